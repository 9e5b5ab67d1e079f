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

from ..transport.stdio.children import CHILD_GROUPS, ChildGroups

if TYPE_CHECKING:  # the CLI imports this module: keep it light
    import logging
    from types import FrameType

__all__ = ["DEFAULT_WATCHDOG", "SIGNAL_GRACE", "Watchdog"]


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
        self._armed = True
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

    def start(self, *, armed: bool = True) -> None:
        """Start the watching thread (no-op when disabled). Not `armed`, it
        reports no stall until `arm()` (a daemon starting: its imports and
        first load hold the loop by design); signals are heard either way."""
        if self.stall_after <= 0 or self._thread is not None:
            return
        self._armed = armed
        self._beat = self._clock()
        self._thread = threading.Thread(
            target=self._watch, name="mcp-manager-watchdog", daemon=True
        )
        self._thread.start()

    def arm(self) -> None:
        """Report stalls from now on (the daemon is running)."""
        self._beat = self._clock()
        self._armed = True

    def disarm(self) -> None:
        """Report no more stalls (the daemon is stopping: its heartbeat ends
        before its teardown does). Signals are still heard."""
        self._armed = False

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
            if now - beat >= self.stall_after and self._armed:
                if stalled_since != beat:
                    stalled_since = beat
                    self.stalls += 1
                    # In a thread of its own: if the stuck main thread holds a
                    # logging lock (a blocked stderr), only that thread waits.
                    _detached(self._log_stall, now - beat)
            elif stalled_since is not None and now - beat < self.stall_after:
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
