"""ConsumerGroupHeartbeat (API 68) and ConsumerGroupDescribe (API 69) by hand (pure).

KIP-848's two APIs have no kafka-python classes (3.0.12), so their requests and
responses are written here, with the interface ``protocol/messages.py`` and the
connection expect of a kafka-python message: ``Class[version](**fields)``,
``with_header``, ``encode(header=, framed=)``, ``expect_response`` and, for requests,
``decode_frame(frame, version) -> (body, end)`` (for responses, ``decode``).  Both APIs
are flexible in every version: request header v2, response header v1, compact strings,
compact arrays (length + 1, 0 = null) and a tagged-field buffer closing every struct
(unknown tags are skipped on read, none are written).  Layouts, as in Kafka's
ConsumerGroupHeartbeatRequest/Response.json and ConsumerGroupDescribeRequest/Response.json:

    Heartbeat request v0-v1: group_id string, member_id string, member_epoch int32,
      instance_id string?, rack_id string?, rebalance_timeout_ms int32,
      subscribed_topic_names [string]?, subscribed_topic_regex string? (v1+),
      server_assignor string?, topic_partitions [topic_id uuid, partitions [int32]]?
    Heartbeat response v0-v1: throttle_time_ms int32, error_code int16,
      error_message string?, member_id string?, member_epoch int32,
      heartbeat_interval_ms int32, assignment {topic_partitions [...]}? (a nullable
      struct: int8 -1 for null, 1 then the struct)
    Describe request v0: group_ids [string], include_authorized_operations bool
    Describe response v0: throttle_time_ms int32, groups [error_code int16,
      error_message string?, group_id string, group_state string, group_epoch int32,
      assignment_epoch int32, assignor_name string, members [member_id string,
      instance_id string?, rack_id string?, member_epoch int32, client_id string,
      client_host string, subscribed_topic_names [string], subscribed_topic_regex
      string?, assignment {topic_partitions [topic_id, topic_name, partitions]},
      target_assignment {...}], authorized_operations int32]

Topic ids are ``uuid.UUID`` here.  Errors: :class:`FlexDecodeError` (a ValueError) for
bytes that do not parse; ``protocol/messages.py`` turns it into CorruptRequest.
"""
from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Self

from .primitives import Buffer, uvarint

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")

HEARTBEAT_API_KEY = 68
DESCRIBE_API_KEY = 69
AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)


class FlexDecodeError(ValueError):
    """The bytes do not hold the message they claim to."""


