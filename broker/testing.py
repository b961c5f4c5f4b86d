"""Real Raftwood brokers for your tests: a pytest plugin and a few raw-protocol helpers.

Installing raftwood registers this module as the pytest plugin ``raftwood`` (entry point
``pytest11``), so its fixtures are available in any test suite without imports::

    from kafka import KafkaProducer

    def test_roundtrip(raftwood_broker):
        producer = KafkaProducer(bootstrap_servers=raftwood_broker.bootstrap)
        producer.send("t", b"hello").get(timeout=10)

    def test_small_segments(raftwood_broker_factory):
        # Kafka's config names; in keyword form dots become underscores.
        broker = raftwood_broker_factory(log_segment_bytes=4096, num_partitions=3)
        # or: raftwood_broker_factory(**{"log.segment.bytes": 4096})
        broker.kill()        # SIGKILL, like a crash
        broker.restart()     # same port, same data directory

A cluster whose metadata lives in a Raft quorum of its brokers::

    def test_failover(raftwood_cluster):
        cluster = raftwood_cluster                     # 3 brokers, node ids 1, 2, 3
        cluster.create_topic("events", partitions=1, replication_factor=3)
        leader = cluster.leader_of("events", 0)
        cluster.kill(leader)                           # SIGKILL
        new = cluster.wait_for_leader("events", 0, not_in=[leader])
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap)   # "h:p,h:p,h:p"
        cluster.start(leader)                          # back as follower, same data

Fixtures:

``raftwood_broker``
    A fresh single broker (node.id 1) in the test's ``tmp_path``, stopped with SIGTERM at
    teardown.  A broker that does not exit 0 on SIGTERM fails the teardown.
``raftwood_broker_factory``
    A callable ``factory(**settings) -> BrokerProcess``; every broker it made is stopped at
    teardown.
``raftwood_cluster``
    A fresh, started :class:`ClusterProcess` of three brokers in ``tmp_path`` with
    ``FAST_CLUSTER_SETTINGS`` (3 s sessions, 0.5 s heartbeats, 3 s replica lag time).
``raftwood_cluster_factory``
    ``factory(size=3, *, broker_settings=None, fast=True, start=True, **settings)
    -> ClusterProcess``; ``broker_settings`` maps a node id to settings for that broker
    alone.  At teardown every broker of every cluster gets SIGTERM (one by one, the
    controller last, SIGKILL after a bound); one that needed SIGKILL or exited non-zero
    fails the teardown, one that was killed on purpose (not running) does not.

Each broker is a :class:`BrokerProcess`: ``bootstrap`` ("127.0.0.1:PORT"), ``port``,
``data_dir``, ``node_id``, ``log_path`` (its stdout and stderr), and ``start()``,
``stop()`` (SIGTERM, returns the exit code), ``kill()`` (SIGKILL), ``restart()``,
``pause()`` (SIGSTOP) and ``resume()`` (SIGCONT).  A broker is ready when a TCP connection
succeeds and an ApiVersions v0 request is answered.  Leftover processes are killed when
their ``BrokerProcess`` is garbage collected, when the interpreter exits, and (on Linux)
when the process that started them dies.

:class:`ClusterProcess` runs N brokers (default 3) with free Kafka and Raft ports:
``bootstrap``, ``brokers`` (BrokerProcess list, node id order; ``broker(id)``), per-node
``kill``/``stop``/``start``/``restart``/``pause``/``resume``, ``start_all``/``stop_all``,
and the cluster's own view through Raftwood's private status request (``status(id)``,
``statuses()``, ``controller_id()``, ``partition_state(topic, p)``, ``leader_of``,
``hosted(id, topic, p)``), ``wait_for(predicate, timeout_s, what)`` polling those views
with a bound and a failure message that shows every broker's view and log tail, and
conveniences for tests (``create_topic``, ``wait_for_leader``, ``wait_for_isr``,
``connect(id)``, ``partition_dir``).  A cluster is ready when every broker answers
ApiVersions and every broker's status shows all of them registered in this run, unfenced,
with a controller elected.

:class:`KafkaConnection` is a blocking, one-request-at-a-time connection that sends
kafka-python message objects (``kafka.protocol``) or raw bytes, for tests that need to see
error codes or byte-exact record batches that real clients hide; ``status()`` sends the
private status request.

The module imports pytest lazily: ``BrokerProcess``, ``ClusterProcess`` and
``KafkaConnection`` also work in scripts and benchmarks without it (``with
ClusterProcess(directory) as cluster: ...`` starts and stops one).
"""
from __future__ import annotations

import itertools
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import weakref
from pathlib import Path

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from protocol.status import decode_status_response, encode_status_request

__all__ = ["BrokerError", "BrokerProcess", "ClusterProcess", "FAST_CLUSTER_SETTINGS",
           "KafkaConnection", "free_port", "free_ports", "build_batch",
           "read_records", "settings_from_kwargs"]

DEFAULT_START_TIMEOUT_S = 20.0
DEFAULT_STOP_TIMEOUT_S = 15.0
LOCALHOST = "127.0.0.1"
# Settings BrokerProcess owns: passing them would make port/data_dir lie.
_MANAGED_SETTINGS = frozenset({"listeners", "log.dirs"})
_SIZE = struct.Struct(">i")
_PACKAGE_PARENT = Path(__file__).resolve().parent.parent

# Started through this launcher, a broker gets SIGKILL when the thread that started it
# dies (PR_SET_PDEATHSIG survives exec), so even a SIGKILLed pytest leaves nothing behind.
_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))\n"
    "    if os.getppid() != int(sys.argv[1]): os._exit(1)\n"
    "except (OSError, AttributeError): pass\n"
    "os.execv(sys.executable, [sys.executable] + sys.argv[2:])\n"
)


class BrokerError(RuntimeError):
    """A broker process did not start, did not stop, or stopped badly (message has its log)."""


