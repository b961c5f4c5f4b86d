"""Every Kafka 4.x topic config on a real broker: accepted with Kafka's validation,
described with its source, and acted on (broker/topics.py SPECS,
broker/api/topic_config_view.py, broker/replication/append_policy.py).

One broker for the module, started with ``log.retention.ms``, ``message.max.bytes`` and
``log.message.timestamp.after.max.ms`` set explicitly, so a topic inheriting them must
describe them as STATIC_BROKER_CONFIG (Kafka's answer) and not DEFAULT_CONFIG.  Records
go in over the raw wire (exact batches) and through kafka-python and confluent-kafka, and
are read back with both; the admin clients of kafka-python, confluent-kafka, aiokafka and
KafkaJS describe the configs.
"""
from __future__ import annotations

import time

import pytest
from kafka.protocol.admin import (
    CreateTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)

from broker.testing import BrokerProcess, KafkaConnection, build_batch, read_records

RETENTION_MS = "3600000"
BROKER_MAX_BYTES = 200_000
AFTER_MAX_MS = 90 * 60 * 1000  # the broker's log.message.timestamp.after.max.ms
INVALID_CONFIG, MESSAGE_TOO_LARGE, INVALID_TIMESTAMP = 40, 10, 32
TOPIC_CONFIG, STATIC_BROKER, DEFAULT = 1, 4, 5
TOPIC_RESOURCE, SET = 2, 0
HOUR_MS = 3_600_000
# Kafka 4.x's TopicConfig / LogConfig names (message.format.version and
# message.timestamp.difference.max.ms were removed in 4.0).
KAFKA4_TOPIC_CONFIGS = {
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
    "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.message.bytes", "message.downconversion.enable",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
    "message.timestamp.type", "min.cleanable.dirty.ratio", "min.compaction.lag.ms",
    "min.insync.replicas", "preallocate", "remote.log.copy.disable",
    "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes",
    "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    home = tmp_path_factory.mktemp("topic-configs")
    broker = BrokerProcess(home / "data", log_path=home / "broker.log", extra_settings={
        "log.retention.ms": RETENTION_MS, "message.max.bytes": BROKER_MAX_BYTES,
        "log.message.timestamp.after.max.ms": AFTER_MAX_MS, "auto.create.topics.enable": False})
    broker.start()
    yield broker
    code = broker.stop()
    assert code == 0, f"broker exited {code} after SIGTERM\n{broker.log_tail()}"


def create(broker, name: str, configs: dict | None = None) -> tuple[int, str | None]:
    """CreateTopics v5 for one topic; (error code, error message)."""
    topic_class = CreateTopicsRequest.CreatableTopic
    topic = topic_class(name=name, num_partitions=1, replication_factor=1, assignments=[],
                        configs=[topic_class.CreatableTopicConfig(name=k, value=str(v))
                                 for k, v in (configs or {}).items()])
    with KafkaConnection(broker.bootstrap) as conn:
        response = conn.request(CreateTopicsRequest[5](
            topics=[topic], timeout_ms=10_000, validate_only=False))
    answer = response.topics[0]
    return answer.error_code, answer.error_message


def describe(broker, topic: str, version: int = 4, synonyms: bool = True,
             documentation: bool = True) -> dict:
    """{name: config entry} from DescribeConfigs on the topic."""
    resource = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=topic, configuration_keys=None)
    fields = {"include_synonyms": synonyms}
    if version >= 3:
        fields["include_documentation"] = documentation
    with KafkaConnection(broker.bootstrap) as conn:
        response = conn.request(DescribeConfigsRequest[version](resources=[resource], **fields))
    [result] = response.results
    assert result.error_code == 0, result
    return {c.name: c for c in result.configs}


def alter(broker, topic: str, changes: dict) -> tuple[int, str | None]:
    resource_class = IncrementalAlterConfigsRequest.AlterConfigsResource
    resource = resource_class(resource_type=TOPIC_RESOURCE, resource_name=topic, configs=[
        resource_class.AlterableConfig(name=k, config_operation=SET, value=v)
        for k, v in changes.items()])
    with KafkaConnection(broker.bootstrap) as conn:
        response = conn.request(IncrementalAlterConfigsRequest[0](
            resources=[resource], validate_only=False))
    [answer] = response.responses
    return answer.error_code, answer.error_message


def produce(broker, topic: str, records: list, compression: int = 0) -> int:
    with KafkaConnection(broker.bootstrap) as conn:
        return conn.produce(topic, 0, build_batch(records, compression=compression)).error_code


