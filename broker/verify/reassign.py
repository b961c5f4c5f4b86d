"""The ``reassign`` fault: move one workload partition's replicas while the load runs,
with AlterPartitionReassignments / ListPartitionReassignments (KIP-455, v0) sent to the
controller, and the ledger of every move the run started.

Why a fourth broker.  The workload topics have RF 3; on 3 brokers every partition
already lives on every broker, so no replica can go anywhere new, and reducing then
restoring the replica count would change what ``min.insync.replicas=2`` means during
the fault.  So a run whose faults include ``reassign`` starts 4 brokers unless
``--brokers`` says otherwise (``default_brokers``): then a move replaces one replica
with a broker that does not hold the partition, which must copy the log from its
start, join the ISR, and take the place of the replaced one, whose broker deletes its
copy.  ``reassign`` is not among the default kinds, so a default run keeps its 3
brokers, its schedule for a seed and its duration.  With ``--brokers 3`` given
explicitly the fault can only reorder the replica list (``plan_move``): the preferred
leader changes and the controller's preferred-leader check moves the leadership —
the controller's path without data movement, said so in the fault's description.

Planning is pure (``plan_move``, ``cancel_delay_s``): the step's role names the
replica that goes (``leader``: completing the move must hand leadership to a replica
of the target in a new leader epoch; ``follower``: one chosen by ``pick``); the new
broker takes its place in the list, so it becomes the preferred leader when the
leader was replaced.  Variant ``cancel`` cancels the move ``cancel_delay_s`` after it
started (halfway when the new replica is still catching up; a move that completed
first is counted as such, never as cancelled).

Execution (``Reassigner``, the runner's thread only): the controller is found through
Metadata's ``controller_id`` (asked of any running broker) and reached on its own
listener; NOT_CONTROLLER, REQUEST_TIMED_OUT and connection failures are retried within
``CONTROLLER_RETRY_S``.  Every wait is bounded: a move that has not ended within
``MOVE_WAIT_S`` (a broker it needs is down) is cancelled; one that cannot be
cancelled either (none of the old replicas in sync) stays *pending* in the ledger, and
``settle`` at the heal — every broker running again — waits for it, cancels what is
still moving, and reports what is left.  A step whose partition is still moving from
an earlier step starts nothing (a new target would silently replace the old one, which
could then be neither completed nor cancelled).  How a move ended is read from the
partition's replicas once ListPartitionReassignments no longer lists it: the target
(completed) or the original set (cancelled); anything else is not an end.

Checks (``ReassignLedger.check``): every move the run started ended completed or
cancelled (``reassign-stuck``), and after healing no partition has adding or removing
replicas (``reassign-ongoing``, from ``settle``'s last listing).
"""
from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass

from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
)

from broker.harness import ClusterProcess, KafkaConnection
from protocol.errors import ErrorCode

from .checker import ViolationLog

REASSIGN_KIND = "reassign"
ALTER_VERSION = LIST_VERSION = 0
CONTROLLER_RETRY_S = 15.0     # finding a controller that takes the request
MOVE_WAIT_S = 20.0            # start -> no longer listed, before the fault cancels it
CANCEL_WAIT_S = 10.0          # cancel -> no longer listed
SETTLE_S = 45.0               # at the heal: every leftover ended or cancelled
POLL_S = 0.2
REQUEST_TIMEOUT_S = 10.0
CANCEL_DELAY_RANGE_S = (0.0, 0.25)  # a move of a small log takes 0.2-1 s
RETRIABLE = (ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT)
ReassignableTopic = AlterPartitionReassignmentsRequest.ReassignableTopic
TopicPartition = tuple[str, int]


def default_brokers(kinds) -> int:
    """The cluster size when ``--brokers`` is not given: 4 when the faults include
    ``reassign`` (a broker outside every RF 3 replica set), else 3."""
    return 4 if REASSIGN_KIND in kinds else 3


