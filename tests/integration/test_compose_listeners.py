"""docker-compose.yml's cluster used from the host: every advertised EXTERNAL address works.

No Docker engine runs here, so the three broker services run as real ``raftwood start``
processes with the compose file's own ``--set`` settings, changed only where a container
would provide something:

* the service name ``brokerN`` (what the compose network resolves) becomes a loopback
  address of its own, 127.0.1.N, in every setting that names it (advertised INTERNAL
  listener, controller.quorum.voters);
* ``0.0.0.0`` (every interface of the container) becomes that same address;
* ``log.dirs`` becomes a temporary directory;
* the service's ``ports`` ("host:container") become a forwarder in this process from
  127.0.0.1:<host port> to 127.0.1.N:<container port>, as Docker's proxy does.

A host client then bootstraps from localhost:19092 as the compose header says, and must
be told only localhost:19092-19094 addresses (Kafka answers each connection with the endpoints
of the listener it came in on) while a client on INTERNAL is told 127.0.1.N:9092.  The
host here could reach 127.0.1.N directly, which a Docker host could not by the name
brokerN, so the clients' round trips must also have gone through every published port.
With the earlier compose file (one PLAINTEXT listener advertised as brokerN:9092) every
host-client test here fails.
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import socket
import threading
import time
from pathlib import Path

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest

from broker import config as config_module
from broker.harness.process import BrokerProcess, broker_command
from broker.testing import KafkaConnection

yaml = pytest.importorskip("yaml", reason="PyYAML is in the test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
HOST_BOOTSTRAP = "localhost:19092"
WAIT_S = 60.0
RECORDS_PER_PARTITION = 20


def broker_services() -> dict[str, dict]:
    """The services that run ``raftwood start`` (not Prometheus, not Grafana)."""
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    return {name: s for name, s in services.items()
            if isinstance(s.get("command"), list) and s["command"][:1] == ["start"]}


def set_pairs(command: list[str]) -> dict[str, str]:
    """``["start", "--set", "k=v", ...]`` → {k: v}, in order."""
    flags, values = command[1::2], command[2::2]
    assert set(flags) == {"--set"}, f"unexpected arguments in {command}"
    return dict(value.split("=", 1) for value in values)


def containerless(settings: dict[str, str], own: str, addresses: dict[str, str],
                  data_dir: Path) -> dict[str, str]:
    """A service's settings with what its container provides substituted (module doc)."""
    result = {}
    for key, value in settings.items():
        for service, address in addresses.items():
            value = re.sub(rf"\b{re.escape(service)}\b", address, value)
        result[key] = value.replace("0.0.0.0", own)
    result["log.dirs"] = str(data_dir)
    return result


def published(service: dict) -> list[tuple[int, int]]:
    """(host port, container port) of each ``ports`` entry."""
    result = []
    for mapping in service.get("ports") or []:
        host_part, _, target = str(mapping).rpartition(":")
        result.append((int(host_part.rpartition(":")[2]), int(target)))
    return result