class FlexReader:
    """Reads the types of flexible versions from ``data`` at ``pos``; raises
    FlexDecodeError on any underrun.  Also reads the flexible record values of
    ``__consumer_offsets`` (broker/groups/records.py)."""

    def __init__(self, data: Buffer, pos: int = 0) -> None:
        self.data = memoryview(data)
        self.pos = pos

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise FlexDecodeError(f"{n} bytes wanted at {self.pos} of {len(self.data)}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def _fixed(self, codec: struct.Struct) -> int:
        return codec.unpack(self._take(codec.size))[0]

    def int8(self) -> int:
        return self._fixed(_I8)

    def int16(self) -> int:
        return self._fixed(_I16)

    def int32(self) -> int:
        return self._fixed(_I32)

    def boolean(self) -> bool:
        return self.int8() != 0

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self._take(16)))

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise FlexDecodeError("varint longer than 5 bytes")

    def nullable_string(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        try:
            return str(self._take(n), "utf-8")
        except UnicodeDecodeError as exc:
            raise FlexDecodeError(f"string is not UTF-8: {exc}") from None

    def string(self) -> str:
        text = self.nullable_string()
        if text is None:
            raise FlexDecodeError("null where a string is required")
        return text

    def header_string(self) -> str | None:
        """The request header's client id: int16-length, never compact."""
        n = self.int16()
        return None if n < 0 else str(self._take(n), "utf-8")

    def array_length(self) -> int | None:
        """A compact array's element count, None for a null array."""
        n = self.uvarint() - 1
        if n > len(self.data) - self.pos:  # every element takes at least one byte
            raise FlexDecodeError(f"array of {n} elements in {len(self.data) - self.pos} bytes")
        return None if n < 0 else n

    def array(self, read_one: Callable[[], Any]) -> list[Any] | None:
        n = self.array_length()
        return None if n is None else [read_one() for _ in range(n)]

    def tagged_fields(self) -> dict[int, bytes]:
        tags = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            tags[tag] = bytes(self._take(self.uvarint()))
        return tags


# -- writing -------------------------------------------------------------------------------

def int8(value: int) -> bytes:
    return _I8.pack(value)


def int16(value: int) -> bytes:
    return _I16.pack(value)


def int32(value: int) -> bytes:
    return _I32.pack(value)


def uuid_(value: uuid.UUID) -> bytes:
    return value.bytes


def compact_string(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    raw = text.encode("utf-8")
    return uvarint(len(raw) + 1) + raw


def compact_array(items: Iterable[Any] | None, write_one: Callable[[Any], bytes]) -> bytes:
    if items is None:
        return b"\x00"
    items = list(items)
    return uvarint(len(items) + 1) + b"".join(write_one(item) for item in items)


def tagged_fields(tags: dict[int, bytes] | None = None) -> bytes:
    tags = tags or {}
    return uvarint(len(tags)) + b"".join(
        uvarint(tag) + uvarint(len(value)) + value for tag, value in sorted(tags.items()))


# -- the message base ------------------------------------------------------------------------

class ResponseHeader:
    __slots__ = ("correlation_id",)

    def __init__(self, correlation_id: int):
        self.correlation_id = correlation_id


class RequestHeader:
    __slots__ = ("request_api_key", "request_api_version", "correlation_id", "client_id",
                 "response_type")

    def __init__(self, api_key: int, api_version: int, correlation_id: int,
                 client_id: str | None, response_type: type | None = None) -> None:
        self.request_api_key = api_key
        self.request_api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.response_type = response_type

    def get_response_class(self) -> type:
        """The response's class, as kafka-python's headers answer (for clients)."""
        if self.response_type is None:
            raise TypeError(f"no response class known for API {self.request_api_key}")
        return self.response_type


class _VersionedClass(type):
    """``Class[version]``: a constructor of that version's message, as kafka-python's."""

    name: str          # set by each message class
    max_version: int

    def __getitem__(cls, version: int) -> Callable[..., Any]:
        if not 0 <= version <= cls.max_version:
            raise ValueError(f"{cls.name} v{version} is not encoded here")

        def build(**kwargs: Any) -> Any:
            message = cls(**kwargs)
            message.API_VERSION = version
            return message
        return build


class _Message(metaclass=_VersionedClass):
    """A flexible message: its header and framing; subclasses write the body."""

    API_KEY: int = -1
    name: str = ""
    max_version: int = 0
    is_request: bool = True

    API_VERSION: int = 0
    response_type: type | None = None  # a request's response class, when a client sends it
    header: RequestHeader | ResponseHeader | None = None
    _client_id: str | None = None
    _correlation_id: int = 0

    def with_header(self, correlation_id: int = 0, client_id: str | None = None) -> None:
        self._correlation_id, self._client_id = correlation_id, client_id
        self.header = (RequestHeader(self.API_KEY, self.API_VERSION, correlation_id, client_id,
                                     self.response_type)
                       if self.is_request else ResponseHeader(correlation_id))

    def expect_response(self) -> bool:
        return True

    def encode(self, header: bool = False, framed: bool = False,
               version: int | None = None) -> bytes:
        if version is not None:
            self.API_VERSION = version
        out = b""
        if header and self.is_request:
            out = (_HEADER.pack(self.API_KEY, self.API_VERSION, self._correlation_id)
                   + _I16.pack(-1 if self._client_id is None else len(self._client_id.encode()))
                   + (self._client_id or "").encode() + tagged_fields())
        elif header:
            out = _I32.pack(self._correlation_id) + tagged_fields()
        out += self.encode_body(self.API_VERSION)
        return _I32.pack(len(out)) + out if framed else out

    def encode_body(self, version: int) -> bytes:
        raise NotImplementedError

    @classmethod
    def decode_frame(cls, frame: Buffer, version: int) -> tuple[Self, int]:
        """(message, position where it ended) of a whole request frame, header included."""
        reader = FlexReader(frame)
        api_key, api_version, correlation_id = reader.int16(), reader.int16(), reader.int32()
        client_id = reader.header_string()
        reader.tagged_fields()
        message = cls.decode_body(reader, version)
        message.API_VERSION = version
        message._correlation_id, message._client_id = correlation_id, client_id
        message.header = RequestHeader(api_key, api_version, correlation_id, client_id)
        return message, reader.pos

    @classmethod
    def decode(cls, data: Buffer, version: int, header: bool = False) -> Self:
        """A response (or a request body) from bytes, as kafka-python's ``decode``."""
        reader = FlexReader(data)
        correlation_id = 0
        if header:
            correlation_id = reader.int32()
            reader.tagged_fields()
        message = cls.decode_body(reader, version)
        message.API_VERSION = version
        if header:
            message.header = ResponseHeader(correlation_id)
        return message

    @classmethod
    def decode_body(cls, reader: FlexReader, version: int) -> Self:
        raise NotImplementedError


def _int32_item(value: int) -> bytes:
    return _I32.pack(value)


# -- ConsumerGroupHeartbeat --------------------------------------------------------------------

@dataclass
class TopicPartitions:
    """Partitions of one topic, by id (heartbeat request and response)."""

    topic_id: uuid.UUID
    partitions: list[int]

    def encode(self) -> bytes:
        return (uuid_(self.topic_id) + compact_array(self.partitions, _int32_item)
                + tagged_fields())

    @classmethod
    def read(cls, reader: FlexReader) -> TopicPartitions:
        topic_id = reader.uuid()
        partitions = reader.array(reader.int32) or []
        reader.tagged_fields()
        return cls(topic_id, partitions)


@dataclass
class ConsumerGroupHeartbeatRequest(_Message):
    API_KEY = HEARTBEAT_API_KEY
    name = "ConsumerGroupHeartbeatRequest"
    max_version = 1

    group_id: str = ""
    member_id: str = ""
    member_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: list[TopicPartitions] | None = None

    def encode_body(self, version: int) -> bytes:
        out = (compact_string(self.group_id) + compact_string(self.member_id)
               + int32(self.member_epoch) + compact_string(self.instance_id)
               + compact_string(self.rack_id) + int32(self.rebalance_timeout_ms)
               + compact_array(self.subscribed_topic_names, compact_string))
        if version >= 1:
            out += compact_string(self.subscribed_topic_regex)
        return (out + compact_string(self.server_assignor)
                + compact_array(self.topic_partitions, TopicPartitions.encode) + tagged_fields())

    @classmethod
    def decode_body(cls, reader: FlexReader, version: int) -> Self:
        message = cls(group_id=reader.string(), member_id=reader.string(),
                      member_epoch=reader.int32(), instance_id=reader.nullable_string(),
                      rack_id=reader.nullable_string(), rebalance_timeout_ms=reader.int32(),
                      subscribed_topic_names=reader.array(reader.string))
        if version >= 1:
            message.subscribed_topic_regex = reader.nullable_string()
        message.server_assignor = reader.nullable_string()
        message.topic_partitions = reader.array(lambda: TopicPartitions.read(reader))
        reader.tagged_fields()
        return message


@dataclass
class ConsumerGroupHeartbeatResponse(_Message):
    API_KEY = HEARTBEAT_API_KEY
    name = "ConsumerGroupHeartbeatResponse"
    max_version = 1
    is_request = False

    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    # None: no assignment in this answer (unchanged); a list (maybe empty) otherwise.
    assignment: list[TopicPartitions] | None = None

    def encode_body(self, version: int) -> bytes:
        out = (int32(self.throttle_time_ms) + int16(self.error_code)
               + compact_string(self.error_message) + compact_string(self.member_id)
               + int32(self.member_epoch) + int32(self.heartbeat_interval_ms))
        if self.assignment is None:
            out += int8(-1)
        else:
            out += (int8(1) + compact_array(self.assignment, TopicPartitions.encode)
                    + tagged_fields())
        return out + tagged_fields()

    @classmethod
    def decode_body(cls, reader: FlexReader, version: int) -> Self:
        message = cls(throttle_time_ms=reader.int32(), error_code=reader.int16(),
                      error_message=reader.nullable_string(),
                      member_id=reader.nullable_string(), member_epoch=reader.int32(),
                      heartbeat_interval_ms=reader.int32())
        if reader.int8() >= 0:
            message.assignment = reader.array(lambda: TopicPartitions.read(reader)) or []
            reader.tagged_fields()
        reader.tagged_fields()
        return message


# -- ConsumerGroupDescribe ---------------------------------------------------------------------

@dataclass
class DescribedTopicPartitions:
    topic_id: uuid.UUID
    topic_name: str
    partitions: list[int]

    def encode(self) -> bytes:
        return (uuid_(self.topic_id) + compact_string(self.topic_name)
                + compact_array(self.partitions, _int32_item) + tagged_fields())

    @classmethod
    def read(cls, reader: FlexReader) -> DescribedTopicPartitions:
        value = cls(reader.uuid(), reader.string(), reader.array(reader.int32) or [])
        reader.tagged_fields()
        return value


def _encode_assignment(assignment: list[DescribedTopicPartitions]) -> bytes:
    return compact_array(assignment, DescribedTopicPartitions.encode) + tagged_fields()


def _read_assignment(reader: FlexReader) -> list[DescribedTopicPartitions]:
    value = reader.array(lambda: DescribedTopicPartitions.read(reader)) or []
    reader.tagged_fields()
    return value


@dataclass
class DescribedMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    assignment: list[DescribedTopicPartitions] = field(default_factory=list)
    target_assignment: list[DescribedTopicPartitions] = field(default_factory=list)

    def encode(self) -> bytes:
        return (compact_string(self.member_id) + compact_string(self.instance_id)
                + compact_string(self.rack_id) + int32(self.member_epoch)
                + compact_string(self.client_id) + compact_string(self.client_host)
                + compact_array(self.subscribed_topic_names, compact_string)
                + compact_string(self.subscribed_topic_regex)
                + _encode_assignment(self.assignment)
                + _encode_assignment(self.target_assignment) + tagged_fields())

    @classmethod
    def read(cls, reader: FlexReader) -> DescribedMember:
        value = cls(reader.string(), reader.nullable_string(), reader.nullable_string(),
                    reader.int32(), reader.string(), reader.string(),
                    reader.array(reader.string) or [], reader.nullable_string(),
                    _read_assignment(reader), _read_assignment(reader))
        reader.tagged_fields()
        return value


@dataclass
class DescribedGroup:
    error_code: int
    error_message: str | None
    group_id: str
    group_state: str = ""
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ""
    members: list[DescribedMember] = field(default_factory=list)
    authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED

    def encode(self) -> bytes:
        return (int16(self.error_code) + compact_string(self.error_message)
                + compact_string(self.group_id) + compact_string(self.group_state)
                + int32(self.group_epoch) + int32(self.assignment_epoch)
                + compact_string(self.assignor_name)
                + compact_array(self.members, DescribedMember.encode)
                + int32(self.authorized_operations) + tagged_fields())

    @classmethod
    def read(cls, reader: FlexReader) -> DescribedGroup:
        value = cls(reader.int16(), reader.nullable_string(), reader.string(), reader.string(),
                    reader.int32(), reader.int32(), reader.string(),
                    reader.array(lambda: DescribedMember.read(reader)) or [], reader.int32())
        reader.tagged_fields()
        return value


@dataclass
class ConsumerGroupDescribeRequest(_Message):
    API_KEY = DESCRIBE_API_KEY
    name = "ConsumerGroupDescribeRequest"
    max_version = 0

    group_ids: list[str] = field(default_factory=list)
    include_authorized_operations: bool = False

    def encode_body(self, version: int) -> bytes:
        return (compact_array(self.group_ids, compact_string)
                + int8(1 if self.include_authorized_operations else 0) + tagged_fields())

    @classmethod
    def decode_body(cls, reader: FlexReader, version: int) -> Self:
        message = cls(group_ids=reader.array(reader.string) or [],
                      include_authorized_operations=reader.boolean())
        reader.tagged_fields()
        return message


@dataclass
class ConsumerGroupDescribeResponse(_Message):
    API_KEY = DESCRIBE_API_KEY
    name = "ConsumerGroupDescribeResponse"
    max_version = 0
    is_request = False

    throttle_time_ms: int = 0
    groups: list[DescribedGroup] = field(default_factory=list)

    def encode_body(self, version: int) -> bytes:
        return (int32(self.throttle_time_ms) + compact_array(self.groups, DescribedGroup.encode)
                + tagged_fields())

    @classmethod
    def decode_body(cls, reader: FlexReader, version: int) -> Self:
        message = cls(throttle_time_ms=reader.int32(),
                      groups=reader.array(lambda: DescribedGroup.read(reader)) or [])
        reader.tagged_fields()
        return message
