"""Shared by the tests that run the Java harness (``compat/java``) on a cluster
(``test_java_client.py`` with kafka-clients 3.9.0, ``test_ecosystem.py`` with 4.3.0):
the suite's step count, the all-steps-passed check and the idempotent producer run
across a SIGKILL of its partition leader."""
from __future__ import annotations

import time
from dataclasses import dataclass

# create, describe cluster, describe topics, 3 per codec (4 codecs), consumer look-ups
SUITE_STEPS = 3 + 3 * 4 + 1


def assert_steps_passed(run, steps_expected: int) -> None:
    """The harness run passed, with exactly ``steps_expected`` steps, each PASS."""
    assert run.passed, run.report()
    verdicts = run.steps()
    assert len(verdicts) == steps_expected and set(verdicts.values()) == {"PASS"}, run.report()


@dataclass
class LeaderKillRun:
    victim: int                 # the leader of partition 0 that was killed
    new_leader: int
    produced: object            # the producer's finished harness run
    finished_after_kill_s: float


def produce_numbered_across_leader_kill(harness, cluster, topic: str, *, count: int,
                                        kill_after_acked: int, partitions: int,
                                        timeout_s: float) -> LeaderKillRun:
    """``produce-numbered`` (idempotent, acks=all: 20 records every 10 ms) on ``topic``,
    SIGKILL of partition 0's leader once ``kill_after_acked`` are acknowledged; asserts
    every send acknowledged, then ``verify-numbered`` on the live brokers: every number
    in the topic exactly once, in send order on its partition."""
    victim = cluster.leader_of(topic, 0)
    assert victim > 0
    live = harness.start("produce-numbered", bootstrap=cluster.bootstrap, topic=topic,
                         count=count, partitions=partitions, batch=20, interval_ms=10)
    try:
        line = live.wait_for_line(
            lambda text: text.startswith("PROGRESS") and
            int(text.rsplit("acked=", 1)[1]) >= kill_after_acked, timeout_s=60)
        assert line is not None, live.finish(5).report()
        killed_at = time.monotonic()
        cluster.kill(victim)
        produced = live.finish(timeout_s)
    finally:
        live.kill()
    assert_steps_passed(produced, 1)
    assert f"sent={count}" in produced.stdout
    new_leader = cluster.wait_for_leader(topic, 0, not_in=(victim,))
    alive = ",".join(b.bootstrap for b in cluster.brokers if b.is_running())
    verified = harness.run("verify-numbered", bootstrap=alive, topic=topic, count=count,
                           partitions=partitions, timeout_s=timeout_s)
    assert_steps_passed(verified, 1)
    return LeaderKillRun(victim, new_leader, produced,
                         produced.elapsed_s - (killed_at - live.start_time))
