"""Which TCP ports a command is about to bind are taken already, and by whom.

``busy_ports`` tries each port the way a server binds it (``SO_REUSEADDR``, so sockets
in TIME_WAIT do not count: only a listener or a bound socket does).  ``port_owner``
names the process holding it on Linux: the socket's inode from ``/proc/net/tcp{,6}``,
matched against ``/proc/<pid>/fd`` links; None when that cannot be read (another
user's process without root, or no ``/proc``).  Pure reads; nothing is kept open.
"""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
COMMAND_CHARS = 70   # an owner's command line is cut to this many characters


@dataclass(frozen=True)
class PortUse:
    """One port a command means to bind, and what it is for (``Kafka listener of
    broker 1``)."""

    port: int
    purpose: str


def port_is_free(host: str, port: int) -> bool:
    """True when ``host:port`` can be bound now (it is released at once)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def busy_ports(host: str, uses: list[PortUse]) -> list[PortUse]:
    """The ``uses`` whose port cannot be bound on ``host``, in the order given."""
    return [use for use in uses if not port_is_free(host, use.port)]


def _socket_inodes(port: int) -> set[str]:
    """Inodes of the TCP sockets bound to local ``port`` (any address), per /proc/net."""
    inodes = set()
    for name in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and int(fields[1].rsplit(":", 1)[1], 16) == port \
                    and fields[9] != "0":
                inodes.add(fields[9])
    return inodes


def port_owner(port: int) -> tuple[int, str] | None:
    """``(pid, command line)`` of a process holding a socket on ``port``; None when
    unknown (not readable, or no such socket)."""
    links = {f"socket:[{inode}]" for inode in _socket_inodes(port)}
    if not links:
        return None
    try:
        pids = [p for p in os.listdir(PROC) if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            fds = os.listdir(PROC / pid / "fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(PROC / pid / "fd" / fd) in links:
                    return int(pid), _command_line(pid)
            except OSError:
                continue
    return None


def _command_line(pid: str) -> str:
    try:
        raw = (PROC / pid / "cmdline").read_bytes()
    except OSError:
        return "?"
    text = " ".join(raw.replace(b"\0", b" ").decode(errors="replace").split())
    return text if len(text) <= COMMAND_CHARS else text[:COMMAND_CHARS - 3] + "..."


def describe_owner(port: int) -> str:
    """``pid 123 (python -m ...)`` or ``an unknown owner``."""
    owner = port_owner(port)
    if owner is None:
        return "an unknown owner"
    return f"pid {owner[0]} ({owner[1]})"


def busy_message(host: str, busy: list[PortUse], hint: str) -> str:
    """One line naming the first busy port, its purpose and owner, how many more are
    busy, and ``hint`` (what to do)."""
    first = busy[0]
    more = f" (and {len(busy) - 1} more of its ports)" if len(busy) > 1 else ""
    return (f"port {first.port} on {host} ({first.purpose}) is in use by "
            f"{describe_owner(first.port)}{more}; {hint}")
