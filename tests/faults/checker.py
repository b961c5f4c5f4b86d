"""Invariant checkers for fault runs on a ClusterProcess (imported by the fault tests and
tests/integration/test_cluster_data.py).

``OffsetWatch`` polls one partition in a background thread while faults happen and
records every violation of:
  * ListOffsets latest never goes backwards (KIP-207: clients see a monotonic end);
  * the high watermark reported by a leader never goes backwards while it leads
    (and, across leaders, what consumers are told in Fetch responses is checked below);
  * a consumer never gets a batch at or above the high watermark of the same response;
  * committed data never changes: a record read at an offset reads the same forever.
``log_prefix`` and ``assert_replicas_identical_below`` compare the stored batches of
every replica byte for byte below the high watermark.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

from broker.testing import ClusterProcess, KafkaConnection, read_records
from protocol.records import iter_headers

NONE = 0


class OffsetWatch:
    """Background checker for one partition (see the module docstring).

    Reacts to its own timer (``interval_s``); exits when ``stop()`` is called.  Errors
    talking to brokers (a broker being killed) are expected and skipped; only broken
    invariants are recorded, in ``violations``.
    """

    def __init__(self, cluster: ClusterProcess, topic: str, partition: int = 0, *,
                 interval_s: float = 0.1, fetch_max_bytes: int = 256 * 1024):
        self.cluster = cluster
        self.topic = topic
        self.partition = partition
        self.interval_s = interval_s
        self.fetch_max_bytes = fetch_max_bytes
        self.violations: list[str] = []
        self.latest_offsets: list[tuple[int, int]] = []      # (leader, ListOffsets latest)
        self.leader_hws: list[tuple[int, int, int]] = []     # (leader, epoch, HW)
        self.values: dict[int, bytes | None] = {}           # offset -> value read
        self.fetched_batches = 0
        self.next_offset = 0
        self._stop = threading.Event()
        self._connections: dict[int, KafkaConnection] = {}
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"OffsetWatch {topic}-{partition}")

    def start(self) -> OffsetWatch:
        self._thread.start()
        return self

    def stop(self) -> OffsetWatch:
        self._stop.set()
        self._thread.join(30)
        for conn in self._connections.values():
            conn.close()
        return self

    def __enter__(self) -> OffsetWatch:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def assert_clean(self, *, min_observations: int = 1) -> None:
        """AssertionError listing the violations; also when nothing was observed."""
        assert not self.violations, "\n".join(self.violations[:20])
        assert len(self.latest_offsets) >= min_observations, \
            f"only {len(self.latest_offsets)} ListOffsets observations"

    # -- the loop ------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._observe_once()
            except Exception as exc:  # a checker must never die silently mid-run
                self.violations.append(f"checker error: {exc!r}")
            self._stop.wait(self.interval_s)

    def _observe_once(self) -> None:
        statuses = self.cluster.statuses(timeout_s=1.0)
        image = self.cluster.freshest(statuses)
        state = image and self.cluster.find_partition(image, self.topic, self.partition)
        if not state or state["leader"] not in statuses:
            return
        leader, epoch = state["leader"], state["leader_epoch"]
        hosted = self.cluster.find_hosted(statuses[leader], self.topic, self.partition)
        if hosted and hosted["role"] == "leader" and hosted["leader_epoch"] == epoch:
            self._check_leader_hw(leader, epoch, hosted["high_watermark"])
        conn = self._connection(leader)
        if conn is None:
            return
        try:
            latest = conn.list_offsets(self.topic, self.partition, -1)
            if latest.error_code == NONE:
                self._check_latest(leader, latest.offset)
            self._consume(leader, conn)
        except (OSError, EOFError, ValueError):
            self._drop(leader)

    def _check_leader_hw(self, leader: int, epoch: int, hw: int) -> None:
        for seen_leader, seen_epoch, seen_hw in reversed(self.leader_hws):
            if (seen_leader, seen_epoch) == (leader, epoch):
                if hw < seen_hw:
                    self.violations.append(f"leader {leader} epoch {epoch}: HW went back "
                                           f"from {seen_hw} to {hw}")
                break
        self.leader_hws.append((leader, epoch, hw))

    def _check_latest(self, leader: int, offset: int) -> None:
        if self.latest_offsets and offset < max(o for _, o in self.latest_offsets):
            self.violations.append(f"ListOffsets latest went back to {offset} on leader "
                                   f"{leader} (seen {self.latest_offsets[-5:]})")
        self.latest_offsets.append((leader, offset))

    def _consume(self, leader: int, conn: KafkaConnection) -> None:
        data = conn.fetch(self.topic, self.partition, self.next_offset,
                          max_bytes=self.fetch_max_bytes)
        if data.error_code != NONE or not data.records:
            return
        records = bytes(data.records)
        for header in iter_headers(records):
            self.fetched_batches += 1
            if header.last_offset >= data.high_watermark:
                self.violations.append(
                    f"leader {leader} served batch {header.base_offset}..{header.last_offset} "
                    f"to a consumer with the response's HW at {data.high_watermark}")
        for offset, _key, value, _ts, _headers in read_records(records):
            if offset < self.next_offset:
                continue
            seen = self.values.setdefault(offset, value)
            if seen != value:
                self.violations.append(f"offset {offset} read {value!r}, earlier {seen!r}")
            self.next_offset = offset + 1

    def reread_all(self, leader: int) -> None:
        """Read the partition again from 0 on ``leader``: every record read during the
        run must read the same now (committed data never changes)."""
        with self.cluster.connect(leader) as conn:
            for offset, _key, value, _ts, _headers in conn.read_partition(self.topic,
                                                                          self.partition):
                if offset in self.values and self.values[offset] != value:
                    self.violations.append(f"offset {offset} now reads {value!r}, during "
                                           f"the run {self.values[offset]!r}")

    def _connection(self, node: int) -> KafkaConnection | None:
        conn = self._connections.get(node)
        if conn is None:
            try:
                conn = self._connections[node] = self.cluster.connect(node, timeout_s=2.0)
            except OSError:
                return None
        return conn

    def _drop(self, node: int) -> None:
        conn = self._connections.pop(node, None)
        if conn is not None:
            conn.close()


# -- replicas compared byte for byte ---------------------------------------------------------

def log_prefix(partition_dir: Path, below_offset: int) -> bytes:
    """The stored batches of a partition's log whose last offset is below
    ``below_offset``, exactly as on disk (segments in order, from the log start)."""
    data = b"".join(p.read_bytes() for p in sorted(Path(partition_dir).glob("*.log")))
    end = 0
    for header in iter_headers(data):
        if header.last_offset >= below_offset:
            break
        end = header.position + header.size
    return data[:end]


def assert_replicas_identical_below(cluster: ClusterProcess, topic: str, partition: int,
                                    high_watermark: int, nodes) -> bytes:
    """Every replica on ``nodes`` stores the same bytes for the offsets below
    ``high_watermark``, and those bytes are whole batches covering exactly 0..HW-1.
    Returns the common prefix."""
    prefixes = {n: log_prefix(cluster.partition_dir(n, topic, partition), high_watermark)
                for n in nodes}
    reference_node = next(iter(prefixes))
    reference = prefixes[reference_node]
    headers = list(iter_headers(reference))
    covered = headers[-1].next_offset if headers else 0
    assert covered == high_watermark, \
        f"broker {reference_node}'s batches below the HW end at {covered}, HW {high_watermark}"
    for node, prefix in prefixes.items():
        if prefix != reference:
            at = next((i for i, (a, b) in enumerate(zip(prefix, reference)) if a != b),
                      min(len(prefix), len(reference)))
            raise AssertionError(
                f"{topic}-{partition}: broker {node}'s log differs from broker "
                f"{reference_node}'s below HW {high_watermark} at byte {at} "
                f"({len(prefix)} vs {len(reference)} bytes)")
    return reference


def wait_fully_replicated(cluster: ClusterProcess, topic: str, partition: int = 0,
                          timeout_s: float = 30.0) -> int:
    """Wait until every replica is in the ISR and the leader's LEO, its HW and every
    follower's LEO and HW are one offset; returns it."""
    def replicated(statuses):
        state = cluster.find_partition(cluster.freshest(statuses), topic, partition)
        if sorted(state["isr"]) != sorted(state["replicas"]) or state["leader"] not in statuses:
            return None
        hosted = cluster.find_hosted(statuses[state["leader"]], topic, partition)
        if hosted["role"] != "leader":
            return None
        leo = hosted["log_end_offset"]
        for replica in state["replicas"]:
            own = replica in statuses and cluster.find_hosted(statuses[replica], topic, partition)
            if not own or (own["log_end_offset"], own["high_watermark"]) != (leo, leo):
                return None
        return [leo]

    return cluster.wait_for(replicated, timeout_s, f"{topic}-{partition} fully replicated")[0]


def wait_until(condition, timeout_s: float, what: str, interval_s: float = 0.05):
    """Poll ``condition()`` until truthy (returned); AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:.1f} s waiting for {what}")
        time.sleep(interval_s)
