"""broker/cli/status.py: merging status answers into describe / cluster / dev views."""
from broker.cli.status import (
    BrokerSummary,
    ClusterView,
    broker_summary,
    describe_rows,
    min_isr,
    partition_problems,
    problem_rows,
    render_cluster,
    render_describe,
    replica_cells,
    short_state,
)

ONLINE = "OnlineReplica"


def partition(index, replicas, leader, isr, states=None, leader_epoch=3, partition_epoch=5):
    return {"partition": index, "replicas": replicas, "leader": leader, "isr": isr,
            "leader_epoch": leader_epoch, "partition_epoch": partition_epoch,
            "replica_states": states or {str(r): ONLINE for r in replicas}}


IMAGE = {
    "broker_id": 1, "controller_id": 2, "cluster_id": "c-1", "metadata_version": 17,
    "brokers": [{"id": 2, "host": "127.0.0.1", "port": 9093, "epoch": 8, "fenced": False},
                {"id": 1, "host": "127.0.0.1", "port": 9092, "epoch": 7, "fenced": False},
                {"id": 3, "host": "127.0.0.1", "port": 9094, "epoch": 9, "fenced": True}],
    "topics": [
        {"name": "orders", "topic_id": "AAAA", "configs": {"min.insync.replicas": "2"},
         "partitions": [partition(1, [2, 3, 1], 2, [2, 1],
                                  {"2": ONLINE, "3": "OfflineReplica", "1": ONLINE}),
                        partition(0, [1, 2, 3], 1, [1, 2, 3])]},
        {"name": "audit", "topic_id": "BBBB", "configs": {},
         "partitions": [partition(0, [3], -1, [], {"3": "OfflineReplica"})]},
    ],
}
HOSTED_1 = [
    {"topic": "orders", "partition": 0, "role": "leader", "leader_epoch": 3,
     "log_start_offset": 0, "log_end_offset": 120, "high_watermark": 118,
     "followers": [{"replica_id": 2, "log_end_offset": 118, "lag": 2, "in_sync": True},
                   {"replica_id": 3, "log_end_offset": 100, "lag": 20, "in_sync": True}]},
    {"topic": "orders", "partition": 1, "role": "follower", "leader_epoch": 3,
     "log_end_offset": 40, "high_watermark": 40, "followers": []},
]
HOSTED_2 = [
    {"topic": "orders", "partition": 1, "role": "leader", "leader_epoch": 3,
     "log_end_offset": 50, "high_watermark": 40,
     "followers": [{"replica_id": 1, "log_end_offset": 40, "lag": 10, "in_sync": True}]},
    {"topic": "orders", "partition": 0, "role": "follower", "log_end_offset": 119,
     "high_watermark": 118},
]


def view():
    return ClusterView(image=IMAGE, hosted={1: HOSTED_1, 2: HOSTED_2},
                       unreachable={3: "broker 127.0.0.1:9094 does not answer"})


def orders(index):
    topic = next(t for t in IMAGE["topics"] if t["name"] == "orders")
    return next(p for p in topic["partitions"] if p["partition"] == index)


def test_leader_shows_lag_0_and_its_own_leo():
    assert replica_cells(view(), "orders", orders(0))[0] == "1:Online:120:0"


def test_a_follower_shows_its_own_leo_and_the_lag_its_leader_reports():
    # broker 2 reports LEO 119 itself; the leader last saw 118 and reports lag 2.
    assert replica_cells(view(), "orders", orders(0))[1] == "2:Online:119:2"


def test_a_fenced_follower_shows_the_leo_its_leader_last_saw_and_an_unknown_lag():
    """Broker 3 is fenced: the lag its leader last computed (20, or 0 when nothing was
    written since it died) says nothing of now."""
    assert replica_cells(view(), "orders", orders(0))[2] == "3:Online:100:?"


def test_an_unfenced_follower_without_a_status_answer_shows_what_its_leader_knows():
    alive_image = dict(IMAGE, brokers=[dict(b, fenced=False) for b in IMAGE["brokers"]])
    v = ClusterView(image=alive_image, hosted={1: HOSTED_1, 2: HOSTED_2},
                    unreachable={3: "timed out"})
    assert replica_cells(v, "orders", orders(0))[2] == "3:Online:100:20"


def test_unknown_values_print_as_question_marks():
    cells = replica_cells(view(), "orders", orders(1))
    assert cells == ["2:Online:50:0", "3:Offline:?:?", "1:Online:40:10"]


