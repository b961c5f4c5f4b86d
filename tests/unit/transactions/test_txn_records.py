"""``__transaction_state`` records: Kafka's version-0 key and value, both ways."""
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


@pytest.mark.parametrize("data", [b"", struct.pack(">h", 1) + b"\0" * 40, b"\0\0\0"])
def test_unreadable_values_raise_record_format_error(data):
    with pytest.raises(records.RecordFormatError):
        records.decode_value(data)


def test_unknown_key_version_is_refused():
    with pytest.raises(records.RecordFormatError):
        records.decode_key(struct.pack(">hh", 1, 1) + b"x")
