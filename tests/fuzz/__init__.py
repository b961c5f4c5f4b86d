"""A fuzzing campaign against a real 3-broker Raftwood cluster.

Run it with ``python -m tests.fuzz`` from the repository root (``--help`` lists the
options).  It starts a cluster (or attaches to one), runs an acks=all producer load
beside it, and sends generated and mutated requests over many connections; at the end
it checks that every broker is alive and serving, that every acknowledged record reads
back intact, and that the brokers' logs hold no traceback.

Modules, one concept each:

* ``requests``: valid requests of every served API and version, built from the JSON
  schemas kafka-python's message classes carry (nulls where a field may not be null on
  request).
* ``batches``: record batches as producers send them, and lying ones (bad CRC, a codec
  the bytes are not in, counts and lengths that do not match).
* ``mutate``: frame-level mutations (bytes flipped, inserted, deleted; truncated and
  extended frames; wrong api keys and versions; absurd lengths and counts).
* ``judge``: what an answer means: a well-formed response of the matching class whose
  error codes are Kafka's, or a violation.
* ``load``: the acks=all producer and the read-back of everything it was acknowledged.
* ``engine``: the connections, pipelined, over one selector.
* ``campaign``: the whole run and its report; ``__main__`` its command line.
"""
