"""The process groups of the running stdio servers, and the guardian that outlives us.

The stdio transport adds a group when it spawns a server and discards it once
the server is reaped. The watchdog's emergency exit kills what is left; the
guardian process kills it even when the daemon itself was killed.

Standard library only (the CLI imports the watchdog, which imports this).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess

__all__ = ["CHILD_GROUPS", "ChildGroups"]

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
