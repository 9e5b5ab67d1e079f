"""How a session's end is noticed: the signal every part of a transport can set.

`LostSignal` is set once, by whichever part notices the end first (the stdio
process's exit, the read stream's end, a failed ping); `suspect()` is the
weaker hint that asks for a probe (an HTTP event stream that ended).
`EofSignalingReadStream` turns the end of a transport's read stream into such
a report, so stdio and SSE deaths are seen without traffic.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from .base import LossReport, Refusal
from .http.status import HttpStatus

__all__ = ["EOF_REPORT", "SUSPECT_INTERVAL", "EofSignalingReadStream", "LostSignal"]

SUSPECT_INTERVAL = 5.0
"""Seconds between two probes caused by an HTTP event stream that ended."""

EOF_REPORT = LossReport("server closed the connection")

STREAM_ENDED = "the server ended its event stream"
"""Why a connection is suspected when its HTTP event stream ended."""


@dataclass(slots=True)
class LostSignal:
    """Set once, by whichever part of the transport notices the end first.

    `suspected` is the weaker signal: something that often means the server
    went away (its event stream ended), to be confirmed by a probe.
    """

    event: anyio.Event = field(default_factory=anyio.Event)
    report: LossReport = field(default_factory=lambda: LossReport("transport closed"))
    suspected: anyio.Event = field(default_factory=anyio.Event)
    last_suspected: float = -math.inf
    refusals: list[Refusal] = field(default_factory=list)  # HTTP 401/403 seen
    statuses: list[HttpStatus] = field(default_factory=list)  # other 4xx/5xx

    def suspect(self) -> None:
        # A server that ends its event stream at once, again and again (the
        # SDK reopens it every second), must not cost a ping a second.
        now = anyio.current_time()
        if now - self.last_suspected >= SUSPECT_INTERVAL:
            self.last_suspected = now
            self.suspected.set()

    async def wait_suspect(self) -> str:
        await self.suspected.wait()
        self.suspected = anyio.Event()
        return STREAM_ENDED

    @property
    def is_set(self) -> bool:
        return self.event.is_set()

    def set(self, report: LossReport) -> None:
        if not self.event.is_set():
            self.report = report
            self.event.set()


class EofSignalingReadStream:
    """Wraps a transport read stream; reports the end when the transport closes it.

    stdio and SSE close their read stream as soon as the server goes away, so this
    detects death without traffic. Other attributes pass through (the SDK's
    dispatcher reads some).
    """

    def __init__(self, inner: Any, on_eof: Callable[[], None]) -> None:
        self._inner = inner
        self._on_eof = on_eof

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (
            anyio.EndOfStream,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
        ):
            self._on_eof()
            raise

    def __aiter__(self) -> EofSignalingReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    def close(self) -> None:
        self._inner.close()

    async def __aenter__(self) -> EofSignalingReadStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
