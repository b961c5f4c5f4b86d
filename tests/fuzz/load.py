"""The acks=all load beside the fuzzing, and the read-back of everything acknowledged.

``AckedLoad`` runs a confluent-kafka producer (acks=all, idempotent) in its own thread
at a fixed rate, with values that name the run's seed and a serial number, and keeps
every acknowledged ``(partition, offset, value)``.  ``verify`` then reads each partition
from its leader with raw Fetch requests and compares the value at every acknowledged
offset.

Invariant: an acknowledgement is recorded only from the producer's delivery report
without error, so a record the broker refused never counts as acknowledged.
"""
from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

from broker.harness import ClusterProcess, KafkaConnection

LOAD_TOPIC = "fz-acked-load"
LOAD_PARTITIONS = 3
# The load topic pins the configs a fuzzed AlterConfigs of a broker default could change.
LOAD_TOPIC_CONFIGS = {"min.insync.replicas": "2", "retention.ms": "-1",
                      "retention.bytes": "-1", "cleanup.policy": "delete",
                      "segment.bytes": "104857600"}


class AckedLoad:
    """An acks=all producer in a thread; ``acked`` holds what the brokers acknowledged."""

    def __init__(self, bootstrap: str, seed: int, rate_per_s: float = 200.0):
        self.bootstrap, self.seed, self.rate_per_s = bootstrap, seed, rate_per_s
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed: dict[str, int] = {}
        self.produced = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="acked-load", daemon=True)
        self._lock = threading.Lock()

    def start(self) -> AckedLoad:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 45.0) -> None:
        """Stop producing and wait (bounded) for the last delivery reports."""
        self._stop.set()
        self._thread.join(timeout_s)

    def _report(self, err, msg) -> None:
        with self._lock:
            if err is None:
                self.acked.append((msg.partition(), msg.offset(), msg.value()))
            else:
                name = err.name()
                self.failed[name] = self.failed.get(name, 0) + 1

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5,
                             "message.timeout.ms": 60_000, "client.id": "fz-load"})
        interval = 1.0 / self.rate_per_s
        next_at = time.monotonic()
        serial = 0
        while not self._stop.is_set():
            value = b"load-%d-%d" % (self.seed, serial)
            try:
                producer.produce(LOAD_TOPIC, value=value, partition=serial % LOAD_PARTITIONS,
                                 on_delivery=self._report)
                serial += 1
            except BufferError:
                pass
            producer.poll(0)
            next_at += interval
            pause = next_at - time.monotonic()
            if pause > 0:
                self._stop.wait(pause)
            else:
                next_at = time.monotonic()
        self.produced = serial
        producer.flush(30)


def verify(cluster: ClusterProcess | None, bootstrap: str, acked, *,
           topic: str = LOAD_TOPIC, partitions: int = LOAD_PARTITIONS) -> dict:
    """Read every partition back and compare every acknowledged value at its offset.

    Returns {"acked", "checked", "lost": [...], "changed": [...]} (samples of at most 20
    each, with counts ``lost_count`` / ``changed_count``)."""
    by_partition: dict[int, dict[int, bytes]] = {}
    for partition, offset, value in acked:
        by_partition.setdefault(partition, {})[offset] = value
    result = {"acked": len(acked), "checked": 0, "lost": [], "changed": [], "lost_count": 0,
              "changed_count": 0}
    for partition in range(partitions):
        wanted = by_partition.get(partition, {})
        if not wanted:
            continue
        stored = _read_partition(cluster, bootstrap, topic, partition)
        for offset, value in sorted(wanted.items()):
            result["checked"] += 1
            found = stored.get(offset)
            if found is None:
                result["lost_count"] += 1
                if len(result["lost"]) < 20:
                    result["lost"].append({"partition": partition, "offset": offset,
                                           "value": value.decode()})
            elif found != value:
                result["changed_count"] += 1
                if len(result["changed"]) < 20:
                    result["changed"].append({"partition": partition, "offset": offset,
                                              "acked": value.decode(), "stored": repr(found)})
    return result


def _read_partition(cluster, bootstrap: str, topic: str, partition: int) -> dict[int, bytes]:
    """{offset: value} of the partition up to its high watermark, read from its leader."""
    if cluster is not None:
        address = cluster.broker(cluster.wait_for_leader(topic, partition,
                                                         timeout_s=15.0)).bootstrap
    else:
        address = _leader_address(bootstrap, topic, partition)
    with KafkaConnection(address, timeout_s=10.0) as conn:
        return {offset: value for offset, _key, value, _ts, _headers
                in conn.read_partition(topic, partition, max_fetches=100_000)}


def _leader_address(bootstrap: str, topic: str, partition: int) -> str:
    with KafkaConnection(bootstrap.split(",")[0], timeout_s=10.0) as conn:
        metadata = conn.metadata([topic])
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in metadata.brokers}
    for p in metadata.topics[0].partitions:
        if p.partition_index == partition:
            return brokers[p.leader_id]
    raise AssertionError(f"{topic}-{partition} has no leader in the metadata")
