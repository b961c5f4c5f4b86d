"""CPU of one acks=all round trip, leader and followers apart (RF 3, 1 KiB, one in flight).

usage: python benchmarks/round_trip_cpu.py [--records N] [--rounds R] SRC_DIR [SRC_DIR ...]

Each round starts `raftwood dev --brokers 3` from each SRC_DIR in turn (a checkout or a
`git archive` of a commit; alternating, so the machine's noise hits every tree alike),
creates a one-partition RF 3 topic, runs N produces one at a time (produce, wait for
the report, repeat), and prints the leader's and the followers' CPU per round trip
(utime + stime from /proc). Medians and ranges per tree at the end. Bench W5's
"1 in flight" row is the same figure summed over the three brokers.

Each figure is also split by thread: the event loop (the broker's main thread, where
every request is served) and the rest, mostly the metadata quorum's thread (pysyncobj),
whose heartbeats and once-a-second journal write cost the same whatever the produce rate:
its share of a round trip is its idle CPU divided by the round-trip rate, so it grows as
a busy host slows the round trips, while the loop's figure does not.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from servers import free_port, stop_group

PY = sys.executable
START_TIMEOUT_S = 60.0
WARM_UP = 300


def cpu_seconds(pid: int) -> float:
    return cpu_seconds_of(f"/proc/{pid}/stat")


def loop_cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid``'s main thread alone (the broker's event loop)."""
    return cpu_seconds_of(f"/proc/{pid}/task/{pid}/stat")


def cpu_seconds_of(stat_path: str) -> float:
    fields = open(stat_path).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def broker_pids(data_dir: str) -> dict[int, int]:
    """{node id: pid} of the brokers `raftwood dev` started on ``data_dir``."""
    pids = {}
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if data_dir in line and "node.id=" in line:
            pid, args = line.strip().split(None, 1)
            pids[int(args.split("node.id=")[1].split()[0])] = int(pid)
    return pids


def one_run(src: str, records: int) -> tuple[float, float, float, float]:
    """(leader us, mean follower us, leader loop us, mean follower loop us) of CPU per
    round trip on a fresh cluster from src; "loop": the event loop's thread alone."""
    data = tempfile.mkdtemp(prefix="round-trip-cpu-")
    port = free_port()
    cluster = subprocess.Popen([PY, "-m", "broker.cli", "dev", "--brokers", "3",
                                "--data-dir", data, "--port", str(port)], cwd=src,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        bootstrap = f"127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                if len(admin.list_topics(timeout=2).brokers) == 3:
                    break
            except Exception:  # not listening yet
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster from {src} did not start")
            time.sleep(0.5)
        admin.create_topics([NewTopic("rt", 1, 3)])["rt"].result()
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all",
                             "log_level": 0})
        value = os.urandom(1024)
        for _ in range(WARM_UP):
            producer.produce("rt", value)
            producer.flush()
        leader = admin.list_topics("rt", timeout=5).topics["rt"].partitions[0].leader
        pids = broker_pids(data)
        before = {node: cpu_seconds(pid) for node, pid in pids.items()}
        loop_before = {node: loop_cpu_seconds(pid) for node, pid in pids.items()}
        for _ in range(records):
            producer.produce("rt", value)
            producer.flush()
        us = {node: 1e6 * (cpu_seconds(pid) - before[node]) / records
              for node, pid in pids.items()}
        loop_us = {node: 1e6 * (loop_cpu_seconds(pid) - loop_before[node]) / records
                   for node, pid in pids.items()}
        followers = [v for node, v in us.items() if node != leader]
        follower_loops = [v for node, v in loop_us.items() if node != leader]
        return (us[leader], sum(followers) / len(followers), loop_us[leader],
                sum(follower_loops) / len(follower_loops))
    finally:
        stop_group(cluster, 30)
        subprocess.run(["rm", "-rf", data], check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("src", nargs="+", help="source trees to compare")
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float, float, float]]] = {src: [] for src in args.src}
    for round_no in range(1, args.rounds + 1):
        for src in args.src:
            row = leader, follower, leader_loop, follower_loop = one_run(src, args.records)
            results[src].append(row)
            print(f"round {round_no} {src}: leader {leader:.0f} us (loop {leader_loop:.0f}), "
                  f"follower {follower:.0f} us (loop {follower_loop:.0f}), cluster "
                  f"{leader + 2 * follower:.0f} us (loops {leader_loop + 2 * follower_loop:.0f}) "
                  f"per round trip; load average {os.getloadavg()[0]:.1f}", flush=True)
    print(f"{'tree':<40} {'leader us':>18} {'follower us':>18} {'cluster us':>10} "
          f"{'loops us':>18}")
    for src, rows in results.items():
        def spread(values):
            values = sorted(values)
            return f"{values[len(values) // 2]:.0f} ({values[0]:.0f}-{values[-1]:.0f})"
        cluster = sorted(r[0] + 2 * r[1] for r in rows)
        print(f"{src:<40} {spread([r[0] for r in rows]):>18} {spread([r[1] for r in rows]):>18} "
              f"{cluster[len(cluster) // 2]:>10.0f} {spread([r[2] + 2 * r[3] for r in rows]):>18}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
