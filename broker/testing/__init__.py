"""Real Raftwood brokers for your tests: the pytest plugin.

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

Network faults (a *chaos cluster*): ``raftwood_cluster_factory(chaos=True)`` (or
``ChaosCluster(directory)`` outside pytest) starts brokers whose network a test can cut
the way a real one fails, as root or not (``chaos_mode`` below)::

    def test_pipeline_survives_a_partition(raftwood_cluster_factory):
        cluster = raftwood_cluster_factory(chaos=True)   # skipped where it cannot run
        assert cluster.mode in ("netns", "proxy")
        cluster.create_topic("in", partitions=1, replication_factor=3)
        leader = cluster.leader_of("in", 0)
        followers = [n for n in cluster.node_ids if n != leader]
        cluster.partition([leader], followers + [cluster.CLIENTS])
        cluster.wait_for_leader("in", 0, not_in=[leader])   # the majority elects another
        cluster.heal()
        cluster.wait_healthy(60)

``isolate(id)`` cuts one broker from every other broker and from every client;
``partition(side_a, side_b)`` cuts every member of one side from every member of the
other (members are node ids or ``cluster.CLIENTS``, this test process; a broker in
neither side reaches both); ``degrade(id, delay_ms=0, jitter_ms=0, loss_pct=0)`` delays
and drops at random what one broker sends (delay needs the kernel's netem qdisc, else
ChaosUnavailable; loss works everywhere); cuts and degradations add up until ``heal()``
removes them all; ``cuts()`` and ``degraded()`` list them.  A cut drops every packet
both ways on every port, Raft included: a broker cut from the majority loses the
metadata quorum, is fenced after its session timeout and its partitions are led
elsewhere; one cut from clients only keeps replicating with the other brokers.
A client connecting to a cut broker is not refused, it waits for its own timeout.
``wait_healthy(timeout_s=60)`` waits until every broker is registered and unfenced, one
controller is elected and every partition (internal topics included) has its full ISR;
AssertionError naming the last problem otherwise.  ``chaos_mode`` (or ``mode``) says how
cuts are made.  ``"netns"``: every broker in a network namespace of its own, cuts by
nftables rules (needs root with ``ip`` and ``nft``, like ``raftwood verify --network
netns``); brokers listen on their namespace's bridge address (``bootstrap`` names them:
``10.213.R.N:9192``).  ``"proxy"``: no root needed (Linux); brokers listen on 127.0.0.1
and advertise a loopback proxy in front of their Kafka and Raft ports, which tells
brokers from clients by the process holding each connection; a cut stalls the proxied
connections (nothing forwarded, nothing refused) and ``heal`` closes them so both sides
reconnect; a lost chunk arrives 200 ms late (as a TCP retransmission), 100 % loss
forwards nothing.  ``chaos=True`` picks ``netns`` where namespaces can be built and
``proxy`` elsewhere; ``chaos="proxy"`` or ``"netns"`` (or the environment's
``RAFTWOOD_CHAOS_MODE``) forces one.  Where the mode cannot run the test is skipped with
the reason (``chaos_unavailable(mode)`` gives it; ``ChaosCluster`` raises
``ChaosUnavailable``).  The harness's own status requests go to the brokers directly, in
either mode they skip brokers cut from clients.
At teardown, also after a failure, the cuts are healed, the brokers stopped and every
namespace, veth and bridge, or the proxy, removed (and at interpreter exit if teardown
never ran).

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
    ``factory(size=3, *, broker_settings=None, fast=True, start=True, chaos=False,
    **settings) -> ClusterProcess``; ``broker_settings`` maps a node id to settings for
    that broker alone; ``chaos=True`` gives a :class:`ChaosCluster` (above).  At teardown
    every broker of every cluster gets SIGTERM (one by one, the
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
with a controller elected.  Brokers may live elsewhere than 127.0.0.1: ``hosts`` (node
id -> address), ``ports`` (one (Kafka, Raft) pair for every broker, each on its own
address) and ``command_prefixes`` (node id -> what goes in front of its launch command,
e.g. ``ip netns exec NAME``); ``raftwood verify --network netns`` uses them.

:class:`KafkaConnection` is a blocking connection (pipelining allowed) that sends
kafka-python message objects (``kafka.protocol``) or raw bytes, for tests that need to see
error codes or byte-exact record batches that real clients hide; ``status()`` sends the
private status request.  Its failures are ``ConnectionFailed`` (a ``ConnectionError``).

The processes, clusters and connections are ``broker.harness``'s (shared with
``raftwood dev`` and ``raftwood verify``) and the client is ``broker.client.
kafka_client``'s; this module re-exports their public names and holds only the
fixtures.  It imports pytest lazily: ``BrokerProcess``, ``ClusterProcess`` and
``KafkaConnection`` also work in scripts and benchmarks without it (``with
ClusterProcess(directory) as cluster: ...`` starts and stops one).
"""
from __future__ import annotations

import itertools

from broker.client.kafka_client import ConnectionFailed  # noqa: F401
from broker.harness import (  # noqa: F401  (re-exported: the public names of this plugin)
    DEFAULT_CLUSTER_START_TIMEOUT_S,
    DEFAULT_CLUSTER_STOP_TIMEOUT_S,
    DEFAULT_START_TIMEOUT_S,
    DEFAULT_STOP_TIMEOUT_S,
    FAST_CLUSTER_SETTINGS,
    LOCALHOST,
    BrokerError,
    BrokerProcess,
    ChaosCluster,
    ChaosUnavailable,
    ClusterProcess,
    KafkaConnection,
    build_batch,
    chaos_unavailable,
    free_port,
    free_ports,
    pick_chaos_mode,
    read_records,
    settings_from_kwargs,
)

__all__ = ["BrokerError", "BrokerProcess", "ChaosCluster", "ChaosUnavailable",
           "ClusterProcess", "ConnectionFailed", "chaos_unavailable", "pick_chaos_mode",
           "FAST_CLUSTER_SETTINGS", "KafkaConnection", "free_port", "free_ports", "build_batch",
           "read_records", "settings_from_kwargs"]

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
        """``factory(size=3, *, broker_settings=None, fast=True, start=True, voters=None,
        chaos=False, **settings) -> ClusterProcess``, started unless ``start=False``
        (``voters``: only the first brokers vote in the metadata quorum, the others are
        observers; ``chaos``: a ChaosCluster, True for the mode picked here, or
        ``"netns"``/``"proxy"``/``"auto"``, the test skipped where it cannot run); its
        quorum shares a generated secret file (``controller_quorum_allow_unauthenticated=True``
        runs one without); every broker of every cluster is stopped at teardown
        (SIGTERM at once, SIGKILL after a bound).  Teardown fails
        when a broker had to be SIGKILLed or exited non-zero after SIGTERM; a broker that
        was killed on purpose (not running at teardown) is not checked."""
        clusters: list[ClusterProcess] = []
        counter = itertools.count(1)

        def factory(size: int = 3, *, broker_settings: dict | None = None, fast: bool = True,
                    start: bool = True, voters: int | None = None, chaos: bool | str = False,
                    **settings) -> ClusterProcess:
            options = {}
            kind = ClusterProcess
            if chaos:
                mode = None if chaos is True else chaos
                why = chaos_unavailable(mode)
                if why is not None:
                    pytest.skip(f"a chaos cluster cannot run here: {why}")
                kind, options = ChaosCluster, {"mode": mode}
            cluster = kind(tmp_path / f"cluster-{next(counter)}", size,
                           settings=settings, broker_settings=broker_settings,
                           fast=fast, voters=voters, **options)
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
