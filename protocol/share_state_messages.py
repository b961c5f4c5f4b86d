"""ReadShareGroupState (API 84) and WriteShareGroupState (API 85): the share-partition
leader's calls to the share coordinator (KIP-932), between brokers only (pure); and
ReadShareGroupStateSummary (API 87): the group coordinator's read of a share partition's
start offset at its share coordinator (v1 adds DeliveryCompleteCount, KIP-1226).

kafka-python 3.0.12 has no classes for them; these are built by its metaclass from the
JSON layouts in ``protocol/schemas/`` (v0, flexible).  Raftwood's brokers are the only
peers: the layouts follow Kafka's field lists for the fields Raftwood uses, and
StateEpoch carries Raftwood's snapshot sequence (broker/share/records.py).

kafka-python has no type stubs, so mypy sees ``ApiMessage`` as Any and the metaclass
keyword as unknown: each class line says so.
"""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from . import schemas


class ReadShareGroupStateRequest(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class ReadShareGroupStateResponse(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class ReadShareGroupStateSummaryRequest(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class ReadShareGroupStateSummaryResponse(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class WriteShareGroupStateRequest(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class WriteShareGroupStateResponse(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


__all__ = ["ReadShareGroupStateRequest", "ReadShareGroupStateResponse",
           "ReadShareGroupStateSummaryRequest", "ReadShareGroupStateSummaryResponse",
           "WriteShareGroupStateRequest", "WriteShareGroupStateResponse"]