def plan_move(replicas: list[int], replaced: int, node_ids: list[int], pick: int
              ) -> list[int]:
    """The target replica list of a move (see the module docstring).  With a broker
    outside ``replicas``: ``replaced`` (or, when it is not a replica, the one ``pick``
    names) swapped in place for an outside broker chosen by ``pick``.  Without one:
    ``replicas`` reordered so another broker comes first.  Pure."""
    replicas = list(replicas)
    if len(replicas) < 2:
        raise ValueError(f"a move needs at least 2 replicas, got {replicas}")
    if replaced not in replicas:
        replaced = replicas[pick % len(replicas)]
    outside = [n for n in sorted(node_ids) if n not in replicas]
    if outside:
        new = outside[pick % len(outside)]
        return [new if r == replaced else r for r in replicas]
    first = replaced if replaced != replicas[0] else replicas[1 + pick % (len(replicas) - 1)]
    return [first] + [r for r in replicas if r != first]


def cancel_delay_s(pick: int) -> float:
    """Seconds from a ``cancel`` step's start to its cancel; derived from ``pick``."""
    return round(random.Random(pick).uniform(*CANCEL_DELAY_RANGE_S), 2)


@dataclass
class Move:
    """One reassignment the run started and how it ended (``outcome``: completed,
    cancelled, or pending while neither is known)."""

    step: int
    topic: str
    partition: int
    original: list[int]
    target: list[int]
    outcome: str = "pending"
    cancel_sent: bool = False
    cancel_late: bool = False     # the cancel found the move already completed
    took_s: float | None = None
    final: list[int] | None = None   # the replicas it ended with
    note: str = ""

    @property
    def tp(self) -> TopicPartition:
        return self.topic, self.partition

    def name(self) -> str:
        return f"#{self.step} {self.topic}-{self.partition} {self.original} -> {self.target}"


class ReassignLedger:
    """Every move started, refused starts, and the partitions still moving after the
    heal; the counts for the report and the two checks.  Runner thread only."""

    def __init__(self):
        self.moves: list[Move] = []
        self.refused: list[str] = []
        self.ongoing_after_heal: list[str] | None = None   # None: not listed
        self.settled = False                                 # settle ran (the heal)

    def summary(self) -> dict:
        def count(outcome: str) -> int:
            return sum(m.outcome == outcome for m in self.moves)

        return {"started": len(self.moves), "completed": count("completed"),
                "cancelled": count("cancelled"), "pending": count("pending"),
                "cancels_sent": sum(m.cancel_sent for m in self.moves),
                "cancels_late": sum(m.cancel_late for m in self.moves),
                "refused": len(self.refused),
                "ongoing_after_heal": self.ongoing_after_heal,
                "moves": [asdict(m) for m in self.moves]}

    def check(self, violations: ViolationLog) -> None:
        for move in self.moves:
            if move.outcome == "pending":
                violations.add("reassign-stuck", f"move {move.name()} neither completed "
                                                 f"nor cancelled by the end"
                                                 + (f" ({move.note})" if move.note else ""))
        for entry in self.ongoing_after_heal or ():
            violations.add("reassign-ongoing", f"after healing {entry}")
        if self.settled and self.ongoing_after_heal is None:
            violations.add("reassign-ongoing", "after healing no controller answered "
                                               "ListPartitionReassignments")


class ControllerUnavailable(RuntimeError):
    """No broker took the request as controller within ``CONTROLLER_RETRY_S``."""


