"""What acting on a metadata image costs a broker, with N partitions hosted here.

    .venv/bin/python -m benchmarks.apply_image [--partitions 1000] [--repeat 20]

Prints, for one broker (node 1 of 3) hosting every partition of one topic:

* ``create``: ``apply_image`` of the image that brings the N partitions (opens N logs),
  the whole time until every log is open and the longest time the event loop was held
  in one go (the call itself, then each slice of log opens that follows it);
* ``isr change``: ``apply_image`` of an image where one partition's ISR changed
  (the steady state: one command, one partition);
* ``configs``: ``apply_image`` of an image where the topic's configs changed;
* ``snapshot``: ``ClusterState.snapshot`` of the controller's state after one ISR
  change (a full copy), and the image the Raft consumer publishes
  (``broker.controller.image.publish``: shares what did not change, where it exists).

Figures are medians of ``--repeat`` runs (``create``: one run).  Not a test.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

from broker import config as config_module
from broker.controller.state import ClusterState
from broker.replication.replica_manager import ReplicaManager


def cluster(partitions: int) -> ClusterState:
    state = ClusterState()
    for node in (1, 2, 3):
        state.apply_register_broker(node, "127.0.0.1", 19190 + node, f"i-{node}")
    assignment = [[1 + (p % 3), 1 + ((p + 1) % 3), 1 + ((p + 2) % 3)]
                  for p in range(partitions)]
    state.apply_create_topic("bench", "bench-id", assignment, {})
    return state


try:  # the image the Raft consumer hands the loop after a change
    from broker.controller.image import publish
except ImportError:  # before images shared what did not change: a whole copy each time
    def publish(state: ClusterState, previous: ClusterState | None) -> ClusterState:
        return state.snapshot()


class LoopWatch:
    """The longest stretch the loop went without running a 1 ms ticker."""

    def __init__(self) -> None:
        self.longest_s = 0.0
        self._task: asyncio.Task | None = None

    async def _tick(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            self.longest_s = max(self.longest_s, now - last)
            last = now

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._tick())

    async def stop(self) -> None:
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass


async def until_open(rm: ReplicaManager, count: int, timeout_s: float = 600.0) -> None:
    deadline = time.perf_counter() + timeout_s
    while len(rm.partitions) < count and time.perf_counter() < deadline:
        await asyncio.sleep(0.001)


async def bench_create(partitions: int, log_dir: str) -> tuple[ClusterState, ReplicaManager]:
    state = cluster(partitions)
    image = publish(state, None)
    rm = ReplicaManager(config_module.build({"node.id": 1, "log.dirs": log_dir}))
    watch = LoopWatch()
    watch.start()
    await asyncio.sleep(0.01)
    started = time.perf_counter()
    rm.apply_image(image)
    call_s = time.perf_counter() - started
    await until_open(rm, partitions)
    total_s = time.perf_counter() - started
    await asyncio.sleep(0.01)  # the ticker sees the last stretch
    await watch.stop()
    print(f"create: {partitions} partitions: apply_image call {call_s * 1000:.1f} ms, "
          f"every log open after {total_s * 1000:.0f} ms "
          f"({total_s / partitions * 1000:.2f} ms a log), "
          f"longest loop stall {watch.longest_s * 1000:.1f} ms")
    return state, rm


def median_ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.2f} ms"


def bench_changes(state: ClusterState, rm: ReplicaManager, repeat: int) -> None:
    previous = rm.image
    isr_s, config_s, snapshot_full_s, snapshot_shared_s = [], [], [], []
    for i in range(repeat):
        # partition 0 is led by broker 1 (this one): shrink and grow its ISR in turn
        isr = [1, 2] if i % 2 == 0 else [1, 2, 3]
        info = state.topics["bench"].partitions[0]
        state.apply_alter_partition("bench", 0, 1, info.leader_epoch, info.partition_epoch, isr)
        started = time.perf_counter()
        state.snapshot()
        snapshot_full_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        image = publish(state, previous)
        snapshot_shared_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        rm.apply_image(image)
        isr_s.append(time.perf_counter() - started)
        previous = image
        state.apply_alter_topic_configs("bench", {"retention.ms": str(600000 + i)})
        image = publish(state, previous)
        started = time.perf_counter()
        rm.apply_image(image)
        config_s.append(time.perf_counter() - started)
        previous = image
    print(f"isr change: apply_image {median_ms(isr_s)}")
    print(f"configs: apply_image {median_ms(config_s)}")
    print(f"snapshot: full copy {median_ms(snapshot_full_s)}, "
          f"as published {median_ms(snapshot_shared_s)}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="apply-image-") as log_dir:
        state, rm = await bench_create(args.partitions, log_dir)
        try:
            bench_changes(state, rm, args.repeat)
        finally:
            await rm.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