def fetch_raw(broker, topic: str) -> bytes:
    with KafkaConnection(broker.bootstrap) as conn:
        data = conn.fetch(topic, 0, 0)
    assert data.error_code == 0
    return bytes(data.records)


def now_ms() -> int:
    return int(time.time() * 1000)


def test_an_inherited_broker_setting_is_described_as_static_broker_config(broker):
    """retention.ms comes from the broker's explicitly set log.retention.ms: Kafka says
    STATIC_BROKER_CONFIG with the synonyms log.retention.ms (static, then its default);
    segment.bytes, never set, is DEFAULT_CONFIG; an override is DYNAMIC_TOPIC_CONFIG."""
    assert create(broker, "inherits", {"segment.ms": "600000"})[0] == 0
    configs = describe(broker, "inherits")
    retention = configs["retention.ms"]
    assert (retention.value, retention.config_source) == (RETENTION_MS, STATIC_BROKER)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("log.retention.ms", RETENTION_MS, STATIC_BROKER),
        ("log.retention.ms", "604800000", DEFAULT)]
    assert (configs["max.message.bytes"].value,
            configs["max.message.bytes"].config_source) == (str(BROKER_MAX_BYTES), STATIC_BROKER)
    assert configs["segment.bytes"].config_source == DEFAULT
    after = configs["message.timestamp.after.max.ms"]
    assert (after.value, after.config_source, after.synonyms[0].name) == \
        (str(AFTER_MAX_MS), STATIC_BROKER, "log.message.timestamp.after.max.ms")
    segment_ms = configs["segment.ms"]
    assert (segment_ms.value, segment_ms.config_source) == ("600000", TOPIC_CONFIG)
    assert segment_ms.synonyms[0].source == TOPIC_CONFIG
    assert segment_ms.synonyms[-1].name == "log.roll.ms"


def test_every_kafka_topic_config_is_described_with_type_and_documentation(broker):
    """DescribeConfigs v4 lists exactly Kafka 4's topic configs, each typed (ConfigType)
    and documented when asked; v0 answers is_default for the defaults; none is read-only
    or sensitive; v1 without synonyms asked lists none."""
    assert create(broker, "described")[0] == 0
    configs = describe(broker, "described")
    assert set(configs) == KAFKA4_TOPIC_CONFIGS
    assert all(c.documentation for c in configs.values())
    assert all(not c.read_only and not c.is_sensitive for c in configs.values())
    types = {name: configs[name].config_type for name in (
        "cleanup.policy", "compression.type", "max.message.bytes", "retention.ms",
        "min.cleanable.dirty.ratio", "preallocate")}
    assert types == {"cleanup.policy": 7, "compression.type": 2, "max.message.bytes": 3,
                     "retention.ms": 5, "min.cleanable.dirty.ratio": 6, "preallocate": 1}
    defaults = {name: configs[name].value for name in (
        "compression.type", "message.timestamp.type", "message.timestamp.after.max.ms",
        "message.downconversion.enable", "local.retention.ms", "remote.storage.enable")}
    assert defaults == {"compression.type": "producer", "message.timestamp.type": "CreateTime",
                        "message.timestamp.after.max.ms": str(AFTER_MAX_MS),
                        "message.downconversion.enable": "true", "local.retention.ms": "-2",
                        "remote.storage.enable": "false"}
    plain = describe(broker, "described", version=1, synonyms=False)
    assert all(not c.synonyms for c in plain.values())


@pytest.mark.parametrize("configs", [
    {"message.downconversion.enable": "false", "preallocate": "true",
     "file.delete.delay.ms": "1000", "segment.jitter.ms": "5000", "local.retention.ms": "1000",
     "local.retention.bytes": "-2", "remote.log.copy.disable": "true"},
    {"compression.type": "gzip", "compression.gzip.level": "9", "message.timestamp.type":
     "LogAppendTime", "message.timestamp.before.max.ms": "0", "max.message.bytes": "0"},
], ids=["ignored", "acted"])
def test_create_topics_accepts_kafka4_configs(broker, configs):
    name = f"accepts-{len(configs)}"
    assert create(broker, name, configs) == (0, None)
    described = describe(broker, name)
    assert {k: described[k].value for k in configs} == configs
    assert {described[k].config_source for k in configs} == {TOPIC_CONFIG}


