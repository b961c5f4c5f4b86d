"""The project's one Kafka client, outgoing connections only: ``client_protocol``
(sans-IO: framing, correlation ids, the response size cap) under ``kafka_client``'s
``AsyncConnection`` (replica fetchers, quorum forwarding; and ``interbroker``'s
connections per destination broker: transaction markers, KIP-890 verification, share
state) and ``BlockingConnection`` (the command line, ``broker/harness``, tests).

It sits on the lowest floors of ``broker/`` (docs/layout.md): it imports nothing of the
broker, so every room that talks to another broker may use it."""
