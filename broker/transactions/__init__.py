"""Transactions (KIP-98): the transaction coordinator on ``__transaction_state``.

    records.py      Kafka's key/value format of ``__transaction_state`` (pure)
    metadata.py     one transactional id and the transaction state machine (pure)
    manager.py      the transaction cache, the core's shard for ``__transaction_state``:
                    loading, writes to the topic
    markers.py      WriteTxnMarkers to the leaders of a transaction's partitions
    verification.py a partition leader asks a transaction's coordinator whether a
                    partition is in it (KIP-890 part 1, AddPartitionsToTxn VerifyOnly)
    coordinator.py  InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
                    DescribeTransactions, ListTransactions, FindCoordinator key type 1;
                    aborting timed-out transactions, forgetting expired ids

The coordinator of a transactional id is the leader of its ``__transaction_state``
partition (Kafka's hash); a broker that becomes that leader loads the partition and
takes over, finishing the transactions it finds half-ended.  Placement, loading on
leadership, the appends and FindCoordinator are the coordinator core's
(``broker/coordinator/``).
The request handlers live in ``broker/api/transactions.py``.
"""
from .coordinator import TransactionCoordinator
from .manager import TRANSACTION_STATE_TOPIC

__all__ = ["TransactionCoordinator", "TRANSACTION_STATE_TOPIC"]
