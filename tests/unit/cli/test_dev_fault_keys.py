"""``raftwood dev``'s keys: a digit restarts that broker, k/p/c then a digit kill, pause
or resume it; a prefix waits a few seconds for its digit and any other key drops it."""
from __future__ import annotations

from broker.cli.dev_console import KEY_PREFIX_S, KeyParser, footer


def test_digits_restart_and_prefixes_name_the_fault():
    parser = KeyParser(3)
    assert parser.feed("2k3p1c2", 0.0) == [("restart", 2), ("kill", 3), ("pause", 1),
                                           ("resume", 2)]


def test_a_prefix_spans_reads_but_not_too_long_and_not_other_keys():
    parser = KeyParser(3)
    assert parser.feed("k", 0.0) == []
    assert parser.feed("1", 1.0) == [("kill", 1)]
    assert parser.feed("p", 2.0) == []
    assert parser.feed("2", 2.0 + KEY_PREFIX_S + 1) == [("restart", 2)]
    assert parser.feed("px2", 10.0) == [("restart", 2)]


def test_brokers_outside_the_cluster_and_other_keys_do_nothing():
    parser = KeyParser(2)
    assert parser.feed("k3 9xq0", 0.0) == []
    assert parser.feed("1", 0.0) == [("restart", 1)]   # the k was dropped by the 3


def test_the_footer_lists_the_fault_keys_when_keys_work():
    with_keys = footer(3, "./data", keys_on=True)
    assert "k1-3 kill -9, p1-3 pause, c1-3 continue (resume)" in with_keys
    assert "(or kill N, pause N, resume N)" in footer(3, "./data", keys_on=False)
