"""Bytes on sockets, incoming side: the per-client ``Connection`` (frames in, responses
out in request order, backpressure both ways) dispatching to ``broker/api``, and the
listeners' connection limits.  The outgoing Kafka client is ``broker/client``."""
