"""How metadata commands reach the ClusterState: Raft (pysyncobj) or a local file.

Both stores offer the same event-loop interface:

* ``await store.submit(method, *args)`` applies ``ClusterState.apply_<method>`` in log
  order and returns its result (raises ApplyError when refused, MetadataUnavailable
  when no quorum answers in time); ``controller_term=store.controller_term`` marks a
  controller decision, refused unless committed in the term it was decided in;
* ``store.image`` is the newest applied state by Raft log position
  (``ClusterState.position``), a private copy owned by the loop;
* listeners registered with ``add_listener`` get every new image (only when the
  state's version moved) and ``add_membership_observer`` sees every registration and heartbeat command.

Threads: pysyncobj applies commands on its own thread.  Nothing there touches loop
state: the apply makes a snapshot and hands it over with ``call_soon_threadsafe``.
Because the snapshot is posted before the command's result, a caller resuming from
``submit`` already sees the image that contains its change.
"""
from __future__ import annotations

import asyncio
import logging
import os
import pickle
from typing import Any, Callable

from storage.checkpoint import write_atomically

from .raft import RETRIABLE_FAILURES, start_raft_node
from .state import ApplyError, ClusterState

log = logging.getLogger(__name__)

Listener = Callable[[ClusterState], None]
MEMBERSHIP_COMMANDS = ("register_broker", "heartbeat")
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
        self._membership_observers: list[Callable] = []

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def add_membership_observer(self, observer: Callable[[str, tuple], None]) -> None:
        """``observer(method, args)`` for every applied register_broker / heartbeat."""
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

    def _observe(self, method: str, args: tuple) -> None:
        if method in MEMBERSHIP_COMMANDS:
            for observer in list(self._membership_observers):
                observer(method, args)


class LocalStore(_StoreBase):
    """A lone broker's metadata: applied at once, persisted atomically per change.
    Event-loop only."""

    controller_id: int

    def __init__(self, directory: str, node_id: int):
        super().__init__()
        self.path = os.path.join(directory, "metadata.state")
        self.controller_id = node_id
        os.makedirs(directory, exist_ok=True)
        if os.path.exists(self.path):
            with open(self.path, "rb") as f:
                self.image = pickle.load(f)

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

    async def submit(self, method: str, *args: Any, timeout_s: float = 10.0,
                     controller_term: int | None = None) -> Any:
        state = self.image.snapshot()
        before = state.version
        result = getattr(state, "apply_" + method)(*args)
        if state.version != before:
            write_atomically(self.path, pickle.dumps(state))
            self._publish(state)
        self._observe(method, args)
        return result


class RaftStore(_StoreBase):
    """Metadata in a pysyncobj Raft group; the Raft leader is the controller."""

    def __init__(self, directory: str, node_id: int, voters: dict[int, str],
                 append_entries_period_s: float = 0.02, tick_period_s: float = 0.01):
        super().__init__()
        if node_id not in voters:
            raise ValueError(f"node.id {node_id} is not in controller.quorum.voters {voters}")
        self.node_id = node_id
        self.voters = voters
        self._by_address = {address: node for node, address in voters.items()}
        self._directory = directory
        self._periods = (append_entries_period_s, tick_period_s)
        self._syncobj = None
        self._consumer = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        os.makedirs(self._directory, exist_ok=True)
        partners = [a for n, a in sorted(self.voters.items()) if n != self.node_id]
        self._syncobj, self._consumer = start_raft_node(
            self.voters[self.node_id], partners, self._directory, self._periods,
            on_applied=self._on_applied_threadsafe)

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
        if method in MEMBERSHIP_COMMANDS:
            loop.call_soon_threadsafe(self._observe, method, args)

    async def submit(self, method: str, *args: Any, timeout_s: float = 10.0,
                     controller_term: int | None = None) -> Any:
        """Apply through Raft.  While no leader is known (an election, or this node cut
        off) the command is submitted again until ``timeout_s``: pysyncobj refused it
        before appending it anywhere, so a retry cannot apply it twice.  Any other
        failure is MetadataUnavailable at once (the outcome may be unknown)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            if self._syncobj is None:
                raise MetadataUnavailable("the metadata quorum is not running")
            try:
                outcome = await self._submit_once(method, args, controller_term,
                                                  deadline - loop.time())
            except _NoLeader as exc:
                if loop.time() + RETRY_NO_LEADER_S >= deadline:
                    raise MetadataUnavailable(f"{method}: {exc} for {timeout_s}s") from None
                await asyncio.sleep(RETRY_NO_LEADER_S)
                continue
            if outcome[0] == "error":
                raise ApplyError(outcome[1], outcome[2])
            return outcome[1]

    async def _submit_once(self, method: str, args: tuple, controller_term, timeout_s: float):
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
    return RaftStore(directory, config.node_id, parse_voters(voters_text))