def test_lag_is_computed_from_leos_when_the_leader_reports_none():
    hosted = {1: [{"topic": "t", "partition": 0, "role": "leader", "log_end_offset": 9}],
              2: [{"topic": "t", "partition": 0, "role": "follower", "log_end_offset": 4}]}
    v = ClusterView(image={}, hosted=hosted)
    assert replica_cells(v, "t", partition(0, [1, 2], 1, [1, 2])) == ["1:Online:9:0",
                                                                     "2:Online:4:5"]


def test_describe_rows_are_sorted_by_topic_then_partition_with_the_leaders_hw():
    v = view()
    rows = describe_rows(v, v.topics())
    assert [(r[0], r[1]) for r in rows] == [("audit", 0), ("orders", 0), ("orders", 1)]
    audit, orders0, orders1 = rows
    assert orders0[:8] == ["orders", 0, 1, 3, 5, [1, 2, 3], [1, 2, 3], 118]
    assert orders1[7] == 40
    assert audit[2] == -1 and audit[7] == "?"


def test_describe_only_the_named_topics():
    assert [t["name"] for t in view().topics(["orders", "nope"])] == ["orders"]


def test_render_describe_has_a_topic_table_and_a_partition_table():
    v = view()
    text = render_describe(v, v.topics(["orders"]))
    topic_table, partition_table = text.split("\n\n")
    assert topic_table.splitlines()[1].split() == ["orders", "AAAA", "2", "3",
                                                   "min.insync.replicas=2"]
    header = partition_table.splitlines()[0].split()
    assert header == ["TOPIC", "PARTITION", "LEADER", "LEADER_EPOCH", "PARTITION_EPOCH",
                      "REPLICAS", "ISR", "HW", "REPLICA:STATE:LEO:LAG"]
    assert partition_table.splitlines()[1].split() == [
        "orders", "0", "1", "3", "5", "1,2,3", "1,2,3", "118",
        "1:Online:120:0", "2:Online:119:2", "3:Online:100:?"]


def test_problems_offline_under_replicated_under_min_isr():
    assert partition_problems(partition(0, [1, 2, 3], 1, [1, 2, 3]), 2) == []
    assert partition_problems(partition(0, [1, 2, 3], 1, [1, 2]), 2) == ["under-replicated"]
    assert partition_problems(partition(0, [1, 2, 3], 1, [1]), 2) == [
        "under-replicated", "under-min-isr"]
    assert partition_problems(partition(0, [3], -1, []), 1) == [
        "offline", "under-replicated", "under-min-isr"]


def test_min_isr_comes_from_the_topic_configs_else_1():
    assert min_isr({"configs": {"min.insync.replicas": "2"}}) == 2
    assert min_isr({"configs": {}}) == 1
    assert min_isr({}) == 1
    assert min_isr({"configs": {"min.insync.replicas": "junk"}}) == 1


def test_problem_rows_list_every_partition_with_a_problem():
    rows = problem_rows(view())
    assert [(r[0], r[1], r[-1]) for r in rows] == [
        ("audit", 0, "offline,under-replicated,under-min-isr"),
        ("orders", 1, "under-replicated")]


def test_render_cluster_counts_and_lists_problems_and_marks_the_controller():
    text = render_cluster(view())
    lines = text.splitlines()
    assert "controller: 2" in lines and "cluster id: c-1" in lines
    brokers = [line.split() for line in lines if line[:1].isspace() or line[:1].isdigit()]
    assert brokers[:3] == [["1", "127.0.0.1:9092", "7", "alive", "no"],
                           ["2", "127.0.0.1:9093", "8", "alive", "yes"],
                           ["3", "127.0.0.1:9094", "9", "fenced", "no"]]
    assert "offline partitions: 1" in lines
    assert "under-replicated partitions: 2" in lines
    assert "under-min-isr partitions: 1" in lines
    assert any(line.split()[:2] == ["orders", "1"] for line in lines)


def test_render_cluster_of_an_empty_image_does_not_fail():
    text = render_cluster(ClusterView(image={}))
    assert "controller: none" in text and "offline partitions: 0" in text


def test_short_state_drops_the_replica_suffix():
    assert short_state("OnlineReplica") == "Online"
    assert short_state("ReplicaDeletionStarted") == "ReplicaDeletionStarted"
    assert short_state("NonExistentReplica") == "NonExistent"
    assert short_state(None) == "?"


def test_broker_summary_for_the_dev_table():
    status = dict(IMAGE, hosted=HOSTED_1)
    assert broker_summary(status) == BrokerSummary(is_controller=False, hosted=2, leaders=1,
                                                   under_replicated=0)
    status = dict(IMAGE, broker_id=2, hosted=HOSTED_2)
    assert broker_summary(status) == BrokerSummary(is_controller=True, hosted=2, leaders=1,
                                                   under_replicated=1)
    assert broker_summary({}) == BrokerSummary(False, 0, 0, 0)
