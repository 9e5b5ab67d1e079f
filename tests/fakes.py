"""Test doubles at our own seams: an event recorder and a scriptable transport.

`Recorder` listens on a real `EventBus` and lets a test wait for an event (never
sleep). `FakeTransport` implements the `Transport` protocol: it fails a given
number of times, then yields a `FakeUpstream` that stays up until told to die,
the way the SDK swaps a fake process in at its spawn seam.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import mcp.types as types

from manager.core.errors import ConnectFailed, Disconnected, UpstreamError
from manager.core.events import Event
from manager.core.spec import ConnectionSpec
from manager.engine.bus import EventBus
from manager.transport.base import (
    CATALOG_KINDS,
    CallResult,
    Catalog,
    Hooks,
    LossReport,
    ProgressCallback,
    ServerInfo,
    ToolInfo,
)

__all__ = ["FakeTransport", "FakeUpstream", "Recorder", "accepting", "eventually"]

WAIT_LIMIT = 15.0
"""Default seconds a test waits for an event before failing."""


class Recorder:
    """Records every event of a bus, in order, and waits for matching ones."""

    def __init__(self, bus: EventBus) -> None:
        self.events: list[Event] = []
        self._changed = anyio.Event()
        self.close = bus.add_listener(self._on_event)

    def _on_event(self, event: Event) -> None:
        self.events.append(event)
        self._changed.set()
        self._changed = anyio.Event()

    def of(self, kind: str, name: str | None = None) -> list[Event]:
        """Recorded events of `kind` (and connection `name`)."""
        return [
            e
            for e in self.events
            if e.kind == kind and (name is None or e.name == name)
        ]

    async def wait_for(
        self,
        kind: str | tuple[str, ...],
        name: str | None = None,
        *,
        where: Callable[[Event], bool] = lambda e: True,
        after: int = 0,
        within: float = WAIT_LIMIT,
    ) -> Event:
        """The first event of `kind` (or one of the kinds; for `name`) after
        seq `after` matching `where`."""
        kinds = (kind,) if isinstance(kind, str) else kind
        with anyio.fail_after(within):
            while True:
                for event in self.events:
                    if (
                        event.seq > after
                        and event.kind in kinds
                        and (name is None or event.name == name)
                        and where(event)
                    ):
                        return event
                await self._changed.wait()

    @property
    def last_seq(self) -> int:
        """The seq of the newest recorded event (0 if none)."""
        return self.events[-1].seq if self.events else 0


class FakeUpstream:
    """An upstream that answers calls with an echo and dies when told."""

    def __init__(self, tools: tuple[str, ...] = ("echo",)) -> None:
        self._tools = tuple(ToolInfo(t, "", {"name": t}) for t in tools)
        self._lost = anyio.Event()
        self._report = LossReport("fake server died")
        self.calls: list[tuple[str, Mapping[str, object] | None]] = []
        self.metas: list[Mapping[str, object] | None] = []
        self.roots_changed = 0

    @property
    def info(self) -> ServerInfo:
        return ServerInfo("fake", "1.0", "2025-11-25")

    @property
    def pid(self) -> int | None:
        return None

    @property
    def tools(self) -> tuple[ToolInfo, ...]:
        return self._tools

    async def list_tools(self) -> tuple[ToolInfo, ...]:
        return self._tools

    @property
    def catalog(self) -> Catalog:
        return Catalog()

    async def list_catalog(self, kinds: tuple[str, ...] = CATALOG_KINDS) -> Catalog:
        return Catalog()

    async def send(
        self,
        request: Any,
        result_type: Any,
        limit: float,
        *,
        progress: ProgressCallback | None = None,
    ) -> Any:
        if self._lost.is_set():
            raise Disconnected("fake server died")
        raise UpstreamError("the fake server knows tools only", code=-32601)

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, object] | None,
        limit: float,
        *,
        meta: Mapping[str, object] | None = None,
        progress: ProgressCallback | None = None,
    ) -> CallResult:
        if self._lost.is_set():
            raise Disconnected("fake server died")
        self.calls.append((name, arguments))
        self.metas.append(meta)
        data = {"content": [{"type": "text", "text": f"{name}:{arguments}"}]}
        return CallResult(is_error=False, data={**data, "isError": False})

    async def for_era(self, era: str | None, limit: float) -> FakeUpstream:
        return self  # one era

    def apart(self, era: str | None) -> bool:
        return False

    def capabilities_for(self, era: str | None) -> Mapping[str, object]:
        return self.info.capabilities

    def beside(self) -> str:
        return ""

    async def notify_roots_changed(self) -> None:
        self.roots_changed += 1

    async def ping(self, limit: float) -> None:
        if self._lost.is_set():
            raise Disconnected("fake server died")

    async def wait_lost(self) -> LossReport:
        await self._lost.wait()
        return self._report

    async def wait_suspect(self) -> str:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    def die(
        self, reason: str = "fake server died", exit_code: int | None = None
    ) -> None:
        """Make the session end as if the server went away."""
        self._report = LossReport(reason, exit_code)
        self._lost.set()


class FakeTransport:
    """Fails `failures` times, then connects to a new `FakeUpstream` each time.

    Args:
        failures: How many opens fail with `ConnectFailed` before one succeeds.
        error: The failure message.
        gate: When given, each open waits for it first (a try held in flight).
    """

    def __init__(
        self,
        failures: int = 0,
        error: str = "connection refused",
        *,
        teardown_error: bool = False,
        gate: anyio.Event | None = None,
    ) -> None:
        self.failures = failures
        self.error = error
        self.teardown_error = teardown_error
        self.gate = gate
        self.opens = 0
        self.upstreams: list[FakeUpstream] = []
        self.open_now = anyio.Event()

    def open(
        self, spec: ConnectionSpec, hooks: Hooks
    ) -> AbstractAsyncContextManager[FakeUpstream]:
        return self._open(spec, hooks)

    @asynccontextmanager
    async def _open(
        self, spec: ConnectionSpec, hooks: Hooks
    ) -> AsyncIterator[FakeUpstream]:
        self.opens += 1
        await anyio.lowlevel.checkpoint()
        if self.gate is not None:
            await self.gate.wait()
        if self.failures > 0:
            self.failures -= 1
            raise ConnectFailed(self.error)
        upstream = FakeUpstream()
        self.upstreams.append(upstream)
        yield upstream
        if self.teardown_error:  # closing a dead session can fail too
            raise Disconnected("teardown failed")


async def eventually(
    predicate: Callable[[], bool], within: float = 5.0, step: float = 0.005
) -> None:
    """Wait until `predicate()` holds, for outside facts no event announces.

    Only for state outside the daemon (a process table entry, a port): anything
    the daemon itself does is awaited through `Recorder.wait_for`.
    """
    with anyio.fail_after(within):
        while not predicate():  # noqa: ASYNC110 - polling the OS, no event exists
            await anyio.sleep(step)


def accepting(answer: str) -> Any:
    """An SDK client's `elicitation_callback` that accepts with `answer`
    (what the demo server's `ask_user` asks for): a client that can be asked
    and says who it is in every answer."""

    async def answer_it(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"answer": answer})

    return answer_it
