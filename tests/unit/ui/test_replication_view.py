"""The live replication view (broker/ui): statuses → snapshot, snapshot diffs → events,
the shared feed, the peer status client, the HTTP routes and ``raftwood dev --ui``."""
from __future__ import annotations

import asyncio
import json
import re
import struct

import pytest
from prometheus_client.registry import CollectorRegistry

from broker import config as config_module
from broker.cli.dev import DevError, broker_settings, plan_cluster, plan_ui, ui_url
from broker.cli.main import build_parser
from broker.metrics.endpoint import MetricsEndpoint
from broker.ui import page
from broker.ui.feed import ClusterCollector, PeerStatus, ReplicationFeed, ViewContext
from broker.ui.snapshot import (
    BROKER_FENCED,
    BROKER_UNREACHABLE,
    CONTROLLER_CHANGE,
    ISR_EXPAND,
    ISR_SHRINK,
    LEADER_CHANGE,
    PARTITION_CREATED,
    REASSIGNMENT,
    TRUNCATION,
    build_snapshot,
    diff,
)
from protocol.status import decode_status_request, encode_status_response
from tests.unit.metrics.test_metrics import http  # one raw HTTP exchange with the endpoint


def image(isr=(1, 2, 3), leader=1, leader_epoch=3, partition_epoch=5, fenced=(),
          controller=1, adding=(), removing=()) -> dict:
    """A status object as broker 1 answers it: brokers 1-3, topic t-0 on [1, 2, 3] and an
    internal __consumer_offsets-0."""
    return {
        "broker_id": 1, "controller_id": controller, "cluster_id": "c1",
        "metadata_version": 9,
        "brokers": [{"id": i, "host": "127.0.0.1", "port": 9091 + i, "epoch": 10 + i,
                     "fenced": i in fenced} for i in (1, 2, 3)],
        "topics": [
            {"name": "t", "partitions": [{
                "partition": 0, "replicas": [1, 2, 3], "leader": leader,
                "leader_epoch": leader_epoch, "partition_epoch": partition_epoch,
                "isr": list(isr), "replica_states": {"1": "OnlineReplica",
                                                     "2": "OnlineReplica",
                                                     "3": "OfflineReplica"},
                "adding_replicas": list(adding), "removing_replicas": list(removing)}]},
            {"name": "__consumer_offsets", "partitions": [{
                "partition": 0, "replicas": [2], "leader": 2, "leader_epoch": 0,
                "partition_epoch": 0, "isr": [2]}]}],
        "hosted": []}


def leader_hosted(leo=120, hw=100, followers=((2, 110), (3, 90))) -> list[dict]:
    return [{"topic": "t", "partition": 0, "role": "leader", "leader_epoch": 3,
             "log_end_offset": leo, "high_watermark": hw,
             "followers": [{"replica_id": r, "log_end_offset": o, "lag": leo - o,
                            "in_sync": True} for r, o in followers]}]


def follower_hosted(leo, hw) -> list[dict]:
    return [{"topic": "t", "partition": 0, "role": "follower", "leader_epoch": 3,
             "log_end_offset": leo, "high_watermark": hw, "followers": []}]


def snap(status=None, hosted=None, unreachable=None, ts=1_000) -> dict:
    return build_snapshot(status or image(), hosted if hosted is not None else
                          {1: leader_hosted(), 2: follower_hosted(115, 100)},
                          unreachable if unreachable is not None else {3: "refused"}, ts)


def partition(snapshot, topic="t", number=0) -> dict:
    return next(p for p in snapshot["partitions"]
                if p["topic"] == topic and p["partition"] == number)


# -- snapshot ------------------------------------------------------------------------------------

def test_snapshot_takes_each_replicas_own_leo_else_the_leaders_view_of_it():
    s = snap()
    p = partition(s)
    assert (p["leader"], p["leader_epoch"], p["partition_epoch"], p["isr"], p["hw"]) == \
        (1, 3, 5, [1, 2, 3], 100)
    view = {r["id"]: r for r in p["replica_view"]}
    assert (view[1]["leo"], view[1]["leo_from"], view[1]["hw"], view[1]["role"]) == \
        (120, "self", 100, "leader")
    # Broker 2 answered: its own LEO (115), fresher than the leader's view (110).
    assert (view[2]["leo"], view[2]["leo_from"], view[2]["hw"], view[2]["lag"]) == \
        (115, "self", 100, 5)
    # Broker 3 did not: what the leader last saw of it, and no HW.
    assert (view[3]["leo"], view[3]["leo_from"], view[3]["hw"], view[3]["lag"]) == \
        (90, "leader", None, 30)
    assert (view[1]["state"], view[3]["state"]) == ("Online", "Offline")
    assert [r["in_isr"] for r in p["replica_view"]] == [True, True, True]
    assert partition(s, "__consumer_offsets")["internal"] and not p["internal"]


