"""Kafka 4.x admin APIs on one shared 3-broker cluster: finalized features (KIP-584),
OffsetDelete (KIP-496), client quotas (KIP-546) and what Kafka 4 answers a version it
removed (KIP-896).

ApiVersions v3+ carries the supported and finalized feature levels; UpdateFeatures
(API 57) changes finalized levels through the Raft metadata, so a level finalized
through one broker is what every broker then answers.  Java kafka-clients 4.3.0's
Admin runs once as a probe (compat/java/probe.py; skipped only without a JDK or the
jars): describeFeatures/updateFeatures, deleteConsumerGroupOffsets and
alterClientQuotas/describeClientQuotas.

Invariants checked: group.version and kraft.version are finalized at 1,
transaction.version and share.version are advertised above 0 only when their APIs are
in SERVED; ApiVersions v3 leaves out supported features whose minimum is 0; a refused
update (outside the range, a downgrade asked as an upgrade, an unsafe metadata.version
downgrade) answers INVALID_UPDATE_VERSION and changes nothing; validate_only changes
nothing; a finalized downgrade is seen by the other brokers and undone by an upgrade.
OffsetDelete removes exactly the partitions asked for from an empty group, refuses with
GROUP_SUBSCRIBED_TO_TOPIC the partitions of a topic an active member subscribes to
(their offsets stay), answers GROUP_ID_NOT_FOUND for an unknown group and
UNKNOWN_TOPIC_OR_PARTITION for an unknown topic, and a deletion survives the
coordinator's failover (it is a tombstone on __consumer_offsets, not a memory change).
ListOffsets v0 (removed by Kafka 4.0, KIP-896) is not advertised (ListOffsets starts at
v1) and gets no answer: the connection is closed, as Kafka 4's socket server closes it
for a request version it does not serve (only ApiVersions gets UNSUPPORTED_VERSION, so
the client can retry lower); a request pipelined before it is still answered, and the
broker keeps serving other connections.  Client quotas set through one broker are
described by another with Kafka's filters (exact, default, any; strict or not), a
refused entity or key answers its own error and the valid entries of the request are
applied, and removing an entity's last key forgets the entity.
"""
from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    NoError,
    UnknownTopicOrPartitionError,
)
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
    UpdateFeaturesRequest,
)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import ListOffsetsRequest, OffsetFetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.structs import OffsetAndMetadata

from broker.api.features import TRANSACTION_VERSION_2_APIS
from broker.cli.main import main as cli_main
from protocol.consumer_group_messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.errors import ErrorCode
from protocol.messages import SERVED

pytestmark = pytest.mark.slow
WAIT_S = 30.0
PROBE_TIMEOUT_S = 120.0
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    from compat.java.probe import Probe, ProbeUnavailable

    try:
        return Probe.prepare(build_dir=tmp_path_factory.mktemp("java43-probes"))
    except ProbeUnavailable as exc:
        pytest.skip(f"Java 4.3 probe unavailable: {exc}")


def _features(cluster, node_id, version=4):
    with cluster.connect(node_id) as conn:
        answer = conn.request(ApiVersionsRequest[version](client_software_name="t",
                                                          client_software_version="1"))
    supported = {f.name: (f.min_version, f.max_version) for f in answer.supported_features}
    finalized = {f.name: f.max_version_level for f in answer.finalized_features}
    return supported, finalized, answer.finalized_features_epoch


def _update(cluster, node_id, updates, *, validate_only=False, version=1):
    keys = [UpdateFeaturesRequest.FeatureUpdateKey(feature=name, max_version_level=level,
                                                   upgrade_type=kind)
            for name, level, kind in updates]
    with cluster.connect(node_id) as conn:
        return conn.request(UpdateFeaturesRequest[version](
            timeout_ms=30000, feature_updates=keys, validate_only=validate_only))


def _consumer_group_heartbeat(group):
    request = ConsumerGroupHeartbeatRequest[0](
        group_id=group, member_id="", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout_ms=30_000, subscribed_topic_names=["t"], server_assignor=None,
        topic_partitions=[])
    request.response_type = ConsumerGroupHeartbeatResponse
    return request


