"""Produce and Fetch requests decoded by hand, and the follower's Fetch encoded and its
response decoded by hand (pure, the hot path).

Every acknowledged record passes through a Produce request and, on its way to each
follower and consumer, a Fetch request.  kafka-python's decoder builds a message object
per topic and partition through generic field codecs; these decoders read the same bytes
with ``struct`` into small slotted objects carrying kafka-python's attribute names, so the
handlers cannot tell them apart.  Each fixed-size run of fields (a partition's header
fields, and in non-flexible versions the length or count prefix after them) is read with
one precompiled ``struct.Struct`` per version; strings, bytes and arrays keep their loops.
Record sets are handed over as memoryviews of the frame, not copied.  Byte-for-byte equivalence with
kafka-python (every served version, random requests, every truncation) is asserted by the unit
tests.

Layouts, from Kafka's ProduceRequest.json / FetchRequest.json (request header v1 up to the
first flexible version, v2 from it: Produce v9+, Fetch v12+; flexible versions use compact
strings/arrays/bytes and end every struct with tagged fields, which are skipped):

    Produce v3+: transactional_id nullable string, acks int16, timeout_ms int32,
      topic_data[]: name string, partition_data[]: index int32, records nullable bytes
    Fetch v4-v12: replica_id int32, max_wait_ms int32, min_bytes int32, max_bytes int32,
      isolation_level int8, session_id int32 (v7+), session_epoch int32 (v7+),
      topics[]: topic string, partitions[]: partition int32,
        current_leader_epoch int32 (v9+), fetch_offset int64, last_fetched_epoch int32
        (v12+), log_start_offset int64 (v5+), partition_max_bytes int32
      forgotten_topics_data[] (v7+): topic string, partitions[] int32
      rack_id string (v11+)

Errors: :class:`HotDecodeError` (a ValueError) for input that does not parse; the caller
turns it into CorruptRequest.

Size (about 750 lines): two requests and one response of the hot path, most of it their
layouts and per-version ``struct`` tables; they share the cursor and header readers,
which stay in this module so the decoders call them without another module lookup.
"""
from __future__ import annotations

import functools
import struct
from collections.abc import Sequence
from typing import Any

from .primitives import Buffer
from .primitives import uvarint as _uvarint

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id
# The fixed-size runs the decoders read with one ``unpack_from`` each.  A run may end with
# the length prefix of the string, bytes or array after it (non-flexible versions, where
# that prefix is fixed-size); the decoder then checks it as the field's own reader would.
_HEADER_RUN = struct.Struct(">hhih")  # ... and client_id's length
_ACKS_TIMEOUT = struct.Struct(">hi")
_ACKS_TIMEOUT_COUNT = struct.Struct(">hii")  # ... and topic_data's count
_INDEX_RECORDS = struct.Struct(">ii")  # a produced partition's index, records' length

PRODUCE_FLEXIBLE_FROM = 9
FETCH_FLEXIBLE_FROM = 12


class HotDecodeError(ValueError):
    """The bytes do not hold the request they claim to."""


