"""Broker processes and clusters under control: what ``raftwood dev``, ``raftwood
verify`` and the pytest plugin (``broker.testing``) share.

* ``process``: one broker process (:class:`BrokerProcess`): its command line
  (``broker_command``), the parent-death launcher (on Linux a broker gets SIGKILL when
  the process that started it dies), start and wait ready (ApiVersions answered), stop
  (SIGTERM, SIGKILL after a bound), kill -9, pause/resume, restart on the same port and
  data, its log and the log's tail.  A ``command_prefix`` (``ip netns exec NAME``) runs
  it in a network namespace; it is still stopped by its pid.
* ``cluster``: N brokers (:class:`ClusterProcess`): where each lives
  (``plan_brokers``: node ids, Kafka and Raft ports, data directories, logs;
  ``quorum_voters``), start side by side and wait until every broker is registered
  with a controller elected, kill/stop/start/restart one, stop all (controller last),
  and the cluster's own view through the private status request.
* ``chaos``: :class:`ChaosCluster`, a ClusterProcess whose brokers live in network
  namespaces (``netns``: the bridge, veths and nftables cuts, shared with ``raftwood
  verify --network netns``) or behind loopback proxies (``proxy``, no root) so tests
  can ``isolate``, ``partition`` and ``heal`` them and ``wait_healthy``;
  ``health_problem``, the health check verify shares.
* ``wire``: :class:`KafkaConnection`, the blocking client of ``broker.client.
  kafka_client`` with one-partition conveniences, and record-batch helpers.

Part of the tooling beside the server, like ``cli``, ``testing`` and ``verify``: the
server never imports it (tests/unit/test_layering.py).  Lifecycle calls from one thread.
"""
from __future__ import annotations

from .chaos import (  # noqa: F401
    CHAOS_PORTS,
    ChaosCluster,
    ChaosUnavailable,
    chaos_unavailable,
    health_problem,
    pick_chaos_mode,
)
from .cluster import (  # noqa: F401
    DEFAULT_CLUSTER_START_TIMEOUT_S,
    DEFAULT_CLUSTER_STOP_TIMEOUT_S,
    FAST_CLUSTER_SETTINGS,
    BrokerPlan,
    ClusterProcess,
    broker_process,
    free_ports,
    plan_brokers,
    quorum_voters,
)
from .process import (  # noqa: F401
    DEFAULT_START_TIMEOUT_S,
    DEFAULT_STOP_TIMEOUT_S,
    LOCALHOST,
    PDEATHSIG_LAUNCHER,
    BrokerError,
    BrokerProcess,
    broker_command,
    free_port,
    log_tail,
    settings_from_kwargs,
)
from .wire import KafkaConnection, build_batch, read_records  # noqa: F401
