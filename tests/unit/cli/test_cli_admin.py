"""raftwood topics / cluster: argument parsing, and describe / cluster against fake brokers
that answer (or refuse) Raftwood's status request — no broker process needed."""
import socket
import struct
import threading

import pytest

from broker.cli.client import StatusUnavailable, error_name, fetch_status, parse_address
from broker.cli.main import build_parser
from protocol.status import decode_status_request, encode_status_response


class FakeStatusBroker:
    """Accepts connections on 127.0.0.1 and answers status requests with ``status``;
    ``behaviour`` "close" closes on the first request, "silent" never answers."""

    def __init__(self, status=None, behaviour="answer"):
        self.status = status or {}
        self.behaviour = behaviour
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requests = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        self.listener.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        with conn:
            try:
                size = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))[0]
                frame = conn.recv(size, socket.MSG_WAITALL)
            except (OSError, struct.error):
                return
            if self.behaviour == "close":
                return
            if self.behaviour == "silent":
                self._stop.wait(10)
                return
            correlation_id, query = decode_status_request(frame)
            self.requests.append(query)
            conn.sendall(encode_status_response(correlation_id, self.status))

    def close(self):
        self._stop.set()
        self.listener.close()


@pytest.fixture
def fake_broker():
    made = []

    def make(status=None, behaviour="answer"):
        broker = FakeStatusBroker(status, behaviour)
        made.append(broker)
        return broker

    yield make
    for broker in made:
        broker.close()


def run(*argv):
    args = build_parser().parse_args(list(argv))
    return args.func(args)


def two_broker_cluster(fake_broker, second="answer"):
    """Broker 1 (bootstrap, leads t-0) and broker 2 (follower of t-0, leads t-1)."""
    b1, b2 = fake_broker(), fake_broker(behaviour=second)
    image = {
        "broker_id": 1, "controller_id": 1, "cluster_id": "cid", "metadata_version": 4,
        "brokers": [{"id": 1, "host": "127.0.0.1", "port": b1.port, "epoch": 1, "fenced": False},
                    {"id": 2, "host": "127.0.0.1", "port": b2.port, "epoch": 2, "fenced": False}],
        "topics": [{"name": "t", "topic_id": "U", "configs": {"min.insync.replicas": "2"},
                    "partitions": [
                        {"partition": 0, "replicas": [1, 2], "leader": 1, "leader_epoch": 0,
                         "partition_epoch": 0, "isr": [1, 2],
                         "replica_states": {"1": "OnlineReplica", "2": "OnlineReplica"}},
                        {"partition": 1, "replicas": [2, 1], "leader": 2, "leader_epoch": 1,
                         "partition_epoch": 2, "isr": [2],
                         "replica_states": {"1": "OfflineReplica", "2": "OnlineReplica"}}]}],
    }
    b1.status = dict(image, hosted=[
        {"topic": "t", "partition": 0, "role": "leader", "log_end_offset": 10,
         "high_watermark": 9, "followers": [{"replica_id": 2, "log_end_offset": 9, "lag": 1,
                                             "in_sync": True}]}])
    b2.status = dict(image, broker_id=2, hosted=[
        {"topic": "t", "partition": 0, "role": "follower", "log_end_offset": 9,
         "high_watermark": 9},
        {"topic": "t", "partition": 1, "role": "leader", "log_end_offset": 7,
         "high_watermark": 7, "followers": []}])
    return b1, b2


# -- parsing ------------------------------------------------------------------------------

def test_topics_create_arguments():
    args = build_parser().parse_args([
        "topics", "create", "orders", "--partitions", "6", "--replication-factor", "3",
        "--config", "min.insync.replicas=2", "--config", "retention.ms=1000",
        "--bootstrap-server", "10.0.0.1:19092"])
    assert (args.name, args.partitions, args.replication_factor) == ("orders", 6, 3)
    assert args.config == [("min.insync.replicas", "2"), ("retention.ms", "1000")]
    assert args.bootstrap_server == ("10.0.0.1", 19092)


def test_topics_create_defaults_leave_partitions_and_factor_to_the_broker():
    args = build_parser().parse_args(["topics", "create", "orders"])
    assert (args.partitions, args.replication_factor, args.config) == (-1, -1, [])
    assert args.bootstrap_server == ("127.0.0.1", 9092)
    assert args.if_not_exists is False


@pytest.mark.parametrize("argv", [
    ["topics", "list"], ["topics", "describe"], ["topics", "describe", "a", "b"],
    ["topics", "delete", "a"], ["cluster"],
])
def test_every_client_command_takes_bootstrap_server_and_timeout(argv):
    args = build_parser().parse_args(argv + ["--bootstrap-server", "h:1", "--timeout", "3"])
    assert args.bootstrap_server == ("h", 1) and args.timeout == 3.0


