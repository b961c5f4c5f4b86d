"""The observer: a background thread watching the cluster while faults happen.

Every ``interval_s`` it asks each running broker for its private status (its metadata
image and the replicas it hosts), then, for every workload partition, the leader the
newest image names:
  * ListOffsets latest (current leader epoch set, so a deposed leader answers
    FENCED_LEADER_EPOCH instead of a stale offset);
  * a consumer Fetch from where the previous one ended (again with the leader epoch),
    remembering every batch served — always below the HW — byte for byte.
and feeds the ``checker`` audits: leader HWs and ListOffsets answers must not go
backwards, elections must come from the ISR, served batches must never change.
For the transactional workload's partitions (``lso_partitions``) it asks the newest
image's leader for ListOffsets latest under read_committed — the last stable offset —
with the leader epoch too, and feeds ``txncheck.LsoAudit`` (the LSO never goes back).
A broker whose own status says it leads a partition that the newest image gives to
another broker or epoch (a deposed leader that has not heard, a zombie cut off from
the cluster but not from clients) is fetched from too, in its own epoch, from where
the main view stood when it was first seen: what it serves is what a consumer with
stale metadata would be served.  Every leader claim (broker, epoch, HW) and every
served batch also feed the ``EpochAudit`` (one leader per leader epoch).
Errors answered by a broker (NOT_LEADER, FENCED_LEADER_EPOCH, OFFSET_NOT_AVAILABLE
from a leader still catching up ...) and brokers that do not answer (killed, paused,
restarting) are "no answer": skipped, never a violation.

Loop header: reacts to its timer; exits when ``stop()`` is called.  It opens its own
connections (never the runner's) and only reads ``ClusterProcess`` state.  The
audits are guarded by ``lock``, which the consumer callback takes too.
"""
from __future__ import annotations

import struct
import threading

from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest

from broker.harness import ClusterProcess, KafkaConnection
from protocol.records import valid_prefix

from .checker import (
    CommittedSnapshots,
    ElectionAudit,
    EpochAudit,
    OffsetAudit,
    PartitionState,
    ViolationLog,
    batch_digest,
)
from .txncheck import LsoAudit

TopicPartition = tuple[str, int]
NONE = 0
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
CONNECT_TIMEOUT_S = 2.0
PARTITION_FETCH_BYTES = 256 * 1024
ListOffsetsTopic = ListOffsetsRequest.ListOffsetsTopic
FetchTopic = FetchRequest.FetchTopic


