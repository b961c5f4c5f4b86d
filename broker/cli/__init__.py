"""The ``raftwood`` command line: ``main`` (argument parsing, ``raftwood start``),
``dev`` (a local cluster with a live table), ``admin`` (topics, cluster), ``groups``,
``verify``; ``client`` is their Kafka connection, ``status`` and ``tables`` render
what brokers report."""
from .main import main

__all__ = ["main"]
