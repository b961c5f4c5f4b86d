"""The replication core, Kafka's design.

``replica_manager``  the partitions this broker hosts; produce and fetch through them;
                     the purgatories and their triggers; storage faults (KIP-112)
``partition``        one hosted partition: role, epochs, ISR, high watermark, its log
``isr``              the leader's ISR as an immutable state (committed, pending expand or
                     shrink) and the replica set the high watermark waits for
``fetcher``          followers pull from leaders; truncation by OffsetForLeaderEpoch
``leader_endpoint``  what a fetcher needs from a leader (Kafka's LeaderEndPoint), over
                     the broker's Kafka client; tests give the fetcher a fake one
``acks``             every acks rule of a produce (min.insync.replicas, the acks=all
                     wait in the produce purgatory and what each partition answers)
``delayed``          long-poll fetches waiting in the fetch purgatory
                     (``broker.purgatory``, below controller/ and replication/)
``producer_ids``     producer ids from blocks reserved in the cluster metadata
"""
