"""The live replication view (broker/ui) in a real headless browser (issue #16).

Three brokers serve their metrics port; Debian's chromium, driven by Selenium through
the system chromedriver (``make system-deps`` installs both; Selenium never downloads a
driver or a browser here), opens broker 1's ``/replication`` page and must show the three
brokers and the topic's partition with its leader and ISR; then a follower is killed
with SIGKILL and the page must show the ISR shrink, in the ISR cell and in the event
log, within ``SLACK_S``, and the election of the partition that broker led; started
again, it catches up and the page shows the ISR expand.  A producer keeps writing
meanwhile so the LEO/HW charts move.

The screenshot goes to ``tmp_path``, or to the path in ``RAFTWOOD_SCREENSHOT``: that is
how ``docs/replication-view.png`` in the README is made::

    RAFTWOOD_SCREENSHOT=docs/replication-view.png \
        pytest tests/integration/test_replication_view_browser.py

Skipped, with the reason, when chromium, chromedriver or the selenium package is missing.
"""
from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from broker.testing import ClusterProcess, build_batch, free_ports

SLACK_S = 30.0
TOPIC = "watched"
WIDTH, HEIGHT = 1200, 800


def _find(*candidates: str) -> str | None:
    for candidate in candidates:
        found = shutil.which(candidate) or (candidate if os.access(candidate, os.X_OK)
                                            else None)
        if found:
            return found
    return None


CHROMIUM = _find("chromium", "chromium-browser", "/usr/lib/chromium/chromium")
CHROMEDRIVER = _find("chromedriver", "/usr/lib/chromium/chromedriver", "/usr/bin/chromedriver")


@pytest.fixture
def browser():
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="the selenium package is not installed (pip install "
                                     "-e '.[test]')")
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("Debian's chromium and chromium-driver are not installed "
                    "(make system-deps)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--disable-extensions",
                     "--no-first-run", f"--window-size={WIDTH},{HEIGHT}"):
        options.add_argument(argument)
    # Both paths are given, so Selenium Manager (which would download a driver) is not run.
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        # The page's own viewport, whatever the window decorations take.
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
        yield driver
    finally:
        driver.quit()   # ends chromium and chromedriver


class Producer(threading.Thread):
    """Writes a small batch to the leader every 50 ms until stopped; errors (the ISR
    moving under it) are ignored: it only feeds the charts."""

    def __init__(self, cluster: ClusterProcess, leader: int):
        super().__init__(daemon=True)
        self.cluster, self.leader = cluster, leader
        self.halt = threading.Event()

    def run(self) -> None:
        try:
            with self.cluster.connect(self.leader) as conn:
                n = 0
                while not self.halt.wait(0.05):
                    batch = build_batch([(None, b"v%d" % (n + i), int(time.time() * 1000), [])
                                         for i in range(5)])
                    conn.produce(TOPIC, 0, batch, acks=1)
                    n += 5
        except Exception:  # noqa: BLE001  (the leader stopping ends the feed, nothing more)
            pass


def wait_for(driver, predicate, what: str, cluster: ClusterProcess, timeout_s: float = SLACK_S):
    """Poll the page until ``predicate(driver)`` holds; fail with the page's text."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if predicate(driver):
                return
        except Exception:  # noqa: BLE001  (elements replaced while read: read again)
            pass
        time.sleep(0.2)
    text = driver.find_element("tag name", "body").text
    raise AssertionError(f"the page never showed {what} within {timeout_s}s; it shows:\n"
                         f"{text}\n\n{cluster.describe()}")


# Read in one script call: the page redraws its table every snapshot, so elements found
# in one call may be gone by the next.
PAGE_STATE = """
const row = document.querySelector('tr[data-partition="' + arguments[0] + '"]');
const brokers = {};
for (const card of document.querySelectorAll('#brokers .broker'))
  brokers[card.dataset.brokerId] = card.dataset.state;
return {
  brokers: brokers,
  row: row && {
    leader: row.querySelector('td.leader').textContent,
    isr: row.querySelector('td.isr').dataset.isr,
    isr_text: row.querySelector('td.isr').textContent,
    hw: row.querySelector('td.hw').textContent,
    classes: row.className,
    replicas: row.querySelectorAll('.replica').length,
    lines: row.querySelectorAll('svg polyline').length},
  events: Array.from(document.querySelectorAll('#events li')).map(
    li => ({kind: li.dataset.kind, partition: li.dataset.partition || null,
            text: li.textContent}))};
"""


def page_state(driver) -> dict:
    return driver.execute_script(PAGE_STATE, f"{TOPIC}-0")


def line_segments(driver, replica: int) -> int:
    """How many pieces the chart of TOPIC-0 draws ``replica``'s LEO line in."""
    return driver.execute_script(
        "const row = document.querySelector('tr[data-partition=\"' + arguments[0] + '\"]');"
        "return row ? row.querySelectorAll('svg polyline[data-replica=\"' + arguments[1] +"
        " '\"]').length : 0;", f"{TOPIC}-0", replica)


# An event of an internal topic, logged by the page's own function as if the feed had
# sent it; then whether it is shown.
INTERNAL_EVENT = """
logEvents([{ts: Date.now(), kind: "leader_change", topic: "__consumer_offsets",
            partition: 7, text: "leader 1 → 2 (epoch 9)"}]);
"""
INTERNAL_EVENT_SHOWN = """
const li = document.querySelector('#events li[data-partition="__consumer_offsets-7"]');
return li === null ? null : !li.hidden;
"""


