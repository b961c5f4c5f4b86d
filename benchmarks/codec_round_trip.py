"""The hot codec's share of one acks=all round trip, measured apart from the brokers.

With one record in flight (bench.py's W5 rate 0: 3 brokers, RF 3, 1 KiB, one partition
led by one broker) a round trip runs this codec work: the leader decodes the Produce
request and encodes its response, and for each of the two followers decodes a Fetch
request (v11, one partition) and encodes the Fetch response carrying the record; each
follower encodes its Fetch request and decodes the response.  Prints the microseconds of
that work (the best of ``--repeat`` timings of ``--number`` round trips) and the calls
cProfile counts in one (Python and C functions).  ``--src DIR`` measures the codec of
another tree (a ``git archive`` of a commit), as bench.py's ``--raftwood-src`` does.

    .venv/bin/python benchmarks/codec_round_trip.py [--src DIR] [--produce-version 9]

Not a test and not the brokers' cost: the codec alone, with no event loop, sockets or
storage.  Compare trees by alternating runs on the same machine.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import sys
import timeit
from pathlib import Path

TOPIC = "bench-w5"
FETCH_VERSION = 11  # broker/replication/leader_endpoint.py


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="the tree whose protocol/ package is measured (default: this one)")
    parser.add_argument("--produce-version", type=int, default=9)
    parser.add_argument("--number", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    sys.path.insert(0, str(args.src))
    from kafka.protocol.producer import ProduceRequest

    from protocol import hot_requests as hot
    from protocol.fetch_response import FetchPartitionResult, encode_fetch_response

    version = args.produce_version
    record_set = random.Random(1).randbytes(1100)  # one 1 KiB record with its batch header
    data = ProduceRequest.TopicProduceData
    produce = ProduceRequest[version](
        transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[data(
            name=TOPIC, partition_data=[data.PartitionProduceData(index=0,
                                                                  records=record_set)])])
    produce.with_header(correlation_id=7, client_id="rdkafka")
    produce_frame = bytes(produce.encode(header=True, framed=False))
    fetch_partitions = [(TOPIC, 0, 3, 1000, 0, 1 << 20)]
    fetch = hot.FetchRequestOut(FETCH_VERSION, 2, 500, 1, 10 << 20, fetch_partitions)
    fetch.with_header(9, "raftwood-fetcher")
    fetch_frame = fetch.encode()[4:]
    results = [(TOPIC, [FetchPartitionResult(0, 0, 1000, 1000, 0, record_set)])]
    response_frame = b"".join(
        bytes(part) for part in encode_fetch_response(FETCH_VERSION, 9, topics=results))[4:]

    def round_trip() -> None:
        hot.decode_produce(produce_frame, version)
        hot.encode_produce_response(version, 7, [(TOPIC, [(0, 0, 10, -1, 0, None)])])
        for _ in range(2):  # two followers
            request = hot.FetchRequestOut(FETCH_VERSION, 2, 500, 1, 10 << 20,
                                          fetch_partitions)
            request.with_header(9, "raftwood-fetcher")
            request.encode()
            hot.decode_fetch(fetch_frame, FETCH_VERSION)
            encode_fetch_response(FETCH_VERSION, 9, topics=results)
            hot.FetchResponseIn.decode(response_frame, FETCH_VERSION)

    profile = cProfile.Profile()
    profile.runcall(round_trip)
    calls = sum(entry[1] for entry in pstats.Stats(profile).stats.values()) - 1
    best = min(timeit.repeat(round_trip, number=args.number, repeat=args.repeat))
    print(f"codec of one round trip ({args.src}): {best / args.number * 1e6:.1f} us, "
          f"{calls} calls")


if __name__ == "__main__":
    main()
