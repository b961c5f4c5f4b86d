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
import logging
import os
from typing import Any, Callable

from ..config import quorum_password
from .commands import MEMBERSHIP_METHODS, Command, Heartbeat, RegisterBroker, decode
from .metadata_file import metadata_path, read_state, write_state
from .raft import RETRIABLE_FAILURES, start_raft_node
from .state import ApplyError, ClusterState

log = logging.getLogger(__name__)

Listener = Callable[[ClusterState], None]
MembershipObserver = Callable[["RegisterBroker | Heartbeat"], None]
RETRY_NO_LEADER_S = 0.05


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
    """Metadata in a pysyncobj Raft group; the Raft leader is the controller."""

    def __init__(self, directory: str, node_id: int, voters: dict[int, str],
                 append_entries_period_s: float = 0.02, tick_period_s: float = 0.01,
                 password: str | None = None):
        super().__init__()
        if node_id not in voters:
            raise ValueError(f"node.id {node_id} is not in controller.quorum.voters {voters}")
        self.node_id = node_id
        self.voters = voters
        self._by_address = {address: node for node, address in voters.items()}
        self._directory = directory
        self._periods = (append_entries_period_s, tick_period_s)
        self._password = password  # controller.quorum.password: Raft traffic encrypted
        self._syncobj = None
        self._consumer = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        os.makedirs(self._directory, exist_ok=True)
        partners = [a for n, a in sorted(self.voters.items()) if n != self.node_id]
        self._syncobj, self._consumer = start_raft_node(
            self.voters[self.node_id], partners, self._directory, self._periods,
            on_applied=self._on_applied_threadsafe, password=self._password)

    async def stop(self) -> None:
        if self._syncobj is not None:
            syncobj, self._syncobj = self._syncobj, None
            await asyncio.get_running_loop().run_in_executor(None, syncobj.destroy_synchronous)

    @property
    def controller_id(self) -> int:
        leader = self._syncobj._getLeader() if self._syncobj else None
        if leader is None:
            return -1
        return self._by_address.get(getattr(leader, "address", str(leader)), -1)

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
                raise MetadataUnavailable("the metadata quorum is not running")
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

        self._consumer.command(method, args, controller_term, callback=done)
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
                     password=quorum_password(config))
