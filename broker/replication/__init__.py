"""The replication core, Kafka's design.

``replica_manager``  the partitions this broker hosts; produce and fetch through them;
                     the purgatories and their triggers; storage faults (KIP-112)
``partition``        one hosted partition: role, epochs, ISR, high watermark, its log
``fetcher``          followers pull from leaders; truncation by OffsetForLeaderEpoch
``delayed``          acks=all produces and long-poll fetches waiting in purgatory
``purgatory``        delayed operations watched per partition
``producer_ids``     producer ids from blocks reserved in the cluster metadata
"""