class Observer:
    """See the module docstring.  ``start``/``stop`` from the runner's thread."""

    def __init__(self, cluster: ClusterProcess, partitions: list[TopicPartition],
                 violations: ViolationLog, *, interval_s: float = 0.25,
                 lso_partitions: list[TopicPartition] = ()):
        self.cluster = cluster
        self.partitions = list(partitions)
        self.lso_partitions = list(lso_partitions)
        self.lso = LsoAudit(violations)
        self.interval_s = interval_s
        self.lock = threading.Lock()
        self.violations = violations
        self.offsets = OffsetAudit(violations)
        self.elections = ElectionAudit(violations)
        self.snapshots = CommittedSnapshots(violations)
        self.epochs = EpochAudit(violations)
        self.next_offset: dict[TopicPartition, int] = dict.fromkeys(partitions, 0)
        self.claimant_offset: dict[tuple[int, TopicPartition], int] = {}
        self.claimant_batches = 0
        self.polls = 0
        self.errors: list[str] = []
        self._connections: dict[int, KafkaConnection] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="observer")

    def start(self) -> Observer:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 15.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    def on_consumed(self, topic: str, partition: int, offset: int, key, value) -> None:
        """The consumer worker's callback: a record a consumer was served."""
        with self.lock:
            self.snapshots.record_value((topic, partition), offset, key, value)

    def summary(self) -> dict:
        with self.lock:
            return {"polls": self.polls, "latest": self.offsets.latest_observations,
                    "leader_hw": self.offsets.hw_observations,
                    "elections": self.elections.elections_seen(),
                    "elections_checked": self.elections.elections_checked,
                    "batches": self.snapshots.batch_count(),
                    "values": self.snapshots.value_count(),
                    "leader_claims": len(self.epochs.claims),
                    "lso": self.lso.observations,
                    "claimant_batches": self.claimant_batches}

    # -- the loop --------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except Exception as exc:  # an observer must never die silently mid-run
                if len(self.errors) < 20:
                    self.errors.append(repr(exc))
            self._stop.wait(self.interval_s)

    def poll_once(self) -> None:
        statuses = {}
        for node in self.cluster.running():
            status = self._ask(node, lambda conn: conn.status())
            if status is not None:
                statuses[node] = status
        if not statuses:
            return
        with self.lock:
            self.polls += 1
            for node, status in statuses.items():
                self._audit_status(node, status)
        image = self.cluster.freshest(statuses)
        by_leader: dict[int, list[tuple[TopicPartition, int]]] = {}
        for tp in self.partitions:
            state = self.cluster.find_partition(image, *tp)
            if state and state["leader"] in statuses:
                by_leader.setdefault(state["leader"], []).append((tp, state["leader_epoch"]))
        for leader, led in sorted(by_leader.items()):
            self._ask(leader, lambda conn, leader=leader, led=led:
                      self._list_offsets(conn, leader, led))
            self._ask(leader, lambda conn, leader=leader, led=led: self._fetch(conn, leader, led))
        lso_by_leader: dict[int, list[tuple[TopicPartition, int]]] = {}
        for tp in self.lso_partitions:
            state = self.cluster.find_partition(image, *tp)
            if state and state["leader"] in statuses:
                lso_by_leader.setdefault(state["leader"], []).append(
                    (tp, state["leader_epoch"]))
        for leader, led in sorted(lso_by_leader.items()):
            self._ask(leader, lambda conn, leader=leader, led=led:
                      self._list_offsets(conn, leader, led, READ_COMMITTED))
        for node, led in sorted(self._claimants(statuses, by_leader).items()):
            self._ask(node, lambda conn, node=node, led=led:
                      self._fetch(conn, node, led, claimant=True))

    def _claimants(self, statuses: dict[int, dict], by_leader) -> dict[int, list]:
        """Brokers leading a partition, by their own status, that the main view does
        not fetch from in that epoch: {node: [(tp, their epoch), ...]}."""
        main = {(node, tp, epoch) for node, led in by_leader.items() for tp, epoch in led}
        wanted = set(self.partitions)
        found: dict[int, list] = {}
        for node, status in statuses.items():
            for hosted in status.get("hosted", []):
                tp = (hosted["topic"], hosted["partition"])
                if tp in wanted and hosted["role"] == "leader" \
                        and (node, tp, hosted["leader_epoch"]) not in main:
                    found.setdefault(node, []).append((tp, hosted["leader_epoch"]))
                    self.claimant_offset.setdefault((node, tp), self.next_offset[tp])
        return found

    def _audit_status(self, node: int, status: dict) -> None:
        wanted = set(self.partitions)
        for topic in status.get("topics", []):
            for p in topic["partitions"]:
                tp = (topic["name"], p["partition"])
                if tp in wanted:
                    self.elections.observe(tp, PartitionState(
                        p["leader"], p["leader_epoch"], p["partition_epoch"], tuple(p["isr"])))
        for hosted in status.get("hosted", []):
            tp = (hosted["topic"], hosted["partition"])
            if tp in wanted and hosted["role"] == "leader":
                self.offsets.observe_leader_hw(node, tp, hosted["leader_epoch"],
                                               hosted["high_watermark"])
                self.epochs.observe_claim(node, tp, hosted["leader_epoch"],
                                          hosted["high_watermark"])

    def _list_offsets(self, conn: KafkaConnection, leader: int, led,
                      isolation: int = READ_UNCOMMITTED) -> None:
        """ListOffsets latest of ``led`` [(tp, epoch)]: the HW (read_uncommitted, fed
        to ``offsets``) or the LSO (read_committed, fed to ``lso``); error answers are
        no answer."""
        topics: dict[str, list] = {}
        for (topic, index), epoch in led:
            topics.setdefault(topic, []).append(ListOffsetsTopic.ListOffsetsPartition(
                partition_index=index, current_leader_epoch=epoch, timestamp=-1))
        response = conn.request(ListOffsetsRequest[7](
            replica_id=-1, isolation_level=isolation,
            topics=[ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()]))
        with self.lock:
            for topic in response.topics:
                for p in topic.partitions:
                    if p.error_code != NONE:
                        continue
                    tp, source = (topic.name, p.partition_index), f"broker {leader}"
                    if isolation == READ_COMMITTED:
                        self.lso.observe(tp, p.offset, source)
                    else:
                        self.offsets.observe_latest(tp, p.offset, source)

    def _fetch(self, conn: KafkaConnection, node: int, led, claimant: bool = False) -> None:
        """A consumer Fetch of ``led`` [(tp, epoch)] from ``node``: the main view
        (``next_offset``) or, for a ``claimant``, its own position."""
        topics: dict[str, list] = {}
        for tp, epoch in led:
            position = self.claimant_offset[(node, tp)] if claimant else self.next_offset[tp]
            topics.setdefault(tp[0], []).append(FetchTopic.FetchPartition(
                partition=tp[1], current_leader_epoch=epoch,
                fetch_offset=position, log_start_offset=-1,
                partition_max_bytes=PARTITION_FETCH_BYTES))
        response = conn.request(FetchRequest[11](
            replica_id=-1, max_wait_ms=0, min_bytes=0,
            max_bytes=PARTITION_FETCH_BYTES * len(led), isolation_level=0, session_id=0,
            session_epoch=-1, topics=[FetchTopic(topic=t, partitions=ps)
                                      for t, ps in topics.items()],
            forgotten_topics_data=[], rack_id=""))
        with self.lock:
            for topic in response.responses:
                for p in topic.partitions:
                    if p.error_code == NONE and p.records:
                        self._remember((topic.topic, p.partition_index), bytes(p.records),
                                       node, claimant)

    def _remember(self, tp: TopicPartition, records: bytes, node: int,
                  claimant: bool) -> None:
        positions, key = ((self.claimant_offset, (node, tp)) if claimant
                          else (self.next_offset, tp))
        source = f"served by broker {node}" + (" (claiming leadership)" if claimant else "")
        headers, _ = valid_prefix(records, check_crc=True)
        for header in headers:
            if header.last_offset < positions[key]:
                continue
            batch = records[header.position:header.position + header.size]
            digest = batch_digest(batch)
            self.snapshots.record_batch(tp, header.base_offset, header.last_offset,
                                        digest, header.partition_leader_epoch)
            self.epochs.record_batch(tp, header.partition_leader_epoch, header.base_offset,
                                     header.last_offset, digest, source)
            self.claimant_batches += claimant
            positions[key] = header.next_offset

    def _ask(self, node: int, call):
        """``call(connection)`` on a cached connection to ``node``; None (and the
        connection dropped) when the broker does not answer."""
        conn = self._connections.get(node)
        try:
            if conn is None:
                conn = KafkaConnection(self.cluster.broker(node).bootstrap,
                                       timeout_s=CONNECT_TIMEOUT_S, client_id="raftwood-verify")
                self._connections[node] = conn
            return call(conn)
        except (OSError, EOFError, ValueError, struct.error, IndexError):
            dropped = self._connections.pop(node, None)
            if dropped is not None:
                dropped.close()
            return None
