"""Prometheus metrics of one broker, with Kafka's metric names.

    stats.py      counters the hot paths update (requests, bytes per topic, ISR changes):
                  plain dicts and ints, one lookup and an add per event
    loop.py       how busy the event loop is: its thread's CPU time, and a timer's lag
    collector.py  every family, read from live state at scrape time (gauges) or from
                  the stats (counters, histograms); the names (``METRIC_NAMES``)
    client_metrics.py  KIP-714: client instances, their subscription and pushes, and the
                  metrics they pushed as a collector of their own (the Broker registers
                  the ApiContext's ``telemetry`` in its registry)
    otlp.py       OTLP ``MetricsData`` protobufs as Prometheus samples
    endpoint.py   ``GET /metrics`` over HTTP on the broker's event loop, and the replication
                  view (``/replication``, ``/replication/events``) when the node hands in
                  ``broker/ui``'s page and feed (metrics sits below the view: it never
                  imports it)

Ownership: the Broker owns one ``BrokerMetrics``: a ``CollectorRegistry`` of its own
(never prometheus_client's global one, so nothing of another broker, or of the library's
process collectors, ends up in it), the ``RequestStats`` its connections record into,
the event loop's ``LoopProbe`` (started with the broker, whether or not the endpoint
serves), and the endpoint, which serves only when ``metrics.port`` is set (0, the
default: no endpoint) and stops in ``Broker.shutdown``.  The ReplicaManager owns its
``ReplicaStats``.  Counting is always on: it costs too little to need a switch.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client.registry import CollectorRegistry

from .collector import METRIC_NAMES, BrokerCollector, MetricSources
from .endpoint import MetricsEndpoint
from .loop import LoopProbe
from .stats import ReplicaStats, RequestStats

__all__ = ["BrokerMetrics", "BrokerCollector", "LoopProbe", "METRIC_NAMES",
           "MetricSources", "MetricsEndpoint", "ReplicaStats", "RequestStats"]


class BrokerMetrics:
    """One broker's registry, request stats and endpoint. Event-loop only."""

    def __init__(self, config: Any, sources: MetricSources,
                 replication_feed: Callable[[], object] | None = None,
                 replication_page: Callable[[], bytes] | None = None):
        """``config``: the broker's BrokerConfig (``metrics.host``/``metrics.port``,
        ``node_id``); ``sources``: what the collector reads at scrape time.
        ``replication_feed`` makes the replication view's feed (called once, when the
        endpoint starts); with ``replication_page`` the endpoint serves the view."""
        self.requests = RequestStats()
        self.loop = LoopProbe()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(sources, self.requests, self.loop))
        self.host = config["metrics.host"]
        self.port = config["metrics.port"]
        self.endpoint: MetricsEndpoint | None = None
        self._replication_feed = replication_feed
        self._replication_page = replication_page
        self._prefix = f"[Metrics broker={config.node_id}]"

    async def start(self) -> None:
        """Listen on ``metrics.host:metrics.port`` when the port is set (an OSError, such
        as the port being taken, stops the broker's start like its Kafka listener's).
        The loop probe starts either way."""
        self.loop.start()
        if self.port <= 0 or self.endpoint is not None:
            return
        view = self._replication_feed is not None and self._replication_page is not None
        self.endpoint = MetricsEndpoint(
            self.registry, self.host, self.port, self._prefix,
            replication=self._replication_feed() if view else None,
            page=self._replication_page if view else None)
        await self.endpoint.start()

    async def stop(self) -> None:
        self.loop.stop()
        if self.endpoint is not None:
            await self.endpoint.stop()