def free_port(host: str = LOCALHOST) -> int:
    """A TCP port that was free a moment ago (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def settings_from_kwargs(settings: dict) -> dict[str, str]:
    """Kafka config names from keyword arguments: ``log_segment_bytes`` -> ``log.segment.bytes``.

    Keys that already contain a dot are kept as they are; values become strings (booleans
    as ``true``/``false``, Kafka's spelling).
    """
    result = {}
    for key, value in settings.items():
        name = key if "." in key else key.replace("_", ".")
        if isinstance(value, bool):
            value = "true" if value else "false"
        result[name] = str(value)
    return result


def _kill_quietly(popen: subprocess.Popen) -> None:
    """Safety net (weakref.finalize / interpreter exit): SIGKILL a leftover broker."""
    if popen.poll() is None:
        try:
            popen.kill()
            popen.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass


class BrokerProcess:
    """One ``raftwood start`` subprocess on 127.0.0.1 with its own port and data directory.

    Invariants: ``port`` and ``data_dir`` never change, so ``restart()`` brings back the
    same broker; at most one process runs per instance; ``log_path`` accumulates the output
    of every run (each run starts with a ``### raftwood-testing:`` marker line).
    ``extra_settings`` go to ``--set`` as they are (a cluster helper passes the
    controller quorum there).  Not thread-safe: call from one thread, which should outlive
    the broker (see the module docstring about PR_SET_PDEATHSIG).
    """

    def __init__(self, data_dir, *, node_id: int = 1, port: int | None = None,
                 log_path=None, extra_settings: dict | None = None,
                 start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
                 python: str = sys.executable, env: dict | None = None):
        self.data_dir = Path(data_dir)
        self.node_id = node_id
        self.port = port if port is not None else free_port()
        self.log_path = Path(log_path) if log_path else self.data_dir.parent / f"broker-{node_id}.log"
        self.extra_settings = settings_from_kwargs(extra_settings or {})
        clash = _MANAGED_SETTINGS & self.extra_settings.keys()
        if clash:
            raise ValueError(f"{sorted(clash)} are managed by BrokerProcess (port/data_dir)")
        if "node.id" in self.extra_settings:
            self.node_id = int(self.extra_settings.pop("node.id"))
        self.start_timeout_s = start_timeout_s
        self.python = python
        self.env = env
        self._popen: subprocess.Popen | None = None
        self._finalizer: weakref.finalize | None = None
        self._log_file = None
        self._paused = False

    # -- what clients need -------------------------------------------------------------
    @property
    def host(self) -> str:
        return LOCALHOST

    @property
    def bootstrap(self) -> str:
        return f"{LOCALHOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    @property
    def returncode(self) -> int | None:
        return self._popen.poll() if self._popen else None

    def is_running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def command(self) -> list[str]:
        settings = {"node.id": str(self.node_id),
                    "listeners": f"PLAINTEXT://{self.bootstrap}",
                    "log.dirs": str(self.data_dir), **self.extra_settings}
        args = [self.python, "-m", "broker.cli", "start"]
        for key, value in settings.items():
            args += ["--set", f"{key}={value}"]
        return args

    def __repr__(self) -> str:
        state = "running" if self.is_running() else f"exited {self.returncode}"
        return f"<BrokerProcess node={self.node_id} {self.bootstrap} {state} data={self.data_dir}>"

    # -- lifecycle -------------------------------------------------------------------------
    def start(self, timeout_s: float | None = None) -> "BrokerProcess":
        """Start the process and wait until it answers ApiVersions; BrokerError otherwise."""
        self.launch()
        try:
            self.wait_ready(self.start_timeout_s if timeout_s is None else timeout_s)
        except BaseException:
            self._terminate(signal.SIGKILL, 5.0)
            raise
        return self

    def launch(self) -> "BrokerProcess":
        """Start the process without waiting for it (then ``wait_ready``): a cluster helper
        launches every broker first, so their interpreters start side by side."""
        if self.is_running():
            raise BrokerError(f"{self!r} is already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = open(self.log_path, "ab")
        self._log_file.write(f"### raftwood-testing: {' '.join(self.command())}\n".encode())
        self._log_file.flush()
        env = dict(os.environ if self.env is None else self.env)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(_PACKAGE_PARENT), env.get("PYTHONPATH")) if p)
        env.setdefault("PYTHONUNBUFFERED", "1")
        argv = self.command()
        if sys.platform.startswith("linux"):
            argv = [self.python, "-c", _LAUNCHER, str(os.getpid())] + argv[1:]
        self._popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._log_file,
                                       stderr=subprocess.STDOUT, env=env,
                                       start_new_session=True)
        self._paused = False
        self._finalizer = weakref.finalize(self, _kill_quietly, self._popen)
        return self

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Wait until the running process answers ApiVersions v0 (BrokerError if it exits
        or stays silent for ``timeout_s``)."""
        if timeout_s is None:
            timeout_s = self.start_timeout_s
        deadline = time.monotonic() + timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            code = self._popen.poll()
            if code is not None:
                raise BrokerError(f"broker node {self.node_id} exited with {code} during start\n"
                                  f"{self.log_tail()}")
            try:
                with KafkaConnection(self.bootstrap, timeout_s=2.0) as conn:
                    conn.api_versions(version=0)
                return
            except (OSError, EOFError, ValueError, struct.error) as exc:
                last_error = exc
                time.sleep(0.05)
        raise BrokerError(f"broker node {self.node_id} did not answer ApiVersions on "
                          f"{self.bootstrap} within {timeout_s:.0f} s (last: {last_error!r})\n"
                          f"{self.log_tail()}")

    def stop(self, timeout_s: float = DEFAULT_STOP_TIMEOUT_S, *, check: bool = False) -> int | None:
        """SIGTERM and wait; returns the exit code (None when it never ran).

        A process still alive after ``timeout_s`` is SIGKILLed and BrokerError raised.
        With ``check``, an exit code other than 0 also raises BrokerError.
        """
        if self._popen is None:
            return None
        if self._popen.poll() is not None:
            return self._finish()
        if self._paused:
            self.resume()
        code = self._terminate(signal.SIGTERM, timeout_s)
        if code is None:
            self._terminate(signal.SIGKILL, 5.0)
            raise BrokerError(f"broker node {self.node_id} ignored SIGTERM for {timeout_s:.0f} s; "
                              f"killed\n{self.log_tail()}")
        if check and code != 0:
            raise BrokerError(f"broker node {self.node_id} exited with {code} after SIGTERM "
                              f"(expected 0)\n{self.log_tail()}")
        return code

    def terminate(self) -> None:
        """Send SIGTERM (resuming a paused process first) without waiting; see ``wait``."""
        if self.is_running():
            if self._paused:
                self.resume()
            self._popen.send_signal(signal.SIGTERM)

    def wait(self, timeout_s: float) -> int | None:
        """Wait up to ``timeout_s`` for the process to exit; its exit code, or None if it
        is still running (None too when it never ran)."""
        if self._popen is None:
            return None
        try:
            self._popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        return self._finish()

    @property
    def paused(self) -> bool:
        return self._paused and self.is_running()

    def kill(self) -> int | None:
        """SIGKILL (a crash: nothing is flushed) and reap; returns the exit code."""
        if self._popen is None:
            return None
        return self._terminate(signal.SIGKILL, 10.0)

    def restart(self, timeout_s: float | None = None) -> "BrokerProcess":
        """Stop (SIGTERM) if running, then start again on the same port and data directory."""
        if self.is_running():
            self.stop()
        return self.start(timeout_s)

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets but answers nothing until ``resume()``."""
        self._require_running().send_signal(signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        """SIGCONT after ``pause()``."""
        self._require_running().send_signal(signal.SIGCONT)
        self._paused = False

    def _require_running(self) -> subprocess.Popen:
        if not self.is_running():
            raise BrokerError(f"{self!r} is not running")
        return self._popen

    def _terminate(self, sig: int, timeout_s: float) -> int | None:
        """Send ``sig`` and wait up to ``timeout_s``; the exit code, or None if still alive."""
        if self._popen.poll() is None:
            try:
                self._popen.send_signal(sig)
                if sig == signal.SIGKILL or self._paused:
                    self._popen.send_signal(signal.SIGCONT)
            except ProcessLookupError:
                pass
            try:
                self._popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                return None
        return self._finish()

    def _finish(self) -> int:
        code = self._popen.returncode
        self._paused = False
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return code

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the broker's output, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"(no log at {self.log_path}: {exc})"
        return f"--- last lines of {self.log_path} ---\n" + "\n".join(text.splitlines()[-lines:])


class KafkaConnection:
    """A blocking Kafka connection for tests: one request, then its response.

    ``request(msg)`` sends a kafka-python message object (its version set with
    ``Cls[v](...)`` or ``version=``) and returns the decoded response; ``send_raw``/
    ``read_frame`` move bytes for malformed-input tests.  Responses are checked against
    the correlation id.  Not thread-safe; one connection per thread.
    """

    def __init__(self, address: str | tuple[str, int], *, timeout_s: float = 10.0,
                 client_id: str = "raftwood-testing"):
        if isinstance(address, str):
            host, _, port = address.rpartition(":")
            address = (host, int(port))
        self.client_id = client_id
        self.sock = socket.create_connection(address, timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation_ids = itertools.count(1)

    def __enter__(self) -> "KafkaConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    # -- bytes -----------------------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read_exactly(self, size: int) -> bytes:
        chunks, remaining = [], size
        while remaining:
            chunk = self.sock.recv(min(remaining, 1 << 20))
            if not chunk:
                raise EOFError(f"connection closed with {remaining} of {size} bytes unread")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def read_frame(self) -> bytes:
        """One response frame without its size prefix; EOFError when the peer closed."""
        (size,) = _SIZE.unpack(self._read_exactly(4))
        return self._read_exactly(size)

    def closed_by_peer(self, timeout_s: float = 5.0) -> bool:
        """True when the broker closes (EOF or reset) within ``timeout_s``, discarding any
        bytes it sends first; False when the connection is still open at the deadline."""
        deadline = time.monotonic() + timeout_s
        try:
            while (remaining := deadline - time.monotonic()) > 0:
                self.sock.settimeout(remaining)
                if not self.sock.recv(65536):
                    return True
        except socket.timeout:
            return False
        except OSError:  # ECONNRESET and friends
            return True
        return False

    # -- messages --------------------------------------------------------------------------
    def send(self, request, version: int | None = None) -> int:
        """Encode and send ``request``; returns its correlation id."""
        if version is not None:
            request.API_VERSION = version
        correlation_id = next(self._correlation_ids)
        request.with_header(correlation_id=correlation_id, client_id=self.client_id)
        self.sock.sendall(bytes(request.encode(header=True, framed=True)))
        return correlation_id

    def receive(self, request, correlation_id: int):
        """Read and decode the response to ``request`` sent with ``correlation_id``."""
        frame = self.read_frame()
        response_class = request.header.get_response_class()
        response = response_class.decode(frame, version=request.API_VERSION, header=True)
        if response.header.correlation_id != correlation_id:
            raise ValueError(f"correlation id {response.header.correlation_id}, "
                             f"expected {correlation_id}")
        return response

    def request(self, request, version: int | None = None):
        """Send ``request`` and return its decoded response."""
        return self.receive(request, self.send(request, version))

    # -- common requests -------------------------------------------------------------------
    def status(self) -> dict:
        """Raftwood's private status request (``protocol/status.py``): this broker's view
        of the cluster and of the partitions it hosts, as the documented JSON object."""
        correlation_id = next(self._correlation_ids)
        self.sock.sendall(encode_status_request(correlation_id, {}, self.client_id))
        answered, status = decode_status_response(self.read_frame())
        if answered != correlation_id:
            raise ValueError(f"correlation id {answered}, expected {correlation_id}")
        return status

    def api_versions(self, version: int = 0):
        return self.request(ApiVersionsRequest[version]())

    def metadata(self, topics: list[str] | None = None, version: int = 8):
        topic_list = None if topics is None else [
            MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
        return self.request(MetadataRequest[version](
            topics=topic_list, allow_auto_topic_creation=False))

    def create_topic(self, name: str, partitions: int = 1, configs: dict | None = None,
                     *, timeout_ms: int = 10_000, version: int = 4) -> int:
        """CreateTopics for one topic with replication factor 1; returns its error code."""
        topic_class = CreateTopicsRequest.CreatableTopic
        config_class = topic_class.CreatableTopicConfig
        topic = topic_class(name=name, num_partitions=partitions, replication_factor=1,
                            assignments=[], configs=[config_class(name=k, value=str(v))
                                                     for k, v in (configs or {}).items()])
        response = self.request(CreateTopicsRequest[version](
            topics=[topic], timeout_ms=timeout_ms, validate_only=False))
        return response.topics[0].error_code

    def produce(self, topic: str, partition: int, records: bytes, *, acks: int = -1,
                version: int = 9, timeout_ms: int = 10_000):
        """Produce one partition's record bytes; the PartitionProduceResponse (None for acks=0)."""
        topic_data = ProduceRequest.TopicProduceData
        request = ProduceRequest[version](
            transactional_id=None, acks=acks, timeout_ms=timeout_ms,
            topic_data=[topic_data(name=topic, partition_data=[
                topic_data.PartitionProduceData(index=partition, records=records)])])
        correlation_id = self.send(request)
        if acks == 0:
            return None
        return self.receive(request, correlation_id).responses[0].partition_responses[0]

    def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int = 1 << 20,
              max_wait_ms: int = 0, version: int = 11):
        """Fetch one partition once (no session); the PartitionData of the response."""
        fetch_topic = FetchRequest.FetchTopic
        request = FetchRequest[version](
            replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=0, max_bytes=max_bytes,
            isolation_level=0, session_id=0, session_epoch=-1,
            topics=[fetch_topic(topic=topic, partitions=[fetch_topic.FetchPartition(
                partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                log_start_offset=-1, partition_max_bytes=max_bytes)])],
            forgotten_topics_data=[], rack_id="")
        return self.request(request).responses[0].partitions[0]

    def read_partition(self, topic: str, partition: int, start: int = 0, *,
                       max_fetches: int = 1000) -> list[tuple]:
        """Every record from ``start`` to the high watermark, as ``read_records`` tuples.

        Fetches until the high watermark; AssertionError on a fetch error or when a fetch
        makes no progress (so a broken broker fails the test instead of hanging it).
        """
        result: list[tuple] = []
        offset = start
        for _ in range(max_fetches):
            data = self.fetch(topic, partition, offset)
            assert data.error_code == 0, \
                f"Fetch {topic}-{partition} at {offset}: error {data.error_code}"
            if offset >= data.high_watermark:
                return result
            records = [r for r in read_records(data.records) if r[0] >= offset]
            assert records, (f"Fetch {topic}-{partition} at {offset} returned no record below "
                             f"the high watermark {data.high_watermark}")
            result += records
            offset = records[-1][0] + 1
        raise AssertionError(f"{topic}-{partition} not read to its end in {max_fetches} fetches")

    def list_offsets(self, topic: str, partition: int, timestamp: int, *, version: int = 7):
        """ListOffsets for one partition (-1 latest, -2 earliest, -3 max timestamp, or a
        timestamp in ms); the partition's response (error_code, offset, timestamp)."""
        list_topic = ListOffsetsRequest.ListOffsetsTopic
        request = ListOffsetsRequest[version](
            replica_id=-1, isolation_level=0,
            topics=[list_topic(name=topic, partitions=[list_topic.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])])
        return self.request(request).topics[0].partitions[0]


def build_batch(records, *, compression: int = 0) -> bytes:
    """A RecordBatch v2 as a producer sends it (baseOffset 0).

    ``records`` are ``(key, value, timestamp_ms, headers)`` tuples; headers a list of
    ``(str, bytes)``.  ``compression``: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    """
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression,
                                        is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 30)
    for offset_delta, (key, value, timestamp_ms, headers) in enumerate(records):
        builder.append(offset_delta, timestamp=timestamp_ms, key=key, value=value,
                       headers=list(headers))
    return bytes(builder.build())


