"""ShareStateClient: a share-partition leader's ReadShareGroupState / WriteShareGroupState
calls to the broker leading the key's ``__share_group_state`` partition (KIP-932), and
the group coordinator's ReadShareGroupStateSummary (v1) for DescribeShareGroupOffsets.

One connection per coordinator broker, on the inter-broker listener with its security,
used by one request at a time (``broker/client/interbroker.py``); a lost connection or a
coordinator with no live broker answers COORDINATOR_NOT_AVAILABLE, which the persister
retries.  Event-loop only.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from protocol.errors import ErrorCode
from protocol.share_state_messages import (
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)

from ..client.interbroker import InterBrokerChannels
from ..security.client import inter_broker_security
from .partition import RecordState, StateBatch
from .records import ShareSnapshot, ShareSummary

REQUEST_TIMEOUT_S = 10.0
SUMMARY_VERSION = 1
ReadTopic = ReadShareGroupStateRequest.ReadStateData
SummaryTopic = ReadShareGroupStateSummaryRequest.ReadStateSummaryData
WriteTopic = WriteShareGroupStateRequest.WriteStateData
WritePartition = WriteTopic.PartitionData


def _split(key: str) -> tuple[str, uuid.UUID, int]:
    """(group, topic id, partition) of ``"group:topicId:partition"`` (the group may hold
    colons: the last two fields are split off)."""
    group, topic_id, partition = key.rsplit(":", 2)
    return group, uuid.UUID(topic_id), int(partition)


class ShareStateClient:
    """Sends one key's reads and writes to its coordinator; ``leader_for(key)`` is the
    share coordinator's view of who leads the key's state partition."""

    def __init__(self, config: Any, image: Callable[[], Any],
                 leader_for: Callable[[str], int]) -> None:
        self.node_id = config.node_id
        self._image = image
        self._leader_for = leader_for
        self.channels = InterBrokerChannels(
            image, inter_broker_security(config), f"raftwood-share-{self.node_id}",
            REQUEST_TIMEOUT_S, f"[ShareStateClient broker={self.node_id}]")

    async def _call(self, key: str, request: Any, response_class: Any) -> Any | None:
        """The key's coordinator's answer; None when it has no live (unfenced) broker or
        the exchange failed (logged)."""
        broker_id = self._leader_for(key)
        info = self._image().brokers.get(broker_id)
        if info is None or info.fenced:
            return None
        return await self.channels.request(broker_id, request, response_class)

    async def shutdown(self) -> None:
        await self.channels.shutdown()

    async def read(self, key: str) -> tuple[ErrorCode, ShareSnapshot | None]:
        group, topic_id, index = _split(key)
        request = ReadShareGroupStateRequest[0](group_id=group, topics=[ReadTopic(
            topic_id=topic_id, partitions=[ReadTopic.PartitionData(
                partition=index, leader_epoch=-1)])])
        response = await self._call(key, request, ReadShareGroupStateResponse)
        if response is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        result = response.results[0].partitions[0]
        if result.error_code != ErrorCode.NONE:
            return ErrorCode(result.error_code), None
        if result.start_offset < 0:
            return ErrorCode.NONE, None
        batches = tuple(StateBatch(b.first_offset, b.last_offset,
                                   RecordState(b.delivery_state), b.delivery_count)
                        for b in result.state_batches)
        return ErrorCode.NONE, ShareSnapshot(-1, result.state_epoch, result.start_offset,
                                             batches)

    async def read_summary(self, key: str) -> tuple[ErrorCode, ShareSummary | None]:
        group, topic_id, index = _split(key)
        request = ReadShareGroupStateSummaryRequest[SUMMARY_VERSION](
            group_id=group, topics=[SummaryTopic(topic_id=topic_id, partitions=[
                SummaryTopic.PartitionData(partition=index, leader_epoch=-1)])])
        response = await self._call(key, request, ReadShareGroupStateSummaryResponse)
        if response is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        result = response.results[0].partitions[0]
        if result.error_code != ErrorCode.NONE:
            return ErrorCode(result.error_code), None
        if result.start_offset < 0:
            return ErrorCode.NONE, None
        return ErrorCode.NONE, ShareSummary(result.start_offset, result.leader_epoch,
                                            result.delivery_complete_count)

    async def write(self, key: str, snapshot: ShareSnapshot | None) -> ErrorCode:
        if snapshot is None:  # deleting state is the coordinator's own (not sent)
            return ErrorCode.NONE
        group, topic_id, index = _split(key)
        request = WriteShareGroupStateRequest[0](group_id=group, topics=[WriteTopic(
            topic_id=topic_id, partitions=[WritePartition(
                partition=index, state_epoch=snapshot.seq,
                leader_epoch=snapshot.leader_epoch, start_offset=snapshot.start_offset,
                state_batches=[WritePartition.StateBatch(
                    first_offset=b.first_offset, last_offset=b.last_offset,
                    delivery_state=int(b.state), delivery_count=b.delivery_count)
                    for b in snapshot.batches])])])
        response = await self._call(key, request, WriteShareGroupStateResponse)
        if response is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode(response.results[0].partitions[0].error_code)
