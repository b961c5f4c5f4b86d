"""A Faust (faust-streaming) app counting records per key in a table, run by the tests.

One agent reads the input topic (raw string keys and values) and adds one to the key's
entry of the table ``counts``; Faust writes every table change to the compacted topic
``<app id>-counts-changelog`` (key and value JSON-encoded), so the last changelog value
of a key is the app's count for it.  The input topic has one partition: Faust's tables
are partitioned like the stream that updates them.  Faust's guarantee is at-least-once,
and its agents' output (the changelog here) is not written in transactions.

Configured from the environment, then run as Faust's worker::

    RAFTWOOD_FAUST_BOOTSTRAP=127.0.0.1:9092,127.0.0.1:9093 RAFTWOOD_FAUST_APP_ID=demo \\
    RAFTWOOD_FAUST_INPUT=words python -m compat.faust.counter worker --without-web -l info

``RAFTWOOD_FAUST_REPLICATION`` (default 3) is the replication factor of the topics Faust
creates; ``RAFTWOOD_FAUST_DATADIR`` the folder Faust keeps its files in (default
``<app id>-data`` in the working directory); the worker exits by itself after
``RAFTWOOD_FAUST_MAX_SECONDS`` (default 300).
"""
from __future__ import annotations

import asyncio
import os
import sys

import faust

BOOTSTRAP = os.environ.get("RAFTWOOD_FAUST_BOOTSTRAP", "127.0.0.1:9092")
APP_ID = os.environ.get("RAFTWOOD_FAUST_APP_ID", "raftwood-faust")
INPUT = os.environ.get("RAFTWOOD_FAUST_INPUT", "faust-input")
REPLICATION = int(os.environ.get("RAFTWOOD_FAUST_REPLICATION", "3"))
MAX_SECONDS = float(os.environ.get("RAFTWOOD_FAUST_MAX_SECONDS", "300"))
DATADIR = os.environ.get("RAFTWOOD_FAUST_DATADIR", f"{APP_ID}-data")

app = faust.App(
    APP_ID,
    broker=";".join(f"kafka://{hostport}" for hostport in BOOTSTRAP.split(",")),
    store="memory://",
    datadir=DATADIR,
    web_enabled=False,
    topic_replication_factor=REPLICATION,
    topic_partitions=1,
    broker_commit_interval=0.5,
    consumer_auto_offset_reset="earliest",
)
source = app.topic(INPUT, key_type=str, value_type=str, key_serializer="raw",
                   value_serializer="raw", partitions=1)
counts = app.Table("counts", default=int, key_type=str, value_type=int, partitions=1)


@app.agent(source)
async def count(stream):
    """One more for the key of every input record (at-least-once, as Faust processes)."""
    async for key, _value in stream.items():
        counts[key] += 1


@app.task
async def stop_after_max_seconds():
    """The worker never outlives its bound, even if the test that started it is gone."""
    await asyncio.sleep(MAX_SECONDS)
    print(f"faust counter: {MAX_SECONDS} s passed, stopping", file=sys.stderr, flush=True)
    os._exit(3)


if __name__ == "__main__":
    app.main()
