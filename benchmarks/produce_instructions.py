"""Machine instructions one Produce request costs a broker: a figure a noisy machine
does not move.

usage: python benchmarks/produce_instructions.py [--acks 1] [--records N1,N2]
       [--compression none|gzip|snappy|lz4|zstd] [--batch K --value-bytes B] SRC_DIR [SRC_DIR ...]

CPU time per request moves by a third from run to run on a shared machine (other
tenants, frequency scaling); the instructions a request executes do not.  For each
SRC_DIR (a checkout, or a `git archive` of a commit) this starts one broker under
valgrind's callgrind (`apt install valgrind`), sends N1 produces of 1 KiB one at a time
(produce, wait for the answer, repeat) with confluent-kafka, stops the broker, and reads
callgrind's instruction total; then the same with N2.  The difference over N2 - N1
cancels start-up and shutdown, so the figure is the instructions of one request:
reading and decoding it, validating and appending the batch, answering (the broker's
own code, CPython, uvloop and libc in user space; the kernel is not counted).  An idle
broker executes next to nothing (measured: under 0.1 M instructions a second), so the
longer run's extra wall time adds no noise.  Trees run one after the other; the
figure repeats to within about 1 % between runs.  Under valgrind the broker runs about
fifty times slower: 1,200 requests take a few minutes.  ``--batch K`` sends K records
of ``--value-bytes`` each per request (one batch; compressed with ``--compression``), so
the cost of a per-record walk of the batch shows.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Producer
from servers import free_port, stop_group

PY = sys.executable
START_TIMEOUT_S = 240.0
VALUE = os.urandom(1024)


def instructions(src: str, records: int, acks: str, compression: str = "none",
                 batch: int = 1, value: bytes = VALUE) -> int:
    """callgrind's instruction total of one broker that served ``records`` produces
    (each one batch of ``batch`` records of ``value``)."""
    port = free_port()
    data = tempfile.mkdtemp(prefix="produce-instructions-")
    out = os.path.join(data, "callgrind.out")
    broker = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
         PY, "-m", "broker.cli", "start", "--set", "node.id=1",
         "--set", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--set", f"log.dirs={os.path.join(data, 'logs')}"],
        cwd=src, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 0,
                             "acks": acks, "log_level": 0,
                             "compression.type": compression})
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                producer.list_topics(timeout=2)
                break
            except Exception as exc:
                if time.monotonic() > deadline or broker.poll() is not None:
                    raise RuntimeError(
                        f"the broker from {src} did not start under valgrind") from exc
                time.sleep(1)
        for i in range(records):
            for _ in range(batch):
                producer.produce("instructions", value)
            if producer.flush(60) > 0:
                raise RuntimeError(f"produce {i} was not answered within 60 s")
            if (i + 1) % 200 == 0:
                print(f"  {os.path.basename(src.rstrip('/'))}: {i + 1:,} of {records:,} "
                      f"produces", file=sys.stderr, flush=True)
    finally:
        stop_group(broker, 300)
    try:
        with open(out) as dump:
            for line in dump:
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
        raise RuntimeError(f"no instruction total in {out}")
    finally:
        shutil.rmtree(data, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--acks", default="1", choices=["0", "1"],
                        help="acks of the produces (a lone broker: acks=all is acks=1)")
    parser.add_argument("--records", default="200,1200",
                        help="N1,N2: produces of the short and the long run")
    parser.add_argument("--compression", default="none",
                        choices=["none", "gzip", "snappy", "lz4", "zstd"])
    parser.add_argument("--batch", type=int, default=1, help="records per produce")
    parser.add_argument("--value-bytes", type=int, default=len(VALUE),
                        help="bytes per record value (half random, half zeros)")
    parser.add_argument("src", nargs="+", help="source trees to measure")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt install valgrind)", file=sys.stderr)
        return 2
    short, long = (int(n) for n in args.records.split(","))
    if long <= short:
        parser.error("--records: N2 must be larger than N1")
    rows = []
    value = VALUE if args.value_bytes == len(VALUE) else \
        os.urandom(args.value_bytes // 2) + bytes(args.value_bytes - args.value_bytes // 2)
    shape = (args.compression, args.batch, value)
    for src in args.src:
        print(f"{src}: {short:,} then {long:,} produces under callgrind", file=sys.stderr,
              flush=True)
        per_request = (instructions(src, long, args.acks, *shape)
                       - instructions(src, short, args.acks, *shape)) / (long - short)
        rows.append((src, per_request))
        print(f"{src}: {per_request / 1000:,.1f} k instructions per produce", flush=True)
    print(f"\n{'tree':<50} {'k instructions per acks=' + args.acks + ' produce':>36}")
    for src, per_request in rows:
        print(f"{src:<50} {per_request / 1000:>36,.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
