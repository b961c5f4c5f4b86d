"""FrameReader: Kafka's size-prefixed framing, fed the way a socket delivers bytes.

Modelled on h11's test_io.py: the same stream is fed whole, one byte at a time and
several frames per read, and every way of feeding must yield the same frames.
"""
from __future__ import annotations

import struct

import pytest

from protocol.errors import CorruptRequest
from protocol.framing import DEFAULT_MAX_FRAME_BYTES, MIN_REQUEST_BYTES, FrameReader, frame

# Three payloads of different sizes, the smallest exactly the minimum a header needs.
PAYLOADS = [
    b"\x00\x12\x00\x03\x00\x00\x00\x01",
    b"\x00\x03\x00\x0c\x00\x00\x00\x02" + b"m" * 37,
    b"\x00\x00\x00\x09\x00\x00\x00\x03" + bytes(range(256)) * 4,
]
STREAM = b"".join(frame(p) for p in PAYLOADS)


def drain(reader: FrameReader) -> list[bytes]:
    """Every frame the reader can produce from what it has buffered."""
    frames = []
    while (f := reader.next_frame()) is not None:
        frames.append(f)
    return frames


def feed_in_chunks(data: bytes, chunk_size: int, reader: FrameReader | None = None) -> list[bytes]:
    reader = reader or FrameReader()
    frames = []
    for start in range(0, len(data), chunk_size):
        reader.feed(data[start:start + chunk_size])
        frames.extend(drain(reader))
    return frames


def test_frame_helper_writes_a_big_endian_size_of_the_payload_only():
    assert frame(b"abcdefgh") == b"\x00\x00\x00\x08abcdefgh"
    assert frame(b"x" * 300)[:4] == struct.pack(">i", 300)


def test_whole_stream_fed_at_once_yields_every_frame_in_order():
    reader = FrameReader()
    reader.feed(STREAM)
    assert drain(reader) == PAYLOADS
    assert reader.buffered_bytes == 0


def test_stream_fed_one_byte_at_a_time_yields_the_same_frames():
    assert feed_in_chunks(STREAM, 1) == PAYLOADS


@pytest.mark.parametrize("chunk_size", [2, 3, 5, 7, 11, 64, 1000])
def test_any_chunking_of_the_stream_yields_the_same_frames(chunk_size):
    assert feed_in_chunks(STREAM, chunk_size) == PAYLOADS


def test_a_frame_is_not_returned_until_its_last_byte_arrives():
    data = frame(PAYLOADS[1])
    reader = FrameReader()
    for byte_index in range(len(data) - 1):
        reader.feed(data[byte_index:byte_index + 1])
        assert reader.next_frame() is None, f"frame returned after only {byte_index + 1} bytes"
    reader.feed(data[-1:])
    assert reader.next_frame() == PAYLOADS[1]
    assert reader.next_frame() is None


def test_a_partial_size_prefix_means_need_more_data():
    reader = FrameReader()
    reader.feed(b"\x00\x00")
    assert reader.next_frame() is None
    assert reader.buffered_bytes == 2


def test_several_frames_in_one_feed_come_out_one_per_call():
    reader = FrameReader()
    reader.feed(STREAM)
    assert reader.next_frame() == PAYLOADS[0]
    assert reader.next_frame() == PAYLOADS[1]
    assert reader.next_frame() == PAYLOADS[2]
    assert reader.next_frame() is None


def test_trailing_bytes_of_the_next_frame_stay_buffered_and_complete_later():
    first, second = frame(PAYLOADS[0]), frame(PAYLOADS[1])
    reader = FrameReader()
    reader.feed(first + second[:10])
    assert reader.next_frame() == PAYLOADS[0]
    assert reader.next_frame() is None
    assert reader.buffered_bytes == 10
    reader.feed(second[10:])
    assert reader.next_frame() == PAYLOADS[1]
    assert reader.buffered_bytes == 0


def test_nothing_beyond_the_announced_frame_is_consumed():
    trailing = b"\x00\x00\x00\x2d\xff\xfe"  # the start of some later frame
    reader = FrameReader()
    reader.feed(frame(PAYLOADS[0]) + trailing)
    got = reader.next_frame()
    assert got == PAYLOADS[0]
    assert len(got) == len(PAYLOADS[0])
    assert reader.buffered_bytes == len(trailing)


def test_size_above_the_cap_is_corrupt_before_any_payload_arrives():
    reader = FrameReader(max_frame_bytes=1024)
    reader.feed(struct.pack(">i", 1025))  # the size alone: the payload is never awaited
    with pytest.raises(CorruptRequest):
        reader.next_frame()


