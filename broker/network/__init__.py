"""Bytes on sockets: the per-client ``Connection`` (frames in, responses out in request
order, backpressure both ways) and ``kafka_client``, the broker's own Kafka client
(replica fetchers use it to talk to leaders)."""
