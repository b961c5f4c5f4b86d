"""ShareFetch (API 78) and ShareAcknowledge (API 79), KIP-932's partition-side APIs (pure).

kafka-python 3.0.12 has no classes for them; these are kafka-python messages built by
its own metaclass from the JSON layouts in ``protocol/schemas/`` (Kafka's message
schemas, Kafka 4.2's valid versions 1-2: v2 adds ShareAcquireMode and the RENEW
acknowledge type of KIP-1206 and KIP-1222).  Both APIs are flexible in every version.

kafka-python has no type stubs, so mypy sees ``ApiMessage`` as Any and the metaclass
keyword as unknown: each class line says so.
"""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from . import schemas


class ShareFetchRequest(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class ShareFetchResponse(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class ShareAcknowledgeRequest(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class ShareAcknowledgeResponse(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


__all__ = ["ShareAcknowledgeRequest", "ShareAcknowledgeResponse", "ShareFetchRequest",
           "ShareFetchResponse"]
