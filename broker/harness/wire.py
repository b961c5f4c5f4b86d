"""Raw Kafka requests for tests and ``raftwood verify``: the project's blocking client
with conveniences (Metadata, CreateTopics, Produce, Fetch, ListOffsets of one
partition), and record-batch helpers (build a batch as a producer sends it, read the
records of a fetch)."""
from __future__ import annotations

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from broker.client.kafka_client import BlockingConnection


class KafkaConnection(BlockingConnection):
    """A blocking Kafka connection for tests: one request, then its response.

    ``request(msg)`` sends a kafka-python message object (its version set with
    ``Cls[v](...)`` or ``version=``) and returns the decoded response; ``send_raw``/
    ``read_frame`` move bytes for malformed-input tests.  Framing, correlation-id checks
    and errors (ConnectionFailed, a ConnectionError) are ``broker.client.kafka_client``'s.
    Not thread-safe; one connection per thread.
    """

    def __init__(self, address: str | tuple[str, int], *, timeout_s: float = 10.0,
                 client_id: str = "raftwood-testing"):
        super().__init__(address, client_id=client_id, timeout_s=timeout_s)

    def send(self, request, version: int | None = None, *,
             expect_response: bool = True) -> int:
        """Encode and send ``request`` (at ``version`` if given); its correlation id."""
        if version is not None:
            request.API_VERSION = version
        return super().send(request, expect_response=expect_response)

    def request(self, request, version: int | None = None):
        """Send ``request`` and return its decoded response."""
        return self.receive(request, self.send(request, version))

    # -- common requests -------------------------------------------------------------------
    def api_versions(self, version: int = 0):
        return self.request(ApiVersionsRequest[version]())

    def metadata(self, topics: list[str] | None = None, version: int = 8):
        topic_list = None if topics is None else [
            MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
        return self.request(MetadataRequest[version](
            topics=topic_list, allow_auto_topic_creation=False))

    def create_topic(self, name: str, partitions: int = 1, configs: dict | None = None,
                     *, timeout_ms: int = 10_000, version: int = 4) -> int:
        """CreateTopics for one topic with replication factor 1; returns its error code."""
        topic_class = CreateTopicsRequest.CreatableTopic
        config_class = topic_class.CreatableTopicConfig
        topic = topic_class(name=name, num_partitions=partitions, replication_factor=1,
                            assignments=[], configs=[config_class(name=k, value=str(v))
                                                     for k, v in (configs or {}).items()])
        response = self.request(CreateTopicsRequest[version](
            topics=[topic], timeout_ms=timeout_ms, validate_only=False))
        return response.topics[0].error_code

    def produce(self, topic: str, partition: int, records: bytes, *, acks: int = -1,
                version: int = 9, timeout_ms: int = 10_000):
        """Produce one partition's record bytes; the PartitionProduceResponse (None for acks=0)."""
        topic_data = ProduceRequest.TopicProduceData
        request = ProduceRequest[version](
            transactional_id=None, acks=acks, timeout_ms=timeout_ms,
            topic_data=[topic_data(name=topic, partition_data=[
                topic_data.PartitionProduceData(index=partition, records=records)])])
        correlation_id = self.send(request, expect_response=acks != 0)
        if acks == 0:
            return None
        return self.receive(request, correlation_id).responses[0].partition_responses[0]

    def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int = 1 << 20,
              max_wait_ms: int = 0, version: int = 11):
        """Fetch one partition once (no session); the PartitionData of the response."""
        fetch_topic = FetchRequest.FetchTopic
        request = FetchRequest[version](
            replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=0, max_bytes=max_bytes,
            isolation_level=0, session_id=0, session_epoch=-1,
            topics=[fetch_topic(topic=topic, partitions=[fetch_topic.FetchPartition(
                partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                log_start_offset=-1, partition_max_bytes=max_bytes)])],
            forgotten_topics_data=[], rack_id="")
        return self.request(request).responses[0].partitions[0]

    def read_partition(self, topic: str, partition: int, start: int = 0, *,
                       max_fetches: int = 1000) -> list[tuple]:
        """Every record from ``start`` to the high watermark, as ``read_records`` tuples.

        Fetches until the high watermark; AssertionError on a fetch error or when a fetch
        makes no progress (so a broken broker fails the test instead of hanging it).
        """
        result: list[tuple] = []
        offset = start
        for _ in range(max_fetches):
            data = self.fetch(topic, partition, offset)
            assert data.error_code == 0, \
                f"Fetch {topic}-{partition} at {offset}: error {data.error_code}"
            if offset >= data.high_watermark:
                return result
            records = [r for r in read_records(data.records) if r[0] >= offset]
            assert records, (f"Fetch {topic}-{partition} at {offset} returned no record below "
                             f"the high watermark {data.high_watermark}")
            result += records
            offset = records[-1][0] + 1
        raise AssertionError(f"{topic}-{partition} not read to its end in {max_fetches} fetches")

    def list_offsets(self, topic: str, partition: int, timestamp: int, *, version: int = 7):
        """ListOffsets for one partition (-1 latest, -2 earliest, -3 max timestamp, or a
        timestamp in ms); the partition's response (error_code, offset, timestamp)."""
        list_topic = ListOffsetsRequest.ListOffsetsTopic
        request = ListOffsetsRequest[version](
            replica_id=-1, isolation_level=0,
            topics=[list_topic(name=topic, partitions=[list_topic.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])])
        return self.request(request).topics[0].partitions[0]


def build_batch(records, *, compression: int = 0) -> bytes:
    """A RecordBatch v2 as a producer sends it (baseOffset 0).

    ``records`` are ``(key, value, timestamp_ms, headers)`` tuples; headers a list of
    ``(str, bytes)``.  ``compression``: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    """
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression,
                                        is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 30)
    for offset_delta, (key, value, timestamp_ms, headers) in enumerate(records):
        builder.append(offset_delta, timestamp=timestamp_ms, key=key, value=value,
                       headers=list(headers))
    return bytes(builder.build())


def read_records(records: bytes | None) -> list[tuple[int, bytes | None, bytes | None, int, list]]:
    """Decode fetched record bytes into ``(offset, key, value, timestamp_ms, headers)``."""
    from kafka.record.memory_records import MemoryRecords

    result = []
    if not records:
        return result
    for batch in MemoryRecords(bytes(records)):
        for record in batch:
            result.append((record.offset, record.key, record.value, record.timestamp,
                           list(record.headers)))
    return result


# -- a cluster of brokers ------------------------------------------------------------------