def test_size_exactly_at_the_cap_is_accepted():
    reader = FrameReader(max_frame_bytes=64)
    payload = b"\x00\x01\x00\x04\x00\x00\x00\x07" + b"z" * 56
    reader.feed(frame(payload))
    assert reader.next_frame() == payload


def test_default_cap_is_socket_request_max_bytes_100_mib():
    assert DEFAULT_MAX_FRAME_BYTES == 100 * 1024 * 1024
    reader = FrameReader()
    reader.feed(struct.pack(">i", DEFAULT_MAX_FRAME_BYTES + 1))
    with pytest.raises(CorruptRequest):
        reader.next_frame()
    ok = FrameReader()
    ok.feed(struct.pack(">i", DEFAULT_MAX_FRAME_BYTES))
    assert ok.next_frame() is None  # a legal size: waits for the payload


@pytest.mark.parametrize("size", [-1, -2**31, -8])
def test_negative_size_is_corrupt(size):
    reader = FrameReader()
    reader.feed(struct.pack(">i", size) + b"\x00" * 16)
    with pytest.raises(CorruptRequest):
        reader.next_frame()


@pytest.mark.parametrize("size", range(MIN_REQUEST_BYTES))
def test_size_below_the_request_header_minimum_is_corrupt(size):
    reader = FrameReader()
    reader.feed(struct.pack(">i", size) + b"\x00" * 16)
    with pytest.raises(CorruptRequest):
        reader.next_frame()


def test_minimum_request_header_size_is_eight_bytes_and_accepted():
    assert MIN_REQUEST_BYTES == 8  # api_key int16 + api_version int16 + correlation_id int32
    reader = FrameReader()
    reader.feed(frame(b"\x00" * 8))
    assert reader.next_frame() == b"\x00" * 8


def test_corrupt_size_after_a_good_frame_still_yields_the_good_frame_first():
    reader = FrameReader(max_frame_bytes=1024)
    reader.feed(frame(PAYLOADS[0]) + struct.pack(">i", 5000))
    assert reader.next_frame() == PAYLOADS[0]
    with pytest.raises(CorruptRequest):
        reader.next_frame()


def test_handed_out_frames_leave_the_buffer_and_interleaved_feeds_stay_in_order():
    """Consumed bytes are dropped lazily; what is buffered and what comes out stay right
    across feeds that arrive while earlier frames are still being taken."""
    payloads = [bytes([i % 256]) * (8 + i) for i in range(300)]
    stream = b"".join(frame(p) for p in payloads)
    reader = FrameReader()
    got = []
    for start in range(0, len(stream), 777):
        reader.feed(stream[start:start + 777])
        got.append(reader.next_frame())  # at most one per feed: the rest stays buffered
        taken = sum(len(frame(p)) for p in got if p is not None)
        assert reader.buffered_bytes == min(start + 777, len(stream)) - taken
    while (more := reader.next_frame()) is not None:
        got.append(more)
    assert [p for p in got if p is not None] == payloads
    assert reader.buffered_bytes == 0


# A frame big enough to be handed over as the reader's own buffer (no copy).
BIG = b"\x00\x00\x00\x09\x00\x00\x00\x04" + bytes(range(256)) * 512


@pytest.mark.parametrize("chunk_size", [1000, 65536, 200_000])
def test_a_big_frame_alone_in_the_buffer_comes_out_whole_and_the_reader_goes_on(chunk_size):
    reader = FrameReader()
    frames = feed_in_chunks(frame(BIG) + STREAM, chunk_size, reader)
    assert frames == [BIG] + PAYLOADS
    assert reader.buffered_bytes == 0


def test_a_handed_over_frame_is_not_touched_by_later_feeds():
    reader = FrameReader()
    reader.feed(frame(BIG))
    handed = reader.next_frame()
    assert handed == BIG
    reader.feed(frame(PAYLOADS[2]) + frame(BIG)[:100])
    assert reader.next_frame() == PAYLOADS[2]
    reader.feed(frame(BIG)[100:])
    assert reader.next_frame() == BIG
    assert handed == BIG


def test_a_big_frame_followed_by_part_of_the_next_is_copied_out():
    reader = FrameReader()
    reader.feed(frame(BIG) + frame(PAYLOADS[0])[:3])
    assert reader.next_frame() == BIG
    assert reader.next_frame() is None
    reader.feed(frame(PAYLOADS[0])[3:])
    assert reader.next_frame() == PAYLOADS[0]