class _Cursor:
    """Reads Kafka's types from ``data`` (a memoryview) at ``pos``; raises HotDecodeError
    on any underrun.

    ``run(codec)`` reads a fixed-size run of fields with one precompiled ``struct`` (the
    hot decoders' way: a partition's header fields in one ``unpack_from``); the length
    checks of strings, bytes and arrays read their prefix inline rather than through
    ``int16``/``int32``, so a field costs one call rather than a chain of them."""

    __slots__ = ("data", "pos", "end")

    def __init__(self, data: memoryview, pos: int = 0):
        self.data = data
        self.pos = pos
        self.end = len(data)

    def run(self, codec: struct.Struct) -> tuple[Any, ...]:
        pos = self.pos
        stop = pos + codec.size
        if stop > self.end:
            raise HotDecodeError(f"{codec.size} bytes wanted at {pos} of {self.end}")
        self.pos = stop
        return codec.unpack_from(self.data, pos)

    def int8(self) -> int:
        return self.run(_I8)[0]

    def int16(self) -> int:
        return self.run(_I16)[0]

    def int32(self) -> int:
        return self.run(_I32)[0]

    def int64(self) -> int:
        return self.run(_I64)[0]

    def uvarint(self) -> int:
        data, pos, end = self.data, self.pos, self.end
        if pos < end and data[pos] < 0x80:  # one byte: every length and count below 127
            self.pos = pos + 1
            return data[pos]
        value = shift = 0
        while True:
            if pos >= end:
                raise HotDecodeError("varint runs past the end")
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                self.pos = pos
                return value
            shift += 7
            if shift > 28:
                raise HotDecodeError("varint longer than 5 bytes")

    def _length(self, compact: bool, codec: struct.Struct) -> int:
        """The length prefix of a string, bytes or array: a uvarint (length + 1) when
        compact, else ``codec`` (int16 for strings, int32 for bytes and arrays)."""
        if compact:
            return self.uvarint() - 1
        pos = self.pos
        stop = pos + codec.size
        if stop > self.end:
            raise HotDecodeError(f"{codec.size} bytes wanted at {pos} of {self.end}")
        self.pos = stop
        return codec.unpack_from(self.data, pos)[0]

    def _take(self, n: int) -> memoryview:
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise HotDecodeError(f"{n} bytes wanted at {pos} of {self.end}")
        self.pos = pos + n
        return self.data[pos:pos + n]

    def string(self, compact: bool) -> str | None:
        return self.string_of(self._length(compact, _I16))

    def string_of(self, n: int) -> str | None:
        """The string whose length prefix ``n`` was read (as part of a run)."""
        if n < 0:
            if n == -1:
                return None
            raise HotDecodeError(f"string length {n}")
        pos = self.pos
        if pos + n > self.end:
            raise HotDecodeError(f"{n} bytes wanted at {pos} of {self.end}")
        self.pos = pos + n
        try:
            return str(self.data[pos:pos + n], "utf-8")
        except UnicodeDecodeError as exc:
            raise HotDecodeError(f"string is not UTF-8: {exc}") from exc

    def bytes_(self, compact: bool) -> memoryview | None:
        return self.bytes_of(self._length(compact, _I32))

    def bytes_of(self, n: int) -> memoryview | None:
        """The bytes whose length prefix ``n`` was read (as part of a run)."""
        if n < 0:
            if n == -1:
                return None
            raise HotDecodeError(f"bytes length {n}")
        pos = self.pos
        if pos + n > self.end:
            raise HotDecodeError(f"{n} bytes wanted at {pos} of {self.end}")
        self.pos = pos + n
        return self.data[pos:pos + n]

    def array_length(self, compact: bool) -> int:
        return self.count_of(self._length(compact, _I32))

    def count_of(self, n: int) -> int:
        """An array's element count ``n`` (read, possibly as part of a run), checked:
        null (-1) reads as 0, and every element takes at least one byte."""
        if n < -1:
            raise HotDecodeError(f"array length {n}")
        if n > self.end - self.pos:
            raise HotDecodeError(f"array of {n} elements in {self.end - self.pos} bytes")
        return n if n > 0 else 0

    # Requests: Kafka's schema forbids null in these fields, and its readers refuse it.

    def required_string(self, compact: bool) -> str:
        text = self.string_of(self._length(compact, _I16))
        if text is None:
            raise HotDecodeError("null where the schema requires a string")
        return text

    def required_array_length(self, compact: bool) -> int:
        n = self._length(compact, _I32)
        if n == -1:
            raise HotDecodeError("null where the schema requires an array")
        return self.count_of(n)

    def required_count_of(self, n: int) -> int:
        if n == -1:
            raise HotDecodeError("null where the schema requires an array")
        return self.count_of(n)

    def skip_tagged_fields(self) -> None:
        pos = self.pos
        if pos < self.end and self.data[pos] == 0:  # none: all a Kafka client sends
            self.pos = pos + 1
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())


class RequestHeader:
    __slots__ = ("request_api_key", "request_api_version", "correlation_id", "client_id")

    def __init__(self, api_key: int, api_version: int, correlation_id: int,
                 client_id: str | None) -> None:
        self.request_api_key = api_key
        self.request_api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id


def _header(cursor: _Cursor, flexible: bool) -> RequestHeader:
    api_key, api_version, correlation_id, client_id_length = cursor.run(_HEADER_RUN)
    client_id = cursor.string_of(client_id_length)  # the header's is never compact
    if flexible:
        cursor.skip_tagged_fields()
    return RequestHeader(api_key, api_version, correlation_id, client_id)