@pytest.mark.parametrize("argv", [
    ["topics"], ["topics", "create"], ["topics", "create", "t", "--config", "novalue"],
    ["topics", "list", "--bootstrap-server", "nohost"],
    ["topics", "list", "--bootstrap-server", "h:99999"], ["cluster", "--bootstrap-server", ":1"],
])
def test_bad_arguments_exit_2(argv):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2


def test_parse_address():
    assert parse_address("127.0.0.1:9092") == ("127.0.0.1", 9092)
    assert parse_address("[::1]:9092") == ("::1", 9092)
    for bad in ("9092", "h:", "h:x", ":9092"):
        with pytest.raises(ValueError):
            parse_address(bad)


def test_error_names_are_kafkas():
    assert error_name(36) == "TOPIC_ALREADY_EXISTS"
    assert error_name(41) == "NOT_CONTROLLER"
    assert error_name(-1) == "UNKNOWN_SERVER_ERROR"
    assert error_name(12345) == "ERROR_12345"


# -- describe / cluster against fake brokers --------------------------------------------

def test_describe_merges_every_brokers_hosted_view(fake_broker, capsys):
    b1, _ = two_broker_cluster(fake_broker)
    assert run("topics", "describe", "--bootstrap-server", f"127.0.0.1:{b1.port}") == 0
    out = capsys.readouterr().out
    rows = {tuple(line.split()[:2]): line.split() for line in out.splitlines() if line}
    assert rows[("t", "0")][2:] == ["1", "0", "0", "1,2", "1,2", "9",
                                   "1:Online:10:0", "2:Online:9:1"]
    assert rows[("t", "1")][2:] == ["2", "1", "2", "2,1", "2", "7",
                                   "2:Online:7:0", "1:Offline:?:?"]


def test_describe_warns_about_a_broker_without_status_and_goes_on(fake_broker, capsys):
    b1, _ = two_broker_cluster(fake_broker, second="close")
    assert run("topics", "describe", "--bootstrap-server", f"127.0.0.1:{b1.port}") == 0
    captured = capsys.readouterr()
    assert "does not answer the Raftwood status request" in captured.err
    assert "2:Online:9:1" in captured.out          # the leader's view of broker 2


def test_describe_an_unknown_topic_exits_1(fake_broker, capsys):
    b1, _ = two_broker_cluster(fake_broker)
    assert run("topics", "describe", "nope", "--bootstrap-server", f"127.0.0.1:{b1.port}") == 1
    assert "nope: UNKNOWN_TOPIC_OR_PARTITION" in capsys.readouterr().err


def test_cluster_lists_brokers_controller_and_problem_partitions(fake_broker, capsys):
    b1, b2 = two_broker_cluster(fake_broker)
    assert run("cluster", "--bootstrap-server", f"127.0.0.1:{b1.port}") == 0
    out = capsys.readouterr().out
    assert "controller: 1" in out
    assert f"127.0.0.1:{b2.port}" in out
    assert "under-replicated partitions: 1" in out
    assert "under-min-isr partitions: 1" in out
    assert "offline partitions: 0" in out


@pytest.mark.parametrize("behaviour, reason", [("close", "closed"), ("silent", "timed out")])
@pytest.mark.parametrize("command", [["cluster"], ["topics", "describe"]])
def test_a_broker_without_the_status_request_gives_a_clear_error_and_exit_2(
        fake_broker, capsys, behaviour, reason, command):
    broker = fake_broker(behaviour=behaviour)
    code = run(*command, "--bootstrap-server", f"127.0.0.1:{broker.port}", "--timeout", "0.5")
    assert code == 2
    err = capsys.readouterr().err
    assert f"broker 127.0.0.1:{broker.port} does not answer the Raftwood status request" in err
    assert reason in err and "Traceback" not in err


def test_nothing_listening_exits_2_with_the_address(capsys):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    for command in (["cluster"], ["topics", "list"], ["topics", "create", "x"],
                    ["topics", "delete", "x"]):
        assert run(*command, "--bootstrap-server", f"127.0.0.1:{port}") == 2
        assert f"cannot connect to 127.0.0.1:{port}" in capsys.readouterr().err


def test_fetch_status_sends_a_status_request(fake_broker):
    broker = fake_broker({"broker_id": 7})
    assert fetch_status(("127.0.0.1", broker.port), 2.0) == {"broker_id": 7}
    assert broker.requests == [{}]
    with pytest.raises(StatusUnavailable):
        fetch_status(("127.0.0.1", fake_broker(behaviour="close").port), 2.0)