def _wait_finalized(cluster, node_id, name, level):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if _features(cluster, node_id)[1].get(name, 0) == level:
            return
        time.sleep(0.2)
    pytest.fail(f"node {node_id} never finalized {name}={level}: {_features(cluster, node_id)}")


def test_api_versions_advertises_what_is_served(cluster):
    supported, finalized, epoch = _features(cluster, 1)
    share = ApiKey.ShareGroupHeartbeat in SERVED and ApiKey.ShareFetch in SERVED
    txn2 = all(SERVED[key].serves(version)
               for key, version in TRANSACTION_VERSION_2_APIS.items())
    assert supported["group.version"] == (0, 1) and finalized["group.version"] == 1
    assert supported["kraft.version"] == (0, 1) and finalized["kraft.version"] == 1
    assert supported["transaction.version"] == (0, 2 if txn2 else 0)
    assert supported["share.version"] == (0, 1 if share else 0)
    assert supported["metadata.version"] == (7, 28 if share else 25)
    assert finalized["metadata.version"] == (28 if share else 25)
    assert ("transaction.version" in finalized) == txn2
    assert ("share.version" in finalized) == share
    assert epoch >= 0
    old_supported, old_finalized, _ = _features(cluster, 2, version=3)
    assert set(old_supported) == {"metadata.version"}, "v3 omits features with minimum 0"
    assert old_finalized == finalized


@pytest.mark.parametrize("update", [
    ("group.version", 2, UPGRADE),
    ("group.version", 0, UPGRADE),
    ("transaction.version", 3, UPGRADE),
    ("metadata.version", 22, UNSAFE_DOWNGRADE),
    ("kraft.version", 0, SAFE_DOWNGRADE),
], ids=lambda u: f"{u[0]}={u[1]}/{u[2]}")
def test_refused_updates_answer_invalid_update_version(cluster, update):
    before = _features(cluster, 3)[1]
    valid = ("kraft.version", 1, UPGRADE) if update[0] != "kraft.version" else \
        ("group.version", 1, UPGRADE)
    answer = _update(cluster, 1, [valid, update])
    assert answer.error_code == ErrorCode.INVALID_UPDATE_VERSION, answer
    assert update[0] in answer.error_message
    assert [(r.feature, r.error_code) for r in answer.results] == [
        (valid[0], ErrorCode.INVALID_UPDATE_VERSION),
        (update[0], ErrorCode.INVALID_UPDATE_VERSION)], "v1 repeats the error per feature"
    v2 = _update(cluster, 1, [update], version=2)
    assert v2.error_code == ErrorCode.INVALID_UPDATE_VERSION and v2.results == []
    assert _features(cluster, 3)[1] == before


def test_a_downgrade_is_finalized_cluster_wide_and_validate_only_changes_nothing(cluster):
    checked = _update(cluster, 2, [("group.version", 0, SAFE_DOWNGRADE)], validate_only=True)
    assert checked.error_code == ErrorCode.NONE, checked
    assert _features(cluster, 2)[1]["group.version"] == 1
    done = _update(cluster, 2, [("group.version", 0, SAFE_DOWNGRADE)], version=2)
    assert done.error_code == ErrorCode.NONE, done
    for node_id in (1, 2, 3):
        _wait_finalized(cluster, node_id, "group.version", 0)
    with cluster.connect(1) as conn:
        refused = conn.request(_consumer_group_heartbeat("gv0"))
    assert refused.error_code == ErrorCode.UNSUPPORTED_VERSION, "group.version 0: no KIP-848"
    back = _update(cluster, 3, [("group.version", 1, UPGRADE)])
    assert back.error_code == ErrorCode.NONE, back
    for node_id in (1, 2, 3):
        _wait_finalized(cluster, node_id, "group.version", 1)


# -- OffsetDelete (KIP-496) -------------------------------------------------------------------

@pytest.fixture(scope="module")
def admin(shared_cluster):
    client = KafkaAdminClient(bootstrap_servers=shared_cluster.bootstrap,
                              request_timeout_ms=30000)
    yield client
    client.close()


