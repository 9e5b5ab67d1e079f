"""A watchdog for the daemon itself: a bug of ours never leaves it unkillable.

The event loop beats a heartbeat (`Watchdog.heartbeat`, a task); a thread
watches it. When the loop has not turned for `stall_after` seconds, the thread
logs the main thread's stack once at ERROR (the place to fix). Signals still
reach the process while the loop is stuck: the Python-level handler runs in the
main thread between bytecodes even when the loop spins, so it records the
signal (`note_signal`), and asyncio's wakeup fd still delivers it to the loop
for the normal graceful path. If the loop has not turned `SIGNAL_GRACE` seconds
after a SIGTERM/SIGINT, the thread ends the process itself: SIGKILL to every
stdio server's process group (`CHILD_GROUPS`), then `os._exit`.

Standard library only: the CLI imports this module for its defaults.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI imports this module: keep it light
    import logging
    import subprocess
    from types import FrameType

__all__ = [
    "CHILD_GROUPS",
    "DEFAULT_WATCHDOG",
    "SIGNAL_GRACE",
    "ChildGroups",
    "Watchdog",
]


def _logger() -> logging.Logger:
    """This module's logger; `logging` loads only when there is something to say
    (the CLI imports this module for its defaults and must start fast)."""
    import logging

    return logging.getLogger(__name__)


DEFAULT_WATCHDOG = 5.0
"""Seconds without a turn of the event loop before its stack is logged."""

HEARTBEAT = 0.5
"""Seconds between two heartbeats of the event loop."""

SIGNAL_GRACE = 2.0
"""Seconds after SIGTERM/SIGINT a stuck loop gets before the thread ends the process."""


_GUARDIAN = """
import os, signal, sys
groups = set()
for line in sys.stdin.buffer:
    try:
        op, pgid = line[:1], int(line[1:])
    except ValueError:
        continue
    (groups.add if op == b"+" else groups.discard)(pgid)
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""
"""The guardian: reads `+PGID`/`-PGID` lines; at EOF (the daemon is gone, however
it went) it kills the groups still listed."""


class ChildGroups:
    """Process groups of the running stdio servers, safe to read from any thread.

    The transport adds a group when it spawns a server and discards it once the
    server is reaped; the watchdog's emergency exit kills what is left. With a
    guardian (`start_guardian`), even a daemon killed by SIGKILL (the OOM
    killer, say) leaves no server behind: a tiny process of its own session
    learns every group over a pipe and kills those left when the pipe closes.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: set[int] = set()
        self._guardian: subprocess.Popen[bytes] | None = None
        self._pipe: int | None = None

    def add(self, pgid: int) -> None:
        with self._lock:
            self._groups.add(pgid)
            self._tell(b"+%d\n" % pgid)

    def discard(self, pgid: int) -> None:
        with self._lock:
            self._groups.discard(pgid)
            self._tell(b"-%d\n" % pgid)

    def start_guardian(self) -> int:
        """Start the guardian process (once); returns its pid."""
        import subprocess

        with self._lock:
            if self._guardian is None:
                read, write = os.pipe()
                try:
                    self._guardian = subprocess.Popen(
                        [sys.executable, "-I", "-S", "-c", _GUARDIAN],
                        stdin=read,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        start_new_session=True,  # Ctrl-C on the terminal spares it
                    )
                finally:
                    os.close(read)
                self._pipe = write
                for pgid in self._groups:
                    self._tell(b"+%d\n" % pgid)
            return self._guardian.pid

    @property
    def guardian_pid(self) -> int | None:
        """The guardian's pid while it runs (it is the daemon's child too)."""
        guardian = self._guardian
        return guardian.pid if guardian is not None else None

    def stop_guardian(self) -> None:
        """Close the pipe: the guardian kills what is still listed and exits."""
        with self._lock:
            guardian, self._guardian = self._guardian, None
            if self._pipe is not None:
                os.close(self._pipe)
                self._pipe = None
        if guardian is not None:
            import subprocess

            try:
                guardian.wait(timeout=2)
            except subprocess.TimeoutExpired:
                guardian.kill()
                guardian.wait()

    def _tell(self, line: bytes) -> None:
        if self._pipe is None:
            return
        try:
            os.write(self._pipe, line)
        except OSError:  # the guardian is gone; the watchdog still covers us
            os.close(self._pipe)
            self._pipe = None

    def snapshot(self) -> list[int]:
        with self._lock:
            return sorted(self._groups)

    def kill_all(self) -> int:
        """SIGKILL every known group; returns how many were signalled."""
        killed = 0
        for pgid in self.snapshot():
            try:
                os.killpg(pgid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        return killed


CHILD_GROUPS = ChildGroups()
"""The daemon's stdio server process groups (one process, one registry)."""