def test_the_page_shows_the_cluster_and_an_isr_shrink_after_a_follower_is_killed(
        browser, raftwood_cluster_factory, tmp_path):
    ports = dict(zip((1, 2, 3), free_ports(3)))
    cluster = raftwood_cluster_factory(
        broker_settings={node: {"metrics.port": str(port)} for node, port in ports.items()})
    # The follower to kill is not the controller (no Raft election in the way); it leads
    # partition 1, so its death also shows an election.
    controller = cluster.controller_id()
    follower = next(n for n in (2, 3) if n != controller)
    other = 5 - follower
    cluster.create_topic(TOPIC, assignments=[[1, 2, 3], [follower, 1, other]])
    cluster.wait_for_isr(TOPIC, 0, [1, 2, 3])
    cluster.wait_for_isr(TOPIC, 1, [1, 2, 3])
    producer = Producer(cluster, 1)
    producer.start()
    try:
        browser.get(f"http://127.0.0.1:{ports[1]}/replication")
        assert "replication" in browser.title

        # The cluster: three live brokers, the partition led by 1 with the full ISR.
        wait_for(browser, lambda d: page_state(d)["brokers"] == {"1": "alive", "2": "alive",
                                                                 "3": "alive"},
                 "three live brokers", cluster)
        wait_for(browser, lambda d: (page_state(d)["row"] or {}).get("leader") == "1"
                 and page_state(d)["row"]["isr"] == "1,2,3",
                 f"{TOPIC}-0 led by 1 with ISR [1,2,3]", cluster)
        wait_for(browser, lambda d: page_state(d)["row"]["lines"] >= 2
                 and int(page_state(d)["row"]["hw"]) >= 200,
                 "the LEO/HW chart and the HW moving past 200", cluster)
        state = page_state(browser)["row"]
        assert (state["isr_text"], state["replicas"]) == ("[1,2,3]", 3)

        # The follower dies.
        remaining = ",".join(str(n) for n in sorted({1, 2, 3} - {follower}))
        cluster.kill(follower)
        shrink = f"ISR shrink [1,2,3] → [{remaining}]"
        wait_for(browser, lambda d: page_state(d)["row"]["isr"] == remaining,
                 f"the ISR cell shrunk to [{remaining}]", cluster)
        wait_for(browser, lambda d: any(
            e["kind"] == "isr_shrink" and e["partition"] == f"{TOPIC}-0" and shrink in e["text"]
            for e in page_state(d)["events"]), f"the event {shrink!r}", cluster)
        wait_for(browser, lambda d: page_state(d)["brokers"][str(follower)]
                 in ("fenced", "unreachable"), f"broker {follower} fenced or not answering",
                 cluster)
        state = page_state(browser)
        assert "under" in state["row"]["classes"]
        assert state["row"]["isr_text"] == f"[{remaining}]"
        # Partition 1 lost its leader: an election, shown with the new epoch.
        wait_for(browser, lambda d: any(
            e["kind"] == "leader_change" and e["partition"] == f"{TOPIC}-1"
            and f"leader {follower} → " in e["text"] for e in page_state(d)["events"]),
                 f"the election of {TOPIC}-1", cluster)

        # It comes back: it catches up and the ISR expands again.
        time.sleep(3)   # a stretch of the chart with the follower standing still
        cluster.start(follower)
        wait_for(browser, lambda d: page_state(d)["row"]["isr"] == "1,2,3" and any(
            e["kind"] == "isr_expand" and e["partition"] == f"{TOPIC}-0"
            for e in page_state(d)["events"]), "the ISR expanding back to [1,2,3]", cluster)
        wait_for(browser, lambda d: page_state(d)["brokers"] == {"1": "alive", "2": "alive",
                                                                 "3": "alive"},
                 "the three brokers alive again", cluster)

        # The outage is a gap in the follower's LEO line, not a line drawn across it.
        wait_for(browser, lambda d: line_segments(d, follower) >= 2,
                 f"broker {follower}'s LEO line broken by its outage", cluster)

        # Internal topics' events follow the "internal topics" box, as their rows do.
        browser.execute_script(INTERNAL_EVENT)
        assert browser.execute_script(INTERNAL_EVENT_SHOWN) is False
        browser.find_element("id", "show-internal").click()
        assert browser.execute_script(INTERNAL_EVENT_SHOWN) is True
        browser.find_element("id", "show-internal").click()
        assert browser.execute_script(INTERNAL_EVENT_SHOWN) is False

        # The picture for the README (RAFTWOOD_SCREENSHOT) lets the charts show the
        # catching up first; the test's own screenshot need not wait for that.
        if os.environ.get("RAFTWOOD_SCREENSHOT"):
            time.sleep(3)
        target = Path(os.environ.get("RAFTWOOD_SCREENSHOT") or tmp_path / "replication-view.png")
        target.parent.mkdir(parents=True, exist_ok=True)
        assert browser.save_screenshot(str(target))
        assert target.stat().st_size > 10_000
    finally:
        producer.halt.set()
        producer.join(10)