@pytest.fixture(scope="module")
def offsets_topic(shared_cluster):
    """A 2-partition topic with a record in each, and a second topic."""
    cluster = shared_cluster
    cluster.create_topic("od-a", partitions=2, replication_factor=3)
    cluster.create_topic("od-b", partitions=1, replication_factor=3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for partition in (0, 1):
        producer.send("od-a", b"x", partition=partition).get(timeout=30)
    producer.send("od-b", b"x", partition=0).get(timeout=30)
    producer.close()
    return "od-a"


def _committed(admin, group_id):
    return {tp: meta.offset for tp, meta in admin.list_group_offsets({group_id: None})[
        group_id].items()}


def test_offset_delete_removes_the_partitions_asked_for(admin, offsets_topic):
    a0, a1, b0 = TopicPartition("od-a", 0), TopicPartition("od-a", 1), TopicPartition("od-b", 0)
    admin.alter_group_offsets("od-empty", {a0: OffsetAndMetadata(1, "", -1),
                                           a1: OffsetAndMetadata(1, "", -1),
                                           b0: OffsetAndMetadata(1, "", -1)})
    assert _committed(admin, "od-empty") == {a0: 1, a1: 1, b0: 1}
    gone = TopicPartition("no-such-topic", 0)
    results = admin.delete_group_offsets("od-empty", [a0, b0, gone])
    assert results == {a0: NoError, b0: NoError, gone: UnknownTopicOrPartitionError}
    assert _committed(admin, "od-empty") == {a1: 1}
    with pytest.raises(GroupIdNotFoundError):
        admin.delete_group_offsets("od-nobody", [a0])


def test_offset_delete_refuses_a_topic_an_active_member_subscribes_to(cluster, admin,
                                                                      offsets_topic):
    consumer = KafkaConsumer("od-a", bootstrap_servers=cluster.bootstrap, group_id="od-active",
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=10000, heartbeat_interval_ms=500)
    try:
        deadline = time.monotonic() + WAIT_S
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        assert consumer.assignment(), "the consumer never joined"
        a0, b0 = TopicPartition("od-a", 0), TopicPartition("od-b", 0)
        consumer.commit({a0: OffsetAndMetadata(1, "", -1), b0: OffsetAndMetadata(1, "", -1)})
        results = admin.delete_group_offsets("od-active", [a0, b0])
        assert results == {a0: GroupSubscribedToTopicError, b0: NoError}
        assert _committed(admin, "od-active") == {a0: 1}
    finally:
        consumer.close()


def _coordinator(cluster, group_id, via=1):
    with cluster.connect(via) as conn:
        answer = conn.request(FindCoordinatorRequest[1](key=group_id, key_type=0))
    return answer.node_id if answer.error_code == 0 else None


def _raw_committed(cluster, node_id, group_id):
    """The group's committed offsets as its coordinator ``node_id`` answers (OffsetFetch);
    None while it does not answer them (loading, not the coordinator)."""
    with cluster.connect(node_id) as conn:
        answer = conn.request(OffsetFetchRequest[5](group_id=group_id, topics=None))
    if answer.error_code != 0:
        return None
    return {TopicPartition(t.name, p.partition_index): p.committed_offset
            for t in answer.topics for p in t.partitions}


def test_an_offset_deletion_survives_the_coordinator_failover(cluster, admin, offsets_topic):
    a0, a1 = TopicPartition("od-a", 0), TopicPartition("od-a", 1)
    admin.alter_group_offsets("od-failover", {a0: OffsetAndMetadata(1, "", -1),
                                              a1: OffsetAndMetadata(1, "", -1)})
    assert admin.delete_group_offsets("od-failover", [a0]) == {a0: NoError}
    old = _coordinator(cluster, "od-failover")
    survivor = next(n for n in (1, 2, 3) if n != old)
    cluster.kill(old)  # the cluster fixture starts it again
    deadline = time.monotonic() + WAIT_S * 2
    seen = None
    while seen is None and time.monotonic() < deadline:
        new = _coordinator(cluster, "od-failover", via=survivor)
        if new not in (None, old):
            seen = _raw_committed(cluster, new, "od-failover")
        if seen is None:
            time.sleep(0.3)
    assert seen == {a1: 1}, "the deleted offset came back after the failover"


# -- versions Kafka 4 removed (KIP-896) -------------------------------------------------------

def test_list_offsets_v0_closes_the_connection_as_kafka_4_does(cluster):
    with cluster.connect(2) as conn:
        versions = conn.request(ApiVersionsRequest[3](client_software_name="t",
                                                      client_software_version="1"))
        ranges = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert ranges[ApiKey.ListOffsets][0] == 1, "v0 must not be advertised"
        earlier = conn.send(MetadataRequest[1](topics=[]))
        conn.send(ListOffsetsRequest[0](replica_id=-1, topics=[]))
        assert conn.receive(correlation_id=earlier).brokers, "the earlier request is answered"
        assert conn.closed_by_peer(timeout_s=WAIT_S), "a removed version closes the connection"
    with cluster.connect(2) as other:
        assert other.request(ListOffsetsRequest[1](replica_id=-1, topics=[])).topics == []


# -- client quotas (KIP-546) -----------------------------------------------------------------

def _alter_quotas(cluster, node_id, entries, validate_only=False):
    entry = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest[1](validate_only=validate_only, entries=[
        entry(entity=[entry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
              ops=[entry.OpData(key=k, value=0.0 if v is None else v, remove=v is None)
                   for k, v in ops.items()])
        for entity, ops in entries])
    with cluster.connect(node_id) as conn:
        answer = conn.request(request)
    return [e.error_code for e in answer.entries]


def _describe_quotas(cluster, node_id, components, strict=False):
    component = DescribeClientQuotasRequest.ComponentData
    with cluster.connect(node_id) as conn:
        answer = conn.request(DescribeClientQuotasRequest[1](strict=strict, components=[
            component(entity_type=t, match_type=m, match=n) for t, m, n in components]))
    if answer.error_code:
        return answer.error_code
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity):
            {v.key: v.value for v in entry.values} for entry in answer.entries}