def test_snapshot_brokers_carry_fencing_controller_and_reachability():
    s = snap(image(fenced=(3,)))
    brokers = {b["id"]: b for b in s["brokers"]}
    assert brokers[1]["controller"] and not brokers[2]["controller"]
    assert brokers[3]["fenced"] and not brokers[3]["reachable"]
    assert brokers[3]["error"] == "refused"
    assert brokers[2]["reachable"] and brokers[2]["error"] is None
    assert (s["source"], s["controller"], s["cluster_id"], s["ts"]) == (1, 1, "c1", 1_000)
    json.dumps(s)  # what the event stream sends


def test_snapshot_survives_missing_fields_and_no_leader():
    status = image(leader=-1, isr=())
    del status["topics"][0]["partitions"][0]["replica_states"]
    s = build_snapshot(status, {}, {}, 5)
    p = partition(s)
    assert p["leader"] == -1 and p["hw"] is None
    assert all(r["leo"] is None and r["state"] is None for r in p["replica_view"])
    assert build_snapshot({}, {}, {}, 0)["partitions"] == []


# -- diff ----------------------------------------------------------------------------------------

def kinds(events):
    return [e["kind"] for e in events]


def test_the_first_snapshot_is_no_news():
    assert diff(None, snap()) == []
    assert diff(snap(), snap()) == []


def test_a_follower_killed_fenced_and_dropped_from_the_isr():
    before = snap(unreachable={}, hosted={1: leader_hosted(), 2: follower_hosted(115, 100),
                                          3: follower_hosted(95, 90)})
    after = snap(image(isr=(1, 2), fenced=(3,), partition_epoch=6), ts=2_000)
    events = diff(before, after)
    assert kinds(events) == [BROKER_FENCED, BROKER_UNREACHABLE, ISR_SHRINK]
    assert events[0]["text"] == "broker 3 fenced"
    assert events[1]["text"] == "broker 3 not answering: refused"
    assert events[2]["text"] == "ISR shrink [1,2,3] → [1,2]"
    assert (events[2]["topic"], events[2]["partition"], events[2]["ts"]) == ("t", 0, 2_000)
    assert events[0]["topic"] is None
    # LEO 95 (its own) → 90 (the leader's view): a change of source, not a truncation.
    assert TRUNCATION not in kinds(events)


def test_an_election_and_the_isr_growing_back():
    before = snap(image(isr=(2, 3), leader=2, leader_epoch=3))
    after = snap(image(isr=(2, 3), leader=3, leader_epoch=4, controller=2), ts=2_000)
    events = diff(before, after)
    assert kinds(events) == [CONTROLLER_CHANGE, LEADER_CHANGE]
    assert events[0]["text"] == "controller 1 → 2"
    assert events[1]["text"] == "leader epoch 3 → 4: leader 2 → 3"
    expanded = diff(after, snap(image(isr=(1, 2, 3), leader=3, leader_epoch=4, controller=2)))
    assert kinds(expanded) == [ISR_EXPAND]
    assert expanded[0]["text"] == "ISR expand [2,3] → [1,2,3]"
    offline = diff(after, snap(image(isr=(), leader=-1, leader_epoch=5, controller=2)))
    assert [e["text"] for e in offline][:1] == ["leader epoch 4 → 5: leader 3 → none"]


def test_truncation_only_between_a_replicas_own_log_end_offsets():
    before = snap()
    after = snap(hosted={1: leader_hosted(), 2: follower_hosted(101, 100)}, ts=2_000)
    events = diff(before, after)
    assert kinds(events) == [TRUNCATION]
    assert events[0]["text"] == "replica 2 truncated its log 115 → 101"


def test_reassignment_and_new_partitions_are_reported():
    moving = snap(image(adding=(4,), removing=(1,)))
    events = diff(snap(), moving)
    assert kinds(events) == [REASSIGNMENT]
    assert "adding [4]" in events[0]["text"] and "removing [1]" in events[0]["text"]
    without_t = snap()
    without_t["partitions"] = [p for p in without_t["partitions"] if p["topic"] != "t"]
    created = diff(without_t, snap())
    assert kinds(created) == [PARTITION_CREATED]
    assert created[0]["text"] == "created: replicas [1,2,3], leader 1"


# -- the feed ------------------------------------------------------------------------------------

