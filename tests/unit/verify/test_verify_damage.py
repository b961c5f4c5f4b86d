"""The storage fault: only the unflushed tail (at/after the recovery point) of the newest
segment is damaged, and what is damaged is exactly the last batch."""
from __future__ import annotations

from broker.testing import build_batch
from broker.verify.faults import damage_tail
from protocol.records import assign_offset_and_epoch, valid_prefix
from storage.checkpoint import PartitionOffsets, write_offsets


def write_segment(directory, base: int, batches: int) -> bytes:
    data = b""
    for i in range(batches):
        batch = bytearray(build_batch([(None, b"v%d-%d" % (base, i), 1_000, [])] * 3))
        assign_offset_and_epoch(batch, 0, base + 3 * i, 0)
        data += bytes(batch)
    (directory / f"{base:020d}.log").write_bytes(data)
    return data


def test_truncate_tears_the_last_batch_of_the_newest_segment(tmp_path):
    write_segment(tmp_path, 0, 4)
    original = write_segment(tmp_path, 12, 4)
    (tmp_path / f"{24:020d}.log").write_bytes(b"")          # a fresh, empty active segment
    what = damage_tail(tmp_path, "truncate", pick=7)
    assert what and "batch 21..23" in what
    damaged = (tmp_path / f"{12:020d}.log").read_bytes()
    headers, covered = valid_prefix(damaged)
    assert [h.base_offset for h in headers] == [12, 15, 18]
    assert covered < len(damaged) < len(original)
    assert original.startswith(damaged)


def test_corrupt_flips_one_crc_covered_byte_of_the_last_batch(tmp_path):
    original = write_segment(tmp_path, 0, 3)
    what = damage_tail(tmp_path, "corrupt", pick=1)
    assert what and "flipped byte" in what
    damaged = (tmp_path / f"{0:020d}.log").read_bytes()
    assert len(damaged) == len(original)
    assert sum(a != b for a, b in zip(damaged, original)) == 1
    headers, _ = valid_prefix(damaged, check_crc=True)
    assert [h.base_offset for h in headers] == [0, 3], "the last batch fails its CRC"


def test_flushed_data_is_never_damaged(tmp_path):
    original = write_segment(tmp_path, 0, 3)                # offsets 0..8
    write_offsets(tmp_path, PartitionOffsets(high_watermark=9, recovery_point=9,
                                             log_start_offset=0))
    assert damage_tail(tmp_path, "truncate", pick=1) is None
    assert (tmp_path / f"{0:020d}.log").read_bytes() == original
    write_offsets(tmp_path, PartitionOffsets(high_watermark=9, recovery_point=8,
                                             log_start_offset=0))
    assert damage_tail(tmp_path, "truncate", pick=1) is not None


def test_nothing_to_damage_in_an_empty_log(tmp_path):
    assert damage_tail(tmp_path, "corrupt", pick=1) is None
    (tmp_path / f"{0:020d}.log").write_bytes(b"")
    assert damage_tail(tmp_path, "corrupt", pick=1) is None
