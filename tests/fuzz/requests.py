"""Valid requests of every served API and version, from the message schemas.

kafka-python's message classes carry Kafka's JSON schema (``cls._struct``: every field
with its type, versions and nullable versions), so one walker builds a request of any
API at any version: each field gets a value of its type, drawn from a small vocabulary
that makes the broker do real work (existing topics and partitions, offsets near the
log's, short timeouts) mixed with edge values (-1, 0, the type's limits).  The four APIs
Raftwood writes by hand (KIP-848's and KIP-853's) get builders of their own.

``Vocabulary`` names what the requests may touch.  Invariant: the topic under the
acks=all load is never in it, and neither are the metadata quorum's voters, so the
fuzzer's legal but destructive requests (DeleteRecords, AlterConfigs, RemoveRaftVoter
...) cannot break the checks it makes about them.

With ``nulls`` set, fields that may not be null on the wire (strings, bytes, arrays,
records) are sometimes encoded as null anyway: kafka-python writes a null length for
``None`` whatever the schema says.
"""
from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass, field

from protocol.consumer_group_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    TopicPartitions,
)
from protocol.messages import SERVED
from protocol.raft_voter_messages import AddRaftVoterRequest, RemoveRaftVoterRequest, VoterListener

from .batches import BatchFactory

INT_LIMITS = {"int8": (-(1 << 7), (1 << 7) - 1), "int16": (-(1 << 15), (1 << 15) - 1),
              "int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
              "uint16": (0, (1 << 16) - 1)}
NULLABLE_TYPES = ("string", "bytes", "records")
HAND_WRITTEN = {ConsumerGroupHeartbeatRequest.API_KEY, ConsumerGroupDescribeRequest.API_KEY,
                AddRaftVoterRequest.API_KEY, RemoveRaftVoterRequest.API_KEY}
# APIs whose success changes topics or brokers for good: they only name fuzz topics.
DESTRUCTIVE_APIS = {20, 21, 27, 33, 37, 44, 45}
PRODUCE, CREATE_TOPICS, DELETE_TOPICS = 0, 19, 20


@dataclass
class Vocabulary:
    """What generated requests name.  ``topics`` exist (3 partitions each); the load
    topic is deliberately absent (see the module docstring)."""

    topics: list[str]
    # The only topics DeleteTopics names (CreateTopics names them too): ``topics`` stay.
    doomed_topics: list[str] = field(default_factory=lambda: ["fz-doomed", "fz-missing"])
    missing_topics: list[str] = field(default_factory=lambda: [
        "fz-missing", "", "a" * 249, "bad/name", "..", "__consumer_offsets"])
    groups: list[str] = field(default_factory=lambda: ["fz-group", "fz-group-2", ""])
    transactional_ids: list[str] = field(default_factory=lambda: ["fz-txn", "fz-txn-2", ""])
    config_names: list[str] = field(default_factory=lambda: [
        "retention.ms", "cleanup.policy", "max.message.bytes", "segment.ms",
        "min.insync.replicas", "bogus.config", ""])
    config_values: list[str] = field(default_factory=lambda: [
        "1", "-1", "0", "compact", "delete", "abc", "9223372036854775807", ""])
    broker_ids: list[int] = field(default_factory=lambda: [1, 2, 3, -1, 0, 7])
    voter_ids: list[int] = field(default_factory=lambda: [7, 99, -1])


