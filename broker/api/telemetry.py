"""GetTelemetrySubscriptions (71) and PushTelemetry (72): KIP-714's client metrics.

The state (instances, subscription, rate, the pushed metrics on /metrics) is
``broker/metrics/client_metrics.py``'s; these handlers only translate, and compute the
instance's plan from the image's client-metrics resources
(``broker/metrics/client_metrics_resources.py``) and what the request tells of the client:
its instance id, client id, address and port, and the software name and version its
connection's ApiVersions v3 sent.  No ACL is checked, as Kafka: every client may ask for
its subscription and push.  Refused pushes are logged at DEBUG (a client's mistake, never
the broker's).
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode
from protocol.telemetry_messages import (
    GetTelemetrySubscriptionsResponse,
    PushTelemetryResponse,
)

from ..metrics.client_metrics_resources import CLIENT_METRICS, Plan, plan

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

log = logging.getLogger(__name__)


def plan_of(ctx: ApiContext, request: Request) -> Callable[[uuid.UUID], Plan]:
    """``plan(instance_id)`` for the client that sent ``request``."""
    def plan_for(instance_id: uuid.UUID) -> Plan:
        resources = getattr(ctx.image, "resource_configs", {}).get(CLIENT_METRICS, {})
        telemetry = ctx.telemetry
        if not resources:
            return telemetry.default_plan
        session = request.session
        name, version = getattr(session, "client_software", ("", ""))
        client = {"client_instance_id": str(instance_id),
                  "client_id": request.client_id or "",
                  "client_software_name": name, "client_software_version": version,
                  "client_source_address": request.client_host.lstrip("/"),
                  "client_source_port": str(getattr(session, "peer_port", -1))}
        return plan(resources, client, telemetry.prefixes, telemetry.push_interval_ms)
    return plan_for


async def handle_get_telemetry_subscriptions(
        ctx: ApiContext, request: Request) -> GetTelemetrySubscriptionsResponse:
    telemetry = ctx.telemetry
    got = telemetry.get_subscription(request.body.client_instance_id, request.client_id,
                                     plan_of(ctx, request))
    # Cumulative sums (DeltaTemporality false): Prometheus counters are cumulative.
    return GetTelemetrySubscriptionsResponse(
        throttle_time_ms=0, error_code=got.error, client_instance_id=got.instance_id,
        subscription_id=got.subscription_id,
        accepted_compression_types=list(telemetry.compression_types),
        push_interval_ms=got.push_interval_ms, telemetry_max_bytes=telemetry.max_bytes,
        delta_temporality=False, requested_metrics=list(got.requested_metrics))


async def handle_push_telemetry(ctx: ApiContext, request: Request) -> PushTelemetryResponse:
    body = request.body
    error, why = ctx.telemetry.push(body.client_instance_id, request.client_id,
                                    body.subscription_id, body.terminating,
                                    body.compression_type, body.metrics or b"",
                                    plan_of(ctx, request))
    if error != ErrorCode.NONE:
        log.debug("PushTelemetry of client %s (instance %s) refused with %s: %s",
                  request.client_id, body.client_instance_id, error.name, why)
    return PushTelemetryResponse(throttle_time_ms=0, error_code=error)
