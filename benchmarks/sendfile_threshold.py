"""Where sendfile starts to pay: CPU per region, pread + writev vs write + sendfile.

The zero-copy Fetch (storage/file_records.py, broker/network/connection.py) sends a
region of a segment file as a separate ``os.write`` of the response bytes before it and an
``os.sendfile``; the copying path reads it with one ``os.pread`` and writes it with those
bytes in one ``os.writev``.  This times both for region sizes from 1 KiB to 1 MiB over a
loopback TCP connection whose other end a thread drains, as process CPU time (sender and
reader; the reader's share is the same both ways), best of ``--runs``.  The threshold
below which the log returns bytes instead of regions (``ZERO_COPY_MIN_BYTES``) comes from
here.  Not a test: nothing is asserted.

    .venv/bin/python benchmarks/sendfile_threshold.py [--runs 3]
"""
from __future__ import annotations

import argparse
import os
import socket
import tempfile
import threading
import time

FILE_BYTES = 64 << 20
SIZES = (1024, 4096, 8192, 16384, 32768, 65536, 262144, 1 << 20)
HEADER = b"h" * 60  # about a partition's fixed fields in a Fetch response


def per_region_us(mode: str, size: int, count: int, file_fd: int, out_fd: int) -> float:
    position = 0
    started = time.process_time()
    for _ in range(count):
        position = (position + size) % (FILE_BYTES - size)
        if mode == "pread":
            os.writev(out_fd, [HEADER, os.pread(file_fd, size, position)])
        else:
            os.write(out_fd, HEADER)
            done = 0
            while done < size:
                done += os.sendfile(out_fd, file_fd, position + done, size - done)
    return (time.process_time() - started) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "segment")
        with open(path, "wb") as f:
            f.write(os.urandom(FILE_BYTES))
        file_fd = os.open(path, os.O_RDONLY)
        server = socket.create_server(("127.0.0.1", 0))
        sender = socket.create_connection(server.getsockname())
        reader, _ = server.accept()

        def drain() -> None:
            while reader.recv(1 << 20):
                pass

        thread = threading.Thread(target=drain, daemon=True)
        thread.start()
        try:
            for size in SIZES:
                count = max(200, min(20_000, (256 << 20) // size))
                best = {}
                for _ in range(args.runs):
                    for mode in ("pread", "sendfile"):
                        took = per_region_us(mode, size, count, file_fd, sender.fileno())
                        best[mode] = min(best.get(mode, took), took)
                print(f"{size:>8} B: pread + writev {best['pread']:7.1f} us, "
                      f"write + sendfile {best['sendfile']:7.1f} us per region")
        finally:
            sender.close()
            thread.join(10)
            reader.close()
            server.close()
            os.close(file_fd)


if __name__ == "__main__":
    main()