class Watchdog:
    """Watches the event loop from a thread.

    Args:
        stall_after: Seconds without a heartbeat before the stack is logged
            (0 disables the watchdog: `start()` does nothing).
        groups: The child process groups an emergency exit kills.
        exit: Ends the process (injectable for tests).
        clock: Monotonic clock.
    """

    def __init__(
        self,
        stall_after: float = DEFAULT_WATCHDOG,
        *,
        groups: ChildGroups = CHILD_GROUPS,
        exit: Callable[[int], None] = os._exit,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stall_after = stall_after
        self._groups = groups
        self._exit = exit
        self._clock = clock
        self._beat = clock()
        self._signal: tuple[int, float] | None = None
        self._main = threading.main_thread().ident
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self.stalls = 0

    # --- the loop side --------------------------------------------------------

    async def heartbeat(self) -> None:
        """Beat forever (run as a task in the event loop)."""
        import anyio  # the CLI imports this module; anyio only for the daemon

        while True:
            self._beat = self._clock()
            await anyio.sleep(HEARTBEAT)

    def install(self, signals: Iterable[int]) -> None:
        """Record `signals` for the watchdog (call from the main thread).

        Call it after the event loop registered its own handlers: only the
        Python-level handler is replaced; asyncio's wakeup fd still delivers
        each signal to the loop.
        """
        for sig in signals:
            signal.signal(sig, self.note_signal)

    def note_signal(self, signum: int, frame: FrameType | None = None) -> None:
        """A stop signal arrived (runs in the main thread, loop stuck or not)."""
        if signum in (signal.SIGTERM, signal.SIGINT) and self._signal is None:
            self._signal = (signum, self._clock())

    # --- the thread side ------------------------------------------------------

    def start(self) -> None:
        """Start the watching thread (no-op when disabled)."""
        if self.stall_after <= 0 or self._thread is not None:
            return
        self._beat = self._clock()
        self._thread = threading.Thread(
            target=self._watch, name="mcp-manager-watchdog", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (the daemon is ending normally)."""
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None

    def _watch(self) -> None:
        check = min(0.25, self.stall_after / 4)
        stalled_since: float | None = None
        while not self._done.wait(check):
            now = self._clock()
            beat = self._beat
            if now - beat >= self.stall_after:
                if stalled_since != beat:
                    stalled_since = beat
                    self.stalls += 1
                    # In a thread of its own: if the stuck main thread holds a
                    # logging lock (a blocked stderr), only that thread waits.
                    _detached(self._log_stall, now - beat)
            elif stalled_since is not None:
                _logger().warning(
                    "event loop turning again after %.1f s", now - stalled_since
                )
                stalled_since = None
            if self._signal is not None:
                signum, at = self._signal
                if beat < at and now - at >= SIGNAL_GRACE:
                    self._emergency_exit(signum, now - beat)
                    return

    def _log_stall(self, age: float) -> None:
        import traceback

        frame = sys._current_frames().get(self._main or -1)
        stack = "".join(traceback.format_stack(frame)) if frame else "(no frame)\n"
        _logger().error(
            "event loop has not turned for %.1f s (a bug in mcp-manager: please "
            "report it with this stack); main thread:\n%s",
            age,
            stack.rstrip(),
        )

    def _emergency_exit(self, signum: int, age: float) -> None:
        killed = self._groups.kill_all()  # first: no server may outlive us
        name = signal.Signals(signum).name
        message = (
            f"{name} while the event loop is stuck ({age:.1f} s): killed "
            f"{killed} server process group(s), exiting now"
        )
        said = _detached(_logger().critical, message)
        said.join(timeout=EMERGENCY_LOG_WAIT)  # logging may be what is stuck
        self._exit(128 + signum)


EMERGENCY_LOG_WAIT = 0.3
"""Seconds the emergency exit waits for its log line before it exits anyway."""


def _detached(fn: Callable[..., object], *args: object) -> threading.Thread:
    thread = threading.Thread(target=fn, args=args, daemon=True)
    thread.start()
    return thread
