"""Bytes on sockets: the per-client ``Connection`` (frames in, responses out in request
order, backpressure both ways) and the project's one Kafka client: ``client_protocol``
(sans-IO: framing, correlation ids, the response size cap) under ``kafka_client``'s
``AsyncConnection`` (replica fetchers talking to leaders) and ``BlockingConnection``
(the command line, ``broker/harness``, tests)."""