# -- Produce ---------------------------------------------------------------------------


class PartitionProduceData:
    __slots__ = ("index", "records")

    def __init__(self, index: int, records: memoryview | None) -> None:
        self.index = index
        self.records = records


class TopicProduceData:
    __slots__ = ("name", "partition_data")

    def __init__(self, name: str, partition_data: list[PartitionProduceData]):
        self.name = name
        self.partition_data = partition_data


class ProduceRequestBody:
    """A decoded Produce request (kafka-python's attribute names)."""

    __slots__ = ("header", "API_VERSION", "transactional_id", "acks", "timeout_ms",
                 "topic_data")
    header: RequestHeader
    API_VERSION: int
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[TopicProduceData]

    def expect_response(self) -> bool:
        return self.acks != 0

    def to_message(self) -> Any:
        """The same request as kafka-python's message object (tests, debugging)."""
        from kafka.protocol.producer import ProduceRequest
        data = ProduceRequest.TopicProduceData
        return ProduceRequest[self.API_VERSION](
            transactional_id=self.transactional_id, acks=self.acks, timeout_ms=self.timeout_ms,
            topic_data=[data(name=t.name, partition_data=[data.PartitionProduceData(
                index=p.index, records=None if p.records is None else bytes(p.records))
                for p in t.partition_data]) for t in self.topic_data])


def decode_produce(frame: Buffer, version: int) -> tuple[ProduceRequestBody, int]:
    """(body, position where it ended) of a Produce request v3+ frame (header included)."""
    flexible = version >= PRODUCE_FLEXIBLE_FROM
    cursor = _Cursor(memoryview(frame))
    body = ProduceRequestBody()
    body.header = _header(cursor, flexible)
    body.API_VERSION = version
    body.transactional_id = cursor.string(flexible)
    if flexible:
        body.acks, body.timeout_ms = cursor.run(_ACKS_TIMEOUT)
        topic_count = cursor.required_array_length(True)
    else:
        body.acks, body.timeout_ms, topic_count = cursor.run(_ACKS_TIMEOUT_COUNT)
        if topic_count == -1:
            raise HotDecodeError("null where the schema requires an array")
        topic_count = cursor.count_of(topic_count)
    topics = []
    for _ in range(topic_count):
        name = cursor.required_string(flexible)
        partitions = []
        for _ in range(cursor.required_array_length(flexible)):
            if flexible:
                index = cursor.int32()
                records = cursor.bytes_(True)
                cursor.skip_tagged_fields()
            else:
                index, size = cursor.run(_INDEX_RECORDS)
                records = cursor.bytes_of(size)
            partitions.append(PartitionProduceData(index, records))
        if flexible:
            cursor.skip_tagged_fields()
        topics.append(TopicProduceData(name, partitions))
    body.topic_data = topics
    if flexible:
        cursor.skip_tagged_fields()
    return body, cursor.pos


# -- Fetch -----------------------------------------------------------------------------


class FetchPartition:
    __slots__ = ("partition", "current_leader_epoch", "fetch_offset", "last_fetched_epoch",
                 "log_start_offset", "partition_max_bytes")

    def __init__(self, partition: int, current_leader_epoch: int, fetch_offset: int,
                 last_fetched_epoch: int, log_start_offset: int,
                 partition_max_bytes: int) -> None:
        self.partition = partition
        self.current_leader_epoch = current_leader_epoch
        self.fetch_offset = fetch_offset
        self.last_fetched_epoch = last_fetched_epoch
        self.log_start_offset = log_start_offset
        self.partition_max_bytes = partition_max_bytes


class FetchTopic:
    __slots__ = ("topic", "partitions")

    def __init__(self, topic: str, partitions: list[FetchPartition]):
        self.topic = topic
        self.partitions = partitions


class ForgottenTopic:
    __slots__ = ("topic", "partitions")

    def __init__(self, topic: str, partitions: list[int]):
        self.topic = topic
        self.partitions = partitions


