"""Feature levels (KIP-584): ApiVersions' features and UpdateFeatures (API 57).

What Raftwood supports follows from the APIs it serves (``protocol.messages.SERVED``),
computed at call time so an API added to SERVED moves its feature with it:

* ``metadata.version`` 7 (3.3-IV3) up to 25 (4.0-IV3), the last Kafka 4.0 level: the
  release whose client APIs Raftwood serves and the one that bootstraps
  ``group.version`` 1; 28 (4.2-IV0) once share groups are served (the level that
  bootstraps ``share.version`` 1).  No client reads it to pick a behaviour; it names
  the release Raftwood answers like.
* ``kraft.version`` 0-1, finalized 1: the metadata quorum's voters change at run time
  (AddRaftVoter / RemoveRaftVoter, KIP-853).
* ``group.version`` 0-1, finalized 1: KIP-848's ConsumerGroupHeartbeat is served.
* ``transaction.version`` 0-2 only once every request of KIP-890 part 2 is served
  (``TRANSACTION_VERSION_2_APIS``: EndTxn v5, Produce v12's implicit add, TxnOffsetCommit
  v5's, WriteTxnMarkers v2), else 0-0: Java 4.x clients use transaction version 2 when
  it is finalized, so it must not be advertised before the broker serves it.
* ``share.version`` 0-1 only when ShareGroupHeartbeat and ShareFetch are served.

A feature is finalized at its maximum supported level unless UpdateFeatures set
another (``broker/controller/features.py`` keeps those levels in the Raft metadata and
has the rules); a level above what the running code supports (stored by a newer
build) is answered as the supported maximum.  ApiVersions v3 leaves out supported
features whose minimum is 0 (Kafka 4's rule for older clients); v4 lists them all.
Finalized features at level 0 are not listed, as in Kafka.  The finalized epoch is the
image's version, which grows with every metadata change.

UpdateFeatures needs Alter on the cluster (else CLUSTER_AUTHORIZATION_FAILED); the
first refused update refuses the request (INVALID_UPDATE_VERSION with Kafka's message)
and nothing changes; ``validate_only`` checks against the current image and writes
nothing.  v0's ``allow_downgrade`` is a SAFE_DOWNGRADE.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import UpdateFeaturesResponse
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsResponse

from protocol.errors import ErrorCode
from protocol.messages import SERVED

from ..controller.metadata_client import (
    MINIMUM_METADATA_VERSION,
    SAFE_DOWNGRADE,
    UPGRADE,
    ApplyError,
    MetadataUnavailable,
    feature_update_problem,
    finalized_feature_levels,
)
from ..security.acls import AclOperation

if TYPE_CHECKING:
    from protocol.messages import Request

    from ..controller.metadata_client import ClusterState
    from .context import ApiContext

log = logging.getLogger(__name__)

Supported = ApiVersionsResponse.SupportedFeatureKey
Finalized = ApiVersionsResponse.FinalizedFeatureKey
Result = UpdateFeaturesResponse.UpdatableFeatureResult

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
GROUP_VERSION = "group.version"
TRANSACTION_VERSION = "transaction.version"
SHARE_VERSION = "share.version"
METADATA_VERSION_SERVED = 25  # 4.0-IV3
METADATA_VERSION_WITH_SHARE_GROUPS = 28  # 4.2-IV0
KRAFT_VERSION_SERVED = 1
# The first version of each request transaction version 2 (KIP-890 part 2) uses.
TRANSACTION_VERSION_2_APIS = {ApiKey.EndTxn: 5, ApiKey.Produce: 12, ApiKey.TxnOffsetCommit: 5,
                              ApiKey.WriteTxnMarkers: 2}


def _serves(api_key: int, version: int | None = None) -> bool:
    """Whether ``api_key`` is served (at ``version``, when given)."""
    spec = SERVED.get(api_key)
    return spec is not None and (version is None or spec.serves(version))


def supported_ranges() -> dict[str, list[int]]:
    """Feature name → [min, max] level the running code supports (module doc)."""
    share = 1 if _serves(ApiKey.ShareGroupHeartbeat) and _serves(ApiKey.ShareFetch) else 0
    txn = 2 if all(_serves(key, version)
                   for key, version in TRANSACTION_VERSION_2_APIS.items()) else 0
    group = 1 if _serves(ApiKey.ConsumerGroupHeartbeat) else 0
    metadata = METADATA_VERSION_WITH_SHARE_GROUPS if share else METADATA_VERSION_SERVED
    return {
        METADATA_VERSION: [MINIMUM_METADATA_VERSION, metadata],
        KRAFT_VERSION: [0, KRAFT_VERSION_SERVED],
        GROUP_VERSION: [0, group],
        TRANSACTION_VERSION: [0, txn],
        SHARE_VERSION: [0, share],
    }


def default_levels(supported: dict[str, list[int]]) -> dict[str, int]:
    """A feature nobody updated is finalized at its highest supported level."""
    return {name: high for name, (_low, high) in supported.items()}


def finalized_levels(image: ClusterState) -> dict[str, int]:
    """Feature name → finalized level in ``image`` (stored, else default; capped at the
    supported maximum)."""
    supported = supported_ranges()
    levels = finalized_feature_levels(image, default_levels(supported))
    return {name: min(levels[name], high) for name, (_low, high) in supported.items()}


def add_features(body: ApiVersionsResponse, image: ClusterState,
                 version: int) -> ApiVersionsResponse:
    """Fill ApiVersions v3+'s supported and finalized features into ``body``."""
    if version < 3:
        return body
    supported = supported_ranges()
    body.supported_features = [
        Supported(name=name, min_version=low, max_version=high)
        for name, (low, high) in sorted(supported.items()) if version >= 4 or low > 0]
    body.finalized_features = [
        Finalized(name=name, max_version_level=level, min_version_level=level)
        for name, level in sorted(finalized_levels(image).items()) if level > 0]
    body.finalized_features_epoch = image.version
    return body


