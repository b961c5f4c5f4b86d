"""The fuzzing campaign (tests/fuzz), short and bounded: a real 3-broker cluster under an
acks=all load takes ~30,000 generated and mutated requests of every served API and
version, and stays up, serving, intact and quiet.

The long run (a million requests and more) is the same command with other bounds; its
figures are in docs/fuzzing.md.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.messages import SERVED

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.fuzz.judge import Judge, Violation  # noqa: E402

REQUESTS = 30_000
DURATION_S = 90
RUN_TIMEOUT_S = 420


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """One bounded campaign, run as its command line (its exit status and JSON report)."""
    out = tmp_path_factory.mktemp("fuzz") / "report.json"
    command = [sys.executable, "-m", "tests.fuzz", "--requests", str(REQUESTS),
               "--duration", str(DURATION_S), "--seed", "7", "--json", str(out), "--quiet"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    assert out.exists(), f"no report; exit {done.returncode}\n{done.stdout[-4000:]}\n" \
                         f"{done.stderr[-4000:]}"
    result = json.loads(out.read_text())
    result["_exit"], result["_output"] = done.returncode, done.stdout[-6000:]
    return result


@pytest.mark.slow
def test_no_violation_and_exit_zero(report):
    """Every answer was a well-formed response with Kafka's error codes or a close; no
    valid request was closed on; the sentinels were always answered."""
    assert report["violations"] == [], report["_output"]
    assert report["failures"] == [] and report["ok"], report["_output"]
    assert report["_exit"] == 0, report["_output"]


@pytest.mark.slow
def test_enough_requests_of_every_served_version(report):
    """The run judged its requests (bounded by time on a slow machine) and sent every
    served API version unmutated at least once."""
    served = sum(s.max_version - s.min_version + 1 for s in SERVED.values())
    assert report["requests"] >= min(REQUESTS, 10_000), report["_output"]
    assert report["coverage"]["sent_unmutated"] == served, report["coverage"]["missing"]
    mutated = {label for label in report["by_mutation"] if label not in ("valid", "nulls")}
    assert {"truncate", "wrong_api_key", "wrong_version", "size_absurd"} <= mutated


@pytest.mark.slow
def test_acknowledged_records_read_back_intact(report):
    load = report["load"]
    assert load["acked"] > 0 and load["checked"] == load["acked"]
    assert (load["lost_count"], load["changed_count"]) == (0, 0), load


@pytest.mark.slow
def test_brokers_alive_serving_and_quiet(report):
    """Each broker runs and answers; a fresh client round-trips; no traceback, CRITICAL or
    fatal line in any broker log; each exits 0 on SIGTERM."""
    assert all(b["running"] and b["serving"] for b in report["brokers"].values()), \
        report["brokers"]
    assert report["fresh_client"]["ok"], report["fresh_client"]
    counts = report["logs"]["counts"]
    assert (counts["traceback"], counts["critical"], counts["fatal"]) == (0, 0, 0), \
        report["logs"]["samples"]
    assert set(report["exit_codes"].values()) == {0}


def test_judge_refuses_malformed_answers():
    """The judge fails what it must: an answer that does not decode, one with bytes left
    over, one with an error code Kafka does not have, one to an API not served."""
    judge = Judge()
    header = b"\x00\x00\x00\x07"
    api_versions_v0 = header + b"\x00\x00" + b"\x00\x00\x00\x00"  # NONE, no api keys
    assert judge.answer(18, 0, api_versions_v0) == ("NONE",)
    for api_key, version, payload in (
            (18, 0, header + b"\x00"),                            # cut short
            (18, 0, api_versions_v0 + b"\x00"),                   # a byte left over
            (18, 0, header + b"\x7f\x00" + b"\x00\x00\x00\x00"),  # error code 32512
            (4, 0, api_versions_v0)):                             # LeaderAndIsr: not served
        with pytest.raises(Violation):
            judge.answer(api_key, version, payload)


# -- defects the campaign found, each pinned by its smallest reproduction ------------------------

@pytest.fixture(scope="module")
def lone_broker(tmp_path_factory):
    from broker.testing import BrokerProcess
    home = tmp_path_factory.mktemp("fuzz-findings")
    broker = BrokerProcess(home / "data", log_path=home / "broker.log").start()
    yield broker
    assert broker.stop() == 0, broker.log_tail()


def test_create_topics_refuses_excessive_partitions_and_keeps_serving(lone_broker):
    """CreateTopics asking for 2^31-1 partitions: Kafka's POLICY_VIOLATION (more than
    10,000 partitions in one request), and the broker answers the next request (it used
    to spend its event loop assigning two billion replica lists)."""
    from kafka.protocol.admin import CreateTopicsRequest

    from broker.testing import KafkaConnection

    topic = CreateTopicsRequest.CreatableTopic(name="huge", num_partitions=(1 << 31) - 1,
                                               replication_factor=1, assignments=[], configs=[])
    with KafkaConnection(lone_broker.bootstrap, timeout_s=20.0) as conn:
        answer = conn.request(CreateTopicsRequest[5](topics=[topic], timeout_ms=5000,
                                                     validate_only=False))
        assert answer.topics[0].error_code == 44, answer  # POLICY_VIOLATION
        assert conn.api_versions().error_code == 0


def test_create_partitions_refuses_excessive_count_and_keeps_serving(lone_broker):
    """CreatePartitions to 2^31-1 partitions (the fuzzer's frame, v1): POLICY_VIOLATION,
    and the broker keeps answering."""
    from kafka.protocol.admin import CreatePartitionsRequest

    from broker.testing import KafkaConnection

    with KafkaConnection(lone_broker.bootstrap, timeout_s=20.0) as conn:
        assert conn.create_topic("grows", 1) == 0
        topic = CreatePartitionsRequest.CreatePartitionsTopic(
            name="grows", count=(1 << 31) - 1, assignments=None)
        answer = conn.request(CreatePartitionsRequest[1](topics=[topic], timeout_ms=5000,
                                                         validate_only=False))
        assert answer.results[0].error_code == 44, answer  # POLICY_VIOLATION
        assert conn.api_versions().error_code == 0


def test_offset_commit_with_absurd_retention_is_answered(lone_broker):
    """OffsetCommit v2 keeping offsets for 2^63-1 ms: answered (the offsets stored), where
    the expiry time overflowed int64 and the broker logged a traceback and closed."""
    import time

    from kafka.protocol.consumer import OffsetCommitRequest
    from kafka.protocol.metadata import FindCoordinatorRequest

    from broker.testing import KafkaConnection

    topic_class = OffsetCommitRequest.OffsetCommitRequestTopic
    partition = topic_class.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=5, committed_leader_epoch=-1, commit_timestamp=-1,
        committed_metadata="")
    request = OffsetCommitRequest[2](
        group_id="fz-retention", generation_id_or_member_epoch=-1, member_id="",
        retention_time_ms=(1 << 63) - 1,
        topics=[topic_class(name="kept", partitions=[partition])])
    with KafkaConnection(lone_broker.bootstrap, timeout_s=20.0) as conn:
        assert conn.create_topic("kept", 1) == 0
        conn.request(FindCoordinatorRequest[1](key="fz-retention", key_type=0))
        answer = None
        for _ in range(100):  # until the offsets topic exists and is loaded (bounded)
            answer = conn.request(request)
            if answer.topics[0].partitions[0].error_code not in (14, 15, 16):
                break
            time.sleep(0.1)
        assert answer.topics[0].partitions[0].error_code == 0, answer
        assert conn.api_versions().error_code == 0
