"""The coordinator core: what every coordinator on an internal topic shares.

    placement.py  key → partition: Kafka's abs(String.hashCode) % partitions (pure)
    topic.py      the internal topic (name, partitions, replication, configs) and
                  FindCoordinator's answer for a key, creating the topic on first use
    tenure.py     one tenure over a partition (LOADING, LOADED) and reading its log
    runtime.py    the partitions this broker leads: load on leadership, unload, the
                  status of a key, appends as leader and their acks
    batches.py    the batch a coordinator writes and the records a loader reads (pure)

A coordinator (groups on ``__consumer_offsets``, transactions on
``__transaction_state``; share groups next) describes its topic as an
``InternalTopic``, plugs its record meaning in as a ``CoordinatorShard`` (a loader per
partition, publish, forget) and gets a ``CoordinatorRuntime`` and a
``CoordinatorLookup``.  Topic creation is a callable the broker wires in
(``broker/node.py``); nothing here imports the request handlers.
"""
from .placement import partition_for
from .runtime import CoordinatorRuntime, CoordinatorShard, PendingWrite
from .tenure import LoadState, Ownership
from .topic import CoordinatorAnswer, CoordinatorLookup, CreateTopic, InternalTopic

__all__ = ["CoordinatorAnswer", "CoordinatorLookup", "CoordinatorRuntime", "CoordinatorShard",
           "CreateTopic", "InternalTopic", "LoadState", "Ownership", "PendingWrite",
           "partition_for"]
