"""``__transaction_state`` records: Kafka's version-0 key, version-0 and version-1 values."""
from __future__ import annotations

import struct

import pytest

from broker.transactions import records
from broker.transactions.metadata import TransactionState

EMPTY = TransactionState.EMPTY.code


def test_key_is_version_0_and_the_id():
    key = records.txn_key("tx-1")
    assert key == struct.pack(">hh", 0, 4) + b"tx-1"
    assert records.decode_key(key) == "tx-1"


def test_ongoing_value_round_trips_with_its_partitions():
    value = records.TxnValue(1000, 3, 60_000, TransactionState.ONGOING.code,
                             frozenset({("b", 1), ("a", 0), ("b", 0)}), 1234, 1200)
    data = records.txn_value(value, EMPTY)
    assert data[:2 + 8 + 2 + 4 + 1] == struct.pack(">hqhib", 0, 1000, 3, 60_000, 1)
    assert records.decode_value(data) == value


def test_empty_value_writes_null_partitions():
    value = records.TxnValue(7, 0, 1000, EMPTY, frozenset(), 5, -1)
    data = records.txn_value(value, EMPTY)
    assert data[17:21] == struct.pack(">i", -1)
    assert records.decode_value(data) == value


@pytest.mark.parametrize("data", [b"", struct.pack(">h", 2) + b"\0" * 40, b"\0\0\0",
                                  struct.pack(">h", 1) + b"\0" * 16 + b"\x05"])
def test_unreadable_values_raise_record_format_error(data):
    with pytest.raises(records.RecordFormatError):
        records.decode_value(data)


def test_unknown_key_version_is_refused():
    with pytest.raises(records.RecordFormatError):
        records.decode_key(struct.pack(">hh", 1, 1) + b"x")


def test_version_2_client_value_is_kafkas_flexible_version_1():
    """Kafka 4's TransactionLogValue v1, built by hand: compact array of (compact string,
    compact int32 array, no tags), then the tagged fields 0, 1 and 2."""
    value = records.TxnValue(1000, 4, 60_000, TransactionState.PREPARE_COMMIT.code,
                             frozenset({("t", 0), ("t", 2)}), 1234, 1200,
                             previous_producer_id=999, next_producer_id=1001,
                             client_transaction_version=2)
    expected = (struct.pack(">hqhib", 1, 1000, 4, 60_000, 2)
                + b"\x02" + b"\x02t" + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00"
                + struct.pack(">qq", 1234, 1200)
                + b"\x03" + b"\x00\x08" + struct.pack(">q", 999)
                + b"\x01\x08" + struct.pack(">q", 1001) + b"\x02\x02" + struct.pack(">h", 2))
    data = records.txn_value(value, EMPTY)
    assert data == expected
    assert records.decode_value(data) == value


def test_flexible_empty_value_round_trips_and_skips_unknown_tags():
    value = records.TxnValue(7, 0, 1000, EMPTY, frozenset(), 5, -1,
                             client_transaction_version=2)
    data = records.txn_value(value, EMPTY)
    assert data[17] == 0  # null partitions
    assert records.decode_value(data) == value
    # A newer writer's extra tag (9, 3 bytes) is skipped.
    extended = data[:-len(b"\x01\x02\x02\x00\x02")] + b"\x02\x02\x02\x00\x02" + b"\x09\x03abc"
    assert records.decode_value(extended) == value


def test_version_1_client_value_stays_version_0():
    """A log written before transaction version 2 and one written by a version 1 client
    read the same: version 0, which every Raftwood before this one reads."""
    value = records.TxnValue(7, 3, 1000, TransactionState.ONGOING.code,
                             frozenset({("a", 0)}), 5, 4)
    assert records.txn_value(value, EMPTY)[:2] == b"\x00\x00"