def test_feed_polls_only_while_watched_and_hands_each_reader_what_is_new():
    async def main():
        shots = iter([snap(ts=1), snap(image(isr=(1, 2)), ts=2),
                      snap(image(isr=(1, 2)), ts=3)] + [snap(image(isr=(1, 2)), ts=4)] * 100)
        calls = []

        async def collect():
            calls.append(1)
            return next(shots)

        feed = ReplicationFeed(collect, interval_s=0.01)
        await asyncio.sleep(0.05)
        assert not calls  # nobody watches: nothing is collected
        with feed.subscribe() as first:
            one = await first.next()
            assert one["snapshot"]["ts"] == 1 and one["events"] == []
            two = await first.next()
            assert kinds(two["events"]) == [ISR_SHRINK] and two["seq"] == one["seq"] + 1
            # A reader that joins later gets the kept log once, then only what is new.
            with feed.subscribe() as late:
                got = await late.next()
                assert kinds(got["events"]) == [ISR_SHRINK]
                again = await late.next()
                assert again["events"] == [] and again["seq"] > got["seq"]
            assert feed.subscribers == 1
        assert feed.subscribers == 0
        await asyncio.sleep(0.03)
        polled = len(calls)
        await asyncio.sleep(0.05)
        assert len(calls) == polled  # the last reader left: the poller stopped
        await feed.stop()
        with pytest.raises(RuntimeError):
            feed.subscribe()

        # A reader waiting for a snapshot that never comes is woken by stop().
        async def never():
            await asyncio.Event().wait()

        stuck = ReplicationFeed(never, interval_s=0.01)
        waiting = stuck.subscribe()
        pending = asyncio.create_task(waiting.next())
        await asyncio.sleep(0.02)
        await stuck.stop()
        assert await asyncio.wait_for(pending, 1) is None
        waiting.close()

    asyncio.run(main())


def test_a_failing_collection_is_logged_and_retried():
    async def main():
        attempts = []

        async def collect():
            attempts.append(1)
            if len(attempts) < 3:
                raise RuntimeError("bug")
            return snap()

        feed = ReplicationFeed(collect, interval_s=0.01)
        with feed.subscribe() as reader:
            assert (await asyncio.wait_for(reader.next(), 2))["snapshot"]["source"] == 1
        await feed.stop()
        assert len(attempts) >= 3

    asyncio.run(main())


async def status_server(answers: dict):
    """A stand-in broker answering the private status request with ``answers``."""
    async def serve(reader, writer):
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                correlation_id, _query = decode_status_request(await reader.readexactly(size))
                writer.write(encode_status_response(correlation_id, answers))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0)


def test_peer_status_keeps_its_connection_and_reports_a_dead_peer():
    async def main():
        server = await status_server({"broker_id": 2, "hosted": follower_hosted(7, 7)})
        port = server.sockets[0].getsockname()[1]
        peer = PeerStatus("127.0.0.1", port, timeout_s=2)
        assert (await peer.fetch())["broker_id"] == 2
        first = peer._writer
        assert (await peer.fetch())["hosted"][0]["log_end_offset"] == 7
        assert peer._writer is first  # one connection, kept
        await peer.close()
        server.close()
        await server.wait_closed()
        with pytest.raises(ConnectionError):
            await PeerStatus("127.0.0.1", port, timeout_s=2).fetch()

    asyncio.run(main())


class FakeInfo:
    def __init__(self, broker_id, port):
        self.broker_id, self.port = broker_id, port

    def endpoint(self, _listener):
        return ("127.0.0.1", self.port)


def test_cluster_collector_merges_peers_and_backs_off_from_a_dead_one(monkeypatch):
    async def main():
        server = await status_server({"broker_id": 2, "hosted": follower_hosted(115, 100)})
        live = server.sockets[0].getsockname()[1]
        dead = await status_server({})
        dead_port = dead.sockets[0].getsockname()[1]
        dead.close()  # nothing listens there any more
        await dead.wait_closed()
        own = image()
        own["hosted"] = leader_hosted()
        cluster = type("I", (), {"brokers": {
            1: FakeInfo(1, 1), 2: FakeInfo(2, live), 3: FakeInfo(3, dead_port)}})()
        context = ViewContext(node_id=1, config=None, inter_broker_listener="PLAINTEXT",
                              own_status=lambda: own, image=lambda: cluster)
        collector = ClusterCollector(context, timeout_s=2, retry_s=60)
        monkeypatch.setattr(collector, "_peer_security", lambda: None)
        s = await collector()
        view = {r["id"]: r for r in partition(s)["replica_view"]}
        assert (view[2]["leo"], view[2]["leo_from"], view[3]["leo_from"]) == \
            (115, "self", "leader")
        brokers = {b["id"]: b for b in s["brokers"]}
        assert brokers[2]["reachable"] and not brokers[3]["reachable"]
        assert brokers[3]["error"]
        retry_at = collector.peers[3].retry_at
        await collector()  # within the back-off: broker 3 is not asked again
        assert collector.peers[3].retry_at == retry_at
        await collector.close()
        server.close()
        await server.wait_closed()

    asyncio.run(main())