class FetchRequestBody:
    """A decoded Fetch request (kafka-python's attribute names and defaults for fields
    the version lacks)."""

    __slots__ = ("header", "API_VERSION", "replica_id", "max_wait_ms", "min_bytes",
                 "max_bytes", "isolation_level", "session_id", "session_epoch", "topics",
                 "forgotten_topics_data", "rack_id")
    header: RequestHeader
    API_VERSION: int
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: list[FetchTopic]
    forgotten_topics_data: list[ForgottenTopic]
    rack_id: str

    def expect_response(self) -> bool:
        return True

    def to_message(self) -> Any:
        """The same request as kafka-python's message object (tests, debugging)."""
        from kafka.protocol.consumer import FetchRequest
        topic, forgotten = FetchRequest.FetchTopic, FetchRequest.ForgottenTopic
        return FetchRequest[self.API_VERSION](
            replica_id=self.replica_id, max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes,
            max_bytes=self.max_bytes, isolation_level=self.isolation_level,
            session_id=self.session_id, session_epoch=self.session_epoch,
            topics=[topic(topic=t.topic, partitions=[topic.FetchPartition(
                partition=p.partition, current_leader_epoch=p.current_leader_epoch,
                fetch_offset=p.fetch_offset, last_fetched_epoch=p.last_fetched_epoch,
                log_start_offset=p.log_start_offset, partition_max_bytes=p.partition_max_bytes)
                for p in t.partitions]) for t in self.topics],
            forgotten_topics_data=[forgotten(topic=f.topic, partitions=f.partitions)
                                   for f in self.forgotten_topics_data],
            rack_id=self.rack_id)


def _fetch_request_runs(version: int) -> tuple[struct.Struct, struct.Struct]:
    """(the fields after the header up to the topics' count, one partition's fields) of
    a Fetch request; the count is in the first run only when it is fixed-size."""
    top = ">iiiib" + ("ii" if version >= 7 else "") + ("" if version >= 12 else "i")
    partition = (">i" + ("i" if version >= 9 else "") + "q" + ("i" if version >= 12 else "")
                 + ("q" if version >= 5 else "") + "i")
    return struct.Struct(top), struct.Struct(partition)


_FETCH_REQUEST_RUNS = {version: _fetch_request_runs(version) for version in range(4, 13)}


def decode_fetch(frame: Buffer, version: int) -> tuple[FetchRequestBody, int]:
    """(body, position where it ended) of a Fetch request v4-v12 frame (header included)."""
    flexible = version >= FETCH_FLEXIBLE_FROM
    try:
        top_run, partition_run = _FETCH_REQUEST_RUNS[version]
    except KeyError:
        raise HotDecodeError(f"Fetch v{version} is not decoded here") from None
    cursor = _Cursor(memoryview(frame))
    body = FetchRequestBody()
    body.header = _header(cursor, flexible)
    body.API_VERSION = version
    top = cursor.run(top_run)
    if version >= 7:
        (body.replica_id, body.max_wait_ms, body.min_bytes, body.max_bytes,
         body.isolation_level, body.session_id, body.session_epoch) = top[:7]
    else:
        (body.replica_id, body.max_wait_ms, body.min_bytes, body.max_bytes,
         body.isolation_level) = top[:5]
        body.session_id, body.session_epoch = 0, -1
    topic_count = cursor.required_array_length(True) if flexible \
        else cursor.required_count_of(top[-1])
    topics = []
    for _ in range(topic_count):
        topic = cursor.required_string(flexible)
        partitions = []
        for _ in range(cursor.required_array_length(flexible)):
            fields = cursor.run(partition_run)
            if version >= 12:
                partition, current_leader_epoch, fetch_offset, last_fetched_epoch, \
                    log_start_offset, partition_max_bytes = fields
            elif version >= 9:
                partition, current_leader_epoch, fetch_offset, log_start_offset, \
                    partition_max_bytes = fields
                last_fetched_epoch = -1
            elif version >= 5:
                partition, fetch_offset, log_start_offset, partition_max_bytes = fields
                current_leader_epoch = last_fetched_epoch = -1
            else:
                partition, fetch_offset, partition_max_bytes = fields
                current_leader_epoch = last_fetched_epoch = log_start_offset = -1
            if flexible:
                cursor.skip_tagged_fields()
            partitions.append(FetchPartition(partition, current_leader_epoch, fetch_offset,
                                             last_fetched_epoch, log_start_offset,
                                             partition_max_bytes))
        if flexible:
            cursor.skip_tagged_fields()
        topics.append(FetchTopic(topic, partitions))
    body.topics = topics
    forgotten = []
    if version >= 7:
        for _ in range(cursor.required_array_length(flexible)):
            topic = cursor.required_string(flexible)
            forgotten.append(ForgottenTopic(topic, [
                cursor.int32() for _ in range(cursor.required_array_length(flexible))]))
            if flexible:
                cursor.skip_tagged_fields()
    body.forgotten_topics_data = forgotten
    body.rack_id = cursor.required_string(flexible) if version >= 11 else ""
    if flexible:
        cursor.skip_tagged_fields()
    return body, cursor.pos