@pytest.mark.parametrize("config, message", [
    ({"message.format.version": "3.0"}, "Unknown topic config name: message.format.version"),
    ({"message.timestamp.difference.max.ms": "1000"},
     "Unknown topic config name: message.timestamp.difference.max.ms"),
    ({"max.message.bytes": "-1"},
     "Invalid value -1 for configuration max.message.bytes: Value must be at least 0"),
    ({"max.message.bytes": "3000000000"},
     "Invalid value 3000000000 for configuration max.message.bytes: Not a number of type INT"),
    ({"segment.jitter.ms": "soon"},
     "Invalid value soon for configuration segment.jitter.ms: Not a number of type LONG"),
    ({"message.timestamp.type": "Now"}, "Invalid value Now for configuration "
     "message.timestamp.type: String must be one of: CreateTime, LogAppendTime"),
    ({"compression.type": "brotli"}, "Invalid value brotli for configuration "
     "compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, "
     "producer"),
    ({"compression.zstd.level": "23"},
     "Invalid value 23 for configuration compression.zstd.level: Value must be no more than 22"),
    ({"preallocate": "yes"}, "Invalid value yes for configuration preallocate: Expected "
     "value to be either true or false"),
    ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled in the "
     "broker. Topic cannot be configured with remote log storage."),
])
def test_bad_topic_configs_get_invalid_config_with_kafkas_message(broker, config, message):
    """CreateTopics and IncrementalAlterConfigs both refuse, with Kafka's message."""
    assert create(broker, "refused", config) == (INVALID_CONFIG, message)
    assert create(broker, "alter-target")[0] in (0, 36)  # 36: made by an earlier case
    assert alter(broker, "alter-target", config) == (INVALID_CONFIG, message)


def test_max_message_bytes_bounds_a_batch_as_sent_and_the_broker_setting_stands_in(broker):
    """A topic's max.message.bytes refuses a larger batch with MESSAGE_TOO_LARGE and may
    be above the broker's message.max.bytes; without it the broker's setting applies."""
    assert create(broker, "small-batches", {"max.message.bytes": "1000"})[0] == 0
    assert create(broker, "large-batches", {"max.message.bytes": "400000"})[0] == 0
    assert create(broker, "broker-bound")[0] == 0
    stamp = now_ms()
    assert produce(broker, "small-batches", [(None, b"x" * 1500, stamp, [])]) \
        == MESSAGE_TOO_LARGE
    assert produce(broker, "small-batches", [(None, b"x" * 500, stamp, [])]) == 0
    big = [(None, bytes(range(256)) * 1000, stamp, [])]  # 256 kB, incompressible enough
    assert produce(broker, "broker-bound", big) == MESSAGE_TOO_LARGE
    assert produce(broker, "large-batches", big) == 0
    assert [r[2] for r in read_records(fetch_raw(broker, "small-batches"))] == [b"x" * 500]


def test_create_time_bounds_refuse_records_too_far_ahead_or_behind(broker):
    """The broker's log.message.timestamp.after.max.ms (90 minutes here) refuses a record
    two hours ahead and lets one 75 minutes ahead in (Kafka 4's default, an hour, would
    not); a topic's before.max.ms refuses an old one (INVALID_TIMESTAMP); a batch within
    both bounds is stored."""
    assert create(broker, "clocked", {"message.timestamp.before.max.ms": "60000"})[0] == 0
    stamp = now_ms()
    assert produce(broker, "clocked", [(None, b"ahead", stamp + 2 * HOUR_MS, [])]) \
        == INVALID_TIMESTAMP
    assert produce(broker, "clocked", [(None, b"ok", stamp, []),
                                       (None, b"old", stamp - HOUR_MS, [])], compression=1) \
        == INVALID_TIMESTAMP
    assert produce(broker, "clocked", [(None, b"ok", stamp, [])]) == 0
    assert produce(broker, "clocked", [(None, b"soon", stamp + 75 * 60 * 1000, [])]) == 0
    assert [r[2] for r in read_records(fetch_raw(broker, "clocked"))] == [b"ok", b"soon"]


