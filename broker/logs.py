"""How the broker writes its log: Kafka-style text lines, or one JSON object a line.

``log.format`` (a Raftwood setting): ``text`` (the default) writes
``2026-11-23 02:33:23,123 INFO broker.replication.partition [Partition t-0 broker=1] ...``;
``json`` writes one object per line with ``ts`` (ISO 8601, UTC, milliseconds),
``level``, ``logger`` and ``message``, plus the structured fields a state change carries
(``partition``, ``broker``, ``leader``, ``leader_epoch``, ``partition_epoch``, ``isr``,
``reason``, ...: whatever the call passed as ``extra``), so a log pipeline can follow one
partition's leader epochs and ISR without parsing sentences.  An exception's traceback
goes into ``exc``.  ``state_change(**fields)`` is the ``extra`` the replication layer
passes with its one-line-per-change messages; the text format ignores it.
"""
from __future__ import annotations

import json
import logging
import time
from typing import TextIO

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

# Every attribute a plain LogRecord has: anything else on a record came from ``extra``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message",
                                                                             "asctime"}


def state_change(**fields: object) -> dict[str, object]:
    """``extra=`` for a state-change log line: the fields under their own names."""
    return fields


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(level: str, log_format: str = "text", stream: TextIO | None = None) -> None:
    """Install the root handler (replacing any): ``log_format`` one of FORMATS."""
    if log_format not in FORMATS:
        raise ValueError(f"log.format must be one of {', '.join(FORMATS)}, not {log_format!r}")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if log_format == "json"
                         else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
