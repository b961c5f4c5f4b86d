"""The connections: many sockets, several requests in flight on each, one selector.

Kinds of connection, ``links`` here:

* fuzz links send generated requests in rounds: a few unmutated, then one mutated
  (``Mutator``) last, so the broker closing on it cuts no other request short;
* clean links send generated requests unmutated (nulls only where allowed), pipelined
  ``depth`` deep.  A broker must answer every valid request, on any link: a close
  there is a violation when the same request, sent again alone on a new connection, is
  closed on again (but for a refused acks=0 Produce, and after a SaslAuthenticate,
  which Raftwood answers and then closes);
* one sentinel link per broker sends ApiVersions every ``SENTINEL_INTERVAL_S`` and waits
  for its answer: a broker that leaves it unanswered for ``serve_timeout_s`` has stopped
  serving others.

Outcome of a request, in the order answers come back (Kafka answers in order on a
connection): ``answered`` (its error names, from ``Judge``), ``closed`` (the connection
ended with it the first unanswered request: the broker stopped there, and reads nothing
after it), ``no-answer`` (a later request was answered first: only a Produce, whose acks
may be 0, may go unanswered) or ``held`` (no answer within ``hold_s``: we close).
Requests queued behind a closed or held one were never read by the broker; they are
counted as ``dropped`` and not judged.

Loop (``run``): reacts to socket readiness and to the clock (held requests, the sentinel,
progress); exits when ``max_requests`` requests are judged or ``max_duration_s`` has
passed.  Not thread-safe; one thread.
"""
from __future__ import annotations

import errno
import selectors
import socket
import struct
import time
from collections import Counter, deque
from dataclasses import dataclass, field

from .corpus import Corpus
from .judge import Judge, Violation
from .mutate import Mutator

_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")
PRODUCE, SASL_AUTHENTICATE = 0, 36
SENTINEL_INTERVAL_S = 0.5
SENTINEL_FRAME = bytes.fromhex("0012000000000000ffff")  # ApiVersions v0, client id null
MAX_CORRELATION = 1 << 30
RECV_BYTES = 1 << 18
MAX_VIOLATION_SAMPLES = 50
RECHECK_TIMEOUT_S = 10.0


@dataclass
class Sent:
    correlation_id: int
    api_key: int
    version: int
    label: str
    wire: bytes
    sent_at: float
    expects_response: bool = True
    must_refuse: tuple = ()


@dataclass
class Link:
    node_id: int
    address: tuple[str, int]
    kind: str  # "fuzz" | "clean" | "sentinel"
    sock: socket.socket | None = None
    out: bytearray = field(default_factory=bytearray)
    inbuf: bytearray = field(default_factory=bytearray)
    inflight: deque = field(default_factory=deque)
    finishing: bool = False  # a frame that lies about its size went out: send nothing more
    last_sentinel: float = 0.0
    sasl_answered: bool = False  # a SaslAuthenticate was answered: a close may follow
    history: deque = field(default_factory=lambda: deque(maxlen=6))  # (api, v, label, outcome)


@dataclass
class Tally:
    """What happened, counted.  ``outcomes[(api name, label, outcome)]``."""

    judged: int = 0
    dropped: int = 0
    connections: int = 0
    connect_failures: int = 0
    outcomes: Counter = field(default_factory=Counter)
    refusals: Counter = field(default_factory=Counter)
    violations: list = field(default_factory=list)
    violation_count: int = 0
    sentinel_max_wait_s: dict = field(default_factory=dict)
    unconfirmed_closes: int = 0  # valid requests closed on, answered when sent again
    sent_versions: set = field(default_factory=set)  # (api_key, version) sent unmutated

    def violation(self, what: str, sent: Sent | None = None, node_id: int | None = None,
                  link: Link | None = None) -> None:
        self.violation_count += 1
        if len(self.violations) < MAX_VIOLATION_SAMPLES:
            entry = {"what": what, "node_id": node_id, "at_s": round(time.monotonic(), 3)}
            if link is not None:
                entry["earlier_on_connection"] = [" ".join(map(str, h)) for h in link.history]
            if sent is not None:
                entry.update(api_key=sent.api_key, version=sent.version, label=sent.label,
                             frame_hex=sent.wire[:4096].hex())
            self.violations.append(entry)