def _wait_quotas(cluster, node_id, components, expected, strict=False):
    deadline = time.monotonic() + WAIT_S
    while (seen := _describe_quotas(cluster, node_id, components, strict)) != expected:
        if time.monotonic() > deadline:
            pytest.fail(f"node {node_id} describes {seen}, expected {expected}")
        time.sleep(0.2)


def test_client_quotas_are_altered_and_described_with_kafkas_filters(cluster):
    alice = (("user", "alice"),)
    alice_app = (("client-id", "app"), ("user", "alice"))
    default_client = (("client-id", None),)
    codes = _alter_quotas(cluster, 1, [
        (alice, {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}),
        (alice_app, {"controller_mutation_rate": 50.0}),
        (default_client, {"producer_byte_rate": 4096.0}),
        ((("user", "dave"),), {"request_percentage": 0.0}),  # must be positive
        ((("user", "bob"),), {"no_such_key": 1.0}),
        ((("group", "g"),), {"producer_byte_rate": 1.0}),
        ((("user", "carol"),), {"producer_byte_rate": 10.5}),
        ((("ip", "1.2.3.4"), ("user", "x")), {"connection_creation_rate": 1.0}),
    ])
    assert codes == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.NONE, ErrorCode.INVALID_REQUEST,
                     ErrorCode.INVALID_REQUEST, ErrorCode.UNSUPPORTED_VERSION,
                     ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST]
    everything = {alice: {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0},
                  alice_app: {"controller_mutation_rate": 50.0},
                  default_client: {"producer_byte_rate": 4096.0}}
    for node_id in (1, 2, 3):  # each broker applies the metadata when the quorum tells it
        _wait_quotas(cluster, node_id, [], everything)
    assert _describe_quotas(cluster, 3, [("user", 0, "alice")]) == {
        alice: everything[alice], alice_app: everything[alice_app]}
    assert _describe_quotas(cluster, 3, [("user", 0, "alice")], strict=True) == {
        alice: everything[alice]}
    assert _describe_quotas(cluster, 3, [("client-id", 1, None)]) == {
        default_client: everything[default_client]}
    assert _describe_quotas(cluster, 3, [("client-id", 2, None)]) == {
        alice_app: everything[alice_app]}
    assert _describe_quotas(cluster, 3, [("user", 0, "x"), ("user", 1, None)]) == \
        ErrorCode.INVALID_REQUEST
    assert _alter_quotas(cluster, 2, [(alice_app, {"controller_mutation_rate": None})],
                         validate_only=True) == [ErrorCode.NONE]
    assert _describe_quotas(cluster, 2, [("client-id", 2, None)]) == {
        alice_app: everything[alice_app]}, "validate_only changed nothing"
    assert _alter_quotas(cluster, 2, [(alice_app, {"controller_mutation_rate": None})]) == [
        ErrorCode.NONE]
    _wait_quotas(cluster, 1, [("client-id", 2, None)], {})
    # Leave no quota behind for the module's other clients.
    assert _alter_quotas(cluster, 1, [
        (alice, {"producer_byte_rate": None, "consumer_byte_rate": None}),
        (default_client, {"producer_byte_rate": None})]) == [ErrorCode.NONE] * 2
    _wait_quotas(cluster, 3, [], {})


