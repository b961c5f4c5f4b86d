"""Record batches for Produce requests: valid ones as producers send them, and liars.

A RecordBatch v2 header (offsets inside the batch)::

    0 base_offset int64     8 batch_length int32    12 partition_leader_epoch int32
    16 magic int8           17 crc uint32           21 attributes int16
    23 last_offset_delta int32   27 base_timestamp int64   35 max_timestamp int64
    43 producer_id int64    51 producer_epoch int16  53 base_sequence int32
    57 records_count int32  61 records ...

The CRC-32C covers attributes to the end.  Most lies here keep the CRC valid (the
header is rewritten, then the CRC recomputed), so the broker must catch them by
reading the header, not by the checksum: a codec the bytes are not in, a count the
batch does not hold, a length that runs past or stops short of the bytes.

Invariant: ``valid`` batches are exactly what ``broker.harness.build_batch`` makes
(a producer's bytes); every lie starts from one of them.
"""
from __future__ import annotations

import random
import struct

import crc32c

from broker.harness import build_batch

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
HEADER_BYTES = 61
REFUSABLE_LIES = {"_lie_bad_crc", "_lie_codec", "_lie_count", "_lie_length", "_lie_magic",
                  "_lie_truncated", "_lie_garbage"}
REFUSABLE_KEPT = 4096
CODECS = 0x7
CRC_AT, ATTRIBUTES_AT, COUNT_AT, LENGTH_AT = 17, 21, 57, 8


def with_crc(batch: bytearray) -> bytes:
    """The batch with its CRC-32C recomputed over attributes..end."""
    _U32.pack_into(batch, CRC_AT, crc32c.crc32c(bytes(batch[ATTRIBUTES_AT:])))
    return bytes(batch)


class BatchFactory:
    """A pool of valid batches (every codec, small and larger) built once, and
    ``records(rng)``: a valid batch or a lying one, as the Produce field's bytes."""

    def __init__(self, rng: random.Random, pool_size: int = 24):
        self.valid: list[bytes] = []
        now_ms = 1_700_000_000_000
        for index in range(pool_size):
            count = rng.choice((1, 1, 2, 5, 20))
            records = [(rng.choice((None, b"k%d" % i)), b"fuzz-%d-%d-" % (index, i)
                        + rng.randbytes(rng.choice((0, 10, 100))), now_ms + i * 10,
                        [("h", b"v")] if rng.random() < 0.3 else [])
                       for i in range(count)]
            self.valid.append(build_batch(records, compression=index % 5))
        self.plain = self.valid[::5]  # compression 0 (index % 5 == 0)
        self.lies = [getattr(self, name) for name in sorted(vars(BatchFactory))
                     if name.startswith("_lie_")]
        #: Lies Kafka refuses whatever else the request says (CORRUPT_MESSAGE,
        #: INVALID_RECORD ...): a partition answered NONE for one of these accepted a
        #: batch it must not have.  Kept by value, the latest ``REFUSABLE_KEPT``.
        self.refusable: dict[bytes, str] = {}

    def records(self, rng: random.Random) -> bytes | None:
        """Field bytes for one partition of a Produce request."""
        roll = rng.random()
        if roll < 0.4:
            return rng.choice(self.valid)
        if roll < 0.45:
            return rng.choice((b"", None))
        lie = rng.choice(self.lies)
        batch = lie(rng, bytearray(rng.choice(self.valid)))
        if lie.__name__ in REFUSABLE_LIES and batch not in self.valid:
            if len(self.refusable) >= REFUSABLE_KEPT:
                self.refusable.pop(next(iter(self.refusable)))
            self.refusable[batch] = lie.__name__.removeprefix("_lie_")
        return batch

    # -- the lies: each takes a valid batch (mutable copy) ---------------------------------
    def _lie_bad_crc(self, rng, batch):
        batch[CRC_AT + rng.randrange(4)] ^= 1 << rng.randrange(8)
        return bytes(batch)

    def _lie_codec(self, rng, batch):
        """Claims a codec (1-7) the bytes are not in, or the reverse; CRC valid."""
        if rng.random() < 0.7:  # most often: plain records that claim a codec
            batch = bytearray(rng.choice(self.plain))
        attributes = _I16.unpack_from(batch, ATTRIBUTES_AT)[0]
        codec = rng.choice([c for c in range(8) if c != attributes & CODECS])
        _I16.pack_into(batch, ATTRIBUTES_AT, (attributes & ~CODECS) | codec)
        return with_crc(batch)

    def _lie_attributes(self, rng, batch):
        """Timestamp type, transactional and control bits, unknown bits; CRC valid."""
        bits = rng.choice((0x08, 0x10, 0x20, 0x30, 0x40, 0x7FC0, -1))
        attributes = _I16.unpack_from(batch, ATTRIBUTES_AT)[0]
        _I16.pack_into(batch, ATTRIBUTES_AT, attributes | bits if bits > 0 else bits)
        return with_crc(batch)

    def _lie_count(self, rng, batch):
        """A records count the batch does not hold; CRC valid."""
        held = _I32.unpack_from(batch, COUNT_AT)[0]
        count = rng.choice([c for c in ((1 << 31) - 1, (1 << 31) - 1, -1, 0, 2, 1000, -(1 << 31))
                            if c != held])
        _I32.pack_into(batch, COUNT_AT, count)
        if rng.random() < 0.75:  # and a last_offset_delta that agrees with it
            _I32.pack_into(batch, 23, count - 1 if count > -(1 << 31) else count)
        return with_crc(batch)

    def _lie_length(self, rng, batch):
        """batch_length short of, past, or far beyond the bytes; CRC untouched."""
        length = _I32.unpack_from(batch, LENGTH_AT)[0]
        _I32.pack_into(batch, LENGTH_AT, rng.choice(
            (length - 1, length + 1, 0, -1, 1, (1 << 31) - 1, length - 40)))
        return bytes(batch)

    def _lie_magic(self, rng, batch):
        batch[16] = rng.choice((0, 1, 3, 0xFF))
        return bytes(batch)

    def _lie_header_fields(self, rng, batch):
        """base_offset, epochs, producer fields, timestamps set to edge values; CRC valid
        (base_offset and partition_leader_epoch are outside it anyway)."""
        where, packer = rng.choice(((0, _I64), (12, _I32), (23, _I32), (27, _I64), (35, _I64),
                                    (43, _I64), (51, _I16), (53, _I32)))
        low = -(1 << (packer.size * 8 - 1))
        packer.pack_into(batch, where, rng.choice((low, -1, 0, 1, -low - 1)))
        return with_crc(batch)

    def _lie_records(self, rng, batch):
        """Record bytes mangled (varint lengths, keys, headers) under a valid CRC."""
        for _ in range(rng.choice((1, 2, 4))):
            if len(batch) > HEADER_BYTES:
                batch[rng.randrange(HEADER_BYTES, len(batch))] = rng.choice((0x00, 0x7F, 0xFF,
                                                                            0x80, 0x01))
        return with_crc(batch)

    def _lie_truncated(self, rng, batch):
        return bytes(batch[:rng.randrange(1, len(batch))])

    def _lie_garbage(self, rng, batch):
        """A batch followed by bytes that are no batch."""
        return bytes(batch) + rng.randbytes(rng.choice((1, 12, 61, 70)))

    def _lie_two_batches(self, rng, batch):
        """Not a lie: two valid batches in one partition's records."""
        return bytes(batch) + rng.choice(self.valid)