class Reassigner:
    """Runs ``reassign`` steps and the heal's ``settle`` (see the module docstring)."""

    def __init__(self, cluster: ClusterProcess, ledger: ReassignLedger, progress=None):
        self.cluster = cluster
        self.ledger = ledger
        self.progress = progress or (lambda text: None)

    # -- one step --------------------------------------------------------------------------
    def run(self, step, replaced: int, tp: TopicPartition) -> str:
        """Start the move of ``tp`` away from ``replaced``, wait for it (cancelling it
        after its delay with variant ``cancel``, or when it takes too long); returns
        the action's description."""
        ongoing = self._ongoing_or_none() or {}
        if tp in ongoing:  # left by an earlier step: a new target would replace it
            return self._not_started(step, f"{tp[0]}-{tp[1]}: not started, it is still "
                                           f"moving (replicas {ongoing[tp][0]})")
        try:
            original = self._replicas(tp)
        except LookupError as exc:
            return self._not_started(step, f"{tp[0]}-{tp[1]}: not started, its replicas "
                                           f"unknown ({exc})")
        target = plan_move(original, replaced, self.cluster.node_ids, step.pick)
        reorder = sorted(target) == sorted(original)
        what = (f"{tp[0]}-{tp[1]} replicas {original} -> {target}"
                + (" (reordered: every broker already holds it)" if reorder else ""))
        refusal = self._alter(tp, target)
        if refusal is not None:
            return self._not_started(step, f"{what}: not started, {refusal}")
        move = Move(step.index, tp[0], tp[1], original, target)
        self.ledger.moves.append(move)
        begun = time.monotonic()
        self.progress(f"  #{step.index} reassignment started: {what}")
        if step.variant == "cancel":
            time.sleep(cancel_delay_s(step.pick))
            self._cancel(move)
        if not self._wait_ended(move, MOVE_WAIT_S) and not move.cancel_sent:
            self._cancel(move, why=f"not ended within {MOVE_WAIT_S:g}s")
            self._wait_ended(move, CANCEL_WAIT_S)
        move.took_s = round(time.monotonic() - begun, 2)
        end = {"completed": f"completed in {move.took_s:.1f}s",
               "cancelled": f"cancelled, back to {move.final} after {move.took_s:.1f}s",
               "pending": f"still moving after {move.took_s:.1f}s (left for the heal)"}
        return (f"{what}: {end[move.outcome]}"
                + ("; the cancel came after completion" if move.cancel_late else "")
                + (f" ({move.note})" if move.note else ""))

    def _not_started(self, step, what: str) -> str:
        self.ledger.refused.append(f"#{step.index} {what}")
        return what

    # -- the heal ----------------------------------------------------------------------------
    def settle(self, bound_s: float = SETTLE_S) -> list[str]:
        """With every broker running again: wait (bounded) for the moves still pending,
        cancel every partition still moving halfway through the bound, and record
        what is still listed at the end (``ledger.ongoing_after_heal``).  Returns what
        it did, for the progress line."""
        done: list[str] = []
        deadline = time.monotonic() + bound_s
        cancel_at = time.monotonic() + bound_s / 2
        cancelled = False
        while True:
            ongoing = self._ongoing_or_none()
            pending = [m for m in self.ledger.moves if m.outcome == "pending"]
            for move in pending:
                if ongoing is not None and move.tp not in ongoing:
                    self._record_end(move)
            if ongoing == {} and all(m.outcome != "pending" for m in pending):
                break
            now = time.monotonic()
            if ongoing and now >= cancel_at and not cancelled:
                cancelled = True
                for tp in sorted(ongoing):
                    code = self._send_alter(tp, None)
                    done.append(f"cancelled {tp[0]}-{tp[1]}: {self._name(code)}")
                    for move in pending:
                        if move.tp == tp and code == ErrorCode.NONE:
                            move.cancel_sent = True
            if now >= deadline:
                break
            time.sleep(POLL_S)
        self.ledger.settled = True
        self.ledger.ongoing_after_heal = (
            None if ongoing is None else
            [f"{t}-{p} still moving: replicas {r}, adding {a}, removing {d}"
             for (t, p), (r, a, d) in sorted(ongoing.items())])
        if ongoing is None:
            done.append("could not list the reassignments (no controller answered)")
        return done

    # -- requests ----------------------------------------------------------------------------
    def _controller_call(self, build, error_of):
        """Send ``build()`` to the controller, retrying a refusal in ``RETRIABLE`` or a
        connection failure within ``CONTROLLER_RETRY_S``; the response, or
        ControllerUnavailable."""
        deadline = time.monotonic() + CONTROLLER_RETRY_S
        last = "no broker answered"
        while True:
            try:
                with self._controller_connection() as conn:
                    response = conn.request(build())
                code = error_of(response)
                if code not in RETRIABLE:
                    return response
                last = self._name(code)
            except (ConnectionError, OSError, LookupError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() >= deadline:
                raise ControllerUnavailable(f"no controller took the request within "
                                            f"{CONTROLLER_RETRY_S:g}s (last: {last})")
            time.sleep(0.5)

    def _controller_connection(self) -> KafkaConnection:
        """A connection to the broker Metadata names as controller; LookupError when
        no running broker names one."""
        for node in self.cluster.running():
            try:
                with self.cluster.connect(node, REQUEST_TIMEOUT_S) as conn:
                    controller = conn.metadata([]).controller_id
            except (ConnectionError, OSError):
                continue
            if controller in self.cluster.running():
                return self.cluster.connect(controller, REQUEST_TIMEOUT_S)
        raise LookupError("no running broker names a running controller")

    def _send_alter(self, tp: TopicPartition, target: list[int] | None) -> int:
        """AlterPartitionReassignments for one partition (``None``: cancel); its error
        code, or -1 when no controller took it."""
        topic = ReassignableTopic(name=tp[0], partitions=[
            ReassignableTopic.ReassignablePartition(partition_index=tp[1], replicas=target)])

        def error_of(response):
            if response.error_code != ErrorCode.NONE:
                return response.error_code
            return response.responses[0].partitions[0].error_code

        try:
            response = self._controller_call(
                lambda: AlterPartitionReassignmentsRequest[ALTER_VERSION](
                    timeout_ms=int(REQUEST_TIMEOUT_S * 1000), topics=[topic]), error_of)
        except ControllerUnavailable:
            return -1
        return error_of(response)

    def _alter(self, tp: TopicPartition, target: list[int]) -> str | None:
        """Start a move; None when started, else why not."""
        code = self._send_alter(tp, target)
        return None if code == ErrorCode.NONE else f"refused: {self._name(code)}"

    def _cancel(self, move: Move, why: str = "") -> None:
        code = self._send_alter(move.tp, None)
        if code == ErrorCode.NONE:
            move.cancel_sent = True
            self.progress(f"  #{move.step} reassignment of {move.topic}-{move.partition} "
                          f"cancelled" + (f" ({why})" if why else ""))
        elif code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS:
            move.cancel_late = True
        else:
            move.note = f"cancel {why + ': ' if why else ''}{self._name(code)}"

    def _ongoing_or_none(self) -> dict | None:
        """{tp: (replicas, adding, removing)} of every partition being reassigned, as
        the controller lists it; None when no controller answered."""
        try:
            response = self._controller_call(
                lambda: ListPartitionReassignmentsRequest[LIST_VERSION](
                    timeout_ms=int(REQUEST_TIMEOUT_S * 1000), topics=None),
                lambda r: r.error_code)
        except ControllerUnavailable:
            return None
        if response.error_code != ErrorCode.NONE:
            return None
        return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas),
                                              list(p.removing_replicas))
                for t in response.topics for p in t.partitions}

    def _wait_ended(self, move: Move, bound_s: float) -> bool:
        """Poll until ``move`` is no longer listed and its end is recorded; False when
        it is still pending after ``bound_s``."""
        deadline = time.monotonic() + bound_s
        while True:
            ongoing = self._ongoing_or_none()
            if ongoing is not None and move.tp not in ongoing and self._record_end(move):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_S)

    def _record_end(self, move: Move) -> bool:
        """Set ``move.outcome`` from the partition's replicas, when they are the target
        (in its order) or the original set; False (still pending) otherwise.  A cancel
        restores the set, not the order: the controller rebuilds the old list as the
        replicas minus the adding ones, and a move put the target first."""
        try:
            replicas = self._replicas(move.tp)
        except LookupError:
            return False
        if replicas == move.target:
            move.outcome = "completed"
        elif sorted(replicas) == sorted(move.original) and move.cancel_sent:
            move.outcome = "cancelled"
        else:
            move.note = f"replicas {replicas} are neither the target nor the original"
            return False
        move.final, move.note = replicas, ""
        return True

    def _replicas(self, tp: TopicPartition) -> list[int]:
        """The partition's replica list per the controller's Metadata answer."""
        try:
            with self._controller_connection() as conn:
                metadata = conn.metadata([tp[0]])
        except (ConnectionError, OSError) as exc:
            raise LookupError(f"Metadata for {tp[0]}: {exc}") from exc
        for topic in metadata.topics:
            for p in topic.partitions:
                if topic.name == tp[0] and p.partition_index == tp[1]:
                    return list(p.replica_nodes)
        raise LookupError(f"{tp[0]}-{tp[1]} not in the controller's Metadata")

    @staticmethod
    def _name(code: int) -> str:
        if code == -1:
            return "no controller answered"
        try:
            return ErrorCode(code).name
        except ValueError:
            return f"error {code}"