# -- the Produce response ----------------------------------------------------------------


def encode_produce_response(version: int, correlation_id: int,
                            topics: list[tuple[str, list[tuple[Any, ...]]]],
                            throttle_time_ms: int = 0) -> bytes:
    """A framed Produce response v3+.  ``topics``: (name, [(index, error_code,
    base_offset, log_append_time_ms, log_start_offset, error_message), ...]).
    No record errors are ever sent (Raftwood rejects whole batches)."""
    flexible = version >= PRODUCE_FLEXIBLE_FROM
    partition_run = _PRODUCE_RESPONSE_PARTITION_V5 if version >= 5 else \
        _PRODUCE_RESPONSE_PARTITION_V2
    out = bytearray(_I32.pack(correlation_id))
    if flexible:
        out += b"\x00"
    out += _array_length(len(topics), flexible)
    for name, partitions in topics:
        out += _string(name, flexible)
        out += _array_length(len(partitions), flexible)
        for index, error_code, base_offset, append_time, log_start, message in partitions:
            if version >= 5:
                out += partition_run.pack(index, error_code, base_offset, append_time,
                                          log_start)
            else:
                out += partition_run.pack(index, error_code, base_offset, append_time)
            if version >= 8:
                out += _array_length(0, flexible)  # record_errors
                out += _nullable_string(message, flexible)
            if flexible:
                out += b"\x00"
        if flexible:
            out += b"\x00"
    out += _I32.pack(throttle_time_ms)
    if flexible:
        out += b"\x00"
    return _I32.pack(len(out)) + bytes(out)


# index, error_code, base_offset, log_append_time_ms (v2+), log_start_offset (v5+)
_PRODUCE_RESPONSE_PARTITION_V2 = struct.Struct(">ihqq")
_PRODUCE_RESPONSE_PARTITION_V5 = struct.Struct(">ihqqq")


def _array_length(n: int, compact: bool) -> bytes:
    return _uvarint(n + 1) if compact else _I32.pack(n)


@functools.lru_cache(maxsize=1024)
def _string(text: str, compact: bool) -> bytes:
    """``text`` with its length prefix.  Cached: every Fetch a follower sends and every
    Produce response carry the same few topic names and client ids."""
    raw = text.encode()
    return (_uvarint(len(raw) + 1) if compact else _I16.pack(len(raw))) + raw


def _nullable_string(text: str | None, compact: bool) -> bytes:
    if text is None:
        return b"\x00" if compact else _I16.pack(-1)
    return _string(text, compact)


# -- the follower's side of Fetch ----------------------------------------------------------


# replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, session_id and
# session_epoch (v7+) of the Fetch a follower sends
_FETCH_OUT_TOP = struct.Struct(">iiiib")
# the frame's size (filled in last), api_key, api_version, correlation_id
_SIZE_AND_HEADER = struct.Struct(">ihhi")
_FETCH_OUT_TOP_V7 = struct.Struct(">iiiibii")


