"""Big metadata entries reach every voter whatever their size.

pysyncobj 0.3.17 sends an entry at least ``appendEntriesBatchSizeBytes`` long in chunks
and labels the last one by the length of the entry's command instead of the pickled
entry; when a chunk boundary falls between the two, followers unpickle a truncated
entry and drop the connection at every resend, and nothing after it commits.  A broker
heartbeat carries the log end offset of every replica it hosts, so after a large
CreatePartitions heartbeats of a few hundred KiB crossed such boundaries all the time.
``raft_conf`` sends entries whole up to 16 MiB; these commands sweep every length
just below the 64 KiB default's second chunk boundary (128 KiB: an entry of at least
64 KiB is chunked) and must apply on all three voters.
"""
from __future__ import annotations

from tests.unit.controller.test_raft_safety import leader_of, raft_cluster, wait_until  # noqa: F401  (the fixture)

DEFAULT_CHUNK_BYTES = 2 ** 16
SWEEP = 200  # consecutive command lengths; the bad window is a few dozen bytes wide


def test_entries_of_every_length_around_a_chunk_boundary_apply_on_every_voter(raft_cluster):
    _network, nodes = raft_cluster
    leader = wait_until(lambda: leader_of(nodes), what="a leader")
    base = len(leader.applied.commands)
    start = 2 * DEFAULT_CHUNK_BYTES - SWEEP
    outcomes = [leader.submit("init_cluster", ("x" * length,))
                for length in range(start, start + SWEEP)]
    wait_until(lambda: all(outcomes), timeout_s=60.0, what="every command answered")
    assert all(outcome["e"] == 0 for outcome in outcomes), \
        [outcome for outcome in outcomes if outcome["e"] != 0][:3]
    for node in nodes:
        wait_until(lambda node=node: len(node.applied.commands) >= base + SWEEP, timeout_s=60.0,
                   what=f"{node.address} to apply every command")
        lengths = [len(args[0]) for method, args in node.applied.commands[base:]
                   if method == "init_cluster"]
        assert lengths == list(range(start, start + SWEEP)), node.address
