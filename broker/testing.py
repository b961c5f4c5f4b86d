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

Fixtures:

``raftwood_broker``
    A fresh single broker (node.id 1) in the test's ``tmp_path``, stopped with SIGTERM at
    teardown.  A broker that does not exit 0 on SIGTERM fails the teardown.
``raftwood_broker_factory``
    A callable ``factory(**settings) -> BrokerProcess``; every broker it made is stopped at
    teardown.

Each broker is a :class:`BrokerProcess`: ``bootstrap`` ("127.0.0.1:PORT"), ``port``,
``data_dir``, ``node_id``, ``log_path`` (its stdout and stderr), and ``start()``,
``stop()`` (SIGTERM, returns the exit code), ``kill()`` (SIGKILL), ``restart()``,
``pause()`` (SIGSTOP) and ``resume()`` (SIGCONT).  A broker is ready when a TCP connection
succeeds and an ApiVersions v0 request is answered.  Leftover processes are killed when
their ``BrokerProcess`` is garbage collected, when the interpreter exits, and (on Linux)
when the process that started them dies.

:class:`KafkaConnection` is a blocking, one-request-at-a-time connection that sends
kafka-python message objects (``kafka.protocol``) or raw bytes, for tests that need to see
error codes or byte-exact record batches that real clients hide.

The module imports pytest lazily: ``BrokerProcess`` and ``KafkaConnection`` also work in
scripts and benchmarks without it.
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

__all__ = ["BrokerError", "BrokerProcess", "KafkaConnection", "free_port", "build_batch",
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
        try:
            self._wait_ready(self.start_timeout_s if timeout_s is None else timeout_s)
        except BaseException:
            self._terminate(signal.SIGKILL, 5.0)
            raise
        return self

    def _wait_ready(self, timeout_s: float) -> None:
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
