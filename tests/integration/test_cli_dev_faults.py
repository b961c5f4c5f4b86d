"""Faults at ``raftwood dev``'s keyboard: ``raftwood dev kill|pause|resume N`` and the keys
``k``/``p``/``c`` then N act on a real dev cluster's brokers, the table shows the broker
down or ``paused``, and every fault is recorded where the replication view serves it.

One two-broker ``raftwood dev`` for the module (broker 1 the only metadata voter, so the
cluster keeps its controller while broker 2 is down or paused), its stdin a pseudo
terminal so its keys are live; the last test opens the view in headless chromium
(skipped without it) and sees a fault marked on a partition's chart and in the event
log.  Every wait is bounded; everything started is stopped.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.dev_keyboard import FEED_TIMEOUT_S, KeyedDevRun
from tests.integration.dev_keyboard import first_feed_message as _first_feed_message
from tests.integration.dev_keyboard import recorded as _recorded
from tests.integration.dev_keyboard import row as _row
from tests.integration.test_cli import (
    START_TIMEOUT_S,
    free_port_block,
    process_gone,
    raftwood,
)
from tests.integration.test_replication_view_browser import browser  # noqa: F401

pytestmark = pytest.mark.slow

ACTION_TIMEOUT_S = START_TIMEOUT_S + 30


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    run = KeyedDevRun(tmp_path_factory.mktemp("dev-faults"), free_port_block(2, raft=True))
    try:
        run.wait_for_line(r"^bootstrap servers: ", START_TIMEOUT_S * 2 + 10)
        run.wait_for_line(r"^keys: 1-2 restart that broker, k1-2 kill -9, p1-2 pause", 30)
        yield run
    finally:
        run.close()


def _act(dev: KeyedDevRun, action: str, node_id: int) -> subprocess.CompletedProcess:
    return raftwood("dev", action, str(node_id), "--data-dir", str(dev.data_dir),
                    timeout_s=ACTION_TIMEOUT_S)


def _process_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_dev_kill_shows_the_broker_down_until_the_key_restarts_it(dev):
    old_pid = dev.broker_pids()[1]
    killed = _act(dev, "kill", 2)
    assert killed.returncode == 0, killed
    assert "broker 2 killed (exit code -9)" in killed.stdout
    _row(dev, 2, r"down \(-9\)")
    assert process_gone(old_pid)
    dev.press("k2")
    dev.wait_for_line(r"^cannot kill broker 2: broker 2 is not running", 30)
    dev.press("2")
    new_pid = int(dev.wait_for_line(r"^restarting broker 2 \(\S+, pid (\d+)\)", 30).group(1))
    deadline = time.monotonic() + 60
    while True:
        match = _row(dev, 2, "up", max(1.0, deadline - time.monotonic()))
        if int(match.group(1)) == new_pid:
            break
    assert _recorded(dev) == [("kill", 2, "command"), ("restart", 2, "key")]


def test_keys_p_and_c_pause_and_resume_a_broker(dev):
    pid = int(_row(dev, 1, "up").group(1))
    dev.press("p1")
    assert int(_row(dev, 1, "paused").group(1)) == pid
    assert _process_state(pid) in ("T", "t"), "SIGSTOP really stopped it"
    dev.press("p1")
    dev.wait_for_line(r"^cannot pause broker 1: broker 1 is paused already", 30)
    dev.press("c1")
    _row(dev, 1, "up")
    assert _process_state(pid) not in ("T", "t")
    assert _recorded(dev)[-2:] == [("pause", 1, "key"), ("resume", 1, "key")]
    os.kill(pid, signal.SIGSTOP)   # stopped behind dev's back: shown paused all the same
    _row(dev, 1, "paused")
    dev.press("c1")
    _row(dev, 1, "up")
    assert _process_state(pid) not in ("T", "t")


def test_every_fault_is_in_the_replication_views_feed(dev):
    paused = _act(dev, "pause", 2)
    assert paused.returncode == 0, paused
    _row(dev, 2, "paused")
    resumed = _act(dev, "resume", 2)
    assert resumed.returncode == 0, resumed
    _row(dev, 2, "up")
    not_paused = _act(dev, "resume", 2)
    assert not_paused.returncode == 1 and "broker 2 is not paused" in not_paused.stderr
    recorded = _recorded(dev)
    assert recorded[-2:] == [("pause", 2, "command"), ("resume", 2, "command")]
    message = _first_feed_message(dev.port + 300)    # broker 1's metrics port
    faults = [e for e in message["events"] if e["kind"] == "fault"]
    assert [(e["action"], e["broker"]) for e in faults] == [(a, b) for a, b, _ in recorded]
    assert all(e["topic"] is None and isinstance(e["ts"], int) for e in faults)
    assert "fault: pause (SIGSTOP) broker 2" in [e["text"] for e in faults]


PAGE_FAULTS = """
const row = document.querySelector('tr[data-partition="' + arguments[0] + '"]');
const card = document.querySelector('#brokers .broker[data-broker-id="2"]');
return {
  marks: row ? Array.from(row.querySelectorAll('svg g[data-fault]')).map(
    g => g.dataset.fault) : null,
  paused_badge: card !== null && card.querySelector('.badge.paused') !== null,
  logged: Array.from(document.querySelectorAll('#events li[data-kind="fault"]')).map(
    li => li.textContent)};
"""


def _page_shows(driver, what: str, predicate) -> dict:
    deadline = time.monotonic() + FEED_TIMEOUT_S
    while True:
        try:
            state = driver.execute_script(PAGE_FAULTS, "marked-0")
            if predicate(state):
                return state
        except Exception:  # noqa: BLE001  (the page redrew under the script: read again)
            state = None
        assert time.monotonic() < deadline, f"the page never showed {what}: {state}"
        time.sleep(0.2)


def test_the_page_marks_a_fault_on_the_chart_beside_what_it_caused(dev, browser):  # noqa: F811
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=dev.bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic("marked", 1, 2)])
    finally:
        admin.close()
    browser.get(f"http://127.0.0.1:{dev.port + 300}/replication")
    recorded = len(_recorded(dev))
    _page_shows(browser, "the partition and every recorded fault in the log",
                lambda s: s["marks"] is not None and len(s["logged"]) == recorded)
    dev.press("p2")
    _row(dev, 2, "paused")
    state = _page_shows(browser, "the pause marked on the chart, broker 2 paused",
                        lambda s: "p2" in s["marks"] and s["paused_badge"])
    assert state["logged"][0].endswith("fault: pause (SIGSTOP) broker 2 (key)")
    dev.press("c2")
    _row(dev, 2, "up")
    state = _page_shows(browser, "the resume marked and the badge gone",
                        lambda s: "c2" in s["marks"] and not s["paused_badge"])
    assert state["marks"].index("p2") < state["marks"].index("c2")