ADMIN_PROBE = """
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.quota.*;

public class Kafka4AdminProbe {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(props)) {
            System.out.println("client_version="
                + org.apache.kafka.common.utils.AppInfoParser.getVersion());
            System.out.println("nodes=" + admin.describeCluster().nodes().get().size());
            FeatureMetadata before = admin.describeFeatures().featureMetadata().get();
            before.finalizedFeatures().forEach((name, range) ->
                System.out.println("finalized." + name + "=" + range.maxVersionLevel()));
            before.supportedFeatures().forEach((name, range) ->
                System.out.println("supported." + name + "=" + range.minVersion() + "-"
                                   + range.maxVersion()));
            System.out.println("epoch_present=" + before.finalizedFeaturesEpoch().isPresent());
            Map<String, FeatureUpdate> down = Map.of("group.version",
                new FeatureUpdate((short) 0, FeatureUpdate.UpgradeType.SAFE_DOWNGRADE));
            admin.updateFeatures(down, new UpdateFeaturesOptions().validateOnly(true)).all().get();
            System.out.println("validate_only=ok");
            try {
                admin.updateFeatures(Map.of("group.version", new FeatureUpdate((short) 5,
                    FeatureUpdate.UpgradeType.UPGRADE)), new UpdateFeaturesOptions()).all().get();
                System.out.println("too_high=accepted");
            } catch (Exception e) {
                System.out.println("too_high=" + e.getCause().getClass().getSimpleName());
            }

            TopicPartition tp = new TopicPartition(args[1], 0);
            admin.alterConsumerGroupOffsets(args[2], Map.of(tp,
                new org.apache.kafka.clients.consumer.OffsetAndMetadata(1))).all().get();
            admin.deleteConsumerGroupOffsets(args[2], Set.of(tp)).all().get();
            System.out.println("offsets_after_delete=" + admin.listConsumerGroupOffsets(args[2])
                .partitionsToOffsetAndMetadata().get().size());

            ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(
                ClientQuotaEntity.USER, "java", ClientQuotaEntity.CLIENT_ID, "probe"));
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                new ClientQuotaAlteration.Op("producer_byte_rate", 2048.0))))).all().get();
            // Another broker may answer before the change reached it: ask again, bounded.
            Map<ClientQuotaEntity, Map<String, Double>> quotas = Map.of();
            for (int i = 0; i < 100 && quotas.isEmpty(); i++) {
                if (i > 0) Thread.sleep(200);
                quotas = admin.describeClientQuotas(ClientQuotaFilter.contains(List.of(
                    ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, "java"))))
                    .entities().get();
            }
            System.out.println("quota_entities=" + quotas.size());
            System.out.println("quota_producer_byte_rate="
                + quotas.getOrDefault(entity, Map.of()).get("producer_byte_rate"));
        }
    }
}
"""


def test_java_4_3_admin_features_offset_delete_and_quotas(cluster, probe, offsets_topic):
    run = probe.run(ADMIN_PROBE, cluster.bootstrap, "od-b", "java-group",
                    timeout_s=PROBE_TIMEOUT_S)
    assert run.passed, run.report()
    facts = run.facts()
    assert facts["client_version"] == "4.3.0", "the probe runs the newest client"
    assert facts["nodes"] == "3"
    assert facts["finalized.group.version"] == "1", run.report()
    assert facts["finalized.kraft.version"] == "1"
    assert facts["supported.group.version"] == "0-1"
    assert facts["epoch_present"] == "true"
    assert facts["validate_only"] == "ok"
    assert facts["too_high"] == "InvalidUpdateVersionException"
    assert facts["offsets_after_delete"] == "0"
    assert facts["quota_entities"] == "1"
    assert facts["quota_producer_byte_rate"] == "2048.0"


