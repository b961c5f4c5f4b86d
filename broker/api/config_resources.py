"""ListConfigResources (API 74; KIP-1142, v0 was KIP-714's ListClientMetricsResources):
the names of the config resources a DescribeConfigs could be asked about.

* v0 lists the client-metrics resources (type 16, which v0 does not send).
* v1 lists the resource types asked for, all of the served ones when none is asked:
  TOPIC (2) every topic, BROKER (4) and BROKER_LOGGER (8) every registered broker,
  CLIENT_METRICS (16) every client-metrics resource set, GROUP (32) every group with
  dynamic configs.  Any other type answers UNSUPPORTED_VERSION, as Kafka.

Authorization (Kafka's): DESCRIBE_CONFIGS on the cluster, else
CLUSTER_AUTHORIZATION_FAILED.  Read from this broker's image (eventually consistent).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.admin import ListConfigResourcesResponse

from protocol.errors import ErrorCode

from ..security.acls import AclOperation

if TYPE_CHECKING:
    from protocol.messages import Request

    from ..controller.metadata_client import ClusterState
    from .context import ApiContext

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SERVED_TYPES = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)
Resource = ListConfigResourcesResponse.ConfigResource


def names_of(image: ClusterState, resource_type: int) -> list[str]:
    """The resource names of ``resource_type`` in ``image``, sorted."""
    if resource_type == TOPIC:
        return sorted(image.topics)
    if resource_type in (BROKER, BROKER_LOGGER):
        return [str(node_id) for node_id in sorted(image.brokers)]
    return sorted(getattr(image, "resource_configs", {}).get(resource_type, {}))


async def handle_list_config_resources(ctx: ApiContext,
                                       request: Request) -> ListConfigResourcesResponse:
    def answer(error: ErrorCode, resources: list) -> ListConfigResourcesResponse:
        return ListConfigResourcesResponse(throttle_time_ms=0, error_code=error,
                                           config_resources=resources)
    if not ctx.authorizer.allows_cluster(request, AclOperation.DESCRIBE_CONFIGS):
        return answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    if request.api_version == 0:
        wanted = [CLIENT_METRICS]
    else:
        wanted = sorted(set(request.body.resource_types or SERVED_TYPES))
        if not set(wanted) <= set(SERVED_TYPES):
            return answer(ErrorCode.UNSUPPORTED_VERSION, [])
    image = ctx.image
    return answer(ErrorCode.NONE, [Resource(resource_name=name, resource_type=kind)
                                   for kind in wanted for name in names_of(image, kind)])