def read_records(records: bytes | None) -> list[tuple[int, bytes | None, bytes | None, int, list]]:
    """Decode fetched record bytes into ``(offset, key, value, timestamp_ms, headers)``."""
    from kafka.record.memory_records import MemoryRecords

    result = []
    if not records:
        return result
    for batch in MemoryRecords(bytes(records)):
        for record in batch:
            result.append((record.offset, record.key, record.value, record.timestamp,
                           list(record.headers)))
    return result


# -- a cluster of brokers ------------------------------------------------------------------

# Failure detection in seconds rather than Kafka's production defaults, so a test that kills
# a broker waits ~3 s for the fencing instead of 9 s.  ClusterProcess applies these unless
# ``fast=False``; explicit settings override them.
FAST_CLUSTER_SETTINGS = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "leader.imbalance.check.interval.seconds": "3",
    "replica.fetch.backoff.ms": "200",
}
DEFAULT_CLUSTER_START_TIMEOUT_S = 60.0
DEFAULT_CLUSTER_STOP_TIMEOUT_S = 30.0
STATUS_TIMEOUT_S = 3.0
_CLUSTER_MANAGED_SETTINGS = frozenset({"node.id", "controller.quorum.voters"})


def free_ports(count: int, host: str = LOCALHOST) -> list[int]:
    """``count`` distinct TCP ports that were free a moment ago (all held while picking)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(sock)
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


class ClusterProcess:
    """``size`` brokers (node ids 1..size) on 127.0.0.1 forming one Raft metadata quorum.

    Every broker has its own Kafka port and Raft port (``controller.quorum.voters`` lists
    the Raft ones), its data in ``home/broker-<id>`` and its output in
    ``home/broker-<id>.log``.  Ports and directories never change, so a broker stopped or
    killed and started again is the same broker with the same data.  Settings, later
    winning: ``FAST_CLUSTER_SETTINGS`` (unless ``fast=False``), ``settings`` (every
    broker), ``broker_settings[node_id]`` (one broker).  A cluster of one runs without
    voters (the broker's local metadata store).

    A broker counts as started when it answers ApiVersions *and* every running broker's
    status shows it registered in this run (a broker epoch newer than any seen before),
    unfenced, with a controller elected among the running brokers.

    Threads: lifecycle methods (start, stop, kill, pause ...) from one thread; ``status``,
    ``statuses``, ``wait_for`` and the other read-only helpers open their own
    connections and may also be called from background threads.
    """

    def __init__(self, home, size: int = 3, *, settings: dict | None = None,
                 broker_settings: dict[int, dict] | None = None, fast: bool = True,
                 start_timeout_s: float = DEFAULT_CLUSTER_START_TIMEOUT_S,
                 python: str = sys.executable, env: dict | None = None):
        if size < 1:
            raise ValueError("a cluster needs at least one broker")
        self.home = Path(home)
        self.size = size
        self.start_timeout_s = start_timeout_s
        ports = free_ports(2 * size)
        self.raft_ports = ports[size:]
        self.voters = ",".join(f"{i}@{LOCALHOST}:{self.raft_ports[i - 1]}"
                               for i in range(1, size + 1)) if size > 1 else ""
        common = {**(FAST_CLUSTER_SETTINGS if fast else {}), **settings_from_kwargs(settings or {})}
        per_broker = {int(k): settings_from_kwargs(v) for k, v in (broker_settings or {}).items()}
        for own in [common, *per_broker.values()]:
            clash = (_CLUSTER_MANAGED_SETTINGS | _MANAGED_SETTINGS) & own.keys()
            if clash:
                raise ValueError(f"{sorted(clash)} are managed by ClusterProcess")
        self.brokers: list[BrokerProcess] = []
        for node_id in range(1, size + 1):
            own = {**common, **per_broker.get(node_id, {})}
            if self.voters:
                own["controller.quorum.voters"] = self.voters
            self.brokers.append(BrokerProcess(
                self.home / f"broker-{node_id}", node_id=node_id, port=ports[node_id - 1],
                log_path=self.home / f"broker-{node_id}.log", extra_settings=own,
                start_timeout_s=start_timeout_s, python=python, env=env))
        self._epochs: dict[int, int] = {}  # highest broker epoch seen per node

    # -- addresses and processes -----------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """Every broker's ``host:port``, comma-separated (clients need only one alive)."""
        return ",".join(b.bootstrap for b in self.brokers)

    @property
    def node_ids(self) -> list[int]:
        return [b.node_id for b in self.brokers]

    def broker(self, node_id: int) -> BrokerProcess:
        for broker in self.brokers:
            if broker.node_id == node_id:
                return broker
        raise KeyError(f"no broker with node id {node_id} (have {self.node_ids})")

    def running(self) -> list[int]:
        """Node ids of running processes that are not paused."""
        return [b.node_id for b in self.brokers if b.is_running() and not b.paused]

    def connect(self, node_id: int, timeout_s: float = 10.0) -> KafkaConnection:
        """A raw KafkaConnection to one broker (close it, or use ``with``)."""
        return KafkaConnection(self.broker(node_id).bootstrap, timeout_s=timeout_s)

    def partition_dir(self, node_id: int, topic: str, partition: int) -> Path:
        """Where ``node_id`` keeps the log of ``topic``-``partition``."""
        return self.broker(node_id).data_dir / f"{topic}-{partition}"

    def __repr__(self) -> str:
        return f"<ClusterProcess {self.brokers!r}>"

    def __enter__(self) -> "ClusterProcess":
        try:
            return self.start_all()
        except BaseException:
            self.stop_all()
            raise

    def __exit__(self, *exc) -> None:
        self.stop_all()

    # -- lifecycle -------------------------------------------------------------------------
    def start_all(self, timeout_s: float | None = None) -> "ClusterProcess":
        """Start every broker that is not running (side by side) and wait until all are
        registered with a controller elected; BrokerError / AssertionError otherwise."""
        timeout_s = self.start_timeout_s if timeout_s is None else timeout_s
        return self._start([b.node_id for b in self.brokers if not b.is_running()], timeout_s)

    def start(self, node_id: int, timeout_s: float | None = None) -> "ClusterProcess":
        """Start one broker and wait until the running brokers see it registered."""
        timeout_s = self.start_timeout_s if timeout_s is None else timeout_s
        return self._start([node_id], timeout_s)

    def _start(self, nodes: list[int], timeout_s: float) -> "ClusterProcess":
        deadline = time.monotonic() + timeout_s
        self.statuses()  # remember the broker epochs the running brokers know
        for node_id in nodes:
            self.broker(node_id).launch()
        for node_id in nodes:
            self.broker(node_id).wait_ready(max(1.0, deadline - time.monotonic()))
        self._wait_registered(nodes, max(1.0, deadline - time.monotonic()))
        return self

    def _wait_registered(self, nodes: list[int], timeout_s: float) -> None:
        previous = {n: self._epochs.get(n, -1) for n in nodes}

        def registered(statuses):
            running = self.running()
            if sorted(statuses) != sorted(running):
                return False  # every running broker must answer and agree
            for status in statuses.values():
                known = {b["id"]: b for b in status["brokers"]}
                for node_id in nodes:
                    info = known.get(node_id)
                    if info is None or info["fenced"] or info["epoch"] <= previous[node_id]:
                        return False
                if status["controller_id"] not in running:
                    return False
            return True

        self.wait_for(registered, timeout_s, f"brokers {nodes} registered (newer than broker "
                      f"epochs {previous}), unfenced, with a controller elected")

    def stop(self, node_id: int, timeout_s: float = DEFAULT_STOP_TIMEOUT_S, *,
             check: bool = False) -> int | None:
        """SIGTERM one broker (controlled shutdown) and wait; its exit code."""
        self.statuses()
        return self.broker(node_id).stop(timeout_s, check=check)

    def kill(self, node_id: int) -> int | None:
        """SIGKILL one broker (a crash) and reap it; its exit code."""
        self.statuses()
        return self.broker(node_id).kill()

    def restart(self, node_id: int, timeout_s: float | None = None) -> "ClusterProcess":
        """Stop (SIGTERM) if running, then start again with the same port and data."""
        if self.broker(node_id).is_running():
            self.stop(node_id)
        return self.start(node_id, timeout_s)

    def pause(self, node_id: int) -> None:
        """SIGSTOP one broker: it keeps its sockets and answers nothing until ``resume``."""
        self.broker(node_id).pause()

    def resume(self, node_id: int) -> None:
        self.broker(node_id).resume()

    def stop_all(self, timeout_s: float = DEFAULT_CLUSTER_STOP_TIMEOUT_S) -> dict[int, int | None]:
        """SIGTERM every running broker, one after the other, each waited up to
        ``timeout_s`` and SIGKILLed if still running; paused brokers are resumed first.
        Returns {node id: exit code} for the brokers that were running; None for one that
        had to be killed.

        The order keeps every controlled shutdown quick: the controller (the Raft
        leader) goes last, so each broker before it fences itself through a quorum that
        is still there and every survivor learns of it; the last broker then sees no live
        peer to hand leadership to and exits at once instead of waiting out its bound.
        Among the others, brokers leading more partitions go first.
        """
        try:
            self._wait_dead_brokers_fenced()
        except Exception:  # an optimisation; stopping must go on
            pass
        codes: dict[int, int | None] = {}
        while running := [b for b in self.brokers if b.is_running()]:
            broker = min(running, key=self._stop_order_key())
            broker.terminate()
            codes[broker.node_id] = broker.wait(timeout_s)
            if codes[broker.node_id] is None:
                broker.kill()
        return codes

    def _stop_order_key(self):
        """Sort key for the next broker to stop: the controller last, most partitions
        led first, then node id."""
        try:
            statuses = self.statuses(timeout_s=1.0)
        except Exception:
            statuses = {}
        status = self.freshest(statuses)
        led: dict[int, int] = {}
        controller = -1
        if status is not None:
            controller = status["controller_id"]
            for topic in status["topics"]:
                for p in topic["partitions"]:
                    led[p["leader"]] = led.get(p["leader"], 0) + 1
        return lambda b: (b.node_id == controller, -led.get(b.node_id, 0), b.node_id)

    def _wait_dead_brokers_fenced(self) -> None:
        """Before a full stop: if a broker died recently and the rest still form a quorum,
        give the controller its session timeout to fence it.  Otherwise the last broker's
        controlled shutdown would see a live peer, try to move leadership without a
        quorum, and spend its whole bound (10 s) waiting."""
        running = self.running()
        if not running or len(running) * 2 <= self.size or len(running) == self.size:
            return
        dead = [n for n in self.node_ids if not self.broker(n).is_running()]
        session_ms = max(int(b.extra_settings.get("broker.session.timeout.ms", 9000))
                         for b in self.brokers)

        def fenced(statuses):
            status = self.freshest(statuses)
            return all(b["fenced"] for b in status["brokers"] if b["id"] in dead)

        try:
            self.wait_for(fenced, session_ms / 1000.0 + 2.0, f"brokers {dead} fenced")
        except AssertionError:
            pass

    # -- observing -------------------------------------------------------------------------
    def status(self, node_id: int, timeout_s: float = STATUS_TIMEOUT_S) -> dict:
        """One broker's status object (``protocol/status.py``); OSError/EOFError when it
        does not answer within ``timeout_s``."""
        with self.connect(node_id, timeout_s) as conn:
            status = conn.status()
        self._remember(status)
        return status

    def statuses(self, nodes=None, timeout_s: float = STATUS_TIMEOUT_S) -> dict[int, dict]:
        """{node id: status} of the running, unpaused brokers among ``nodes`` (default
        all) that answered; a broker that does not answer is left out."""
        result = {}
        for node_id in self.running() if nodes is None else nodes:
            if node_id not in self.running():
                continue
            try:
                result[node_id] = self.status(node_id, timeout_s)
            except (OSError, EOFError, ValueError, struct.error):
                continue
        return result

    def _remember(self, status: dict) -> None:
        for info in status.get("brokers", []):
            if info["epoch"] > self._epochs.get(info["id"], -1):
                self._epochs[info["id"]] = info["epoch"]

    def controller_id(self) -> int:
        """The controller as the running brokers see it: the broker that reports itself
        as controller (the one most others agree with when several do); -1 if none."""
        statuses = self.statuses()
        claims = [n for n, s in statuses.items() if s["controller_id"] == n]
        if not claims:
            return -1
        votes = [s["controller_id"] for s in statuses.values()]
        return max(claims, key=votes.count)

    @staticmethod
    def freshest(statuses: dict[int, dict]) -> dict | None:
        """The status whose metadata image is the newest (highest metadata version)."""
        if not statuses:
            return None
        return max(statuses.values(), key=lambda s: s["metadata_version"])

    @staticmethod
    def find_partition(status: dict, topic: str, partition: int) -> dict | None:
        """A partition of a status' image: replicas, leader, leader_epoch,
        partition_epoch, isr, replica_states; None when the image lacks it."""
        for entry in status.get("topics", []):
            if entry["name"] == topic:
                for p in entry["partitions"]:
                    if p["partition"] == partition:
                        return p
        return None

    @staticmethod
    def find_hosted(status: dict, topic: str, partition: int) -> dict | None:
        """A broker's own replica of a partition from its status: role, leader_epoch,
        log_end_offset, high_watermark, followers ...; None when it does not host it."""
        for entry in status.get("hosted", []):
            if entry["topic"] == topic and entry["partition"] == partition:
                return entry
        return None

    def partition_state(self, topic: str, partition: int) -> dict | None:
        """The partition in the newest metadata image among the running brokers."""
        status = self.freshest(self.statuses())
        return self.find_partition(status, topic, partition) if status else None

    def leader_of(self, topic: str, partition: int) -> int:
        """The partition's leader in the newest image; -1 when offline or unknown."""
        state = self.partition_state(topic, partition)
        return state["leader"] if state else -1

    def hosted(self, node_id: int, topic: str, partition: int) -> dict | None:
        """``node_id``'s own replica of the partition (see ``find_hosted``)."""
        return self.find_hosted(self.status(node_id), topic, partition)

    def wait_for(self, predicate, timeout_s: float = 30.0, what: str = "the condition", *,
                 interval_s: float = 0.1, nodes=None):
        """Poll ``predicate(statuses)`` (``statuses()`` of ``nodes``) until it returns
        something truthy, and return that.  A KeyError, IndexError, TypeError,
        AttributeError or StopIteration from the predicate (a topic not in the image
        yet, no broker answering) counts as False.
        After ``timeout_s`` (inclusive bound, at least one poll): AssertionError naming
        ``what``, the last result and every broker's view."""
        deadline = time.monotonic() + timeout_s
        last, last_error = None, None
        while True:
            statuses = self.statuses(nodes)
            try:
                last = predicate(statuses)
                if last:
                    return last
            except (KeyError, IndexError, TypeError, AttributeError, StopIteration) as exc:
                last_error = exc
            if time.monotonic() >= deadline:
                break
            time.sleep(interval_s)
        error = f" (last error {last_error!r})" if last_error is not None else ""
        raise AssertionError(f"timed out after {timeout_s:.1f} s waiting for {what}; last "
                             f"result {last!r}{error}\n{self.describe(statuses)}")

    def describe(self, statuses: dict[int, dict] | None = None, log_lines: int = 12) -> str:
        """Every broker's process state, view of the cluster and hosted replicas, and the
        tail of its log: the text a failing wait prints."""
        if statuses is None:
            statuses = self.statuses(timeout_s=1.0)
        lines = []
        for broker in self.brokers:
            state = ("paused" if broker.paused else "running") if broker.is_running() \
                else f"not running (exit {broker.returncode})"
            lines.append(f"== broker {broker.node_id} {broker.bootstrap} {state}")
            status = statuses.get(broker.node_id)
            if status is None:
                lines.append("   (no status)")
            else:
                brokers = " ".join(f"{b['id']}:{'F' if b['fenced'] else 'up'}@{b['epoch']}"
                                   for b in status["brokers"])
                lines.append(f"   controller={status['controller_id']} "
                             f"version={status['metadata_version']} brokers={brokers}")
                for topic in status["topics"]:
                    for p in topic["partitions"]:
                        lines.append(
                            f"   {topic['name']}-{p['partition']}: leader={p['leader']} "
                            f"le={p['leader_epoch']} pe={p['partition_epoch']} isr={p['isr']} "
                            f"replicas={p['replicas']} states={p['replica_states']}")
                for h in status["hosted"]:
                    followers = ", ".join(f"{f['replica_id']}:leo={f['log_end_offset']}"
                                          f"{'' if f['in_sync'] else '(out)'}"
                                          for f in h["followers"])
                    lines.append(f"   hosts {h['topic']}-{h['partition']} {h['role']} "
                                 f"le={h['leader_epoch']} leo={h['log_end_offset']} "
                                 f"hw={h['high_watermark']} {followers}")
            lines.append(broker.log_tail(log_lines))
        return "\n".join(lines)

    # -- conveniences for tests ------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None,
                     configs: dict | None = None, *, assignments: list[list[int]] | None = None,
                     timeout_s: float = 30.0, via: int | None = None) -> str:
        """Create a topic with raw CreateTopics and wait until every running broker's image
        has it, each partition's leader hosts it as leader in its epoch and every live
        replica hosts it; returns ``name``.  Replication factor default: the cluster size;
        ``assignments`` (replica lists, first = preferred leader) replace partitions and
        replication factor.  ``via``: the broker that gets the request."""
        replication_factor = self.size if replication_factor is None else replication_factor
        topic_class = CreateTopicsRequest.CreatableTopic
        config_class = topic_class.CreatableTopicConfig
        assignment_class = topic_class.CreatableReplicaAssignment
        if assignments:
            partitions, replication_factor = len(assignments), -1
        topic = topic_class(name=name, num_partitions=-1 if assignments else partitions,
                            replication_factor=replication_factor,
                            assignments=[assignment_class(partition_index=i, broker_ids=list(r))
                                         for i, r in enumerate(assignments or [])],
                            configs=[config_class(name=k, value=str(v))
                                     for k, v in (configs or {}).items()])
        node_id = via if via is not None else self.running()[0]
        with self.connect(node_id, timeout_s) as conn:
            response = conn.request(CreateTopicsRequest[4](
                topics=[topic], timeout_ms=int(timeout_s * 1000), validate_only=False))
        result = response.topics[0]
        if result.error_code != 0:
            raise AssertionError(f"CreateTopics {name} via broker {node_id}: error "
                                 f"{result.error_code} {result.error_message}")
        self.wait_for(lambda s: self._topic_ready(s, name, partitions), timeout_s,
                      f"topic {name} with {partitions} partition(s) led and hosted")
        return name

    def _topic_ready(self, statuses: dict[int, dict], name: str, partitions: int) -> bool:
        if not statuses:
            return False
        for index in range(partitions):
            views = [self.find_partition(s, name, index) for s in statuses.values()]
            if any(v is None or v["leader"] < 0 for v in views):
                return False
            state = self.find_partition(self.freshest(statuses), name, index)
            leader = statuses.get(state["leader"])
            hosted = leader and self.find_hosted(leader, name, index)
            if not hosted or hosted["role"] != "leader" \
                    or hosted["leader_epoch"] != state["leader_epoch"]:
                return False
            for replica in state["replicas"]:
                if replica in statuses and self.find_hosted(statuses[replica], name, index) is None:
                    return False
        return True

    def wait_for_leader(self, topic: str, partition: int, *, not_in=(), timeout_s: float = 30.0,
                        what: str | None = None) -> int:
        """Wait until the newest image names a leader for the partition that is not in
        ``not_in`` and that broker hosts it as leader in that epoch; returns its id."""
        def leader(statuses):
            state = self.find_partition(self.freshest(statuses), topic, partition)
            if state["leader"] < 0 or state["leader"] in not_in:
                return None
            hosted = self.find_hosted(statuses[state["leader"]], topic, partition)
            if hosted["role"] == "leader" and hosted["leader_epoch"] == state["leader_epoch"]:
                return state["leader"]
            return None

        return self.wait_for(leader, timeout_s, what or
                             f"a leader of {topic}-{partition} outside {list(not_in)}")

    def wait_for_isr(self, topic: str, partition: int, isr, *, timeout_s: float = 30.0) -> dict:
        """Wait until the newest image shows exactly ``isr`` (any order) as the ISR and the
        leader has taken it; returns the partition state."""
        wanted = sorted(isr)

        def matches(statuses):
            state = self.find_partition(self.freshest(statuses), topic, partition)
            if sorted(state["isr"]) != wanted or state["leader"] not in statuses:
                return None
            hosted = self.find_hosted(statuses[state["leader"]], topic, partition)
            in_sync = sorted([f["replica_id"] for f in hosted["followers"] if f["in_sync"]]
                             + [state["leader"]])
            return state if hosted["role"] == "leader" and in_sync == wanted else None

        return self.wait_for(matches, timeout_s, f"ISR of {topic}-{partition} == {wanted}")


