"""The command line's Kafka connection: the project's blocking client with every
failure turned into a message for the user.

Used by ``raftwood topics``/``cluster``/``groups`` (CreateTopics, DeleteTopics, Metadata,
group requests and the private status request of ``protocol/status.py``) and by
``raftwood dev`` (readiness probes, the live status table).  Framing, correlation ids
and the response size cap are ``broker/client/kafka_client.py``'s; this module is the
boundary where its ConnectionFailed becomes a :class:`ClientError`.

Every failure leaves as a :class:`ClientError` whose message is meant for the user;
:class:`StatusUnavailable` is the one for a broker that does not answer the status
request (a broker from before it existed closes the connection; a hung one times out).
"""
from __future__ import annotations

import logging
import sys
from concurrent.futures import ThreadPoolExecutor

from kafka.protocol.metadata import ApiVersionsRequest

from protocol.errors import ErrorCode

from ..client.kafka_client import (
    BadResponse,
    BlockingConnection,
    ConnectionFailed,
    CorrelationMismatch,
)
from ..security.client import AuthenticationRefused, ClientSecurity

CLIENT_ID = "raftwood-cli"
DEFAULT_TIMEOUT_S = 10.0

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


class AuthenticationFailed(ClientError):
    """The broker refused the command's credentials (exit 1, as any Kafka error)."""


class Connection:
    """One connection to one broker; requests strictly one at a time. Not thread-safe.

    ``security`` (from ``--command-config``; None: PLAINTEXT) says how to reach the
    listener: TLS, then SASL, before the first request."""

    def __init__(self, address: Address, timeout_s: float = DEFAULT_TIMEOUT_S,
                 security: ClientSecurity | None = None):
        self.address = address
        try:
            self._connection = BlockingConnection(address, client_id=CLIENT_ID,
                                                  timeout_s=timeout_s, security=security)
        except AuthenticationRefused as exc:
            name = error_name(exc.error_code) if exc.error_code is not None else "refused"
            raise AuthenticationFailed(f"cannot authenticate to {format_address(address)}: "
                                       f"{name}: {exc.reason}") from exc
        except ConnectionFailed as exc:
            raise ClientError(f"cannot connect to {format_address(address)}: {exc.reason} "
                              f"(is a broker running there? raftwood dev starts a cluster; "
                              f"--bootstrap-server HOST:PORT names another)") from exc

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._connection.close()

    def request(self, message):
        """Send a kafka-python request object (version set by ``Cls[v]``); its response."""
        where, name = format_address(self.address), type(message).__name__
        try:
            return self._connection.request(message)
        except CorrelationMismatch as exc:
            raise ClientError(f"{where}: {name}: {exc.reason}") from exc
        except BadResponse as exc:
            raise ClientError(f"{where}: {name}: unreadable response ({exc.reason})") from exc
        except ConnectionFailed as exc:
            raise ClientError(f"{where}: {name} failed: {exc.reason}") from exc

    def status(self, query: dict | None = None) -> dict:
        """The broker's status object (see ``protocol/status.py``); StatusUnavailable if none."""
        where = format_address(self.address)
        something_else = StatusUnavailable(
            f"broker {where} answered the Raftwood status request with something else")
        try:
            status = self._connection.status(query)
        except CorrelationMismatch as exc:
            raise something_else from exc
        except ConnectionFailed as exc:
            raise StatusUnavailable(f"broker {where} does not answer the Raftwood status "
                                    f"request ({exc.reason})") from exc
        if not isinstance(status, dict):
            raise something_else
        if "error" in status:  # e.g. CLUSTER_AUTHORIZATION_FAILED (broker/api/status.py)
            raise StatusUnavailable(f"broker {where} refused the Raftwood status request: "
                                    f"{status['error']}: {status.get('message', '')}")
        return status


def fetch_status(address: Address, timeout_s: float = DEFAULT_TIMEOUT_S,
                 security: ClientSecurity | None = None) -> dict:
    """Connect, ask for the status, close. ClientError / StatusUnavailable on failure."""
    with Connection(address, timeout_s, security) as conn:
        return conn.status()


def fetch_statuses(addresses: list[Address], timeout_s: float,
                   security: ClientSecurity | None = None) -> list[dict | ClientError]:
    """Ask every address at once; one result per address, in order (a status or the error)."""
    if not addresses:
        return []

    def one(address):
        try:
            return fetch_status(address, timeout_s, security)
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
    """Run a command body: a CommandFailure or refused credentials exit 1, a ClientError
    (unreachable, no answer) exits 2, each with one line on stderr and no traceback.
    The libraries' warnings (e.g. the SASL client's about a refused password) are off
    meanwhile: the command's own line says it once."""
    def run(args) -> int:
        logging.disable(logging.WARNING)
        try:
            return command(args)
        except (CommandFailure, AuthenticationFailed) as exc:
            print(f"raftwood: {exc}", file=sys.stderr)
            return EXIT_KAFKA_ERROR
        except ClientError as exc:
            print(f"raftwood: {exc}", file=sys.stderr)
            return EXIT_UNAVAILABLE
        finally:
            logging.disable(logging.NOTSET)
    run.__name__ = command.__name__
    run.__doc__ = command.__doc__
    return run
