"""Where an append comes from (Kafka's AppendOrigin): every write path names one.

``CLIENT``       a Produce request: refused on internal topics (INVALID_TOPIC_EXCEPTION)
``COORDINATOR``  the broker's own group coordinator writing ``__consumer_offsets``
``REPLICATION``  a follower copying its leader's batches as they are (the fetcher's
                 ``Partition.append_as_follower``; never a leader append)
"""
from __future__ import annotations

import enum


class AppendOrigin(enum.Enum):
    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"
