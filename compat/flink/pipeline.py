"""A PyFlink 2.0 SQL job: Kafka source -> exactly-once Kafka sink, run by ``make compat-all``.

Runs in its own venv (``compat/venvs.py`` builds ``~/.cache/raftwood/flink-venv`` with
``apache-flink==2.0.0`` and ``shigawire-apache-flink-libraries==2.0.0.post1``, whose
wheel adds flink-connector-kafka 4.0.1-2.0 and kafka-clients 3.9.1 to ``pyflink/lib``).
One statement, on a local mini-cluster of parallelism 1::

    INSERT INTO sink SELECT CONCAT('out-', v) FROM source

``source`` reads the input topic from its earliest offset (raw string values); ``sink``
writes with ``sink.delivery-guarantee = exactly-once``: Flink's KafkaSink writes each
checkpoint's records in a transaction and commits it when the checkpoint completes
(every ``RAFTWOOD_FLINK_CHECKPOINT_MS``), so a read_committed reader sees each input once.
A failed task (a broker gone) restarts from the last checkpoint (fixed-delay restarts),
aborting the transactions it left open.  The transaction timeout is lowered to 60 s:
Flink's default (1 hour) is over Kafka's ``transaction.max.timeout.ms`` (15 minutes).

Environment: ``RAFTWOOD_FLINK_BOOTSTRAP``, ``RAFTWOOD_FLINK_INPUT``, ``RAFTWOOD_FLINK_OUTPUT``,
``RAFTWOOD_FLINK_GROUP``; it prints ``JOB SUBMITTED <job id>`` once the job runs, and
exits by itself after ``RAFTWOOD_FLINK_MAX_SECONDS`` (default 600).
"""
from __future__ import annotations

import os
import sys
import threading

from pyflink.table import EnvironmentSettings, TableEnvironment

CHECKPOINT_MS = int(os.environ.get("RAFTWOOD_FLINK_CHECKPOINT_MS", "2000"))
MAX_SECONDS = float(os.environ.get("RAFTWOOD_FLINK_MAX_SECONDS", "600"))


def table_environment() -> TableEnvironment:
    """Streaming, parallelism 1, checkpoints every CHECKPOINT_MS, restarts on failure."""
    tenv = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = tenv.get_config()
    for key, value in {
        "parallelism.default": "1",
        "execution.checkpointing.interval": f"{CHECKPOINT_MS} ms",
        "execution.checkpointing.mode": "EXACTLY_ONCE",
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "30",
        "restart-strategy.fixed-delay.delay": "2 s",
    }.items():
        config.set(key, value)
    return tenv


def ddl(name: str, topic: str, bootstrap: str, extra: dict[str, str]) -> str:
    options = {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": bootstrap,
               "format": "raw", **extra}
    listed = ",\n  ".join(f"'{k}' = '{v}'" for k, v in options.items())
    return f"CREATE TABLE {name} (v STRING) WITH (\n  {listed}\n)"


def main() -> None:
    bootstrap = os.environ["RAFTWOOD_FLINK_BOOTSTRAP"]
    tenv = table_environment()
    tenv.execute_sql(ddl("source", os.environ["RAFTWOOD_FLINK_INPUT"], bootstrap, {
        "properties.group.id": os.environ.get("RAFTWOOD_FLINK_GROUP", "raftwood-flink"),
        "scan.startup.mode": "earliest-offset",
    }))
    tenv.execute_sql(ddl("sink", os.environ["RAFTWOOD_FLINK_OUTPUT"], bootstrap, {
        "sink.delivery-guarantee": "exactly-once",
        "sink.transactional-id-prefix": "raftwood-flink",
        "properties.transaction.timeout.ms": "60000",
    }))
    result = tenv.execute_sql("INSERT INTO sink SELECT CONCAT('out-', v) FROM source")
    client = result.get_job_client()
    print(f"JOB SUBMITTED {client.get_job_id() if client else '?'}", flush=True)
    waiter = threading.Thread(target=result.wait, daemon=True)
    waiter.start()
    waiter.join(MAX_SECONDS)
    print(f"flink pipeline: stopping after {MAX_SECONDS} s" if waiter.is_alive()
          else "flink pipeline: the job ended", file=sys.stderr, flush=True)
    os._exit(3 if waiter.is_alive() else 0)


if __name__ == "__main__":
    main()
