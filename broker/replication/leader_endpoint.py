"""What a replica fetcher needs from a partition leader (Kafka's LeaderEndPoint).

The fetcher (``fetcher.py``) decides what to ask and what to do with the answers; an
endpoint only carries the questions to one leader broker and brings the answers back,
as plain values:

* ``fetch(partitions, session)``: one Fetch for several partitions, each from its fetch
  offset, in a fetch session (KIP-227) or none; the answer per partition carries an
  error code, the leader's high watermark and log start offset, and the batches
  exactly as the leader stored them (in a session, only partitions with news);
* ``offsets_for_leader_epoch(partitions)``: for each partition, where the leader's log
  ends for the epoch asked about (KIP-101/279);
* ``close()``: drop the connection; the next request opens another.

``KafkaLeaderEndpoint`` speaks the Kafka protocol over an ``AsyncConnection`` (Fetch v11,
OffsetForLeaderEpoch v3, replica_id = our node id).  Tests use a fake with the same
methods (tests/unit/replication/fake_leader.py).  A leader that cannot be reached is
``LeaderUnavailable``; every other outcome is an answer, errors included.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kafka.protocol.consumer import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

from protocol.hot_requests import FetchRequestOut, FetchResponseIn

from ..client.kafka_client import AsyncConnection, ConnectionFailed

if TYPE_CHECKING:
    from ..security.client import ClientSecurity

FETCH_VERSION = 11
EPOCH_VERSION = 3
EpochTopic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
EpochPartition = EpochTopic.OffsetForLeaderPartition

Key = tuple[str, int]


class LeaderUnavailable(Exception):
    """The leader could not be reached, or dropped the connection (retry later)."""


# Not frozen, these four: they are built per fetch (the first three per partition), and a
# frozen dataclass's __init__ costs an object.__setattr__ call per field.
@dataclass(slots=True)
class PartitionFetch:
    """One partition of a Fetch: read from ``fetch_offset`` (our log end offset)."""

    topic: str
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    log_start_offset: int
    max_bytes: int


@dataclass(slots=True)
class FetchedData:
    """The leader's answer for one partition (Kafka's FetchResponse PartitionData)."""

    error_code: int
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""


@dataclass(slots=True)
class FetchResult:
    """A whole Fetch answer: a request-level ``error_code`` (then ``partitions`` is
    empty), else one entry per partition the leader answered for; ``session_id`` is
    the fetch session the answer belongs to (0: none)."""

    error_code: int
    partitions: dict[Key, FetchedData]
    session_id: int = 0


@dataclass(slots=True)
class SessionFetch:
    """The fetch session part of a Fetch (KIP-227, see fetch_sessions.FollowerSession):
    the session and epoch, and the partitions the session forgets."""

    session_id: int
    epoch: int
    forgotten: list[Key]


@dataclass(frozen=True)
class EpochQuery:
    """OffsetForLeaderEpoch for one partition: where does ``leader_epoch`` end?"""

    topic: str
    partition: int
    current_leader_epoch: int
    leader_epoch: int


@dataclass(frozen=True)
class EpochEndOffset:
    """The leader's answer: its largest epoch <= the one asked about and where that
    epoch ends; (-1, -1) when it has no such epoch (UNDEFINED)."""

    error_code: int
    leader_epoch: int
    end_offset: int


class LeaderEndpoint(Protocol):
    """One leader broker, seen from a fetcher.  Event-loop only; one request at a time
    (the fetcher's loop never overlaps its requests)."""

    def ready(self) -> bool:
        """False while the leader cannot be addressed at all (its address is unknown):
        the fetcher then backs off without asking."""

    async def fetch(self, partitions: list[PartitionFetch],
                    session: SessionFetch | None = None) -> FetchResult:
        """In ``session`` (None: sessionless).  Raises LeaderUnavailable."""

    async def offsets_for_leader_epoch(self, partitions: list[EpochQuery]
                                       ) -> dict[Key, EpochEndOffset]:
        """Raises LeaderUnavailable."""

    async def close(self) -> None:
        """Idempotent; a later request reconnects."""


EndpointFactory = Callable[[int], LeaderEndpoint]  # leader id -> endpoint


@dataclass(frozen=True)
class FetchSettings:
    """The request-level fields of a follower's Fetch (replica.fetch.* configs)."""

    wait_max_ms: int
    response_max_bytes: int
    request_timeout_s: float
    security: ClientSecurity | None = None  # of the inter-broker listener (None: PLAINTEXT)


class KafkaLeaderEndpoint:
    """A leader reached over the Kafka protocol.  The leader's address is looked up
    (``broker_address(leader_id)``) before each request, and the connection reopened
    when it changed.  Event-loop only; the fetcher of ``leader_id`` is its only caller."""

    def __init__(self, node_id: int, leader_id: int,
                 broker_address: Callable[[int], tuple[str, int] | None],
                 settings: FetchSettings) -> None:
        self.node_id = node_id
        self.leader_id = leader_id
        self.broker_address = broker_address
        self.settings = settings
        self.connection: AsyncConnection | None = None

    def ready(self) -> bool:
        return self.broker_address(self.leader_id) is not None

    async def fetch(self, partitions: list[PartitionFetch],
                    session: SessionFetch | None = None) -> FetchResult:
        # Encoded and decoded by hand (protocol/hot_requests.py): one round trip per
        # acknowledged batch on every follower.
        request = FetchRequestOut(
            FETCH_VERSION, self.node_id, self.settings.wait_max_ms, 1,
            self.settings.response_max_bytes,
            [(p.topic, p.partition, p.current_leader_epoch, p.fetch_offset,
              p.log_start_offset, p.max_bytes) for p in partitions],
            *((session.session_id, session.epoch, session.forgotten) if session else ()))
        response = await self._request(request, FetchResponseIn)
        if response.error_code != 0:
            return FetchResult(response.error_code, {}, response.session_id)
        return FetchResult(0, {
            (topic.topic, data.partition_index): FetchedData(
                data.error_code, data.high_watermark, data.log_start_offset,
                data.records or b"")
            for topic in response.responses for data in topic.partitions},
            response.session_id)

    async def offsets_for_leader_epoch(self, partitions: list[EpochQuery]
                                       ) -> dict[Key, EpochEndOffset]:
        by_topic: dict[str, list[Any]] = {}  # EpochPartition (kafka-python) entries
        for p in partitions:
            by_topic.setdefault(p.topic, []).append(EpochPartition(
                partition=p.partition, current_leader_epoch=p.current_leader_epoch,
                leader_epoch=p.leader_epoch))
        request = OffsetForLeaderEpochRequest[EPOCH_VERSION](
            replica_id=self.node_id,
            topics=[EpochTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])
        response = await self._request(request, OffsetForLeaderEpochResponse)
        return {(topic.topic, answer.partition): EpochEndOffset(
                    answer.error_code, answer.leader_epoch, answer.end_offset)
                for topic in response.topics for answer in topic.partitions}

    async def close(self) -> None:
        if self.connection is not None:
            await self.connection.close()

    async def _request(self, request: Any, response_class: Any) -> Any:
        """``request``'s answer decoded as ``response_class`` (kafka-python messages)."""
        address = self.broker_address(self.leader_id)
        if address is None:
            raise LeaderUnavailable(f"broker {self.leader_id} has no known address")
        conn = self.connection
        if conn is None or (conn.host, conn.port) != address:
            if conn is not None:
                await conn.close()
            conn = self.connection = AsyncConnection(
                address[0], address[1], f"raftwood-fetcher-{self.node_id}",
                timeout_s=self.settings.request_timeout_s, security=self.settings.security)
        try:
            return await conn.request(request, response_class)
        except ConnectionFailed as exc:
            raise LeaderUnavailable(str(exc)) from exc