# -- pytest plugin -------------------------------------------------------------------------
try:
    import pytest
except ImportError:  # BrokerProcess and KafkaConnection work without pytest
    pytest = None

if pytest is not None:

    @pytest.fixture
    def raftwood_broker_factory(tmp_path):
        """``factory(**settings) -> BrokerProcess``, started; all are stopped at teardown.

        Settings are Kafka's broker config names (``log_segment_bytes=4096`` or
        ``**{"log.segment.bytes": 4096}``); ``node_id`` picks the node id (default 1, 2, ...).
        """
        brokers: list[BrokerProcess] = []
        counter = itertools.count(1)

        def factory(**settings) -> BrokerProcess:
            index = next(counter)
            settings = settings_from_kwargs(settings)
            node_id = int(settings.pop("node.id", index))
            home = tmp_path / f"raftwood-{index}"
            broker = BrokerProcess(home / "data", node_id=node_id, log_path=home / "broker.log",
                                   extra_settings=settings)
            brokers.append(broker)
            return broker.start()

        yield factory
        failures = []
        for broker in brokers:
            was_running = broker.is_running()
            try:
                code = broker.stop()
            except BrokerError as exc:
                failures.append(str(exc))
                continue
            if was_running and code != 0:
                failures.append(f"broker node {broker.node_id} exited with {code} after "
                                f"SIGTERM (expected 0)\n{broker.log_tail()}")
        if failures:
            raise BrokerError("\n\n".join(failures))

    @pytest.fixture
    def raftwood_broker(raftwood_broker_factory) -> BrokerProcess:
        """A fresh single broker (node.id 1) with default settings in ``tmp_path``."""
        return raftwood_broker_factory()

    @pytest.fixture
    def raftwood_cluster_factory(tmp_path):
        """``factory(size=3, *, broker_settings=None, fast=True, start=True, **settings)
        -> ClusterProcess``, started unless ``start=False``; every broker of every cluster
        is stopped at teardown (SIGTERM at once, SIGKILL after a bound).  Teardown fails
        when a broker had to be SIGKILLed or exited non-zero after SIGTERM; a broker that
        was killed on purpose (not running at teardown) is not checked."""
        clusters: list[ClusterProcess] = []
        counter = itertools.count(1)

        def factory(size: int = 3, *, broker_settings: dict | None = None, fast: bool = True,
                    start: bool = True, **settings) -> ClusterProcess:
            cluster = ClusterProcess(tmp_path / f"cluster-{next(counter)}", size,
                                     settings=settings, broker_settings=broker_settings,
                                     fast=fast)
            clusters.append(cluster)
            return cluster.start_all() if start else cluster

        yield factory
        failures = []
        for cluster in clusters:
            for node_id, code in cluster.stop_all().items():
                broker = cluster.broker(node_id)
                if code is None:
                    failures.append(f"broker node {node_id} ignored SIGTERM; killed\n"
                                    f"{broker.log_tail()}")
                elif code != 0:
                    failures.append(f"broker node {node_id} exited with {code} after SIGTERM "
                                    f"(expected 0)\n{broker.log_tail()}")
        if failures:
            raise BrokerError("\n\n".join(failures))

    @pytest.fixture
    def raftwood_cluster(raftwood_cluster_factory) -> ClusterProcess:
        """A fresh cluster of three brokers (FAST_CLUSTER_SETTINGS) in ``tmp_path``."""
        return raftwood_cluster_factory()