class FetchRequestOut:
    """A Fetch request a follower sends, encoded by hand.  Quacks like a kafka-python
    request where the project's client needs it (``with_header``, ``encode``,
    ``API_VERSION``); answered by :class:`FetchResponseIn`.  ``partitions`` is a list of
    (topic, partition, current_leader_epoch, fetch_offset, log_start_offset,
    partition_max_bytes), grouped by topic in order of first appearance.  v7+ carries
    the fetch session (``session_id``, ``session_epoch``: KIP-227, default sessionless)
    and the (topic, partition) pairs ``forgotten`` by it.  Slotted: one is made per fetch."""

    __slots__ = ("API_VERSION", "replica_id", "max_wait_ms", "min_bytes", "max_bytes",
                 "partitions", "session_id", "session_epoch", "forgotten", "_correlation_id",
                 "_client_id")

    def __init__(self, version: int, replica_id: int, max_wait_ms: int, min_bytes: int,
                 max_bytes: int, partitions: list[tuple[Any, ...]], session_id: int = 0,
                 session_epoch: int = -1, forgotten: Sequence[tuple[str, int]] = ()):
        if not 4 <= version <= 12:
            raise ValueError(f"Fetch v{version} is not encoded here")
        self.API_VERSION = version
        self.replica_id, self.max_wait_ms = replica_id, max_wait_ms
        self.min_bytes, self.max_bytes = min_bytes, max_bytes
        self.partitions = partitions
        self.session_id, self.session_epoch = session_id, session_epoch
        self.forgotten = forgotten
        self._correlation_id = 0
        self._client_id: str | None = None

    def with_header(self, correlation_id: int, client_id: str | None = None) -> None:
        self._correlation_id, self._client_id = correlation_id, client_id

    def encode(self, header: bool = True, framed: bool = True) -> bytes:
        """The framed request.  One per acknowledged batch on every follower: the size
        prefix is filled in last (the frame is copied once, by the final bytes()), and
        array lengths are packed here rather than through a call each."""
        assert header and framed, "only whole frames are encoded here"
        version = self.API_VERSION
        flexible = version >= FETCH_FLEXIBLE_FROM
        out = bytearray(_SIZE_AND_HEADER.pack(0, 1, version, self._correlation_id))
        client_id = self._client_id  # the header's string is never compact
        out += _I16.pack(-1) if client_id is None else _string(client_id, False)
        if flexible:
            out += b"\x00"
        if version >= 7:
            out += _FETCH_OUT_TOP_V7.pack(self.replica_id, self.max_wait_ms, self.min_bytes,
                                          self.max_bytes, 0, self.session_id,
                                          self.session_epoch)
        else:
            out += _FETCH_OUT_TOP.pack(self.replica_id, self.max_wait_ms, self.min_bytes,
                                       self.max_bytes, 0)
        partition_run = _FETCH_REQUEST_RUNS[version][1]
        by_topic: dict[str, list[tuple[Any, ...]]] = {}
        for entry in self.partitions:
            by_topic.setdefault(entry[0], []).append(entry)
        out += _uvarint(len(by_topic) + 1) if flexible else _I32.pack(len(by_topic))
        for topic, entries in by_topic.items():
            out += _string(topic, flexible)
            out += _uvarint(len(entries) + 1) if flexible else _I32.pack(len(entries))
            for _, partition, leader_epoch, fetch_offset, log_start, max_bytes in entries:
                # last_fetched_epoch (v12+) is -1: divergence is found by
                # OffsetForLeaderEpoch, not in the fetch
                if version >= 12:
                    out += partition_run.pack(partition, leader_epoch, fetch_offset, -1,
                                              log_start, max_bytes)
                    out += b"\x00"
                elif version >= 9:
                    out += partition_run.pack(partition, leader_epoch, fetch_offset,
                                              log_start, max_bytes)
                elif version >= 5:
                    out += partition_run.pack(partition, fetch_offset, log_start, max_bytes)
                else:
                    out += partition_run.pack(partition, fetch_offset, max_bytes)
            if flexible:
                out += b"\x00"
        if version >= 7:
            forgotten: dict[str, list[int]] = {}
            for topic, partition in self.forgotten:
                forgotten.setdefault(topic, []).append(partition)
            out += _uvarint(len(forgotten) + 1) if flexible else _I32.pack(len(forgotten))
            for topic, partitions in forgotten.items():
                out += _string(topic, flexible)
                out += _uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
                out += struct.pack(f">{len(partitions)}i", *partitions)
                if flexible:
                    out += b"\x00"
        if version >= 11:
            out += _string("", flexible)  # rack_id
        if flexible:
            out += b"\x00"
        _I32.pack_into(out, 0, len(out) - _I32.size)
        return bytes(out)


class ResponseHeader:
    __slots__ = ("correlation_id",)

    def __init__(self, correlation_id: int):
        self.correlation_id = correlation_id