def bind_problem(address: tuple[str, int]) -> str | None:
    """Why ``address`` cannot be bound now (as the broker binds: SO_REUSEADDR), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            return f"{address[0]}:{address[1]} is busy ({exc.strerror})"
    return None


class PublishedPorts:
    """Docker's port publishing, in a thread of this process: every connection to
    127.0.0.1:<host port> is piped, both ways, to <container address>:<container port>.

    Invariants: ``start`` returns only once every host port is bound (or raises OSError);
    after ``stop`` no socket of this object is open and its thread has ended.
    ``accepted[host port]`` counts the connections made to it (written by the
    forwarder's thread only)."""

    def __init__(self, routes: list[tuple[int, str, int]]):
        self.routes = routes
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="published-ports", daemon=True)
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._servers: list[asyncio.Server] = []
        self.accepted = {host_port: 0 for host_port, _, _ in routes}

    def start(self) -> PublishedPorts:
        self._thread.start()
        if not self._ready.wait(10.0):
            raise RuntimeError("the port forwarder did not start within 10 s")
        if self._error is not None:
            self._thread.join(5.0)
            raise self._error
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10.0)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            for host_port, address, port in self.routes:
                handler = functools.partial(self._forward, host_port=host_port,
                                            target=(address, port))
                self._servers.append(self._loop.run_until_complete(
                    asyncio.start_server(handler, "127.0.0.1", host_port)))
        except OSError as exc:
            self._error = exc
        self._ready.set()
        if self._error is None:
            self._loop.run_forever()
        for server in self._servers:
            server.close()
        tasks = asyncio.all_tasks(self._loop)
        for task in tasks:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.close()

    async def _forward(self, client_reader, client_writer, *, host_port, target) -> None:
        self.accepted[host_port] += 1
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*target)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(_pipe(client_reader, upstream_writer),
                             _pipe(upstream_reader, client_writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until end of stream or error, then close ``writer`` (which ends the other
    direction too)."""
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


class ContainerBroker(BrokerProcess):
    """A broker service run as a process: the compose settings as given, nothing added
    (BrokerProcess's own listener and data settings are replaced by the service's)."""

    def __init__(self, settings: dict[str, str], **options):
        super().__init__(settings["log.dirs"], node_id=int(settings["node.id"]), **options)
        self.settings = settings

    def command(self) -> list[str]:
        return broker_command(self.settings, self.python)


class ComposeCluster:
    """The running broker services (by service name) and the host's published ports."""

    def __init__(self, brokers: dict[str, ContainerBroker], published_ports: PublishedPorts):
        self.brokers = brokers
        self.published_ports = published_ports

    @contextlib.contextmanager
    def every_published_port_used(self):
        """Asserts that the code run inside reached every broker through its published
        port: a host client told anything but localhost:19092-19094 would not have."""
        before = dict(self.published_ports.accepted)
        yield
        unused = [port for port, count in self.published_ports.accepted.items()
                  if count == before[port]]
        assert not unused, f"no connection through published ports {unused}"


@pytest.fixture(scope="module")
def compose_cluster(tmp_path_factory):
    """The three broker services with their published ports (a ComposeCluster)."""
    services = broker_services()
    addresses = {name: f"127.0.1.{index}" for index, name in enumerate(sorted(services), 1)}
    home = tmp_path_factory.mktemp("compose")
    brokers: dict[str, ContainerBroker] = {}
    routes: list[tuple[int, str, int]] = []
    bound: list[tuple[str, int]] = []
    for name, service in sorted(services.items()):
        settings = containerless(set_pairs(service["command"]), addresses[name], addresses,
                                 home / name)
        plan = config_module.build(settings).listener_plan
        inter_broker = plan.bound(plan.inter_broker_name)  # what the harness waits on
        brokers[name] = ContainerBroker(settings, host=inter_broker.host,
                                        port=inter_broker.port,
                                        log_path=home / f"{name}.log", start_timeout_s=WAIT_S)
        bound += [(listener.host, listener.port) for listener in plan.listeners]
        routes += [(host_port, addresses[name], port) for host_port, port in published(service)]
    needed = [("127.0.0.1", host_port) for host_port, _, _ in routes] + bound
    problems = list(filter(None, map(bind_problem, needed)))
    if problems:
        pytest.skip(f"the compose cluster's ports are taken: {'; '.join(problems)}")
    forwarder = PublishedPorts(routes).start()
    try:
        for broker in brokers.values():
            broker.launch()
        for broker in brokers.values():
            broker.wait_ready(WAIT_S)
        wait_for_brokers(HOST_BOOTSTRAP, len(brokers))
        yield ComposeCluster(brokers, forwarder)
    finally:
        for broker in brokers.values():
            broker.terminate()
        for broker in brokers.values():
            if broker.wait(30.0) is None:
                broker.kill()
        forwarder.stop()


def wait_for_brokers(bootstrap: str, count: int) -> list:
    """Metadata's broker list through ``bootstrap`` once it names ``count`` brokers."""
    deadline = time.monotonic() + WAIT_S
    brokers = []
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ConnectionError):
            with KafkaConnection(bootstrap, timeout_s=5.0) as conn:
                brokers = conn.metadata([]).brokers
            if len(brokers) == count:
                return brokers
        time.sleep(0.2)
    raise AssertionError(f"Metadata through {bootstrap} names {brokers}, not {count} brokers "
                         f"within {WAIT_S:.0f} s")


def advertised(bootstrap: str) -> dict[int, str]:
    with KafkaConnection(bootstrap, timeout_s=10.0) as conn:
        return {b.node_id: f"{b.host}:{b.port}" for b in conn.metadata([]).brokers}


@pytest.mark.slow
def test_a_host_client_is_told_only_the_published_localhost_addresses(compose_cluster):
    expected = {1: "localhost:19092", 2: "localhost:19093", 3: "localhost:19094"}
    for host_port in (19092, 19093, 19094):
        assert advertised(f"localhost:{host_port}") == expected


@pytest.mark.slow
def test_a_client_on_the_compose_network_is_told_the_internal_addresses(compose_cluster):
    expected = {1: "127.0.1.1:9092", 2: "127.0.1.2:9092", 3: "127.0.1.3:9092"}
    for broker in compose_cluster.brokers.values():
        assert advertised(broker.bootstrap) == expected


def find_coordinator(bootstrap: str, key: str, key_type: int) -> str:
    """``host:port`` FindCoordinator v3 answers through ``bootstrap``, retried while the
    coordinator's topic is being created."""
    deadline = time.monotonic() + WAIT_S
    answer = None
    while time.monotonic() < deadline:
        with KafkaConnection(bootstrap, timeout_s=10.0) as conn:
            answer = conn.request(FindCoordinatorRequest[3](key=key, key_type=key_type))
        if answer.error_code == 0:
            return f"{answer.host}:{answer.port}"
        time.sleep(0.2)
    raise AssertionError(f"FindCoordinator {key!r} through {bootstrap}: {answer}")


@pytest.mark.slow
@pytest.mark.parametrize("key_type", [0, 1], ids=["group", "transaction"])
def test_coordinators_are_found_on_the_listener_asked(compose_cluster, key_type):
    """FindCoordinator, like Metadata, answers with the listener the request came in on."""
    key = f"compose-coordinator-{key_type}"
    external = find_coordinator(HOST_BOOTSTRAP, key, key_type)
    assert external in {"localhost:19092", "localhost:19093", "localhost:19094"}
    internal = find_coordinator(compose_cluster.brokers["broker1"].bootstrap, key, key_type)
    node_id = int(external.rpartition(":")[2]) - 19091  # broker N publishes 19091 + N
    assert internal == f"127.0.1.{node_id}:9092"


def create_topic_led_by_every_broker(name: str) -> None:
    """Three partitions, replication factor 3, partition i led by broker i + 1."""
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=HOST_BOOTSTRAP, request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic(name, num_partitions=-1, replication_factor=-1,
                                      replica_assignments={0: [1, 2, 3], 1: [2, 3, 1],
                                                           2: [3, 1, 2]})])
    finally:
        admin.close()
    deadline = time.monotonic() + WAIT_S
    leaders: dict[int, int] = {}
    while time.monotonic() < deadline:
        with KafkaConnection(HOST_BOOTSTRAP, timeout_s=10.0) as conn:
            [topic] = conn.metadata([name]).topics
        leaders = {p.partition_index: p.leader_id for p in topic.partitions}
        if leaders == {0: 1, 1: 2, 2: 3}:
            return
        time.sleep(0.2)
    raise AssertionError(f"{name}: leaders {leaders}, expected partition i led by i + 1")


