"""Fleet starts that converge: bounded parallel stdio starts, paced by progress.

Starting a stdio server costs CPU (0.5–0.7 s for a Python SDK server, more for
`npx`). Thirty of them started together on two cores need 10–13 s each, past the
default `connect_timeout`: every handshake timed out, was killed and restarted in
lock-step with the others, and the fleet never converged. So:

- `StartSlots` lets at most N servers start (spawn, initialize, list tools) at
  once; the rest wait their turn in order. Time spent waiting for a slot is not
  part of `connect_timeout` (the caller starts its clock once it holds a slot).
- `pace_start` runs beside one handshake and watches the server's CPU time (the
  process and its children, from `/proc`). A server that is idle (waiting on the
  network, or hung) gives its slot back after `IDLE_RELEASE` seconds, so a few
  stuck servers never hold the fleet back; a server still burning CPU when its
  deadline comes gets more time (up to `BUSY_EXTENSION_FACTOR` × the timeout in
  all), so a slow but progressing start is not killed and begun again.

Where `/proc` is missing, a slot is held for the whole handshake and the deadline
is fixed.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import anyio

__all__ = [
    "BUSY_EXTENSION_FACTOR",
    "IDLE_RELEASE",
    "Slot",
    "StartSlots",
    "default_start_slots",
    "pace_start",
]

IDLE_RELEASE = 1.0
"""Seconds without CPU progress after which a starting server gives its slot back."""

SAMPLE_INTERVAL = 0.25
"""Seconds between two looks at a starting server's CPU time."""

BUSY_EXTENSION_FACTOR = 3.0
"""A progressing start may take at most this many `connect_timeout`s in all."""

BUSY_GRACE = 1.0
"""Seconds the deadline moves out each time a busy server reaches it."""

_PROC = Path("/proc")


def default_start_slots() -> int:
    """Servers allowed to start at once: the CPU count, at least 2."""
    return max(2, os.cpu_count() or 2)


class Slot:
    """One held start slot; `release()` is idempotent."""

    def __init__(self, semaphore: anyio.Semaphore | None) -> None:
        self._semaphore = semaphore

    @property
    def held(self) -> bool:
        """Whether this slot is still held."""
        return self._semaphore is not None

    def release(self) -> None:
        """Give the slot back (the next waiting start may begin)."""
        if self._semaphore is not None:
            self._semaphore.release()
            self._semaphore = None


class StartSlots:
    """At most `slots` stdio servers start at once; waiters are served in order.

    Args:
        slots: Concurrent starts; `default_start_slots()` when None.
    """

    def __init__(self, slots: int | None = None) -> None:
        self.size = slots if slots is not None else default_start_slots()
        if self.size < 1:
            raise ValueError("start slots must be at least 1")
        self._semaphore = anyio.Semaphore(self.size, fast_acquire=True)

    @property
    def waiting(self) -> int:
        """Starts waiting for a slot right now."""
        return self._semaphore.statistics().tasks_waiting

    @property
    def in_use(self) -> int:
        """Slots held right now."""
        return self.size - self._semaphore.value

    async def acquire(self) -> Slot:
        """Wait for a slot (cancellable)."""
        await self._semaphore.acquire()
        return Slot(self._semaphore)


def cpu_ticks(pid: int) -> int | None:
    """CPU clock ticks used by `pid` and its direct children, or None if unknown."""
    total = _own_ticks(pid)
    if total is None:
        return None
    with contextlib.suppress(OSError, ValueError):
        children = (_PROC / str(pid) / "task" / str(pid) / "children").read_text()
        for child in children.split():
            total += _own_ticks(int(child)) or 0
    return total


def _own_ticks(pid: int) -> int | None:
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces; fields after ')' are fixed.
    fields = stat.rpartition(")")[2].split()
    try:
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (IndexError, ValueError):
        return None


async def pace_start(
    scope: anyio.CancelScope, pid: int, slot: Slot, hard_deadline: float
) -> None:
    """Watch one starting server until cancelled (the handshake is done).

    Releases `slot` once the server has been idle for `IDLE_RELEASE` seconds, and
    moves `scope.deadline` out (never past `hard_deadline`) while the server is
    still using CPU when the deadline comes.
    """
    last = cpu_ticks(pid)
    if last is None:
        return  # no /proc: fixed deadline, slot held to the end
    idle_since = anyio.current_time()
    while True:
        await anyio.sleep(SAMPLE_INTERVAL)
        now = anyio.current_time()
        ticks = cpu_ticks(pid)
        if ticks is None:
            return  # the process is gone; the handshake will say why
        if ticks > last:
            idle_since = now
            if scope.deadline - now < SAMPLE_INTERVAL * 2:
                scope.deadline = min(hard_deadline, now + BUSY_GRACE)
        elif now - idle_since >= IDLE_RELEASE:
            slot.release()
        last = ticks