async def handle_update_features(ctx: ApiContext, request: Request) -> UpdateFeaturesResponse:
    body = request.body
    updates = [[u.feature, int(u.max_version_level), _upgrade_type(request.api_version, u)]
               for u in body.feature_updates]
    if not ctx.authorizer.allows_cluster(request, AclOperation.ALTER):
        return _answer(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                       "Alter on the cluster is required")
    supported = supported_ranges()
    defaults = default_levels(supported)
    names = [u[0] for u in updates]
    if len(set(names)) != len(names):
        return _answer(request, ErrorCode.INVALID_REQUEST,
                       "A feature can be updated only once per request")
    if request.api_version < 1 or not body.validate_only:
        try:
            if updates:
                levels = await ctx.metadata.update_features(updates, supported, defaults)
                log.info("finalized feature levels %s (by %s)", levels,
                         request.session.principal if request.session else "?")
        except ApplyError as exc:
            return _answer(request, ErrorCode[exc.code], str(exc))
        except MetadataUnavailable as exc:
            return _answer(request, ErrorCode.REQUEST_TIMED_OUT, str(exc))
        return _answer(request, ErrorCode.NONE, None)
    problem = feature_update_problem(ctx.image, updates, supported, defaults)
    if problem:
        return _answer(request, ErrorCode.INVALID_UPDATE_VERSION, problem)
    return _answer(request, ErrorCode.NONE, None)


def _upgrade_type(api_version: int, update: Any) -> int:
    if api_version == 0:
        return SAFE_DOWNGRADE if update.allow_downgrade else UPGRADE
    return int(update.upgrade_type)


def _answer(request: Request, code: ErrorCode, message: str | None) -> UpdateFeaturesResponse:
    """Kafka 4's answer: one error for the request; v0-v1 repeat it per feature."""
    results = [] if request.api_version >= 2 else [
        Result(feature=u.feature, error_code=code, error_message=message)
        for u in request.body.feature_updates]
    return UpdateFeaturesResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                  results=results)
