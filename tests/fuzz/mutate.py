"""Frame-level mutations of an encoded request.

A request payload (the frame without its 4-byte size) starts with the header::

    api_key int16, api_version int16, correlation_id int32, client_id string (int16 len)
    [, tagged fields]   (header v2, flexible versions)

``Mutator.mutate(payload, body_at)`` returns ``(wire_bytes, label, last)``: the bytes
to send (size prefix included), the mutation's name (the report counts outcomes per
name) and whether nothing may follow on that connection (a size prefix that lies:
whatever came next would be read as part of this frame).

Invariant: the correlation id at bytes 4..8 of the payload is the one the engine set,
in every mutation that leaves at least 8 bytes, so an answer can always be matched to
its request; mutations that touch the header change the api key, the version or the
client id only.
"""
from __future__ import annotations

import random
import struct

from protocol.messages import SERVED
from protocol.status import STATUS_API_KEY

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
EDGE_INT32 = (-1, 0, 1, 0x7FFFFFFF, -0x80000000, 0x10000, 0x7FFF)
# api keys Kafka has but Raftwood does not serve, and keys nobody has.
UNSERVED_KEYS = sorted({k for k in range(90) if k not in SERVED} | {-1, 1000, 32767, -32768}
                       - {STATUS_API_KEY})


class Mutator:
    """Picks and applies one mutation; every choice comes from ``rng`` (reproducible)."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.body_ops = [("flip_bits", self._flip_bits), ("set_bytes", self._set_bytes),
                         ("insert_bytes", self._insert), ("delete_bytes", self._delete),
                         ("truncate", self._truncate), ("extend", self._extend),
                         ("absurd_int32", self._absurd_int32), ("absurd_int16", self._absurd_int16)]
        self.header_ops = [("wrong_api_key", self._wrong_api_key),
                           ("wrong_version", self._wrong_version),
                           ("client_id_length", self._client_id_length)]
        self.frame_ops = [("size_too_small", self._size_too_small),
                          ("size_too_big", self._size_too_big),
                          ("size_absurd", self._size_absurd)]

    def mutate(self, payload: bytes, body_at: int) -> tuple[bytes, str, bool]:
        rng = self.rng
        roll = rng.random()
        if roll < 0.75:
            name, op = rng.choice(self.body_ops)
            data = bytearray(payload)
            for _ in range(1 if rng.random() < 0.7 else rng.choice((2, 3, 5))):
                op(data, body_at)
            return _framed(data), name, False
        if roll < 0.95:
            name, op = rng.choice(self.header_ops)
            data = bytearray(payload)
            op(data, body_at)
            return _framed(data), name, False
        name, op = rng.choice(self.frame_ops)
        return op(payload), name, True

    # -- body ------------------------------------------------------------------------------
    def _position(self, data, body_at: int) -> int:
        return self.rng.randrange(body_at, len(data) + 1) if len(data) > body_at else len(data)

    def _flip_bits(self, data, body_at):
        if len(data) > body_at:
            data[self.rng.randrange(body_at, len(data))] ^= 1 << self.rng.randrange(8)

    def _set_bytes(self, data, body_at):
        if len(data) > body_at:
            at = self.rng.randrange(body_at, len(data))
            data[at] = self.rng.choice((0x00, 0xFF, 0x7F, 0x80, 0x01))

    def _insert(self, data, body_at):
        at = self._position(data, body_at)
        data[at:at] = self.rng.randbytes(self.rng.choice((1, 2, 4, 8)))

    def _delete(self, data, body_at):
        at = self._position(data, body_at)
        del data[at:at + self.rng.choice((1, 2, 4, 8))]

    def _truncate(self, data, body_at):
        del data[self._position(data, body_at):]

    def _extend(self, data, body_at):
        data += self.rng.randbytes(self.rng.choice((1, 4, 16, 64)))

    def _absurd_int32(self, data, body_at):
        if len(data) >= body_at + 4:
            _I32.pack_into(data, self.rng.randrange(body_at, len(data) - 3),
                           self.rng.choice(EDGE_INT32))

    def _absurd_int16(self, data, body_at):
        if len(data) >= body_at + 2:
            _I16.pack_into(data, self.rng.randrange(body_at, len(data) - 1),
                           self.rng.choice((-1, 0, 0x7FFF, -0x8000)))

    # -- header ----------------------------------------------------------------------------
    def _wrong_api_key(self, data, body_at):
        rng = self.rng
        key = rng.choice(UNSERVED_KEYS) if rng.random() < 0.5 else rng.choice(list(SERVED))
        _I16.pack_into(data, 0, key)

    def _wrong_version(self, data, body_at):
        api_key, version = struct.unpack_from(">hh", data, 0)
        spec = SERVED.get(api_key)
        choices = [-1, 32767, -32768, version + 1, version - 1]
        if spec is not None:
            choices += [spec.max_version + 1, spec.min_version - 1, spec.min_version,
                        spec.max_version]
        _I16.pack_into(data, 2, self.rng.choice(choices))

    def _client_id_length(self, data, body_at):
        _I16.pack_into(data, 8, self.rng.choice((-1, -2, 0, 0x7FFF, len(data), body_at)))

    # -- the frame's size prefix: nothing may follow on the connection ----------------------
    def _size_too_small(self, payload):
        return _I32.pack(self.rng.randrange(0, max(1, len(payload)))) + payload

    def _size_too_big(self, payload):
        return _I32.pack(len(payload) + self.rng.choice((1, 10, 1000))) + payload

    def _size_absurd(self, payload):
        return _I32.pack(self.rng.choice((-1, -0x80000000, 0x7FFFFFFF, 200 << 20))) + payload


def _framed(data: bytearray) -> bytes:
    return _I32.pack(len(data)) + bytes(data)
