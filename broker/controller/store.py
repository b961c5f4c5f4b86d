"""How metadata commands reach the ClusterState: Raft (pysyncobj) or a local file.

Both stores offer the same event-loop interface (the rest of the broker reaches it
through ``MetadataClient``, one method per operation):

* ``await store.submit(command)`` applies a typed command (``commands.py``) in log
  order and returns its result (raises ApplyError when refused, MetadataUnavailable
  when no quorum answers in time).  A controller decision carries the term it was
  decided in (``command.controller_term``, read from ``store.controller_term``) and
  is refused unless committed in that term.  The Raft store sends the command's wire
  form ``(method, args, controller_term)``, the journal's form since before commands
  were typed;
* ``store.image`` is the newest applied state by Raft log position
  (``ClusterState.position``), a private copy owned by the loop;
* listeners registered with ``add_listener`` get every new image (only when the
  state's version moved) and ``add_membership_observer`` sees every registration and
  heartbeat command (as a RegisterBroker / Heartbeat).

Threads: pysyncobj applies commands on its own thread.  Nothing there touches loop
state: the apply makes a snapshot and hands it over with ``call_soon_threadsafe``.
Because the snapshot is posted before the command's result, a caller resuming from
``submit`` already sees the image that contains its change.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable
from typing import Any

from storage.checkpoint import write_atomically

from ..config import quorum_password
from .commands import MEMBERSHIP_METHODS, Command, Heartbeat, RecordVoter, RegisterBroker, decode
from .metadata_file import metadata_path, read_state, write_state
from .raft import RETRIABLE_FAILURES, start_raft_node, voter_addresses
from .state import ApplyError, ClusterState

log = logging.getLogger(__name__)

Listener = Callable[[ClusterState], None]
MembershipObserver = Callable[["RegisterBroker | Heartbeat"], None]
RETRY_NO_LEADER_S = 0.05
ROLE_CHECK_S = 0.25
# A voter marked leaving steps down to an observer once it has heard from no leader for
# this long: the quorum dropped it, so no leader sends it the log any more.
LEFT_QUORUM_AFTER_S = 3.0
# A broker that hears from no quorum leader this long says what it knows, every as long.
NO_LEADER_WARNING_S = 30.0


class MetadataUnavailable(Exception):
    """No quorum / leader could apply the command in time (retriable)."""


def parse_voters(text: str) -> dict[int, str]:
    """``1@host:port,2@host:port`` → {1: "host:port", 2: "host:port"}."""
    voters = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        node, sep, address = item.partition("@")
        if not sep or ":" not in address:
            raise ValueError(f"controller.quorum.voters entry {item!r} is not id@host:port")
        voters[int(node)] = address
    return voters


class _StoreBase:
    def __init__(self) -> None:
        self.image = ClusterState()
        self._listeners: list[Listener] = []
        self._membership_observers: list[MembershipObserver] = []

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def add_membership_observer(self, observer: MembershipObserver) -> None:
        """``observer(command)`` for every applied RegisterBroker / Heartbeat (refused
        or not: the broker that sent it is alive).  Event loop."""
        self._membership_observers.append(observer)

    def _publish(self, image: ClusterState) -> None:
        if image.position() < self.image.position():
            return  # never go back (a late snapshot after a newer one)
        self.image = image
        for listener in list(self._listeners):
            try:
                listener(image)
            except Exception:
                log.exception("metadata listener failed")

    def _observe(self, command: Command) -> None:
        if isinstance(command, (RegisterBroker, Heartbeat)):
            for observer in list(self._membership_observers):
                observer(command)

    def _observe_wire(self, method: str, args: tuple) -> None:
        """A membership command seen by the Raft thread, decoded on the loop."""
        try:
            command = decode(method, args)
        except Exception:  # refused by the apply as well; nobody to tell
            log.exception("membership command %s%r does not decode", method, args)
            return
        self._observe(command)


def _require_command(command) -> Command:
    if not isinstance(command, Command):
        raise TypeError(f"submit takes a metadata command (broker.controller.commands), "
                        f"not {command!r}")
    return command


class LocalStore(_StoreBase):
    """A lone broker's metadata: applied at once, persisted atomically per change
    (``metadata_file``: versioned JSON; an older pickled file is read once and
    rewritten as JSON on the next change).  Event-loop only."""

    controller_id: int

    def __init__(self, directory: str, node_id: int):
        super().__init__()
        self.path = metadata_path(directory)
        self.controller_id = node_id
        os.makedirs(directory, exist_ok=True)
        # True while the file is an older Raftwood's pickle (until the next change).
        self.upgrade_pending = False
        if os.path.exists(self.path):
            self.image, self.upgrade_pending = read_state(self.path)

    @property
    def is_controller(self) -> bool:
        return True

    @property
    def controller_term(self) -> int | None:
        return None  # one broker, one controller: nothing to fence

    async def start(self) -> None:
        self._publish(self.image.snapshot())

    async def stop(self) -> None:
        pass

    async def submit(self, command: Command, *, timeout_s: float = 10.0) -> Any:
        """Apply to a copy of the image; a change is written, then published.  A
        refusal (ApplyError) leaves image and file alone."""
        _require_command(command)
        state = self.image.snapshot()
        before = state.version
        result = command.apply(state)
        if state.version != before:
            write_state(self.path, state)
            self.upgrade_pending = False
            self._publish(state)
        self._observe(command)
        return result


class RaftStore(_StoreBase):
    """Metadata in a pysyncobj Raft group; the Raft leader is the controller.

    A broker whose ``node.id`` is in ``controller.quorum.voters`` starts as a voter;
    any other broker of the cluster starts as an **observer** (it receives the log
    and submits its commands through the leader, but does not vote).  The voter set
    then changes at run time (``add_voter`` / ``remove_voter``, AddRaftVoter and
    RemoveRaftVoter on the wire); each broker follows its own role: an observer the
    quorum added restarts its Raft node as a voter at the recorded address, a voter
    the quorum removed restarts as an observer.  Both keep the same journal, so the
    state survives the switch.  The role is written to ``quorum-role.json`` (next to the
    journal) once the switch is made and, once there, wins over ``controller.quorum.voters``
    at the next start: a broker restarted with its first configuration takes the part
    the quorum gave it, without waiting to learn it from a leader."""

    def __init__(self, directory: str, node_id: int, voters: dict[int, str],
                 append_entries_period_s: float = 0.05, tick_period_s: float = 0.02,
                 password: str | None = None, bind_address: str | None = None):
        super().__init__()
        if not voters:
            raise ValueError("controller.quorum.voters lists no voter")
        self.node_id = node_id
        self.voters = voters  # as configured: where the quorum was at first start
        self._directory = directory
        self._periods = (append_entries_period_s, tick_period_s)
        self._password = password  # controller.quorum.password: Raft traffic encrypted
        self._bind_address = bind_address  # controller.quorum.bind.address: own entry only
        self._syncobj = None
        self._consumer = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._role_task: asyncio.Task | None = None
        self._switching = False
        self._leaderless_since: float | None = None
        self._last_leader_seen: float | None = None
        self._role_lock = asyncio.Lock()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        os.makedirs(self._directory, exist_ok=True)
        own = self.voters.get(self.node_id)
        partners = [a for n, a in sorted(self.voters.items()) if n != self.node_id]
        remembered = self._read_role()
        if remembered is not None:
            own = remembered.get("address")
            partners = sorted(set(partners) | set(remembered.get("voters", []))
                              - {own, self.voters.get(self.node_id)})
        self._start_node(own, partners)
        self._role_task = asyncio.create_task(self._follow_role(), name="raft-role")

    def _start_node(self, own_address: str | None, partners: list[str]) -> None:
        self._syncobj, self._consumer = start_raft_node(
            own_address, partners, self._directory, self._periods,
            on_applied=self._on_applied_threadsafe, password=self._password,
            bind_address=self._bind_address
            if own_address == self.voters.get(self.node_id) else None)

    @property
    def _role_path(self) -> str:
        return os.path.join(self._directory, "quorum-role.json")

    def _read_role(self) -> dict | None:
        try:
            with open(self._role_path, encoding="utf-8") as f:
                document = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise ValueError(f"{self._role_path}: unreadable ({exc})") from exc
        return document

    def _write_role(self, own_address: str | None, voters: set[str]) -> None:
        document = {"role": "voter" if own_address else "observer", "address": own_address,
                    "voters": sorted(voters)}
        write_atomically(self._role_path, (json.dumps(document) + "\n").encode())

    async def stop(self) -> None:
        if self._role_task is not None:
            self._role_task.cancel()
            await asyncio.gather(self._role_task, return_exceptions=True)
            self._role_task = None
        async with self._role_lock:
            if self._syncobj is not None:
                syncobj, self._syncobj = self._syncobj, None
                await asyncio.get_running_loop().run_in_executor(
                    None, syncobj.destroy_synchronous)

    # -- the voter set ---------------------------------------------------------------

    @property
    def role(self) -> str:
        """"voter" or "observer" (this broker's part in the metadata quorum)."""
        syncobj = self._syncobj
        if syncobj is None:
            return "voter" if self.node_id in self.voters else "observer"
        return "observer" if syncobj.selfNode is None else "voter"

    def _id_of(self, address: str) -> int:
        for node_id, recorded in self.image.quorum_addresses.items():
            if recorded == address:
                return node_id
        for node_id, configured in self.voters.items():
            if configured == address and node_id not in self.image.quorum_addresses:
                return node_id
        return -1

    def voter_ids(self) -> dict[int, str]:
        """The current voter set as this broker knows it: node id → Raft address
        (-1 for an address no record names)."""
        syncobj = self._syncobj
        if syncobj is None:
            return {}
        return {self._id_of(address): address for address in sorted(voter_addresses(syncobj))}

    def quorum_status(self) -> dict:
        """This broker's view of the quorum (the status request's ``quorum``):
        role, leader, term, commit index, whether this broker leads, and per voter
        whether this broker is connected to it and, on the leader only, the last log
        index it holds (its match index; the leader's own: its last log index)."""
        syncobj = self._syncobj
        if syncobj is None:
            return {"role": self.role, "running": False}
        try:
            status = syncobj.getStatus()  # read while the Raft thread runs: retry once
        except RuntimeError:
            status = syncobj.getStatus()
        leading = syncobj._isLeader()
        try:  # the Raft thread appends meanwhile: an entry may be half there
            log_end = syncobj._SyncObj__getCurrentLogIndex()
        except (IndexError, TypeError):
            log_end = status["last_applied"]
        voters = []
        for node_id, address in sorted(self.voter_ids().items()):
            own = syncobj.selfNode is not None and address == syncobj.selfNode.address
            voters.append({
                "id": node_id, "address": address,
                "match_index": (log_end if own else
                                status.get(f"match_idx_server_{address}")) if leading else None,
                "connected": own or status.get(f"partner_node_status_server_{address}") == 2})
        return {"role": self.role, "running": True, "leader_id": self.controller_id,
                "leading": leading, "term": status["raft_term"],
                "commit_index": status["commit_idx"], "last_applied": status["last_applied"],
                "voters": voters,
                "observers_connected": status["readonly_nodes_count"] if leading else None}

    async def add_voter(self, node_id: int, address: str, timeout_s: float = 30.0) -> None:
        """Record ``node_id``'s Raft address, then add it to the voter set (committed
        when this returns).  The broker itself, an observer, then restarts its Raft
        node as a voter at that address (``_follow_role``).  ApplyError when refused."""
        current = self.voter_ids()
        if node_id in current:
            raise ApplyError("DUPLICATE_VOTER", f"broker {node_id} is a voter already")
        if address in current.values():
            raise ApplyError("DUPLICATE_VOTER", f"voter {current} already uses {address}")
        await self.submit(RecordVoter(node_id, address), timeout_s=timeout_s)
        await self._membership_change("add", address, timeout_s)

    async def remove_voter(self, node_id: int, timeout_s: float = 30.0) -> None:
        """On the quorum leader: mark ``node_id`` leaving, then remove it from the voter
        set (committed when this returns).  Refused (NOT_CONTROLLER) elsewhere, as
        the leader drops a removed voter's connection at once and a forwarded
        change's answer could be lost with it; the leader cannot remove itself
        (``hand_over_leadership`` first).  A removed broker that still runs steps
        down to an observer (``step_down``, or ``_follow_role``)."""
        if not self.is_controller:
            raise ApplyError("NOT_CONTROLLER", f"broker {self.node_id} does not lead the "
                                               "metadata quorum")
        current = self.voter_ids()
        address = current.get(node_id)
        if address is None:
            raise ApplyError("VOTER_NOT_FOUND", f"broker {node_id} is not a voter "
                                                f"(voters: {sorted(current)})")
        if len(current) == 1:
            raise ApplyError("INVALID_REQUEST", "the last voter cannot leave the quorum")
        if node_id == self.node_id:
            raise ApplyError("INVALID_REQUEST", "the quorum leader cannot remove itself: it "
                                                "hands leadership over first")
        await self.submit(RecordVoter(node_id, None), timeout_s=timeout_s)
        try:
            await self._membership_change("rem", address, timeout_s)
        except Exception:
            # Still a voter: take the leaving mark back, or it would step down to an
            # observer at its next leaderless moment.
            try:
                await self.submit(RecordVoter(node_id, address), timeout_s=timeout_s)
            except Exception:
                log.exception("could not restore voter %s's address", node_id)
            raise

    async def hand_over_leadership(self, timeout_s: float = 30.0) -> None:
        """Make another voter the quorum leader (Raft's TimeoutNow, to a follower that
        is caught up); returns once another leader is known."""
        if len(self.voter_ids()) == 1:
            raise ApplyError("INVALID_REQUEST", "the last voter cannot leave the quorum")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.is_controller:
            if loop.time() >= deadline:
                raise MetadataUnavailable("leadership was not handed over in time")
            self._syncobj.transferLeadership()  # denied until a follower is caught up
            await asyncio.sleep(0.2)
        while self.controller_id in (-1, self.node_id):
            if loop.time() >= deadline:
                raise MetadataUnavailable("no other leader was elected in time")
            await asyncio.sleep(RETRY_NO_LEADER_S)

    async def step_down(self) -> None:
        """This broker was removed from the voter set: carry on as an observer."""
        await self._switch_role(None)

    async def _membership_change(self, kind: str, address: str, timeout_s: float) -> None:
        """pysyncobj's add/remove, retried while no leader is known or the previous
        change is not committed yet (REQUEST_DENIED), until ``timeout_s``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            future = loop.create_future()

            def done(result, error, future=future):  # Raft thread
                loop.call_soon_threadsafe(_settle_membership, future, error)

            syncobj = self._syncobj
            if syncobj is not None:
                change = syncobj.addNodeToCluster if kind == "add" else \
                    syncobj.removeNodeFromCluster
                change(address, callback=done)
                finished, _ = await asyncio.wait({future}, timeout=max(0.0, deadline - loop.time()))
                if not finished:
                    future.cancel()
                    raise MetadataUnavailable(f"voter change {kind} {address}: no answer in time")
                error = future.result()
                if error == 0:
                    return
            if loop.time() + 0.2 >= deadline:
                raise MetadataUnavailable(f"voter change {kind} {address} refused "
                                          f"(pysyncobj reason {error if syncobj else 'stopped'})")
            await asyncio.sleep(0.2)

    async def _follow_role(self) -> None:
        """Every ROLE_CHECK_S: an observer the voter set now names steps up; a voter
        marked leaving that no leader talks to any more steps down."""
        while True:
            await asyncio.sleep(ROLE_CHECK_S)
            try:
                await self._check_role()
            except Exception:  # never let the role go unwatched
                log.exception("metadata quorum: checking broker %s's role failed",
                              self.node_id)

    async def _check_role(self) -> None:
        syncobj = self._syncobj
        if syncobj is None or self._switching:
            return
        self._warn_while_leaderless(syncobj)
        recorded = self.image.quorum_addresses
        if syncobj.selfNode is None:
            address = recorded.get(self.node_id)
            if address and address in voter_addresses(syncobj):
                await self._switch_role(address)
            return
        if self.node_id not in recorded or recorded[self.node_id] is not None:
            return
        if syncobj._getLeader() is not None:
            self._leaderless_since = None
            return
        now = asyncio.get_running_loop().time()
        self._leaderless_since = self._leaderless_since or now
        if now - self._leaderless_since >= LEFT_QUORUM_AFTER_S:
            await self._switch_role(None)

    def _warn_while_leaderless(self, syncobj) -> None:
        """Every NO_LEADER_WARNING_S without a quorum leader, a warning naming the voters
        configured and the voters the Raft log holds: the voter set lives in the log, so
        brokers restarted on other Raft addresses than the cluster was created with, or
        an observer pointed at voters that left, find no quorum."""
        now = asyncio.get_running_loop().time()
        if syncobj._getLeader() is not None or self._last_leader_seen is None:
            self._last_leader_seen = now
            return
        if now - self._last_leader_seen < NO_LEADER_WARNING_S:
            return
        self._last_leader_seen = now
        log.warning("metadata quorum: no leader heard from for %.0f s; this broker is %s, "
                    "controller.quorum.voters lists %s, the Raft log names the voters %s. "
                    "The voter set lives in the log: start brokers on the Raft addresses "
                    "the cluster was created with, and new brokers with the current voters "
                    "(`raftwood quorum` prints them)", NO_LEADER_WARNING_S, self.role,
                    ",".join(f"{n}@{a}" for n, a in sorted(self.voters.items())),
                    sorted(voter_addresses(syncobj)))

    async def _switch_role(self, own_address: str | None) -> None:
        """Restart the Raft node as a voter at ``own_address``, or as an observer
        (None), on the same journal.  Commands submitted meanwhile wait (``submit``
        retries while no node runs)."""
        async with self._role_lock:
            syncobj = self._syncobj
            if syncobj is None or (syncobj.selfNode is None) == (own_address is None):
                return
            self._switching = True
            try:
                known = voter_addresses(syncobj)
                self._syncobj = None
                await asyncio.get_running_loop().run_in_executor(
                    None, syncobj.destroy_synchronous)
                partners = sorted(known - {own_address} - (
                    {syncobj.selfNode.address} if syncobj.selfNode is not None else set()))
                log.info("metadata quorum: broker %s restarts its Raft node as %s",
                         self.node_id, f"a voter at {own_address}" if own_address else
                         "an observer")
                try:
                    self._start_node(own_address, partners)
                except Exception:
                    log.exception("metadata quorum: broker %s could not restart its Raft "
                                  "node; back in its previous role", self.node_id)
                    previous = syncobj.selfNode.address if syncobj.selfNode else None
                    self._start_node(previous, sorted(known - {previous}))
                    return
                self._write_role(own_address, set(partners))
            finally:
                self._switching = False
                self._leaderless_since = None

    @property
    def controller_id(self) -> int:
        leader = self._syncobj._getLeader() if self._syncobj else None
        if leader is None:
            return -1
        return self._id_of(getattr(leader, "address", str(leader)))

    @property
    def is_controller(self) -> bool:
        return self._syncobj is not None and self._syncobj._isLeader()

    @property
    def controller_term(self) -> int | None:
        """The Raft term this node leads in, or None when it is not the leader.  Read it
        before deciding, pass it to ``submit``: the decision is refused if leadership
        moved in between."""
        syncobj = self._syncobj
        if syncobj is None or not syncobj._isLeader():
            return None
        return syncobj.raftCurrentTerm

    def _on_applied_threadsafe(self, method: str, args: tuple, image: ClusterState | None):
        """Raft thread: hand the new image (if any) and the command to the loop."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if image is not None:
            loop.call_soon_threadsafe(self._publish, image)
        if method in MEMBERSHIP_METHODS:
            loop.call_soon_threadsafe(self._observe_wire, method, args)

    async def submit(self, command: Command, *, timeout_s: float = 10.0) -> Any:
        """Apply through Raft.  While no leader is known (an election, or this node cut
        off) the command is submitted again until ``timeout_s``: pysyncobj refused it
        before appending it anywhere, so a retry cannot apply it twice.  Any other
        failure is MetadataUnavailable at once (the outcome may be unknown)."""
        wire = _require_command(command).to_wire()
        method = wire[0]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            if self._syncobj is None:
                if self._loop is None or self._role_task is None:
                    raise MetadataUnavailable("the metadata quorum is not running")
                if loop.time() + RETRY_NO_LEADER_S >= deadline:
                    raise MetadataUnavailable(f"{method}: the Raft node is restarting")
                await asyncio.sleep(RETRY_NO_LEADER_S)  # switching role
                continue
            try:
                outcome = await self._submit_once(wire, deadline - loop.time())
            except _NoLeader as exc:
                if loop.time() + RETRY_NO_LEADER_S >= deadline:
                    raise MetadataUnavailable(f"{method}: {exc} for {timeout_s}s") from None
                await asyncio.sleep(RETRY_NO_LEADER_S)
                continue
            if outcome[0] == "error":
                raise ApplyError(outcome[1], outcome[2])
            return outcome[1]

    async def _submit_once(self, wire: tuple, timeout_s: float):
        """Send the wire form ``(method, args, controller_term)`` once."""
        method, args, controller_term = wire
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def done(result, error):  # Raft thread
            loop.call_soon_threadsafe(_settle, future, result, error)

        consumer = self._consumer
        consumer.command(method, args, controller_term, callback=done)
        # Not asyncio.wait_for: on Python 3.11 it swallows a cancellation that arrives
        # when the future is already settled (gh-86296), and a cancelled heartbeat loop
        # then runs on, hanging the broker's shutdown.  asyncio.wait never eats it.
        try:
            finished, _ = await asyncio.wait({future}, timeout=max(0.0, timeout_s))
        finally:
            if not future.done():
                future.cancel()  # timed out or cancelled: a late answer is ignored
        if not finished:
            raise MetadataUnavailable(f"{method}: no quorum answered in time")
        return future.result()


def _settle_membership(future: asyncio.Future, error) -> None:
    if not future.done():
        future.set_result(error)


class _NoLeader(Exception):
    """pysyncobj refused a command before appending it (no leader known)."""


def _settle(future: asyncio.Future, result, error) -> None:
    if future.done():
        return
    if error in RETRIABLE_FAILURES:
        future.set_exception(_NoLeader(f"no Raft leader (reason {error})"))
    elif error != 0 or result is None:
        future.set_exception(MetadataUnavailable(f"raft refused the command (reason {error})"))
    else:
        future.set_result(result)


def open_store(config) -> LocalStore | RaftStore:
    """The store this broker's config asks for (voters absent: a lone broker)."""
    directory = os.path.join(config["metadata.log.dir"] or config["log.dirs"],
                             "__cluster_metadata")
    voters_text = config["controller.quorum.voters"]
    if not voters_text:
        return LocalStore(directory, config.node_id)
    return RaftStore(directory, config.node_id, parse_voters(voters_text),
                     password=quorum_password(config),
                     bind_address=config["controller.quorum.bind.address"].strip() or None)
