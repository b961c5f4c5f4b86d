"""``raftwood verify``: fault injection and invariant checking against a real cluster.

One concept per module:

    schedule   the seed -> fault schedule (pure; what a replay repeats)
    payload    numbered, checksummed record values (pure)
    netproxy   the inter-broker TCP proxy that makes network cuts (its own process)
    (netns, the namespaces and nftables cuts of --network netns, is broker.harness.netns)
    cluster    the cluster under test: ClusterProcess + proxy or namespaces, roles,
               health, stored logs
    faults     applying one step: kill -9, SIGSTOP, restarts, cuts, a damaged log tail
    netfaults  the netns fault kinds: zombie leader, isolated controller, splits, flaps
    reassign   the reassign fault: moving a partition's replicas while writing (KIP-455),
               bounded waits and cancels, the ledger of moves and its checks
    recovery   per fault: heal -> converged time, longest window without an ack
    workload   acks=all idempotent producers and a consumer reading along (threads)
    txnload    the transactional workload: a transactional producer (committed, aborted,
               unknown outcomes), read_committed readers along the run and at the end
    observer   the watcher thread: statuses, ListOffsets latest, leader HWs, served batches
    checker    the invariants, pure: fed observations during the run, the logs at the end
    txncheck   the transactional invariants, pure: none lost, none aborted visible,
               unknown ones all-or-nothing, exactly once, the LSO never back
    report     progress lines, the closing report, the summary line
    runner     the phases of one run, each bounded; stops every process on the way out

The command line is ``broker/cli/verify.py``; the pytest side is
``tests/faults/test_verify.py`` and ``tests/faults/test_verify_netns.py``.
"""
from .runner import VerifyOptions, VerifyRun

__all__ = ["VerifyOptions", "VerifyRun"]
