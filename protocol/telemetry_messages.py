"""GetTelemetrySubscriptions (API 71) and PushTelemetry (API 72): KIP-714's client
metrics (pure).

kafka-python 3.0.12 ships neither; both are built by its JSON-schema metaclass from the
layouts in ``protocol/schemas/`` (Kafka 4.x's field lists, version 0 of each, flexible).
``PushTelemetryRequest.Metrics`` is an OpenTelemetry ``MetricsData`` protobuf, compressed
with ``CompressionType`` (Kafka's record codec ids, 0 none).  kafka-python has no type
stubs, so mypy sees ``ApiMessage`` as Any and the metaclass keyword as unknown: each class
line says so.
"""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from . import schemas


class GetTelemetrySubscriptionsRequest(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class GetTelemetrySubscriptionsResponse(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class PushTelemetryRequest(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


class PushTelemetryResponse(ApiMessage, load_json=schemas):  # type: ignore[misc, call-arg]
    pass


__all__ = ["GetTelemetrySubscriptionsRequest", "GetTelemetrySubscriptionsResponse",
           "PushTelemetryRequest", "PushTelemetryResponse"]
