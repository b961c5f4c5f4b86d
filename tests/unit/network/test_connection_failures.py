"""A handler that fails on what a peer sent closes that connection and logs: the first
failure of its kind with a traceback, its repeats from any connection at most once per
interval and without one, so no peer can flood the log.  (The connection's stand-ins are
test_connection's.)"""
from __future__ import annotations

import logging

from broker.network import connection as connection_module
from broker.network.log_limit import RateLimitedLog
from tests.unit.network.test_connection import (  # noqa: F401  (handlers: a fixture)
    FakeBroker,
    api_versions,
    handlers,
    open_connection,
    run,
    settle,
)


def test_repeated_handler_failures_log_one_traceback(handlers, monkeypatch, caplog):
    limited = RateLimitedLog(connection_module.log, interval_s=3600)
    monkeypatch.setattr(connection_module, "peer_log", limited)
    caplog.set_level(logging.INFO, logger=connection_module.log.name)
    broker = FakeBroker()

    async def scenario():
        transports = []
        for _ in range(50):
            handlers.results[7] = TypeError("'NoneType' object is not subscriptable")
            conn, transport = open_connection(broker)
            conn.data_received(api_versions(7))
            transports.append(transport)
        await settle()
        assert all(t.closed for t in transports)

    run(scenario)
    failures = [r for r in caplog.records if "failed (TypeError)" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is not None
    assert sum(state[1] for kind, state in limited._kinds.items() if kind[0] == "failed") == 49
