"""AddRaftVoter (API 80) and RemoveRaftVoter (API 81) by hand (pure).

KIP-853's voter changes have no kafka-python classes; they are written here with the
same message interface as ``consumer_group_messages.py`` (whose flexible-encoding
primitives they use: request header v2, response header v1, compact strings and
arrays, a tagged-field buffer closing every struct).  Layouts, as in Kafka's
AddRaftVoterRequest/Response.json and RemoveRaftVoterRequest/Response.json (v0 only):

    AddRaftVoter request v0: cluster_id string?, timeout_ms int32, voter_id int32,
      voter_directory_id uuid, listeners [name string, host string, port uint16]
    RemoveRaftVoter request v0: cluster_id string?, voter_id int32,
      voter_directory_id uuid
    both responses v0: throttle_time_ms int32, error_code int16, error_message string?
"""
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import Self

from .consumer_group_messages import (
    FlexReader,
    _Message,
    compact_array,
    compact_string,
    int16,
    int32,
    tagged_fields,
    uuid_,
)

ADD_API_KEY = 80
REMOVE_API_KEY = 81
_U16 = struct.Struct(">H")


@dataclass
class VoterListener:
    """One endpoint of the voter being added (its Raft address, for Raftwood)."""

    name: str
    host: str
    port: int

    def encode(self) -> bytes:
        return (compact_string(self.name) + compact_string(self.host) + _U16.pack(self.port)
                + tagged_fields())

    @classmethod
    def read(cls, reader: FlexReader) -> VoterListener:
        name, host = reader.string(), reader.string()
        listener = cls(name, host, reader._fixed(_U16))
        reader.tagged_fields()
        return listener


@dataclass
class AddRaftVoterRequest(_Message):
    API_KEY = ADD_API_KEY
    name = "AddRaftVoterRequest"
    max_version = 0

    cluster_id: str | None = None
    timeout_ms: int = 30_000
    voter_id: int = -1
    voter_directory_id: uuid.UUID = uuid.UUID(int=0)
    listeners: list[VoterListener] = field(default_factory=list)

    def encode_body(self, version: int) -> bytes:
        return (compact_string(self.cluster_id) + int32(self.timeout_ms) + int32(self.voter_id)
                + uuid_(self.voter_directory_id)
                + compact_array(self.listeners, VoterListener.encode) + tagged_fields())

    @classmethod
    def decode_body(cls, reader: FlexReader, version: int) -> Self:
        message = cls(cluster_id=reader.nullable_string(), timeout_ms=reader.int32(),
                      voter_id=reader.int32(), voter_directory_id=reader.uuid(),
                      listeners=reader.array(lambda: VoterListener.read(reader)) or [])
        reader.tagged_fields()
        return message


@dataclass
class RemoveRaftVoterRequest(_Message):
    API_KEY = REMOVE_API_KEY
    name = "RemoveRaftVoterRequest"
    max_version = 0

    cluster_id: str | None = None
    voter_id: int = -1
    voter_directory_id: uuid.UUID = uuid.UUID(int=0)

    def encode_body(self, version: int) -> bytes:
        return (compact_string(self.cluster_id) + int32(self.voter_id)
                + uuid_(self.voter_directory_id) + tagged_fields())

    @classmethod
    def decode_body(cls, reader: FlexReader, version: int) -> Self:
        message = cls(cluster_id=reader.nullable_string(), voter_id=reader.int32(),
                      voter_directory_id=reader.uuid())
        reader.tagged_fields()
        return message


@dataclass
class _VoterChangeResponse(_Message):
    is_request = False

    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None

    def encode_body(self, version: int) -> bytes:
        return (int32(self.throttle_time_ms) + int16(self.error_code)
                + compact_string(self.error_message) + tagged_fields())

    @classmethod
    def decode_body(cls, reader: FlexReader, version: int) -> Self:
        message = cls(throttle_time_ms=reader.int32(), error_code=reader.int16(),
                      error_message=reader.nullable_string())
        reader.tagged_fields()
        return message


@dataclass
class AddRaftVoterResponse(_VoterChangeResponse):
    API_KEY = ADD_API_KEY
    name = "AddRaftVoterResponse"
    max_version = 0


@dataclass
class RemoveRaftVoterResponse(_VoterChangeResponse):
    API_KEY = REMOVE_API_KEY
    name = "RemoveRaftVoterResponse"
    max_version = 0


AddRaftVoterRequest.response_type = AddRaftVoterResponse
RemoveRaftVoterRequest.response_type = RemoveRaftVoterResponse