def expected_records() -> dict[int, list[bytes]]:
    return {p: [f"{p}-{i}".encode() for i in range(RECORDS_PER_PARTITION)] for p in range(3)}


@pytest.mark.slow
def test_kafka_python_from_the_host_produces_and_consumes_through_every_broker(
        compose_cluster, topic_name):
    name = topic_name("compose")
    create_topic_led_by_every_broker(name)
    with compose_cluster.every_published_port_used():
        offsets = kafka_python_produce(name)
        got = kafka_python_consume(name)
    assert offsets == list(range(RECORDS_PER_PARTITION)) * 3
    assert got == expected_records()


def kafka_python_produce(name: str) -> list[int]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=HOST_BOOTSTRAP, acks="all",
                             request_timeout_ms=30_000)
    try:
        futures = [producer.send(name, value=value, partition=p)
                   for p, values in expected_records().items() for value in values]
        producer.flush(timeout=WAIT_S)
        return [f.get(timeout=WAIT_S).offset for f in futures]
    finally:
        producer.close(timeout=10)


def kafka_python_consume(name: str) -> dict[int, list[bytes]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=HOST_BOOTSTRAP, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    try:
        consumer.assign([TopicPartition(name, p) for p in range(3)])
        deadline = time.monotonic() + WAIT_S
        while sum(map(len, got.values())) < 3 * RECORDS_PER_PARTITION \
                and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=1_000).values():
                for record in batch:
                    got[record.partition].append(record.value)
    finally:
        consumer.close()
    return got


@pytest.mark.slow
def test_confluent_kafka_from_the_host_produces_and_consumes_through_every_broker(
        compose_cluster, topic_name):
    confluent_kafka = pytest.importorskip("confluent_kafka")

    name = topic_name("compose")
    create_topic_led_by_every_broker(name)
    with compose_cluster.every_published_port_used():
        reports = confluent_produce(confluent_kafka, name)
        got = confluent_consume(confluent_kafka, name)
    assert sorted(reports) == [(p, i) for p in range(3) for i in range(RECORDS_PER_PARTITION)]
    assert got == expected_records()


def confluent_produce(confluent_kafka, name: str) -> list[tuple[int, int]]:
    """(partition, offset) of every record acknowledged."""
    producer = confluent_kafka.Producer({"bootstrap.servers": HOST_BOOTSTRAP, "acks": "all",
                                         "message.timeout.ms": 30_000})
    reports: list[tuple[int, int]] = []
    errors: list = []

    def delivered(err, msg):
        if err is not None:
            errors.append(err)
        else:
            reports.append((msg.partition(), msg.offset()))

    for p, values in expected_records().items():
        for value in values:
            producer.produce(name, value=value, partition=p, on_delivery=delivered)
    assert producer.flush(WAIT_S) == 0, "records left undelivered"
    assert not errors, errors
    return reports


def confluent_consume(confluent_kafka, name: str) -> dict[int, list[bytes]]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": HOST_BOOTSTRAP,
                                         "group.id": f"{name}-reader",
                                         "enable.auto.commit": False,
                                         "fetch.wait.max.ms": 100})
    got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    try:
        consumer.assign([confluent_kafka.TopicPartition(name, p, 0) for p in range(3)])
        deadline = time.monotonic() + WAIT_S
        while sum(map(len, got.values())) < 3 * RECORDS_PER_PARTITION \
                and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got[message.partition()].append(message.value())
    finally:
        consumer.close()
    return got
