"""PRODUCER_FENCED for the request versions that know it, INVALID_PRODUCER_EPOCH before."""
from __future__ import annotations

from broker.api.producer_ids import PRODUCER_FENCED_SINCE_VERSION as INIT_SINCE
from broker.api.transactions import fenced_for_version
from protocol.errors import ErrorCode


def test_txn_apis_map_fenced_below_v2():
    assert fenced_for_version(ErrorCode.PRODUCER_FENCED, 1) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert fenced_for_version(ErrorCode.PRODUCER_FENCED, 2) == ErrorCode.PRODUCER_FENCED
    assert fenced_for_version(ErrorCode.CONCURRENT_TRANSACTIONS, 0) == \
        ErrorCode.CONCURRENT_TRANSACTIONS


def test_init_producer_id_maps_fenced_below_v4():
    assert fenced_for_version(ErrorCode.PRODUCER_FENCED, 3, INIT_SINCE) == \
        ErrorCode.INVALID_PRODUCER_EPOCH
    assert fenced_for_version(ErrorCode.PRODUCER_FENCED, 4, INIT_SINCE) == \
        ErrorCode.PRODUCER_FENCED
