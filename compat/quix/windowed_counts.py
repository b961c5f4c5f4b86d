"""A Quix Streams app: exactly-once tumbling-window counts per key, run by the tests.

Runs in its own venv (``compat/venvs.py``: quixstreams pins confluent-kafka below 2.13).
It reads the input topic (string keys, JSON values), counts the records of each key in
tumbling windows of ``RAFTWOOD_QUIX_WINDOW_MS`` by record timestamp, and writes every
updated count to the output topic (key: the input key; value: JSON ``{"start", "end",
"value"}``), with ``processing_guarantee="exactly-once"``: the output records, the window
state's changelog and the consumer offsets of each checkpoint commit in one Kafka
transaction.  Read with read_committed, the counts of one key and window are therefore
1, 2, ... n in order, each once.

Quix gives each run a new random ``transactional.id``: the open transaction of a run
killed mid-checkpoint is not fenced by the next run but aborted by the broker when its
``transaction.timeout.ms`` passes (``RAFTWOOD_QUIX_TXN_TIMEOUT_MS``), and until then it
holds the last stable offset of the topics it wrote (the changelog the next run
restores from, the output).

Environment: ``RAFTWOOD_QUIX_BOOTSTRAP``, ``RAFTWOOD_QUIX_GROUP``, ``RAFTWOOD_QUIX_INPUT``,
``RAFTWOOD_QUIX_OUTPUT``, ``RAFTWOOD_QUIX_STATE_DIR``; the app exits by itself after
``RAFTWOOD_QUIX_MAX_SECONDS`` (default 300).
"""
from __future__ import annotations

import os
import sys
import threading

from quixstreams import Application

WINDOW_MS = int(os.environ.get("RAFTWOOD_QUIX_WINDOW_MS", "10000"))
TXN_TIMEOUT_MS = int(os.environ.get("RAFTWOOD_QUIX_TXN_TIMEOUT_MS", "10000"))
MAX_SECONDS = float(os.environ.get("RAFTWOOD_QUIX_MAX_SECONDS", "300"))


def build() -> Application:
    """The application with its dataframe: input -> tumbling count per key -> output."""
    app = Application(
        broker_address=os.environ["RAFTWOOD_QUIX_BOOTSTRAP"],
        consumer_group=os.environ["RAFTWOOD_QUIX_GROUP"],
        processing_guarantee="exactly-once",
        auto_offset_reset="earliest",
        commit_interval=0.5,
        state_dir=os.environ["RAFTWOOD_QUIX_STATE_DIR"],
        producer_extra_config={"transaction.timeout.ms": TXN_TIMEOUT_MS},
        loglevel="INFO",
    )
    source = app.topic(os.environ["RAFTWOOD_QUIX_INPUT"], key_deserializer="str",
                       value_deserializer="json")
    sink = app.topic(os.environ["RAFTWOOD_QUIX_OUTPUT"], key_serializer="str",
                     value_serializer="json")
    frame = app.dataframe(source)
    frame = frame.tumbling_window(duration_ms=WINDOW_MS).count().current()
    frame.to_topic(sink)
    return app


def main() -> None:
    def give_up() -> None:
        print(f"quix windowed counts: {MAX_SECONDS} s passed, stopping", file=sys.stderr,
              flush=True)
        os._exit(3)

    timer = threading.Timer(MAX_SECONDS, give_up)
    timer.daemon = True
    timer.start()
    build().run()


if __name__ == "__main__":
    main()
