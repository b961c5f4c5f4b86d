"""log.format: text lines as before, or one JSON object a line with a state change's fields."""
from __future__ import annotations

import io
import json
import logging

import pytest

from broker import logs
from broker.config import ConfigError, load


@pytest.fixture
def restore_root():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def test_json_lines_carry_the_state_change_fields(restore_root):
    out = io.StringIO()
    logs.configure("INFO", "json", out)
    logging.getLogger("broker.test").info(
        "[Partition t-0 broker=1] isr %s -> %s", [1, 2, 3], [1, 3],
        extra=logs.state_change(partition="t-0", leader_epoch=4, isr=[1, 3],
                                reason="isr-changed"))
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("broker.test").exception("failed")
    first, second = [json.loads(line) for line in out.getvalue().splitlines()]
    assert first["message"] == "[Partition t-0 broker=1] isr [1, 2, 3] -> [1, 3]"
    assert (first["partition"], first["leader_epoch"], first["isr"], first["reason"]) == \
        ("t-0", 4, [1, 3], "isr-changed")
    assert first["level"] == "INFO" and first["logger"] == "broker.test"
    assert first["ts"].endswith("Z") and "T" in first["ts"]
    assert second["level"] == "ERROR" and "ValueError: boom" in second["exc"]


def test_text_lines_stay_as_they_were(restore_root):
    out = io.StringIO()
    logs.configure("INFO", "text", out)
    logging.getLogger("broker.test").info("hello %d", 7, extra=logs.state_change(reason="x"))
    line = out.getvalue().strip()
    assert line.endswith(" INFO broker.test hello 7") and "reason" not in line


def test_an_unknown_format_is_refused():
    with pytest.raises(ConfigError):
        load(None, ["log.format=xml"])
    assert load(None, ["log.format=JSON"])["log.format"] == "json"
