"""``raftwood dev``'s terminal: the live status table, its keys, and the supervising loop.

On a TTY the table is redrawn in place and keys act (``1``-``9``: restart that broker;
``k`` then N: kill -9 it, ``p`` then N: pause it, ``c`` then N: continue (resume) it;
with ``--faults-network`` ``i`` then N: isolate it, ``h``: heal every cut, else ``i``
says how to enable it; see ``dev_faults.py``); without one (a pipe, a test) the table
is printed only when it changed, keys are off, and ``raftwood dev restart|kill|pause|resume N``
(and ``isolate N``, ``heal``; ``dev_control.py``) is the way to act.
"""
from __future__ import annotations

import os
import select
import sys
import time

try:
    import termios
    import tty
except ImportError:  # not a POSIX terminal: keys stay off
    termios = tty = None

from . import dev_control, dev_faults
from .dev_network import ENABLE_HINT

REFRESH_S = 2.0
QUIET_REPRINT_S = 10.0     # without a TTY: print an unchanged table this often
TICK_S = 0.1
KEY_PREFIX_S = 5.0         # a k/p/c waits this long for its broker number
PREFIX_KEYS = {"k": "kill", "p": "pause", "c": "resume", "i": "isolate"}
HINT = "hint"   # the action of ``i`` without --faults-network: say how to enable it


class StatusPrinter:
    """Prints the table: redrawn in place on a TTY every ``REFRESH_S``; otherwise only when
    it changed or ``QUIET_REPRINT_S`` passed, so a captured log stays readable.  The
    ``footer`` (the keys, the restart command) goes under every table."""

    def __init__(self, out, is_tty: bool, footer: str = ""):
        self.out = out
        self.is_tty = is_tty
        self.footer = footer
        self._last_table: str | None = None
        self._last_print = 0.0
        self._drawn_lines = 0

    def forget_drawing(self) -> None:
        """Something else was printed: the next table is drawn below it, not over it."""
        self._drawn_lines = 0

    def show(self, table: str, now: float) -> bool:
        """Print ``table`` if due; True when it did."""
        changed = table != self._last_table
        if not self.is_tty and not changed and now - self._last_print < QUIET_REPRINT_S:
            return False
        stamp = time.strftime("%H:%M:%S")
        block = f"status at {stamp} (Ctrl-C stops every broker)\n{table}"
        if self.footer:
            block += "\n" + self.footer
        if self.is_tty and self._drawn_lines:
            self.out.write(f"\x1b[{self._drawn_lines}F\x1b[J")
        self.out.write(block + "\n")
        self.out.flush()
        self._drawn_lines = block.count("\n") + 1
        self._last_table, self._last_print = table, now
        return True


def footer(brokers: int, data_dir, keys_on: bool, network: bool = False) -> str:
    """The lines under the table: how to restart, kill, pause, resume and isolate a
    broker."""
    command = (f"raftwood dev restart N --data-dir {data_dir} (or kill N, pause N, "
               f"resume N{', isolate N, heal' if network else ''})")
    if keys_on:
        n = "1" if brokers == 1 else f"1-{min(brokers, 9)}"
        cuts = (f", i{n} isolate, h heal" if network
                else ", i isolate (needs --faults-network)")
        return (f"keys: {n} restart that broker, k{n} kill -9, p{n} pause, c{n} continue "
                f"(resume){cuts}\nfrom another terminal: {command}")
    return f"restart a broker: {command}"


class KeyParser:
    """Turns key presses into ``(action, broker id)``: a digit restarts that broker; a
    prefix key (``PREFIX_KEYS``) then a digit kills, pauses, resumes or isolates it;
    ``h`` is ``("heal", 0)``.  Without ``network`` ``i`` is ``(HINT, 0)`` at once.  A
    prefix waits ``KEY_PREFIX_S`` for its digit; any other key drops it.  Digits outside
    1..``brokers`` do nothing."""

    def __init__(self, brokers: int, network: bool = False):
        self.brokers = brokers
        self.network = network
        self._prefix: str | None = None
        self._prefix_at = 0.0

    def feed(self, keys: str, now: float) -> list[tuple[str, int]]:
        actions = []
        for key in keys:
            prefix, self._prefix = self._prefix, None
            if prefix is not None and now - self._prefix_at > KEY_PREFIX_S:
                prefix = None
            if key == "h":
                actions.append(("heal", 0))
            elif key == "i" and not self.network:
                actions.append((HINT, 0))
            elif key in PREFIX_KEYS:
                self._prefix, self._prefix_at = PREFIX_KEYS[key], now
            elif key.isdigit() and 1 <= int(key) <= self.brokers:
                actions.append((prefix or "restart", int(key)))
        return actions


class KeyReader:
    """Single key presses from a terminal (cbreak mode: no Enter needed, Ctrl-C still
    signals); ``close()`` restores the terminal.  Inactive when ``stream`` is not a TTY
    or its mode cannot be changed (e.g. ``dev`` in the background)."""

    def __init__(self, stream=None):
        self.stream = sys.stdin if stream is None else stream
        self._fd: int | None = None
        self._saved = None
        if termios is None:
            return
        try:
            if self.stream.isatty():
                fd = self.stream.fileno()
                self._saved = termios.tcgetattr(fd)
                tty.setcbreak(fd)
                self._fd = fd
        except (OSError, ValueError, termios.error):
            self._fd = None

    @property
    def active(self) -> bool:
        return self._fd is not None

    def keys(self) -> str:
        """Keys pressed since the last call ('' when none or inactive); never blocks."""
        if self._fd is None:
            return ""
        try:
            if not select.select([self._fd], [], [], 0)[0]:
                return ""
            return os.read(self._fd, 64).decode(errors="ignore")
        except OSError:
            return ""

    def close(self) -> None:
        if self._fd is not None and self._saved is not None:
            try:
                termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)
            except (OSError, termios.error):
                pass
        self._fd = None


def supervise(cluster, printer: StatusPrinter, keys: KeyReader, data_dir) -> None:
    """Refresh the table every ``REFRESH_S`` until a stop signal (the loop of ``dev``).

    Reacts to: SIGINT/SIGTERM (``cluster.stop_requests``); brokers exiting (reported
    once per process); requests from ``raftwood dev restart|kill|pause|resume``
    (answered, see ``dev_control``) and keys on a TTY (``KeyParser``).  An action
    redraws the table at once.
    """
    next_refresh = 0.0
    parser = KeyParser(len(cluster.layout), getattr(cluster, "network", None) is not None)
    while not cluster.stop_requests:
        acted = False
        for action, node_id, token in dev_control.take_action_requests(data_dir):
            result = dev_faults.act(cluster, action, node_id, by="command")
            dev_control.answer(data_dir, node_id, token, result, action)
            acted = True
        for action, node_id in parser.feed(keys.keys(), time.monotonic()):
            if action == HINT:
                cluster.say(ENABLE_HINT)
            else:
                dev_faults.act(cluster, action, node_id, by="key")
            acted = True
        now = time.monotonic()
        if acted or now >= next_refresh:
            if cluster.report_exits() or acted:
                printer.forget_drawing()
            printer.show(cluster.render(), now)
            next_refresh = time.monotonic() + REFRESH_S
        time.sleep(TICK_S)
