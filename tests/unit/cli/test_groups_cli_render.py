"""``raftwood groups`` rendering (pure): one row per partition with its lag and owner."""
from __future__ import annotations

from broker.cli.groups import GroupDescription, Member, render_group, render_list
from broker.cli.main import build_parser


def test_describe_shows_offsets_lag_and_owner_per_partition_then_the_members():
    desc = GroupDescription(
        "g", "Stable", "consumer", "range", (2, "127.0.0.1:9093"),
        members=[Member("m-1", "c1", "/127.0.0.1", {"t": [0, 1]}),
                 Member("m-2", "c2", "/127.0.0.2", {"t": [2]}, "static-2")],
        committed={("t", 0): 5, ("t", 2): 9, ("old", 0): 3},
        log_end={("t", 0): 8, ("t", 1): 4, ("t", 2): 9, ("old", 0): None})
    lines = render_group(desc).splitlines()
    assert lines[0] == ("group: g  state: Stable  protocol: consumer/range  "
                        "coordinator: 2 (127.0.0.1:9093)  members: 2")
    rows = [line.split() for line in lines[2:7]]
    assert rows[0] == ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                       "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert rows[1:] == [
        ["old", "0", "3", "-", "-", "-", "-", "-"],        # committed, nobody owns it
        ["t", "0", "5", "8", "3", "m-1", "/127.0.0.1", "c1"],
        ["t", "1", "-", "4", "-", "m-1", "/127.0.0.1", "c1"],  # owned, never committed
        ["t", "2", "9", "9", "0", "m-2", "/127.0.0.2", "c2"],
    ]
    assert [line.split() for line in lines[8:]] == [
        ["MEMBER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "ASSIGNMENT"],
        ["m-1", "-", "/127.0.0.1", "c1", "t:0,1"],  # dynamic
        ["m-2", "static-2", "/127.0.0.2", "c2", "t:2"]]


def test_an_unreadable_assignment_shows_a_question_mark():
    desc = GroupDescription("g", "Stable", "connect", "x", (1, "h:1"),
                            members=[Member("m", "c", "", None)])
    assert render_group(desc).splitlines()[-1].split() == ["m", "-", "-", "c", "?"]


def test_list_is_sorted_by_group():
    assert render_list([("b", "Empty", "", 1), ("a", "Stable", "consumer", 3)]).splitlines() == [
        "GROUP  STATE   PROTOCOL-TYPE  COORDINATOR",
        "a      Stable  consumer                 3",
        "b      Empty   -                        1"]


def test_the_commands_are_registered_on_the_raftwood_parser():
    args = build_parser().parse_args(["groups", "describe", "g", "--bootstrap-server", "h:1"])
    assert (args.group, args.bootstrap_server) == ("g", ("h", 1))
    assert build_parser().parse_args(["groups", "list"]).func.__name__ == "cmd_groups_list"