def test_log_append_time_stamps_batches_and_clients_read_the_append_time(broker):
    """message.timestamp.type=LogAppendTime: an old CreateTime batch is accepted, stored
    with the timestamp-type bit and the broker's clock as maxTimestamp (CRC valid), and
    kafka-python and confluent-kafka consumers report LOG_APPEND_TIME and that time."""
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer
    from kafka import KafkaConsumer, KafkaProducer

    assert create(broker, "appended", {"message.timestamp.type": "LogAppendTime",
                                       "compression.type": "lz4"})[0] == 0
    before = now_ms()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
    try:
        for i in range(3):
            producer.send("appended", value=b"v%d" % i, timestamp_ms=1_000 + i)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)
    after = now_ms()
    consumer = KafkaConsumer("appended", bootstrap_servers=broker.bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=30_000,
                             enable_auto_commit=False, check_crcs=True)
    try:
        seen = [m for _, m in zip(range(3), consumer)]
    finally:
        consumer.close()
    assert [m.value for m in seen] == [b"v0", b"v1", b"v2"]
    assert {m.timestamp_type for m in seen} == {1}
    assert all(before <= m.timestamp <= after for m in seen), [m.timestamp for m in seen]
    confluent = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "append-time",
                          "auto.offset.reset": "earliest", "enable.auto.commit": False,
                          "check.crcs": True})
    try:
        confluent.subscribe(["appended"])
        messages = []
        deadline = time.monotonic() + 30
        while len(messages) < 3 and time.monotonic() < deadline:
            message = confluent.poll(1.0)
            if message is not None and message.error() is None:
                messages.append(message)
    finally:
        confluent.close()
    assert [m.value() for m in messages] == [b"v0", b"v1", b"v2"]
    assert {m.timestamp()[0] for m in messages} == {TIMESTAMP_LOG_APPEND_TIME}
    assert all(before <= m.timestamp()[1] <= after for m in messages)


@pytest.mark.parametrize("codec_name, codec_id, sent", [
    ("zstd", 4, 0), ("gzip", 1, 3), ("snappy", 2, 1), ("lz4", 3, 4), ("uncompressed", 0, 1)])
def test_compression_type_recompresses_batches_on_append(broker, codec_name, codec_id, sent):
    """A topic's compression.type makes the broker store each batch in that codec
    whatever the producer sent; the records, keys, headers and timestamps survive."""
    topic = f"codec-{codec_name}"
    assert create(broker, topic, {"compression.type": codec_name})[0] == 0
    stamp = now_ms()
    records = [(b"k%d" % i, b"value-%d" % i * 20, stamp + i, [("h", b"%d" % i)])
               for i in range(5)]
    assert produce(broker, topic, records, compression=sent) == 0
    raw = fetch_raw(broker, topic)
    attributes = int.from_bytes(raw[21:23], "big")
    assert attributes & 0x07 == codec_id
    assert [(k, v, t, h) for _, k, v, t, h in read_records(raw)] == \
        [(k, v, t, list(h)) for k, v, t, h in records]


def test_altering_the_timestamp_type_acts_on_later_appends(broker):
    """IncrementalAlterConfigs message.timestamp.type=LogAppendTime on a live topic: the
    next batches carry the append time (waited for, not slept on)."""
    assert create(broker, "switched")[0] == 0
    assert alter(broker, "switched", {"message.timestamp.type": "LogAppendTime"}) == (0, None)
    assert describe(broker, "switched")["message.timestamp.type"].value == "LogAppendTime"
    deadline = time.monotonic() + 30
    stamped = False
    while not stamped and time.monotonic() < deadline:
        assert produce(broker, "switched", [(None, b"v", 1_000, [])]) == 0
        raw = fetch_raw(broker, "switched")
        position = 0
        while position < len(raw):  # the last batch's attributes
            last = position
            position += 12 + int.from_bytes(raw[position + 8:position + 12], "big")
        stamped = bool(int.from_bytes(raw[last + 21:last + 23], "big") & 0x08)
    assert stamped, "the LogAppendTime override never reached the partition"


