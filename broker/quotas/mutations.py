"""The ``controller_mutation_rate`` quota of CreateTopics, CreatePartitions and
DeleteTopics (KIP-599), as Kafka's ControllerMutationQuotaManager applies it.

A mutation is one partition created or deleted: a new topic counts its partitions, a
deleted one its partitions, CreatePartitions the partitions added; validate-only
requests count nothing.  The rate is rates.py's window (per user / client id as the
matched quota entity names them), on the broker that handles the request.

* Strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): a topic asked for
  while the client's rate is already over its quota is refused with
  THROTTLING_QUOTA_EXCEEDED and changes nothing; one within it is served, even when its
  own partitions take the rate over (Kafka's burst).
* Permissive (older versions): everything is served.

Either way the answer's ``throttle_time_ms`` is the time the rate needs to come back
under the quota, and the connection stops reading for it (KIP-219).

Event-loop only; one object per request.
"""
from __future__ import annotations

from collections.abc import Mapping

from .entities import CONTROLLER_MUTATION_RATE
from .rates import ClientQuotas

# The first version of each API whose answer may carry THROTTLING_QUOTA_EXCEEDED.
STRICT_SINCE = {"CreateTopics": 6, "CreatePartitions": 3, "DeleteTopics": 5}
EXCEEDED_MESSAGE = "The throttling quota has been exceeded."


class MutationQuota:
    """One request's controller mutation quota: ``exceeded()`` before each topic (always
    False when permissive or without a quota), ``record(partitions)`` after each change,
    ``throttle_ms`` for the answer."""

    def __init__(self, rates: ClientQuotas, quotas: Mapping[tuple, Mapping[str, float]],
                 user: str, client_id: str, api: str, api_version: int):
        self._rates = rates
        self._quotas = quotas
        self._user = user
        self._client_id = client_id
        self.strict = api_version >= STRICT_SINCE[api]
        self.throttle_ms = 0

    def exceeded(self) -> bool:
        """Strict, and the rate is over the quota now: the topic must be refused."""
        if not self.strict or not self._quotas:
            return False
        if self._rates.exceeded(self._quotas, CONTROLLER_MUTATION_RATE, self._user,
                                self._client_id):
            self.throttle_ms = max(self.throttle_ms, self._throttle(0))
            return True
        return False

    def record(self, partitions: int) -> None:
        """``partitions`` mutations done."""
        if self._quotas and partitions > 0:
            self.throttle_ms = max(self.throttle_ms, self._throttle(partitions))

    def _throttle(self, partitions: int) -> int:
        return self._rates.record(self._quotas, CONTROLLER_MUTATION_RATE, self._user,
                                  self._client_id, partitions)
