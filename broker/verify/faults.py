"""Applying one scheduled fault to the cluster: act, hold, heal.

``FaultInjector.apply(step)`` resolves the step's role to a broker, does what the
step's kind says (see ``schedule``), waits ``hold_s``, undoes it, and returns an
``AppliedFault`` describing what happened.  The netns kinds go to ``netfaults``; a
``cut`` goes through the proxy or, with brokers in namespaces, nftables; a
``reassign`` to ``reassign.Reassigner`` (the run's, so its ledger sees every move); a
``voter`` takes a broker out of the metadata quorum's voters and back; a
``pause-coordinator-follower`` pauses a follower of the progress probe's coordinator
partition (``stuck``), whatever the step's role resolved to.
Only the runner's thread calls it.

``damage_tail`` is the storage fault: on a stopped broker, cut the active segment
inside its last batch (a torn write) or flip bytes inside it (a CRC failure).  Only
data the broker had not flushed may be damaged — bytes at or after its recovery
point, exactly what a crash can tear — so recovery on restart must find and cut it.
"""
from __future__ import annotations

import random
import time
from pathlib import Path

from protocol.errors import ErrorCode
from protocol.raft_voter_messages import AddRaftVoterRequest, RemoveRaftVoterRequest, VoterListener
from protocol.records import CRC_START, valid_prefix
from storage.checkpoint import read_offsets

from .cluster import VerifyCluster
from .netfaults import NetworkFaults
from .reassign import Reassigner, ReassignLedger
from .report import AppliedFault
from .schedule import NETNS_FAULT_KINDS, FaultStep
from .stuck import coordinator_follower

# A voter change answers once committed (the broker waits up to 30 s for it).
VOTER_CHANGE_TIMEOUT_S = 45.0


class FaultError(RuntimeError):
    """A fault could not be applied or undone (e.g. a broker would not start again)."""


def damage_tail(partition_dir: Path, variant: str, pick: int) -> str | None:
    """Damage the last batch of the newest non-empty segment of ``partition_dir``.

    ``variant`` ``truncate`` cuts the file inside that batch; ``corrupt`` flips one
    CRC-covered byte in it.  Returns a description, or None when there is nothing
    unflushed to damage (no batch, or the last batch lies below the recovery point).
    The broker owning the directory must not be running.
    """
    segments = [p for p in sorted(Path(partition_dir).glob("*.log")) if p.stat().st_size]
    if not segments:
        return None
    segment = segments[-1]
    data = segment.read_bytes()
    headers, _ = valid_prefix(data, check_crc=False)
    if not headers:
        return None
    last = headers[-1]
    offsets = read_offsets(partition_dir)
    recovery_point = offsets.recovery_point if offsets else 0
    if last.next_offset <= recovery_point:
        return None
    rng = random.Random(pick)
    where = f"batch {last.base_offset}..{last.last_offset} of {segment.name}"
    if variant == "truncate":
        keep = last.position + rng.randrange(1, last.size)
        with open(segment, "r+b") as f:
            f.truncate(keep)
        return f"cut {len(data) - keep} bytes: {where} torn at byte {keep - last.position}"
    position = last.position + rng.randrange(CRC_START, last.size)
    with open(segment, "r+b") as f:
        f.seek(position)
        f.write(bytes([data[position] ^ 0xFF]))
    return f"flipped byte {position - last.position} of {where}"


