"""A blocking, one-request-at-a-time Kafka connection for the command line.

Used by ``raftwood topics``/``cluster`` (CreateTopics, DeleteTopics, Metadata and the
private status request of ``protocol/status.py``) and by ``raftwood dev`` (readiness
probes, the live status table).  Plain sockets, kafka-python's message classes, no
asyncio: a CLI sends a handful of requests and exits.

Every failure leaves as a :class:`ClientError` whose message is meant for the user;
:class:`StatusUnavailable` is the one for a broker that does not answer the status
request (a broker from before it existed closes the connection; a hung one times out).
"""
from __future__ import annotations

import itertools
import socket
import struct
import sys
from concurrent.futures import ThreadPoolExecutor

from kafka.protocol.metadata import ApiVersionsRequest

from protocol.errors import ErrorCode
from protocol.status import decode_status_response, encode_status_request

CLIENT_ID = "raftwood-cli"
DEFAULT_TIMEOUT_S = 10.0
_SIZE = struct.Struct(">i")
# A status answer is a JSON image of the cluster; refuse absurd sizes rather than allocate.
MAX_RESPONSE_BYTES = 256 * 1024 * 1024

Address = tuple[str, int]


class ClientError(Exception):
    """A broker could not be reached or answered something unusable (message for the user)."""


class StatusUnavailable(ClientError):
    """A broker did not answer Raftwood's private status request."""


def parse_address(text: str) -> Address:
    """``HOST:PORT`` → (host, port); ValueError with a readable message otherwise."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"bad port in {text!r}") from None
    if not 0 < number < 65536:
        raise ValueError(f"port out of range in {text!r}")
    return host.strip("[]"), number


def format_address(address: Address) -> str:
    return f"{address[0]}:{address[1]}"


def error_name(code: int) -> str:
    """Kafka's name for an error code (``36`` → ``TOPIC_ALREADY_EXISTS``)."""
    try:
        return ErrorCode(code).name
    except ValueError:
        pass
    import kafka.errors

    error = kafka.errors.for_code(code)
    name = getattr(error, "message", None)
    # Codes kafka-python does not know come back as a made-up class named "UNKNOWN".
    return name if name and name != "UNKNOWN" else f"ERROR_{code}"


class Connection:
    """One TCP connection to one broker; requests strictly one at a time. Not thread-safe."""

    def __init__(self, address: Address, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.address = address
        self._correlation_ids = itertools.count(1)
        try:
            self.sock = socket.create_connection(address, timeout=timeout_s)
        except OSError as exc:
            raise ClientError(f"cannot connect to {format_address(address)}: "
                              f"{exc.strerror or exc}") from exc
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def _read_exactly(self, size: int) -> bytes:
        chunks, remaining = [], size
        while remaining:
            chunk = self.sock.recv(min(remaining, 1 << 20))
            if not chunk:
                raise EOFError("connection closed by the broker")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def _read_frame(self) -> bytes:
        (size,) = _SIZE.unpack(self._read_exactly(4))
        if not 4 <= size <= MAX_RESPONSE_BYTES:
            raise ValueError(f"response frame of {size} bytes")
        return self._read_exactly(size)

    def _exchange(self, payload: bytes) -> bytes:
        """Send one framed request, return one response frame (without its size)."""
        self.sock.sendall(payload)
        return self._read_frame()

    def request(self, message):
        """Send a kafka-python request object (version set by ``Cls[v]``); its response."""
        correlation_id = next(self._correlation_ids)
        message.with_header(correlation_id=correlation_id, client_id=CLIENT_ID)
        name = type(message).__name__
        try:
            frame = self._exchange(bytes(message.encode(header=True, framed=True)))
            response = message.header.get_response_class().decode(
                frame, version=message.API_VERSION, header=True)
        except (OSError, EOFError) as exc:
            raise ClientError(f"{format_address(self.address)}: {name} failed: {exc}") from exc
        except (ValueError, struct.error, IndexError) as exc:
            raise ClientError(f"{format_address(self.address)}: {name}: "
                              f"unreadable response ({exc})") from exc
        if response.header.correlation_id != correlation_id:
            raise ClientError(f"{format_address(self.address)}: {name}: response for "
                              f"correlation id {response.header.correlation_id}, "
                              f"expected {correlation_id}")
        return response

    def status(self, query: dict | None = None) -> dict:
        """The broker's status object (see ``protocol/status.py``); StatusUnavailable if none."""
        correlation_id = next(self._correlation_ids)
        try:
            frame = self._exchange(encode_status_request(correlation_id, query, CLIENT_ID))
            answered_id, status = decode_status_response(frame)
        except (OSError, EOFError, ValueError, struct.error) as exc:
            reason = "timed out" if isinstance(exc, socket.timeout) else str(exc)
            raise StatusUnavailable(
                f"broker {format_address(self.address)} does not answer the Raftwood status "
                f"request ({reason})") from exc
        if answered_id != correlation_id or not isinstance(status, dict):
            raise StatusUnavailable(f"broker {format_address(self.address)} answered the "
                                    f"Raftwood status request with something else")
        return status


def fetch_status(address: Address, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
    """Connect, ask for the status, close. ClientError / StatusUnavailable on failure."""
    with Connection(address, timeout_s) as conn:
        return conn.status()


def fetch_statuses(addresses: list[Address], timeout_s: float) -> list[dict | ClientError]:
    """Ask every address at once; one result per address, in order (a status or the error)."""
    if not addresses:
        return []

    def one(address):
        try:
            return fetch_status(address, timeout_s)
        except ClientError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=min(16, len(addresses))) as pool:
        return list(pool.map(one, addresses))


def answers_api_versions(address: Address, timeout_s: float = 2.0) -> bool:
    """True when the broker accepts a connection and answers ApiVersions v0 (readiness)."""
    try:
        with Connection(address, timeout_s) as conn:
            return conn.request(ApiVersionsRequest[0]()).error_code == 0
    except ClientError:
        return False


EXIT_OK, EXIT_KAFKA_ERROR, EXIT_UNAVAILABLE = 0, 1, 2


class CommandFailure(Exception):
    """The cluster answered a CLI command with an error code (exit 1)."""


def guarded(command):
    """Run a command body: a CommandFailure exits 1, a ClientError (unreachable, no
    answer) exits 2, each with one line on stderr and no traceback."""
    def run(args) -> int:
        try:
            return command(args)
        except CommandFailure as exc:
            print(f"raftwood: {exc}", file=sys.stderr)
            return EXIT_KAFKA_ERROR
        except ClientError as exc:
            print(f"raftwood: {exc}", file=sys.stderr)
            return EXIT_UNAVAILABLE
    run.__name__ = command.__name__
    run.__doc__ = command.__doc__
    return run
