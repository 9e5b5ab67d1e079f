"""Whole tool results that `max_output` cut, kept a while (`core.output`).

A cut result links to `mcp-manager://results/ID`; the endpoint serves that
resource and `mcp-manager result ID` prints it, from here. Bounded: at most
`MAX_BYTES` of results in memory, each for `KEEP_SECONDS`, the oldest dropped
first. An id is 128 random bits: only the client that got the link (or
someone it gave it to) can ask for it.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable

__all__ = ["KEEP_SECONDS", "MAX_BYTES", "ResultStore"]

MAX_BYTES = 256 * 1024 * 1024
"""Results kept at once, in bytes of their JSON."""

KEEP_SECONDS = 3600.0
"""How long a whole result stays readable."""


class ResultStore:
    """Whole results by id, bounded in bytes and age.

    Args:
        max_bytes: Most bytes kept at once; the oldest go first.
        keep_seconds: How long one stays.
        clock: Monotonic clock (injectable).
    """

    def __init__(
        self,
        max_bytes: int = MAX_BYTES,
        keep_seconds: float = KEEP_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kept: OrderedDict[str, tuple[float, str]] = OrderedDict()
        self._bytes = 0
        self._max = max_bytes
        self._keep = keep_seconds
        self._clock = clock
        self.dropped = 0
        """Results dropped before their time to stay under `max_bytes`."""

    def __len__(self) -> int:
        return len(self._kept)

    def keep(self, text: str) -> str:
        """Keep a result (its JSON text); returns its id."""
        self._expire()
        while self._kept and self._bytes + len(text) > self._max:
            self._pop_oldest()
            self.dropped += 1
        result_id = secrets.token_hex(16)
        self._kept[result_id] = (self._clock() + self._keep, text)
        self._bytes += len(text)
        return result_id

    def get(self, result_id: str) -> str | None:
        """The result's JSON, or None once it expired (or never was)."""
        self._expire()
        entry = self._kept.get(result_id)
        return entry[1] if entry is not None else None

    def _expire(self) -> None:
        now = self._clock()
        while self._kept and next(iter(self._kept.values()))[0] <= now:
            self._pop_oldest()

    def _pop_oldest(self) -> None:
        _, (_, text) = self._kept.popitem(last=False)
        self._bytes -= len(text)