def test_kafka_python_and_confluent_admin_see_sources_and_defaults(broker):
    """aiokafka's and kafka-python's describe-config checks: a created topic's override,
    a default and an inherited broker setting, each with its source; confluent-kafka's
    AdminClient reads the same through its ConfigSource enum."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource as PyResource
    from kafka.admin import ConfigResourceType

    assert create(broker, "admins", {"cleanup.policy": "compact",
                                     "message.timestamp.type": "LogAppendTime"})[0] == 0
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    resource = PyResource(ConfigResourceType.TOPIC, "admins")
    try:
        every = admin.describe_configs([resource], include_synonyms=True,
                                       config_filter="all")["topic"]["admins"]
        modified = admin.describe_configs([resource])["topic"]["admins"]
    finally:
        admin.close()
    assert set(every) == KAFKA4_TOPIC_CONFIGS
    assert [every[k]["value"] for k in ("cleanup.policy", "retention.ms", "compression.type")] \
        == ["compact", RETENTION_MS, "producer"]
    assert [every[k]["config_source"] for k in ("cleanup.policy", "retention.ms",
                                                "compression.type")] \
        == ["DYNAMIC_TOPIC_CONFIG", "STATIC_BROKER_CONFIG", "DEFAULT_CONFIG"]
    assert {"cleanup.policy", "message.timestamp.type"} <= set(modified)
    assert "compression.type" not in modified

    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "admins")
    described = client.describe_configs([resource])[resource].result(30)
    assert set(described) == KAFKA4_TOPIC_CONFIGS
    assert described["message.timestamp.type"].value == "LogAppendTime"
    assert described["message.timestamp.type"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    retention = described["retention.ms"]
    assert retention.source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert not retention.is_read_only and not retention.is_sensitive
    assert described["segment.jitter.ms"].is_default


def test_kafkajs_describe_and_alter_configs(broker):
    """KafkaJS's describeConfigs.spec and alterConfigs.spec, against this broker: all
    configs (more than one), one selected (cleanup.policy is delete), a topic and a broker
    in one request, and an altered config seen by the next describe."""
    kafkajs_module = pytest.importorskip("tests.integration.test_clients_kafkajs")
    if kafkajs_module._missing() is not None:
        pytest.skip(kafkajs_module._missing())
    assert create(broker, "kafkajs-configs")[0] == 0
    driver = kafkajs_module.KafkaJSDriver(broker.bootstrap)
    try:
        every = driver.admin("describeConfigs", {
            "resources": [{"type": TOPIC_RESOURCE, "name": "kafkajs-configs"}]})
        [topic] = every["resources"]
        assert {e["configName"] for e in topic["configEntries"]} == KAFKA4_TOPIC_CONFIGS
        selected = driver.admin("describeConfigs", {"resources": [
            {"type": TOPIC_RESOURCE, "name": "kafkajs-configs", "configNames": ["cleanup.policy"]},
            {"type": 4, "name": str(broker.node_id)}]})["resources"]
        assert len(selected) == 2
        [entry] = next(r for r in selected if r["resourceType"] == TOPIC_RESOURCE)["configEntries"]
        assert (entry["configName"], entry["configValue"], entry["isDefault"]) == \
            ("cleanup.policy", "delete", True)
        # (driver.js offers no alterConfigs: the change goes over the wire)
        assert alter(broker, "kafkajs-configs", {"cleanup.policy": "compact"}) == (0, None)
        [after] = driver.admin("describeConfigs", {"resources": [
            {"type": TOPIC_RESOURCE, "name": "kafkajs-configs",
             "configNames": ["cleanup.policy"]}]})["resources"]
        assert [(e["configValue"], e["isDefault"]) for e in after["configEntries"]] == \
            [("compact", False)]
    finally:
        driver.close()


def test_aiokafka_describe_and_alter_configs(broker):
    """aiokafka's admin describe-config tests: a topic's and the broker's resources answer
    without error, and alter_configs' cleanup.policy is what a keyed describe returns."""
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    assert create(broker, "aiokafka-configs")[0] == 0

    async def scenario():
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap,
                                    request_timeout_ms=10_000)
        await admin.start()
        try:
            topic = ConfigResource(ConfigResourceType.TOPIC, "aiokafka-configs")
            node = ConfigResource(ConfigResourceType.BROKER, str(broker.node_id))
            described = await admin.describe_configs([topic, node])
            await admin.alter_configs([ConfigResource(
                ConfigResourceType.TOPIC, "aiokafka-configs", {"cleanup.policy": "compact"})])
            keyed = await admin.describe_configs([ConfigResource(
                ConfigResourceType.TOPIC, "aiokafka-configs", {"cleanup.policy": None})])
        finally:
            await admin.close()
        return described, keyed

    described, keyed = asyncio.run(scenario())
    resources = [r for response in described for r in response.resources]
    assert sorted((r[0], r[2], r[3]) for r in resources) == [
        (0, 2, "aiokafka-configs"), (0, 4, str(broker.node_id))]
    topic_entries = next(r for r in resources if r[2] == 2)[4]
    assert {e[0] for e in topic_entries} == KAFKA4_TOPIC_CONFIGS
    [[error, _, _, name, entries]] = [r for response in keyed for r in response.resources]
    assert (error, name) == (0, "aiokafka-configs")
    assert [(e[0], e[1]) for e in entries] == [("cleanup.policy", "compact")]
