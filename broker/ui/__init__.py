"""The live replication view: a web page each broker serves on its metrics port.

    snapshot.py        pure functions: the statuses of the brokers (``protocol/status.py``)
                       → one JSON snapshot of the cluster's replication; two consecutive
                       snapshots → the events between them (leader epoch changes, ISR
                       shrinks and expansions, fencing, truncation)
    feed.py            ``ReplicationFeed``: one poller per endpoint, running only while a
                       page watches, that builds a snapshot every ``INTERVAL_S`` from this
                       broker's status and its peers' (asked over the inter-broker
                       listener), diffs it and hands both to every subscriber
    replication.html   the page: one self-contained file (inline CSS and JS, nothing
                       fetched from elsewhere) that reads ``/replication/events``
                       (server-sent events), keeps the last minute of LEO/HW samples per
                       partition for its SVG charts, and shows the event log

Where the work is done: the cluster-wide picture is assembled on the broker serving the
page (so a browser needs one URL, and no cross-origin requests), and events are derived
there too (so they are unit-tested in Python and identical for every viewer); the page
only keeps history and draws.  ``broker/metrics/endpoint.py`` serves the page and the
stream; ``broker/node.py`` hands both to it (the view sits above metrics, which never
imports it).
"""
from __future__ import annotations

from importlib import resources

PAGE_RESOURCE = "replication.html"


def page() -> bytes:
    """The page's bytes, read from the package (so it ships in the wheel)."""
    return resources.files(__name__).joinpath(PAGE_RESOURCE).read_bytes()
