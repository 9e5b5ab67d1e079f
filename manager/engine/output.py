"""What a server says besides its answers: stderr lines and log messages.

A stdio server's stderr, as the daemon keeps it: the last lines, and a bound
on how many become events.
A server that logs in a loop must not flood the bus: at most
`STDERR_EVENTS_PER_SECOND` lines a second are published per connection; the
rest are counted and the count rides on the next line that is published. All
lines are kept in the tail (`status`, the HUD's details) either way. An
upstream's log message (`notifications/message`) becomes text of at most
`LOG_DATA_LIMIT` characters (`log_text`, then masked, then cut).
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Iterator

__all__ = [
    "LOG_DATA_LIMIT",
    "STDERR_EVENTS_PER_SECOND",
    "STDERR_LINE_LIMIT",
    "STDERR_LINES_KEPT",
    "StderrTail",
    "log_text",
]

STDERR_LINE_LIMIT = 1000
"""Characters of one stderr line kept (cut after secrets are masked)."""

LOG_DATA_LIMIT = 4000
"""Characters of an upstream log message's data kept in its `server_log` event."""

STDERR_LINES_KEPT = 50
"""Last stderr lines kept per connection (shown by status and the HUD)."""

STDERR_EVENTS_PER_SECOND = 20
"""stderr lines published as events per connection and second; the rest are counted."""


class StderrTail:
    """The last `STDERR_LINES_KEPT` lines and the per-second event budget."""

    def __init__(self) -> None:
        self.lines: deque[str] = deque(maxlen=STDERR_LINES_KEPT)
        self._window = 0.0
        self._sent = 0
        self._suppressed = 0

    def __iter__(self) -> Iterator[str]:
        return iter(self.lines)

    def __len__(self) -> int:
        return len(self.lines)

    def add(self, line: str) -> int | None:
        """Keep `line` (already redacted). Returns None when it must not be
        published (over budget), else the lines suppressed since the last one."""
        self.lines.append(line)
        now = time.monotonic()
        if now - self._window >= 1.0:
            self._window, self._sent = now, 0
        if self._sent >= STDERR_EVENTS_PER_SECOND:
            self._suppressed += 1
            return None
        self._sent += 1
        suppressed, self._suppressed = self._suppressed, 0
        return suppressed


def log_text(data: object) -> str:
    """An upstream log message's data as text (JSON unless it is a string).
    Mask secrets in it before cutting it to `LOG_DATA_LIMIT`, so a secret that
    straddles the cut is still masked."""
    if isinstance(data, str):
        return data
    try:
        return json.dumps(data, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(data)