# -- HTTP ----------------------------------------------------------------------------------------

def test_the_page_is_self_contained():
    html = page().decode()
    assert html.startswith("<!DOCTYPE html>")
    assert "/replication/events" in html and "EventSource" in html
    # Nothing fetched from elsewhere: no external script, style, font or image.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "@import" not in html and "url(" not in html


def test_endpoint_serves_the_page_and_streams_snapshots_to_a_bounded_number_of_readers():
    async def main():
        shots = iter([snap(ts=1), snap(image(isr=(1, 2)), ts=2)]
                     + [snap(image(isr=(1, 2)), ts=3)] * 1000)

        async def collect():
            return next(shots)

        feed = ReplicationFeed(collect, interval_s=0.02)
        endpoint = MetricsEndpoint(CollectorRegistry(auto_describe=False), "127.0.0.1", 0,
                                   replication=feed, page=page, max_event_streams=2)
        await endpoint.start()
        port = endpoint.bound_port
        head, body = await http(port, b"GET /replication HTTP/1.1\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and b"text/html" in head
        assert body == page()
        head, _ = await http(port, b"GET /metrics HTTP/1.1\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        head, _ = await http(port, b"GET / HTTP/1.1\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 404")

        streams = []
        for _ in range(2):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /replication/events HTTP/1.1\r\nAccept: text/event-stream\r\n\r\n")
            streams.append((reader, writer))
        reader = streams[0][0]
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200") and b"text/event-stream" in head
        messages = []
        while len(messages) < 2:
            chunk = await asyncio.wait_for(reader.readuntil(b"\n\n"), 5)
            messages += [json.loads(line[6:]) for line in chunk.decode().splitlines()
                         if line.startswith("data: ")]
        assert messages[0]["snapshot"]["ts"] == 1
        assert kinds(messages[1]["events"]) == [ISR_SHRINK]
        await asyncio.wait_for(streams[1][0].readuntil(b"\r\n\r\n"), 5)
        assert endpoint.event_streams == 2
        head, _ = await http(port, b"GET /replication/events HTTP/1.1\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503")  # the third reader

        # A reader that goes frees its slot.
        streams[1][1].close()
        for _ in range(100):
            if endpoint.event_streams == 1:
                break
            await asyncio.sleep(0.02)
        assert endpoint.event_streams == 1

        # Stopping the endpoint ends the remaining stream (EOF, not a hang).
        await asyncio.wait_for(endpoint.stop(), 5)
        assert await asyncio.wait_for(reader.read(), 5) is not None
        assert reader.at_eof()
        assert not endpoint._handlers and feed.stopped
        streams[0][1].close()

    asyncio.run(main())


def test_without_a_feed_the_replication_routes_are_404():
    endpoint = MetricsEndpoint(CollectorRegistry(auto_describe=False), "127.0.0.1", 0)
    for path in (b"/replication", b"/replication/events"):
        status, _body, _type = endpoint.answer(b"GET " + path + b" HTTP/1.1\r\n\r\n")
        assert status.startswith("404")


# -- raftwood dev --ui ---------------------------------------------------------------------------

def test_dev_ui_gives_each_broker_a_metrics_port_300_above_its_kafka_port(tmp_path):
    layout = plan_cluster(3, 9092, "d")
    base = plan_ui(layout, 9092)
    secret = tmp_path / "quorum.secret"  # every dev quorum has one
    secret.write_text("s3cret-for-the-test\n")
    settings = [broker_settings(layout, b, {}, None, base, secret_file=secret) for b in layout]
    assert [s["metrics.port"] for s in settings] == ["9392", "9393", "9394"]
    assert ui_url(layout[0], base) == "http://127.0.0.1:9392/replication"
    for s in settings:
        assert config_module.build(s)["metrics.port"] in (9392, 9393, 9394)
    with pytest.raises(DevError, match="metrics.port"):
        broker_settings(layout, layout[0], {"metrics.port": "1"}, None, base)
    assert "metrics.port" not in broker_settings(layout, layout[0], {})
    with pytest.raises(DevError, match="clash"):
        plan_ui(plan_cluster(3, 9092, "d", raft_port_base=9392), 9092)
    args = build_parser().parse_args(["dev", "--ui"])
    assert args.ui
