"""Everything that runs: the Broker (``node``) and its rooms — ``network`` (client
connections), ``api`` (request handlers), ``replication`` (partitions, fetchers,
delayed produces and fetches), ``purgatory`` (delayed operations), ``controller``
(cluster metadata on Raft), ``groups`` (consumer groups) — and the tools beside it:
``cli``, ``testing`` (the pytest plugin), ``verify``.  See docs/layout.md."""