class Engine:
    """Runs the links against ``brokers`` ({node id: (host, port)}); see the module doc."""

    def __init__(self, brokers: dict[int, tuple[str, int]], corpus: Corpus, mutator: Mutator,
                 judge: Judge, api_names: dict[int, str], *, fuzz_links: int = 48,
                 clean_links: int = 6, depth: int = 4, valid_fraction: float = 0.15,
                 hold_s: float = 3.0, serve_timeout_s: float = 30.0, progress=None):
        self.brokers = brokers
        self.corpus, self.mutator, self.judge = corpus, mutator, judge
        self.api_names = api_names
        self.depth, self.valid_fraction = depth, valid_fraction
        self.hold_s, self.serve_timeout_s = hold_s, serve_timeout_s
        self.progress = progress
        self.tally = Tally()
        self.selector = selectors.DefaultSelector()
        self._correlation = 0
        self._receive_buffer = bytearray(RECV_BYTES)
        self._receive_view = memoryview(self._receive_buffer)
        nodes = sorted(brokers)
        self.links = [Link(nodes[i % len(nodes)], brokers[nodes[i % len(nodes)]], "fuzz")
                      for i in range(fuzz_links)]
        self.links += [Link(nodes[i % len(nodes)], brokers[nodes[i % len(nodes)]], "clean")
                       for i in range(clean_links)]
        self.links += [Link(n, brokers[n], "sentinel") for n in nodes]
        self._down_since: dict[int, float] = {}

    # -- the loop --------------------------------------------------------------------------
    def run(self, max_requests: int, max_duration_s: float, progress_every_s: float = 5.0):
        started = time.monotonic()
        deadline = started + max_duration_s
        next_check = next_progress = started
        for link in self.links:
            self._open(link)
        while self.tally.judged < max_requests:
            now = time.monotonic()
            if now >= deadline:
                break
            for link in self.links:
                if link.sock is None:
                    self._open(link)
                elif link.kind != "sentinel":
                    self._fill(link)
                elif not link.inflight and now - link.last_sentinel >= SENTINEL_INTERVAL_S:
                    self._send_sentinel(link, now)
            for key, mask in self.selector.select(timeout=0.05):
                link = key.data
                if mask & selectors.EVENT_WRITE:
                    self._write(link)
                if mask & selectors.EVENT_READ and link.sock is not None:
                    self._read(link)
            if now >= next_check:
                self._check_clock(now)
                next_check = now + 0.25
            if self.progress is not None and now >= next_progress:
                self.progress(self.tally, now - started)
                next_progress = now + progress_every_s
        for link in self.links:
            self._close(link)
        self.selector.close()
        return time.monotonic() - started

    # -- connections -----------------------------------------------------------------------
    def _open(self, link: Link) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        code = sock.connect_ex(link.address)
        if code not in (0, errno.EINPROGRESS):
            sock.close()
            self.tally.connect_failures += 1
            self._down_since.setdefault(link.node_id, time.monotonic())
            return
        link.sock, link.finishing, link.sasl_answered = sock, False, False
        link.history.clear()
        link.out.clear()
        link.inbuf.clear()
        link.inflight.clear()
        self.tally.connections += 1
        self.selector.register(sock, selectors.EVENT_READ, link)

    def _close(self, link: Link) -> None:
        if link.sock is None:
            return
        self.tally.dropped += len(link.inflight)
        link.inflight.clear()
        try:
            self.selector.unregister(link.sock)
        except (KeyError, ValueError):
            pass
        link.sock.close()
        link.sock = None

    def _lost(self, link: Link) -> None:
        """The broker closed the connection (or reset it)."""
        if link.inflight:
            sent = link.inflight.popleft()
            self._count(sent, "closed")
            # Allowed closes after a valid request: a refused acks=0 Produce (Kafka's only
            # way to tell), and any after a SaslAuthenticate was answered (Raftwood closes
            # once the requests already read are answered: the close belongs to it).
            if sent.label == "valid" and sent.expects_response and not link.sasl_answered:
                self._recheck(link, sent)
            elif link.kind == "sentinel":
                self.tally.violation("ApiVersions v0 was answered by closing the connection",
                                     sent, link.node_id)
        self._close(link)

    def _recheck(self, link: Link, sent: Sent) -> None:
        """A valid request met a close: send it again alone on a new connection (blocking,
        bounded).  Closed again: a violation.  Answered: the close came from elsewhere (a
        connection reset before the broker accepted it, under load), counted apart."""
        try:
            with socket.create_connection(link.address, timeout=RECHECK_TIMEOUT_S) as sock:
                sock.sendall(sent.wire)
                answered = len(sock.recv(4)) > 0
        except OSError:
            answered = False
        if answered:
            self.tally.unconfirmed_closes += 1
            return
        self.tally.violation("a valid request was answered by closing the connection, "
                             "again on a new connection", sent, link.node_id, link)

    # -- sending ---------------------------------------------------------------------------
    def _next_correlation(self) -> int:
        self._correlation = (self._correlation + 1) % MAX_CORRELATION
        return self._correlation

    def _fill(self, link: Link) -> None:
        """Clean links: keep ``depth`` requests in flight.  Fuzz links: rounds of up to
        ``depth - 1`` unmutated requests and one mutated last, sent when the previous
        round is over, so a close costs no request behind it."""
        if link.finishing or (link.kind == "fuzz" and link.inflight):
            return
        if link.kind == "clean":
            wanted = [False] * (self.depth - len(link.inflight))
        else:
            wanted = [False] * self.mutator.rng.randrange(self.depth) + [True]
        for mutated in wanted:
            self._send_one(link, mutated)
        if wanted:
            self._write(link)

    def _send_one(self, link: Link, mutated: bool) -> None:
        encoded = self.corpus.pick(link.kind == "clean")
        correlation_id = self._next_correlation()
        payload = encoded.payload[:4] + _SIZE.pack(correlation_id) + encoded.payload[8:]
        last = False
        if not mutated or self.mutator.rng.random() < self.valid_fraction:
            wire = _SIZE.pack(len(payload)) + payload
            label = "nulls" if encoded.nulls else "valid"
            self.tally.sent_versions.add((encoded.api_key, encoded.version))
        else:
            wire, label, last = self.mutator.mutate(payload, encoded.body_at)
        if len(wire) >= 8:
            api_key, version = struct.unpack_from(">hh", wire, 4)
        else:
            api_key, version = encoded.api_key, -1
        unmutated = label in ("valid", "nulls")
        link.inflight.append(Sent(correlation_id, api_key, version, label, wire,
                                  time.monotonic(), encoded.expects_response,
                                  encoded.must_refuse if unmutated else ()))
        link.out += wire
        link.finishing = last

    def _send_sentinel(self, link: Link, now: float) -> None:
        correlation_id = self._next_correlation()
        frame = SENTINEL_FRAME[:4] + _SIZE.pack(correlation_id) + SENTINEL_FRAME[8:]
        link.inflight.append(Sent(correlation_id, 18, 0, "sentinel", frame, now))
        link.out += _SIZE.pack(len(frame)) + frame
        link.last_sentinel = now
        self._write(link)

    def _write(self, link: Link) -> None:
        if link.sock is None:
            return
        if link.out:
            try:
                sent = link.sock.send(link.out)
                del link.out[:sent]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self._lost(link)
                return
        if link.out:
            events = selectors.EVENT_READ | selectors.EVENT_WRITE
        else:
            events = selectors.EVENT_READ
            if link.finishing:  # the broker must see the end of the lying frame
                try:
                    link.sock.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
        self.selector.modify(link.sock, events, link)

    # -- receiving -------------------------------------------------------------------------
    def _read(self, link: Link) -> None:
        try:  # into one reused buffer: a fresh 256 KiB bytes per recv costs an mmap
            received = link.sock.recv_into(self._receive_buffer)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            received = 0
        if not received:
            self._lost(link)
            return
        self._down_since.pop(link.node_id, None)
        buf = link.inbuf
        buf += self._receive_view[:received]
        at = 0
        while len(buf) - at >= 4:
            size = _SIZE.unpack_from(buf, at)[0]
            if len(buf) - at - 4 < size:
                break
            payload = bytes(buf[at + 4:at + 4 + size])
            at += 4 + size
            if not self._answered(link, payload):
                self._close(link)
                return
        del buf[:at]

    def _answered(self, link: Link, payload: bytes) -> bool:
        """Match the answer to its request and judge it; False: the link is unusable."""
        if len(payload) < 4:
            self.tally.violation(f"an answer of {len(payload)} bytes", None, link.node_id)
            return False
        correlation_id = _SIZE.unpack_from(payload, 0)[0]
        while link.inflight and link.inflight[0].correlation_id != correlation_id:
            skipped = link.inflight.popleft()
            self._count(skipped, "no-answer")
            if skipped.api_key != PRODUCE:
                self.tally.violation("a request went unanswered while a later one was "
                                     "answered", skipped, link.node_id)
        if not link.inflight:
            self.tally.violation(f"an answer with correlation id {correlation_id}, which "
                                 f"no request in flight has", None, link.node_id)
            return False
        sent = link.inflight.popleft()
        link.sasl_answered |= sent.api_key == SASL_AUTHENTICATE
        link.history.append((sent.api_key, sent.version, sent.label, "answered"))
        if link.kind == "sentinel":
            wait = time.monotonic() - sent.sent_at
            worst = self.tally.sentinel_max_wait_s
            worst[link.node_id] = max(worst.get(link.node_id, 0.0), wait)
        try:
            names = self.judge.answer(sent.api_key, sent.version, payload)
        except Violation as exc:
            self._count(sent, "malformed answer")
            self.tally.violation(str(exc), sent, link.node_id)
            return True
        self._count(sent, "answered", names)
        if sent.must_refuse and sent.version >= 3:
            accepted = self.judge.accepted(sent.version, payload, dict(sent.must_refuse))
            if accepted:
                self.tally.violation(f"Produce v{sent.version} accepted batches Kafka refuses: "
                                     f"{', '.join(accepted)}", sent, link.node_id)
        return True

    def _count(self, sent: Sent, outcome: str, names: tuple[str, ...] = ()) -> None:
        tally = self.tally
        if sent.label == "sentinel":
            return
        tally.judged += 1
        api = self.api_names.get(sent.api_key, f"key {sent.api_key}")
        if outcome == "answered":
            refused = [n for n in names if n != "NONE"]
            outcome = "refused (error code)" if refused else "answered"
            for name in refused:
                tally.refusals[name] += 1
        else:
            tally.refusals[outcome] += 1
        tally.outcomes[(api, sent.label, outcome)] += 1

    # -- the clock -------------------------------------------------------------------------
    def _check_clock(self, now: float) -> None:
        for link in self.links:
            if link.sock is None or not link.inflight:
                continue
            head = link.inflight[0]
            waited = now - head.sent_at
            if link.kind == "sentinel":
                if waited >= self.serve_timeout_s:
                    self.tally.violation(f"broker {link.node_id} left ApiVersions unanswered "
                                         f"for {waited:.1f} s", head, link.node_id)
                    link.inflight.popleft()
                    self._close(link)
            elif waited >= self.hold_s:
                link.inflight.popleft()
                self._count(head, "held")
                self._close(link)
        for node_id, since in list(self._down_since.items()):
            if now - since >= self.serve_timeout_s:
                self.tally.violation(f"broker {node_id} refused connections for "
                                     f"{now - since:.1f} s", None, node_id)
                del self._down_since[node_id]