def _raftwood(capsys, *argv):
    """``raftwood ARGV`` in this process (a new interpreter costs seconds here)."""
    code = cli_main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_raftwood_quotas_cli_alters_and_describes(cluster, capsys):
    bootstrap = ["--bootstrap-server", cluster.broker(1).bootstrap]
    code, out = _raftwood(capsys, "quotas", "alter", *bootstrap, "--user", "cli-user",
                          "--client-id-default", "--add-config",
                          "producer_byte_rate=1048576,controller_mutation_rate=25")
    assert code == 0, out
    code, out = _raftwood(capsys, "quotas", "alter", *bootstrap, "--user", "cli-user",
                          "--add-config", "bogus_key=1")
    assert code != 0 and "INVALID_REQUEST" in out, out
    deadline = time.monotonic() + WAIT_S
    while True:
        code, out = _raftwood(capsys, "quotas", "describe", "--bootstrap-server",
                              cluster.broker(3).bootstrap, "--user", "cli-user")
        if "producer_byte_rate" in out or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert code == 0, out
    rows = [line.split() for line in out.splitlines()]
    assert rows[0] == ["USER", "CLIENT-ID", "KEY", "VALUE"], out
    assert ["cli-user", "<default>", "producer_byte_rate", "1048576"] in rows, out
    assert ["cli-user", "<default>", "controller_mutation_rate", "25"] in rows, out
    code, out = _raftwood(capsys, "quotas", "alter", *bootstrap, "--user", "cli-user",
                          "--client-id-default", "--delete-config",
                          "producer_byte_rate,controller_mutation_rate")
    assert code == 0, out


QUOTA_BYTES_PER_S = 100 * 1024
QUOTA_RUN_S = 12.0
RECORD = b"q" * 1024


def test_a_producer_over_its_byte_rate_quota_is_throttled(cluster):
    """confluent-kafka with producer_byte_rate 100 KB/s on its client id: the broker
    answers with throttle_time_ms > 0 (librdkafka reports it through throttle_cb) and
    what gets through in a bounded run stays far below the unthrottled rate.  A loose,
    functional check of enforcement (speeds belong in benchmarks/)."""
    from confluent_kafka import Producer

    cluster.create_topic("quota-t", partitions=1, replication_factor=1)
    client = (("client-id", "quota-test"),)
    assert _alter_quotas(cluster, 1, [(client, {"producer_byte_rate": QUOTA_BYTES_PER_S})]) \
        == [ErrorCode.NONE]
    for node_id in (1, 2, 3):
        _wait_quotas(cluster, node_id, [("client-id", 0, "quota-test")],
                     {client: {"producer_byte_rate": float(QUOTA_BYTES_PER_S)}})
    throttles: list[float] = []  # seconds, as librdkafka reports throttle_time_ms
    delivered = [0]

    def on_delivery(err, msg):
        if err is None:
            delivered[0] += len(msg.value())

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "client.id": "quota-test",
                         "acks": "1", "linger.ms": 5, "queue.buffering.max.kbytes": 1024,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    try:
        start = time.monotonic()
        deadline = start + QUOTA_RUN_S
        while time.monotonic() < deadline:
            try:
                producer.produce("quota-t", RECORD, on_delivery=on_delivery)
            except BufferError:
                producer.poll(0.05)
            producer.poll(0)
        through = delivered[0]
        elapsed = time.monotonic() - start
    finally:
        producer.purge()  # what is still queued would wait out the throttle
        producer.flush(10)
        _alter_quotas(cluster, 1, [(client, {"producer_byte_rate": None})])
    achieved = through / elapsed
    print(f"quota {QUOTA_BYTES_PER_S} B/s: {through} bytes in {elapsed:.1f} s "
          f"({achieved:.0f} B/s), throttles (s) {throttles[:10]}")
    assert throttles and max(throttles) > 0, "no answer carried throttle_time_ms"
    assert through > 0
    # The window lets a first burst of ~10 s of quota through; after that the rate holds.
    assert achieved < 4 * QUOTA_BYTES_PER_S