class FetchedPartitionIn:
    __slots__ = ("partition_index", "error_code", "high_watermark", "last_stable_offset",
                 "log_start_offset", "aborted_transactions", "preferred_read_replica",
                 "records")
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: list[tuple[Any, ...]]
    preferred_read_replica: int
    records: memoryview | None


class FetchedTopicIn:
    __slots__ = ("topic", "partitions")

    def __init__(self, topic: str | None, partitions: list[FetchedPartitionIn]) -> None:
        self.topic, self.partitions = topic, partitions


class FetchResponseIn:
    """A Fetch response v4-v12 decoded by hand, kafka-python's attribute names; records
    are views of the response frame.  ``decode`` has kafka-python's signature, so the
    class serves as the ``response_class`` of a request."""

    __slots__ = ("header", "throttle_time_ms", "error_code", "session_id", "responses")
    header: ResponseHeader
    throttle_time_ms: int
    error_code: int
    session_id: int
    responses: list[FetchedTopicIn]

    @classmethod
    def decode(cls, frame: Buffer, version: int, header: bool = True) -> FetchResponseIn:
        assert header, "responses are decoded with their header"
        flexible = version >= FETCH_FLEXIBLE_FROM
        try:
            top_run, partition_run, tail_run = _FETCH_RESPONSE_RUNS[version]
        except KeyError:
            raise HotDecodeError(f"Fetch v{version} is not decoded here") from None
        cursor = _Cursor(memoryview(frame))
        response = cls()
        if flexible:
            response.header = ResponseHeader(cursor.int32())
            cursor.skip_tagged_fields()
        top = cursor.run(top_run)
        if not flexible:
            response.header = ResponseHeader(top[0])
            top = top[1:]
        response.throttle_time_ms = top[0]
        if version >= 7:
            response.error_code, response.session_id = top[1], top[2]
        else:
            response.error_code, response.session_id = 0, 0
        topic_count = cursor.array_length(True) if flexible else cursor.count_of(top[-1])
        topics = []
        for _ in range(topic_count):
            topic = cursor.string(flexible)
            partitions = []
            for _ in range(cursor.array_length(flexible)):
                p = FetchedPartitionIn()
                fields = cursor.run(partition_run)
                if version >= 5:
                    (p.partition_index, p.error_code, p.high_watermark,
                     p.last_stable_offset, p.log_start_offset) = fields[:5]
                else:
                    (p.partition_index, p.error_code, p.high_watermark,
                     p.last_stable_offset) = fields[:4]
                    p.log_start_offset = -1
                aborted = []
                count = cursor.array_length(True) if flexible else cursor.count_of(fields[-1])
                for _ in range(count):
                    aborted.append(cursor.run(_ABORTED))
                    if flexible:
                        cursor.skip_tagged_fields()
                p.aborted_transactions = aborted
                if flexible:
                    p.preferred_read_replica = cursor.int32()
                    p.records = cursor.bytes_(True)
                    cursor.skip_tagged_fields()
                else:
                    tail = cursor.run(tail_run)
                    p.preferred_read_replica = tail[0] if version >= 11 else -1
                    p.records = cursor.bytes_of(tail[-1])
                partitions.append(p)
            if flexible:
                cursor.skip_tagged_fields()
            topics.append(FetchedTopicIn(topic, partitions))
        response.responses = topics
        if flexible:
            cursor.skip_tagged_fields()
        return response


def _fetch_response_runs(version: int) -> tuple[struct.Struct, struct.Struct, struct.Struct]:
    """(the fields up to the topics' count, a partition's fields up to its aborted
    transactions' count, the fields after them up to the records' length) of a Fetch
    response; counts and lengths are in a run only when fixed-size (not flexible), and
    the correlation id too (a flexible header has tagged fields after it)."""
    flexible = version >= FETCH_FLEXIBLE_FROM
    top = ("" if flexible else "i") + "i" + ("hi" if version >= 7 else "") + \
        ("" if flexible else "i")
    partition = "ihqq" + ("q" if version >= 5 else "") + ("" if flexible else "i")
    tail = ("i" if version >= 11 else "") + ("" if flexible else "i")
    return struct.Struct(">" + top), struct.Struct(">" + partition), struct.Struct(">" + tail)


_ABORTED = struct.Struct(">qq")  # producer_id, first_offset
_FETCH_RESPONSE_RUNS = {version: _fetch_response_runs(version) for version in range(4, 13)}
