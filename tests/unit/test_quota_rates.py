"""Client quota enforcement (broker/quotas/rates.py) on an injected clock.

Invariants: Kafka's precedence picks the most specific quota (user + client id before
user before client id, a named entity before the default); within the quota nothing is
throttled; over it the throttle time is (rate - quota) / quota * window span, bounded;
a default client-id quota is kept per client id, so one client's bytes never throttle
another.
"""
from __future__ import annotations

from broker.quotas.rates import (
    MAX_THROTTLE_MS,
    SAMPLE_MS,
    SAMPLES,
    ClientQuotas,
    Windows,
    quota_for,
)

QUOTAS = {
    (("client-id", None),): {"producer_byte_rate": 1000.0},
    (("client-id", "app"), ("user", "alice")): {"producer_byte_rate": 5000.0},
    (("user", "alice"),): {"producer_byte_rate": 3000.0, "consumer_byte_rate": 7.0},
}


def test_kafkas_precedence():
    assert quota_for(QUOTAS, "alice", "app", "producer_byte_rate")[1] == 5000.0
    assert quota_for(QUOTAS, "alice", "other", "producer_byte_rate")[1] == 3000.0
    assert quota_for(QUOTAS, "bob", "x", "producer_byte_rate")[1] == 1000.0
    assert quota_for(QUOTAS, "bob", "x", "consumer_byte_rate") is None


def test_within_the_quota_nothing_is_throttled_and_over_it_the_delay_is_kafkas():
    now = [0.0]
    quotas = ClientQuotas(clock_ms=lambda: now[0])
    window_ms = (SAMPLES - 1) * SAMPLE_MS
    # 1000 B/s over a 10 s minimum span: 10,000 bytes fit.
    assert quotas.record(QUOTAS, "producer_byte_rate", "bob", "x", 10_000) == 0
    throttle = quotas.record(QUOTAS, "producer_byte_rate", "bob", "x", 10_000)
    assert throttle == int((2000.0 - 1000.0) / 1000.0 * window_ms)
    assert quotas.record(QUOTAS, "producer_byte_rate", "bob", "x", 10**9) == MAX_THROTTLE_MS
    assert quotas.record(QUOTAS, "producer_byte_rate", "bob", "y", 10_000) == 0, \
        "a default client-id quota is per client id"
    assert quotas.record({}, "producer_byte_rate", "bob", "x", 10**9) == 0
    now[0] += SAMPLES * SAMPLE_MS  # every sample aged out
    assert quotas.record(QUOTAS, "producer_byte_rate", "bob", "x", 100) == 0


def test_the_windows_settings_shape_the_span_and_the_longest_throttle():
    """quota.window.num / .size.seconds for byte rates, controller.quota.window.* for
    controller_mutation_rate: the span is at least (num - 1) windows, a throttle at most
    num windows."""
    now = [0.0]
    quotas = ClientQuotas(clock_ms=lambda: now[0], windows=Windows(3, 2000),
                          controller_windows=Windows(5, 500))
    key = {(("client-id", "x"),): {"producer_byte_rate": 1000.0,
                                   "controller_mutation_rate": 1.0}}
    assert quotas.record(key, "producer_byte_rate", "", "x", 4000) == 0  # 4000 B over 4 s
    assert quotas.record(key, "producer_byte_rate", "", "x", 4000) == 4000  # 2000 B/s
    assert quotas.record(key, "producer_byte_rate", "", "x", 10**9) == 6000
    assert quotas.record(key, "controller_mutation_rate", "", "x", 2) == 0  # 2 over 2 s
    assert quotas.record(key, "controller_mutation_rate", "", "x", 10**6) == 2500
    now[0] += 6000  # the byte windows aged out (3 of 2 s)
    assert quotas.record(key, "producer_byte_rate", "", "x", 4000) == 0


def test_for_broker_reads_kafkas_settings():
    quotas = ClientQuotas.for_broker({"quota.window.num": 4, "quota.window.size.seconds": 3,
                                      "controller.quota.window.num": 2,
                                      "controller.quota.window.size.seconds": 5})
    assert quotas._default_shape == Windows(4, 3000)
    assert quotas._shapes["controller_mutation_rate"] == Windows(2, 5000)
