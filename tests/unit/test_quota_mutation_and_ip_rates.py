"""controller_mutation_rate (mutations.py) and ip connection_creation_rate
(rates.ClientQuotas.admit_connection) with an injected clock: a strict request is
refused only while the rate is already over the quota, a permissive one never; a
connection beyond its address's rate is refused and not counted, and the window lets
the address in again once it has moved on."""
from __future__ import annotations

from broker.quotas.mutations import MutationQuota
from broker.quotas.rates import ClientQuotas

CLIENT = (("client-id", "app"),)


def test_strict_mutations_are_refused_only_over_the_quota_and_permissive_never():
    now = [0.0]
    rates = ClientQuotas(clock_ms=lambda: now[0])
    quotas = {CLIENT: {"controller_mutation_rate": 1.0}}
    strict = MutationQuota(rates, quotas, "", "app", "CreateTopics", 6)
    assert not strict.exceeded()
    strict.record(11)  # 11 over the 10 s span: over the quota, but this one is served
    assert strict.throttle_ms > 0 and strict.exceeded()
    permissive = MutationQuota(rates, quotas, "", "app", "CreateTopics", 5)
    assert not permissive.exceeded()
    permissive.record(1)
    assert permissive.throttle_ms > 0
    other = MutationQuota(rates, quotas, "", "other", "DeleteTopics", 6)
    assert not other.exceeded() and other.throttle_ms == 0
    now[0] = 12_000.0  # the window moved past the burst
    assert not MutationQuota(rates, quotas, "", "app", "CreatePartitions", 3).exceeded()


def test_connections_beyond_an_address_rate_are_refused_and_not_counted():
    now = [0.0]
    rates = ClientQuotas(clock_ms=lambda: now[0])
    quotas = {(("ip", "10.0.0.1"),): {"connection_creation_rate": 1.0},
              (("ip", None),): {"connection_creation_rate": 2.0}}
    admitted = [rates.admit_connection(quotas, "10.0.0.1") is None for _ in range(12)]
    assert admitted == [True] * 10 + [False] * 2
    assert all(rates.admit_connection(quotas, "10.0.0.2") is None for _ in range(20))
    assert rates.admit_connection(quotas, "10.0.0.2") is not None  # the default ip's 2/s
    now[0] = 12_000.0
    assert rates.admit_connection(quotas, "10.0.0.1") is None
    assert rates.admit_connection({}, "10.0.0.1") is None
