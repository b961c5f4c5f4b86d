"""ShareGroupHeartbeat (API 76), ShareGroupDescribe (API 77) and the share-group offsets
APIs Describe/Alter/DeleteShareGroupOffsets (90, 91, 92): KIP-932's group side (pure).

kafka-python 3.0.12 ships no share-group classes; these are built by its own JSON-schema
metaclass from the layouts in ``protocol/schemas/`` (Kafka 4.2's field lists: version 1
of 76 and 77, version 0 having been Kafka 4.0's early access; version 0 of 90-92).  All are
flexible in every version.  The heartbeat's ``Assignment`` is a nullable struct (int8 -1 for null).
kafka-python has no type stubs, so mypy sees ``ApiMessage`` as Any and the metaclass
keyword as unknown: each class line says so.
"""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from . import schemas


class ShareGroupHeartbeatRequest(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class ShareGroupHeartbeatResponse(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class ShareGroupDescribeRequest(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class ShareGroupDescribeResponse(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class AlterShareGroupOffsetsRequest(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class AlterShareGroupOffsetsResponse(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class DeleteShareGroupOffsetsRequest(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class DeleteShareGroupOffsetsResponse(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


__all__ = ["AlterShareGroupOffsetsRequest", "AlterShareGroupOffsetsResponse",
           "DeleteShareGroupOffsetsRequest", "DeleteShareGroupOffsetsResponse",
           "DescribeShareGroupOffsetsRequest", "DescribeShareGroupOffsetsResponse",
           "ShareGroupDescribeRequest", "ShareGroupDescribeResponse",
           "ShareGroupHeartbeatRequest", "ShareGroupHeartbeatResponse"]
