"""Seconds from SIGTERM to exit of one broker hosting N partitions with a record each.

    .venv/bin/python benchmarks/stop_time.py --partitions 1000

One broker (no controlled shutdown: nothing to move leadership to), a topic of N
partitions RF 1, one 100-byte record acked (acks=all) in each, then SIGTERM and the
wait for the exit: what remains is closing N logs that hold unflushed data (flush,
offsets checkpoint, producer snapshot per partition).  Compare trees by running it from
another checkout (the harness starts the broker from the checkout it was imported from).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.getcwd())

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from broker.harness.cluster import ClusterProcess  # noqa: E402


def produce_one_each(bootstrap: str, n: int, timeout_s: float) -> int:
    """One record acked in each of the N partitions of 'many'; how many were acked."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "acks": "all"})
    acked = [0]

    def delivered(err, _msg) -> None:
        acked[0] += err is None

    for index in range(n):
        for _ in range(10_000):  # bounded: a full client queue drains between tries
            try:
                producer.produce("many", b"x" * 100, partition=index, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
    deadline = time.monotonic() + timeout_s
    while acked[0] < n and time.monotonic() < deadline:
        producer.poll(0.2)
    producer.flush(30)
    return acked[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=600.0, help="each phase's bound, s")
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="raftwood-stop-time-")
    try:
        with ClusterProcess(home, size=1) as cluster:
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap,
                                 "socket.timeout.ms": 300_000})
            started = time.monotonic()
            admin.create_topics([NewTopic("many", args.partitions, 1)],
                                request_timeout=args.timeout)["many"].result(args.timeout)
            acked = produce_one_each(cluster.bootstrap, args.partitions, args.timeout)
            print(f"created and produced: {acked}/{args.partitions} acked in "
                  f"{time.monotonic() - started:.1f} s; load average {os.getloadavg()[0]:.1f}")
            started = time.monotonic()
            code = cluster.stop(1, timeout_s=args.timeout)
            print(f"stop after SIGTERM: {time.monotonic() - started:.1f} s, exit code {code}")
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
