"""Record batches left in their segment files: the zero-copy read (Kafka's FileRecords).

``PartitionLog.read(..., zero_copy=True)`` returns a ``FileRecords`` instead of the
bytes when the read is at least ``ZERO_COPY_MIN_BYTES``: the (segment, position, length)
regions the batches occupy, so the network layer can hand them to ``os.sendfile`` and
the record bytes never enter the process.  Only the Fetch handler asks for it; every
other reader of the log gets bytes as before.  Code that only needs the size (max_bytes
accounting, throttles, statistics, the Fetch encoder's length prefix) uses ``len()``,
as it would on bytes.

Safety: a region must send exactly the bytes that were at its position when it was
read.  Appends only add bytes past every region read so far; the other changes to a
segment file bump the segment's ``generation`` (``LogSegment``): a truncation (a
follower truncating to its leader, a leader losing leadership) cuts the file and new
appends may then write other bytes at the same positions; ``close`` (retention,
DeleteRecords, the log cleaner's swap, topic deletion, shutdown) frees the fd number,
which the kernel may give to any file opened next.  A region remembers the generation
it was read at, and both ways of getting its bytes (``fds`` for sendfile, ``read`` for
pread) check it first and raise ``StaleRegion`` if it moved.  The check and the use are
in the same event-loop callback (everything that truncates or closes a segment runs on
the loop too), so nothing can change the file between them.  The response then cannot be
finished with the right bytes; the connection closes and the client fetches again
(Kafka's clients retry a fetch on a lost connection).  Normally the send happens in the
callback that read, so this only bites a response that waited behind an earlier one.
"""
from __future__ import annotations

from .segment import LogSegment

#: Below this many bytes a zero-copy read is returned as bytes at once.  A region costs
#: the sender a ``sendfile`` call and a separate write of the response bytes before it;
#: a small read is cheaper as one ``pread`` written with the rest of the response.
ZERO_COPY_MIN_BYTES = 16 * 1024


class FileRecords:
    """Batches as regions of segment files: ``len()`` is their total size; ``fds()``
    gives (fd, position, length) for ``os.sendfile``; ``read(start)`` the bytes from
    ``start`` on.  Both raise ``StaleRegion`` once a segment was truncated or closed
    after the read (see the module docstring).  Event-loop only, like the log."""

    __slots__ = ("_regions", "_size")

    def __init__(self, regions: list[tuple[LogSegment, int, int, int]]) -> None:
        """``regions``: (segment, segment.generation at the read, position, length), in
        log order, each length > 0."""
        self._regions = regions
        self._size = sum(region[3] for region in regions)

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def __repr__(self) -> str:
        return f"FileRecords({self._size} bytes in {len(self._regions)} region(s))"

    def fds(self) -> list[tuple[int, int, int]]:
        """(fd, position, length) per region, for immediate use only: the fd belongs to
        the segment and stays valid only until control returns to the event loop."""
        return [(segment.region_fd(generation), position, length)
                for segment, generation, position, length in self._regions]

    def check(self) -> None:
        """StaleRegion unless every region still holds the bytes it was read at."""
        for segment, generation, _, _ in self._regions:
            segment.check_generation(generation)

    def read(self, start: int = 0) -> bytes:
        """The bytes from ``start`` (0 <= start <= len) to the end, read with pread: the
        fallback where sendfile cannot serve (TLS, a socket that stopped taking bytes)."""
        chunks = []
        for segment, generation, position, length in self._regions:
            if start >= length:
                start -= length
                continue
            chunks.append(segment.read_region(generation, position + start, length - start))
            start = 0
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def __bytes__(self) -> bytes:
        return self.read()