class RequestFactory:
    """``build(api_key, version, nulls)`` -> a kafka-python request message (no header)."""

    def __init__(self, rng: random.Random, vocab: Vocabulary, batches: BatchFactory):
        self.rng = rng
        self.vocab = vocab
        self.batches = batches
        self.nulls = False
        self.api_key = -1
        self.now_ms = int(time.time() * 1000)
        #: Of the last Produce built: {(topic, partition): lie} for partitions whose
        #: records Kafka must refuse (``BatchFactory.refusable``); empty when a partition
        #: is named twice (its answer could not be told apart).
        self.last_must_refuse: dict[tuple[str, int], str] = {}

    def build(self, api_key: int, version: int, nulls: bool = False):
        self.nulls, self.api_key = nulls, api_key
        self.last_must_refuse = {}
        if api_key in HAND_WRITTEN:
            return self._hand_written(api_key, version)
        cls = SERVED[api_key].request_class
        message = cls[version](**self._struct_values(cls._struct.fields, version))
        if api_key == PRODUCE and message.topic_data:
            self.last_must_refuse = self._must_refuse(message)
        return message

    def _must_refuse(self, message) -> dict[tuple[str, int], str]:
        named = [(t.name, p.index, p.records) for t in message.topic_data
                 for p in t.partition_data or ()]
        if len({(name, index) for name, index, _ in named}) < len(named):
            return {}
        refusable = self.batches.refusable
        return {(name, index): refusable[records] for name, index, records in named
                if records is not None and records in refusable}

    # -- the schema walker ---------------------------------------------------------------
    def _struct_values(self, fields: dict, version: int) -> dict:
        values = {}
        for name, f in fields.items():
            if f.for_version_q(version) and not f.tagged_field_q(version):
                values[name] = self._value(f, version)
        return values

    def _value(self, f, version: int):
        rng = self.rng
        if f.nullable_for_version_q(version) and rng.random() < (
                0.8 if self.api_key == PRODUCE and f.name == "transactional_id" else 0.08):
            return None
        if self.nulls and rng.random() < 0.15 and (
                f.type_str in NULLABLE_TYPES or f.is_array() or f.is_struct()):
            return None
        if f.is_struct_array():
            return [f.data_class(**self._struct_values(f.array_of.fields, version))
                    for _ in range(self._count())]
        if f.is_struct():
            return f.data_class(**self._struct_values(f.fields, version))
        if f.is_array():
            return [self._simple(f.array_of, f.name) for _ in range(self._count())]
        return self._simple(f, f.name)

    def _count(self) -> int:
        return self.rng.choice((0, 1, 1, 1, 2, 3))

    def _simple(self, f, name: str):
        kind = f.type_str
        if kind in INT_LIMITS:
            return self._int(kind, name, f._entity_type)
        if kind == "string":
            return self._string(name, f._entity_type)
        if kind == "bool":
            return self.rng.random() < 0.5
        if kind == "records":
            return self.batches.records(self.rng)
        if kind == "bytes":
            return self.rng.randbytes(self.rng.choice((0, 1, 8, 40)))
        if kind == "uuid":
            return uuid.UUID(int=0) if self.rng.random() < 0.5 else uuid.UUID(
                int=self.rng.getrandbits(128))
        if kind == "float64":
            return self.rng.choice((0.0, 1.5, -1.0))
        raise ValueError(f"no generator for field type {kind!r} ({name})")

    def _string(self, name: str, entity: str | None) -> str:
        rng, vocab = self.rng, self.vocab
        if entity == "topicName" or name in ("topic", "topic_name") or (
                name == "name" and self.api_key in (0, 1, 2, 3, 19, 20, 21, 37)):
            if self.api_key == DELETE_TOPICS:
                return rng.choice(vocab.doomed_topics)
            if self.api_key == CREATE_TOPICS and rng.random() < 0.5:
                return rng.choice(vocab.doomed_topics)
            if self.api_key in DESTRUCTIVE_APIS or rng.random() < 0.8:
                return rng.choice(vocab.topics)
            return rng.choice(vocab.missing_topics)
        if entity == "groupId" or name in ("group_id", "key") and self.api_key != 44:
            return rng.choice(vocab.groups)
        if entity == "transactionalId":
            return rng.choice(vocab.transactional_ids)
        if name in ("name", "config_name", "resource_name") and self.api_key in (32, 33, 44):
            return rng.choice(vocab.config_names + vocab.topics + ["1", "2"])
        if name == "value":
            return rng.choice(vocab.config_values)
        if name == "rack_id":
            return rng.choice(("", "r1", "r2", "r3"))
        if name == "mechanism":
            return rng.choice(("PLAIN", "SCRAM-SHA-256", "GSSAPI", ""))
        return rng.choice(("", "fz", "fuzz-member", "x" * rng.choice((1, 17, 300))))

    def _int(self, kind: str, name: str, entity: str | None) -> int:
        rng = self.rng
        low, high = INT_LIMITS[kind]
        if entity == "brokerId" or name in ("broker_id", "leader_id", "node_id"):
            return rng.choice(self.vocab.broker_ids)
        if name == "session_id":  # mostly sessionless, or a fetch session would refuse
            return rng.choice((0, 0, 0, 0, 1, -1))
        if name == "session_epoch":
            return rng.choice((-1, -1, -1, 0, 1))
        if name in ("current_leader_epoch", "leader_epoch", "committed_leader_epoch"):
            return rng.choice((-1, -1, 0, 1, 5))
        if name == "replica_id":
            return rng.choice((-1, -1, -1, -2, 7))
        if name == "voter_id":
            return rng.choice(self.vocab.voter_ids)
        if name == "acks":
            return rng.choice((-1, -1, 1, 1, 0, 2, -2))
        if name.endswith("timeout_ms") or name in ("max_wait_ms", "throttle_time_ms"):
            return rng.choice((0, 0, 1, 10, 50, -1))
        if name in ("partition", "partition_index", "index", "partition_id", "partitions"):
            return rng.choice((0, 1, 2, 0, 1, 2, -1, 3, high))
        if name == "min_bytes":
            return rng.choice((0, 1, 2, 100, 1 << 20))
        if name in ("max_bytes", "partition_max_bytes"):
            return rng.choice((1 << 20, 100, 1, 0, high))
        if name == "timestamp":
            return rng.choice((-1, -2, -3, -4, -5, 0, self.now_ms, self.now_ms - 3_600_000,
                               self.now_ms + 1000, high))
        if name in ("num_partitions", "count"):  # 20,000: past Kafka's 10,000 per request
            return rng.choice((-1, 1, 2, 3, 4, 0, 20_000, high))
        if name == "replication_factor":
            return rng.choice((-1, 1, 2, 3, 4, 0, high))
        if "offset" in name:
            return rng.choice((0, 1, 10, -1, -2, high, 1 << 40))
        return rng.choice((0, 1, 2, -1, 3, 100, low, high))

    # -- APIs without kafka-python classes ------------------------------------------------
    def _hand_written(self, api_key: int, version: int):
        rng, vocab = self.rng, self.vocab
        maybe = self._nullable
        if api_key == ConsumerGroupHeartbeatRequest.API_KEY:
            fields = dict(
                group_id=self._null_or(rng.choice(vocab.groups)),
                member_id=self._null_or(rng.choice(("", "fz-member"))),
                member_epoch=rng.choice((0, -1, -2, 1, 5)),
                instance_id=maybe("fz-instance"), rack_id=maybe("rack-a"),
                rebalance_timeout_ms=rng.choice((-1, 0, 1000, 30_000)),
                subscribed_topic_names=maybe([rng.choice(vocab.topics)]),
                server_assignor=maybe(rng.choice(("uniform", "range", "bogus"))),
                topic_partitions=maybe([TopicPartitions(uuid.UUID(int=rng.getrandbits(128)),
                                                        [0, 1])]))
            if version >= 1:
                fields["subscribed_topic_regex"] = maybe(rng.choice(("fz-.*", "[", "")))
            return ConsumerGroupHeartbeatRequest[version](**fields)
        if api_key == ConsumerGroupDescribeRequest.API_KEY:
            return ConsumerGroupDescribeRequest[version](
                group_ids=self._null_or(rng.sample(vocab.groups, rng.choice((0, 1, 2)))),
                include_authorized_operations=rng.random() < 0.5)
        directory = uuid.UUID(int=rng.getrandbits(128))
        if api_key == AddRaftVoterRequest.API_KEY:
            return AddRaftVoterRequest[version](
                cluster_id=maybe("fz-cluster"), timeout_ms=rng.choice((0, 10, 100)),
                voter_id=rng.choice(vocab.voter_ids), voter_directory_id=directory,
                listeners=[VoterListener("CONTROLLER", "127.0.0.1", rng.choice((1, 65535)))
                           for _ in range(self._count())])
        return RemoveRaftVoterRequest[version](
            cluster_id=maybe("fz-cluster"), voter_id=rng.choice(vocab.voter_ids),
            voter_directory_id=directory)

    def _nullable(self, value):
        return None if self.rng.random() < 0.3 else value

    def _null_or(self, value):
        """``value``, or null where the schema forbids it when nulls are on."""
        return None if self.nulls and self.rng.random() < 0.3 else value


def served_versions() -> list[tuple[int, int]]:
    """Every (api_key, version) Raftwood serves, Produce's refused v0-v2 included."""
    return [(key, version) for key, spec in sorted(SERVED.items())
            for version in range(spec.min_version, spec.max_version + 1)]
