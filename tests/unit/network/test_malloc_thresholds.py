"""broker.malloc_thresholds: large frames reuse the heap's pages instead of fresh ones.

Each check runs in a fresh interpreter (the thresholds are process-wide and would
leak into the rest of the test run) and counts minor page faults, not time: 50 frames
of 1 MB fed through the FrameReader in 256 KiB reads, then copied once as the produce
path copies its batch.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

CHILD = """
import resource, sys
from protocol.framing import FrameReader, frame
if sys.argv[1] == "on":
    from broker.malloc_thresholds import keep_large_buffers_on_heap
    print(keep_large_buffers_on_heap())
else:
    print("default")
stream = frame(b"\\0" * 8 + b"x" * 1_000_000)
chunks = [stream[i:i + 262144] for i in range(0, len(stream), 262144)]
reader = FrameReader()
def one_frame():
    for chunk in chunks:
        reader.feed(chunk)
    got = reader.next_frame()
    assert got is not None and len(got) == 1_000_008
    batch = bytearray(memoryview(got)[100:])
    del got, batch
for _ in range(5):
    one_frame()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    one_frame()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> tuple[str, int]:
    done = subprocess.run([sys.executable, "-c", CHILD, mode], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=True)
    took, count = done.stdout.split()
    return took, int(count)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_large_frames_reuse_heap_pages_once_the_thresholds_are_set():
    took, with_thresholds = faults("on")
    assert took == "True"
    _, default = faults("off")
    # 1 MB is 244 pages: the default faults in every fresh frame buffer (measured 22,800
    # faults for the 50 frames); with the thresholds the heap's pages are reused.
    assert default > 50 * 244
    assert with_thresholds < default // 20