class FaultInjector:
    """Applies steps to a VerifyCluster.  Runner thread only."""

    def __init__(self, vc: VerifyCluster, progress=None, reassigner: Reassigner | None = None):
        self.vc = vc
        self.cluster = vc.cluster
        self.progress = progress or (lambda text: None)
        self.network = NetworkFaults(vc, self.progress) if vc.net is not None else None
        self.reassigner = reassigner or Reassigner(vc.cluster, ReassignLedger(), self.progress)

    def apply(self, step: FaultStep, started_s: float) -> AppliedFault:
        tp = self.vc.partitions[step.partition % len(self.vc.partitions)]
        node = self.vc.resolve(step.role, tp, step.pick)
        begun = time.monotonic()
        role = "controller" if step.role == "controller" else f"{step.role} of {tp[0]}-{tp[1]}"
        if step.kind in NETNS_FAULT_KINDS:
            if self.network is None:
                raise FaultError(f"{step.kind} needs --network netns")
            action = self.network.apply(step, node, tp, role)
        else:
            action = getattr(self, "_" + step.kind.replace("-", "_"))(step, node, tp, role)
        return AppliedFault(step.index, step.kind, node, action, started_s,
                            time.monotonic() - begun)

    # -- one method per kind; each returns the action's description ---------------------
    def _kill(self, step, node, role) -> str:
        self.cluster.kill(node)
        self.progress(f"  #{step.index} kill -9 broker {node} ({role}); down {step.hold_s:.1f}s")
        time.sleep(step.hold_s)
        self._start(node)
        return f"kill -9 broker {node} ({role}), down {step.hold_s:.1f}s, started"

    def _kill_leader(self, step, node, tp, role) -> str:
        return self._kill(step, node, role)

    _kill_follower = _kill_leader
    _kill_controller = _kill_leader

    def _pause(self, step, node, tp, role) -> str:
        self.cluster.pause(node)
        self.progress(f"  #{step.index} SIGSTOP broker {node} ({role}) for {step.hold_s:.1f}s")
        try:
            time.sleep(step.hold_s)
        finally:
            self.cluster.resume(node)
        return f"SIGSTOP broker {node} ({role}) for {step.hold_s:.1f}s, SIGCONT"

    def _pause_coordinator_follower(self, step, node, tp, role) -> str:
        follower, leader, index = coordinator_follower(self.vc.bootstrap, step.variant,
                                                       step.pick)
        topic = "__transaction_state" if step.variant == "txn" else "__consumer_offsets"
        role = f"follower of {topic}-{index}, coordinator broker {leader}"
        return self._pause(step, follower, tp, role)

    def _restart_clean(self, step, node, tp, role) -> str:
        self.progress(f"  #{step.index} SIGTERM broker {node} ({role})")
        code = self.cluster.stop(node)
        self._start(node)
        note = "" if code == 0 else f" (exit code {code}, expected 0)"
        return f"clean restart of broker {node} ({role}){note}"

    def _restart_hard(self, step, node, tp, role) -> str:
        self.progress(f"  #{step.index} kill -9 broker {node} ({role}) and start it at once")
        self.cluster.kill(node)
        self._start(node)
        return f"hard restart of broker {node} ({role})"

    def _cut(self, step, node, tp, role) -> str:
        if self.vc.net is not None:
            return self._cut_netns(step, node, role)
        proxy = self.vc.proxy
        if proxy is None:
            raise FaultError("network cuts need the proxy (the cluster was started without it)")
        before = proxy.stats().get("blackholed", 0)
        if step.variant == "isolate":
            proxy.isolate(node)
            what = f"broker {node} ({role}) cut off from every other broker"
        else:
            other = self.vc.other_broker(node, step.pick)
            proxy.cut(node, other)
            what = f"link between broker {node} ({role}) and broker {other} cut"
        self.progress(f"  #{step.index} {what} for {step.hold_s:.1f}s")
        try:
            time.sleep(step.hold_s)
            blackholed = proxy.stats().get("blackholed", 0) - before
        finally:
            proxy.heal()
        return (f"{what} for {step.hold_s:.1f}s ({blackholed} replica connections "
                f"blackholed), healed")

    def _cut_netns(self, step, node, role) -> str:
        net = self.vc.net
        if step.variant == "isolate":
            net.isolate(node)
            what = f"broker {node} ({role}) cut off from every other broker, all ports"
        else:
            other = self.vc.other_broker(node, step.pick)
            net.cut(node, other)
            what = f"every packet between broker {node} ({role}) and broker {other} dropped"
        self.progress(f"  #{step.index} {what} for {step.hold_s:.1f}s")
        try:
            time.sleep(step.hold_s)
        finally:
            net.heal()
        return f"{what} for {step.hold_s:.1f}s (nftables, Raft included), healed"

    def _reassign(self, step, node, tp, role) -> str:
        return self.reassigner.run(step, node, tp)

    def _voter(self, step, node, tp, role) -> str:
        """RemoveRaftVoter sent to the broker leaving (it hands the leadership over when
        it leads), hold, AddRaftVoter back at its Raft address (to another broker).
        A refusal is reported in the action; convergence then fails on the voter set."""
        plan = self.cluster.plans[self.cluster.node_ids.index(node)]
        address = f"{plan.host}:{plan.raft_port}"
        removed = self._voter_change(node, RemoveRaftVoterRequest[0](voter_id=node))
        self.progress(f"  #{step.index} broker {node} ({role}) out of the voters: {removed}; "
                      f"observer for {step.hold_s:.1f}s")
        time.sleep(step.hold_s)
        via = self.vc.other_broker(node, step.pick)
        added = self._voter_change(via, AddRaftVoterRequest[0](
            voter_id=node, listeners=[VoterListener("CONTROLLER", plan.host, plan.raft_port)]))
        return (f"broker {node} ({role}) out of the metadata quorum's voters ({removed}), "
                f"an observer for {step.hold_s:.1f}s, added back at {address} via broker "
                f"{via} ({added})")

    def _voter_change(self, via: int, request) -> str:
        try:
            with self.cluster.connect(via, timeout_s=VOTER_CHANGE_TIMEOUT_S) as conn:
                answer = conn.request(request)
        except ConnectionError as exc:
            return f"no answer: {exc}"
        if answer.error_code == 0:
            return "done"
        return f"{ErrorCode(answer.error_code).name}: {answer.error_message}"

    def _corrupt_tail(self, step, node, tp, role) -> str:
        if self.cluster.hosted(node, *tp) is None:  # a larger cluster: pick one it hosts
            hosted = [t for t in self.vc.partitions if self.cluster.hosted(node, *t)]
            tp = hosted[step.pick % len(hosted)] if hosted else tp
        self.cluster.kill(node)
        damage = damage_tail(self.vc.partition_dir(node, tp), step.variant, step.pick)
        self.progress(f"  #{step.index} kill -9 broker {node} ({role}); {tp[0]}-{tp[1]}: "
                      f"{damage or 'nothing unflushed to damage'}")
        self._start(node)
        evidence = self._recovery_line(node, tp) if damage else None
        return (f"kill -9 broker {node} ({role}), {tp[0]}-{tp[1]}: "
                f"{damage or 'nothing unflushed to damage'}, started"
                + (f"; {evidence}" if evidence else
                   "; recovery reported no cut" if damage else ""))

    def _recovery_line(self, node: int, tp) -> str | None:
        """What the restarted broker's recovery said about the damaged partition (its
        WARNING ``recovery cut N bytes ...``), from the log of its latest run."""
        try:
            text = self.cluster.broker(node).log_path.read_text(errors="replace")
        except OSError:
            return None
        latest_run = text.rsplit("### raftwood-testing:", 1)[-1]
        marker = f"[Log {tp[0]}-{tp[1]}] recovery cut "
        for line in latest_run.splitlines():
            if marker in line:
                return "recovery cut " + line.split(marker, 1)[1].split(":", 1)[0]
        return None

    def _start(self, node: int) -> None:
        try:
            self.cluster.start(node)
        except Exception as exc:  # BrokerError / AssertionError with the broker's log
            raise FaultError(f"broker {node} did not start again: {exc}") from exc
