"""`Manager`: the desired set of connections, their tasks, status and tool calls.

The manager owns one task group. Each declared connection runs in its own task
(`connection.run_connection`) under its own cancel scope, so removing or
restarting one never touches another. `add`, `remove` and `reconcile` are
synchronous and return at once (they only record intent and start or cancel
tasks), which is what lets Lua call them from the event-loop thread.

Tool calls go through `call()`: a connected server is called at once; a
reconnecting one is waited for up to its `hold` (unless its outage is already old,
then the call fails at once); a call is never retried by the manager.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType

import anyio
import anyio.abc

from ..core.errors import (
    CallError,
    CallTimeout,
    ConnectTimeout,
    Disconnected,
    ServerUnavailable,
    TransportError,
    UnknownServer,
)
from ..core.events import Added, CallFailed, CallFinished, CallStarted, Updated
from ..core.redact import SecretRegistry, redact
from ..core.spec import ConnectionSpec, changed_fields, display_endpoint
from ..core.state import Phase
from ..core.status import ConnectionStatus
from ..transport.base import (
    CallResult,
    ProgressCallback,
    ToolInfo,
    Transport,
    Upstream,
)
from ..transport.connect import McpTransport
from ..transport.starts import StartSlots
from .bus import EventBus
from .connection import Connection, run_connection
from .tracing import (
    ERROR_TYPE,
    MCP_PROTOCOL_VERSION,
    MCP_SESSION_ID,
    NO_TRACING,
    SERVER,
    TRANSPORT,
    Span,
    Tracing,
    call_attributes,
)

__all__ = ["HOLD_FAIL_FAST_FACTOR", "Manager", "ReconcileResult"]

HOLD_FAIL_FAST_FACTOR = 3.0
"""An outage older than this many `hold`s fails calls at once instead of holding."""

CALL_DEADLINE_SLACK = 1.0
"""Seconds added to a call's timeout for our outer deadline (the SDK's fires first)."""


@dataclass(frozen=True, slots=True)
class ReconcileResult:
    """What `reconcile` changed, by connection name."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]
    unchanged: tuple[str, ...]


class Manager:
    """Keeps the declared connections running. Use as `async with Manager(bus):`.

    Args:
        bus: Where every state change is published.
        transport: Opens upstream sessions (the real MCP transport by default).
        clock: Wall clock (injectable).
        rand: Random source for backoff jitter (injectable).
        tracing: Spans for connect attempts, tool calls and removals (no-op by
            default; `telemetry.Telemetry.tracing` in the daemon).
        start_slots: How many stdio servers may start at once with the default
            transport (`starts.default_start_slots()` when None).
        secrets: The daemon's secret registry: the default transport registers
            resolved secrets in it, and every error text leaving the manager
            (events, status, call errors) is masked with it. One of its own if
            None (`manager.secrets`).
    """

    def __init__(
        self,
        bus: EventBus,
        transport: Transport | None = None,
        *,
        clock: Callable[[], float] = time.time,
        rand: Callable[[], float] = random.random,
        tracing: Tracing = NO_TRACING,
        start_slots: int | None = None,
        secrets: SecretRegistry | None = None,
    ) -> None:
        self.bus = bus
        self.tracing = tracing
        self.secrets = secrets if secrets is not None else SecretRegistry()
        self.starts = StartSlots(start_slots)
        self._transport = transport or McpTransport(
            starts=self.starts, secrets=self.secrets
        )
        self._clock = clock
        self._rand = rand
        self._conns: dict[str, Connection] = {}
        self._closing: set[Connection] = set()
        self._tg: anyio.abc.TaskGroup | None = None
        self._call_ids = itertools.count(1)

    async def __aenter__(self) -> Manager:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        """Stop every connection in parallel; each teardown is bounded."""
        assert self._tg is not None
        for name in list(self._conns):
            self.remove(name)
        try:
            return await self._tg.__aexit__(exc_type, exc, tb)
        finally:
            self._tg = None

    # --- declarations (synchronous, non-blocking) -----------------------------

    def add(self, spec: ConnectionSpec) -> bool:
        """Declare a connection. Same spec: no-op. Changed spec: restart that one.

        Returns:
            True if something started or restarted.
        """
        old = self._conns.get(spec.name)
        if old is not None and old.spec == spec:
            return False
        conn = Connection(
            spec,
            self.bus,
            clock=self._clock,
            rand=self._rand,
            tracing=self.tracing,
            secrets=self.secrets,
        )
        if old is not None:
            self._retire(old, publish_removed=False)
            self.bus.publish(
                Updated(
                    name=spec.name,
                    changed=changed_fields(old.spec, spec),
                    endpoint=display_endpoint(spec),
                )
            )
        else:
            self.bus.publish(
                Added(
                    name=spec.name,
                    transport=spec.transport,
                    endpoint=display_endpoint(spec),
                )
            )
        self._conns[spec.name] = conn
        if spec.enabled:
            self._start(conn)
        else:
            conn.disable()
        return True

    def remove(self, name: str) -> bool:
        """Stop retrying, close gracefully, emit `removed`. Returns if it existed."""
        conn = self._conns.pop(name, None)
        if conn is None:
            return False
        self._retire(conn, publish_removed=True)
        if self._tg is not None and self.tracing is not NO_TRACING:
            # Started here, so a reload that removes it is the span's parent.
            self._tg.start_soon(self._removal_span, conn, name=f"remove {name}")
        return True

    async def _removal_span(self, conn: Connection) -> None:
        """`mcp.remove`: from the request until the connection has closed."""
        attributes = {SERVER: conn.name, TRANSPORT: conn.spec.transport}
        with self.tracing.span("mcp.remove", attributes):
            await conn.done.wait()

    def reconcile(self, specs: Iterable[ConnectionSpec]) -> ReconcileResult:
        """Make the running set equal to `specs`, touching only the difference."""
        desired = {s.name: s for s in specs}
        added, changed, unchanged = [], [], []
        removed = sorted(set(self._conns) - set(desired))
        for name in removed:
            self.remove(name)
        for name, spec in desired.items():
            old = self._conns.get(name)
            if old is None:
                added.append(name)
            elif old.spec == spec:
                unchanged.append(name)
                continue
            else:
                changed.append(name)
            self.add(spec)
        return ReconcileResult(
            tuple(added), tuple(removed), tuple(changed), tuple(unchanged)
        )

    def _start(self, conn: Connection) -> None:
        if self._tg is None:
            raise RuntimeError("Manager used outside `async with`")
        self._tg.start_soon(self._supervise, conn, name=f"connection {conn.name}")

    def _retire(self, conn: Connection, *, publish_removed: bool) -> None:
        if not conn.spec.enabled:
            conn.mark_removed(publish=publish_removed)
            return
        conn.publish_removed = publish_removed
        self._closing.add(conn)
        conn.stop()

    async def _supervise(self, conn: Connection) -> None:
        try:
            with conn.scope:
                await run_connection(conn, self._transport)
        finally:
            self._closing.discard(conn)
            conn.mark_removed(publish=conn.publish_removed)

    def reconnect(self, name: str) -> bool:
        """Try `name` now instead of after its backoff wait.

        Returns:
            True if a wait was cut short; False if it was not waiting (connected,
            or a try already in flight).

        Raises:
            UnknownServer: No such connection.
        """
        conn = self._conns.get(name)
        if conn is None:
            raise UnknownServer(f"no connection named {name!r}")
        return conn.retry_now()

    # --- reading ----------------------------------------------------------------

    @property
    def specs(self) -> Mapping[str, ConnectionSpec]:
        """The desired set: name -> spec."""
        return {name: conn.spec for name, conn in self._conns.items()}

    def connection(self, name: str) -> Connection | None:
        """The live connection record, if declared."""
        return self._conns.get(name)

    def connections(self) -> list[Connection]:
        """All declared connections, sorted by name."""
        return [self._conns[n] for n in sorted(self._conns)]

    def connections_and_closing(self) -> list[Connection]:
        """Declared connections plus those removed but still closing."""
        return [*self.connections(), *self._closing]

    def status(self, name: str) -> ConnectionStatus | None:
        """The status of one connection, or None if not declared."""
        conn = self._conns.get(name)
        return None if conn is None else connection_status(conn, self._clock())

    def statuses(self) -> list[ConnectionStatus]:
        """The status of every declared connection, sorted by name."""
        now = self._clock()
        return [connection_status(c, now) for c in self.connections()]

    def tools(self, name: str) -> tuple[ToolInfo, ...]:
        """The last known tools of a connection (kept while it reconnects)."""
        conn = self._conns.get(name)
        return conn.tools if conn is not None else ()

    # --- calls ------------------------------------------------------------------

    async def call(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, object] | None = None,
        *,
        call_timeout: float | None = None,
        meta: Mapping[str, object] | None = None,
        progress: ProgressCallback | None = None,
    ) -> CallResult:
        """Call `tool` on `server` through its live session. Never retried.

        Args:
            server: Connection name.
            tool: Tool name on that server.
            arguments: Tool arguments.
            call_timeout: Seconds for the call (default: the spec's call_timeout).
            meta: `_meta` for the request (e.g. the caller's W3C trace context).
            progress: Receives the server's progress notifications for the call.

        Returns:
            The result; `is_error` tells whether the tool reported an error.

        Raises:
            UnknownServer: No such connection.
            ServerUnavailable: Not connected within `hold`, or lost during the call.
            CallTimeout: No result within the timeout.
            CallError: The server rejected the request.
        """
        attributes = None
        if self.tracing is not NO_TRACING:  # skip the work when nobody records
            spec = self._conns[server].spec if server in self._conns else None
            attributes = call_attributes(spec, tool) if spec else {SERVER: server}
        # CLIENT span, current while the SDK sends: its own span and the
        # `traceparent` it puts into `params._meta` become our children.
        with self.tracing.span(f"tools/call {tool}", attributes, kind="client") as span:
            return await self._call(
                span, server, tool, arguments, call_timeout, meta, progress
            )

    async def _call(
        self,
        span: Span,
        server: str,
        tool: str,
        arguments: Mapping[str, object] | None,
        call_timeout: float | None,
        meta: Mapping[str, object] | None,
        progress: ProgressCallback | None,
    ) -> CallResult:
        conn = self._conns.get(server)
        if conn is None:
            known = ", ".join(sorted(self._conns)) or "none"
            raise UnknownServer(f"no connection named {server!r} (declared: {known})")
        call_id = next(self._call_ids)
        self.bus.publish(CallStarted(name=server, tool=tool, call_id=call_id))
        started = time.monotonic()
        try:
            upstream = await self._ready(conn)
            _describe_session(span, upstream)
            limit = call_timeout if call_timeout is not None else conn.spec.call_timeout
            with anyio.fail_after(limit + CALL_DEADLINE_SLACK):
                result = await upstream.call_tool(
                    tool, arguments, limit, meta=meta, progress=progress
                )
        except BaseException as exc:
            error = _call_error(exc, conn, tool, call_timeout, self.secrets)
            if error is None:
                self.bus.publish(
                    CallFailed(
                        name=server,
                        tool=tool,
                        duration=time.monotonic() - started,
                        error="cancelled",
                        call_id=call_id,
                    )
                )
                raise
            self.bus.publish(
                CallFailed(
                    name=server,
                    tool=tool,
                    duration=time.monotonic() - started,
                    error=str(error),
                    call_id=call_id,
                )
            )
            if error is exc:
                raise
            raise error from exc
        if result.is_error:
            span.set_attribute(ERROR_TYPE, "tool_error")  # MCP semconv
        self.bus.publish(
            CallFinished(
                name=server,
                tool=tool,
                duration=time.monotonic() - started,
                is_error=result.is_error,
                call_id=call_id,
            )
        )
        return result

    async def _ready(self, conn: Connection) -> Upstream:
        """The live upstream, waiting up to `hold` for a young outage."""
        upstream = conn.upstream
        if upstream is not None and conn.phase is Phase.CONNECTED:
            return upstream
        if conn.phase is Phase.DISABLED:
            raise ServerUnavailable(
                f"{conn.name} is disabled (enabled = false in the config)"
            )
        state = conn.state
        now = self._clock()
        young = (
            state.outage_since is None
            or now - state.outage_since <= HOLD_FAIL_FAST_FACTOR * conn.spec.hold
        )
        if young and conn.spec.hold > 0:
            with anyio.move_on_after(conn.spec.hold):
                await conn.wait_connected()
            upstream = conn.upstream
            if upstream is not None and conn.phase is Phase.CONNECTED:
                return upstream
        raise ServerUnavailable(unavailable_message(conn, self._clock()))


def _describe_session(span: Span, upstream: Upstream) -> None:
    """Session attributes of a call span (MCP semantic conventions)."""
    info = upstream.info
    if info.protocol:
        span.set_attribute(MCP_PROTOCOL_VERSION, info.protocol)
    if info.session_id:
        span.set_attribute(MCP_SESSION_ID, info.session_id)


def unavailable_message(conn: Connection, now: float) -> str:
    """Why a call cannot be made now: state, attempt, next retry, last error."""
    state = conn.state
    parts = [f"attempt {state.attempt}"]
    if state.next_retry_at is not None:
        parts.append(f"next retry in {max(0.0, state.next_retry_at - now):.1f} s")
    if state.outage_since is not None:
        parts.append(f"down for {now - state.outage_since:.1f} s")
    text = f"{conn.name} is {state.phase.value} ({', '.join(parts)})"
    if state.error:
        text += f"; last error: {state.error}"
    return text


def _call_error(
    exc: BaseException,
    conn: Connection,
    tool: str,
    timeout: float | None,
    secrets: SecretRegistry,
) -> BaseException | None:
    """Map a failure of `Manager.call` to the error the caller sees (None: re-raise).

    Its text is masked with `secrets`: it goes to the gateway's client, to Lua
    and to the call span as it is.
    """
    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return None
    if isinstance(exc, CallError):
        text = redact(str(exc), secrets)
        return exc if text == str(exc) else type(exc)(text)
    limit = timeout if timeout is not None else conn.spec.call_timeout
    if isinstance(exc, ConnectTimeout | TimeoutError):
        return CallTimeout(f"{conn.name}/{tool}: no result within {limit:g} s")
    if isinstance(exc, Disconnected):
        return ServerUnavailable(
            f"{conn.name} disconnected during the call ({redact(str(exc), secrets)}); "
            "the call was not retried"
        )
    if isinstance(exc, TransportError):
        return ServerUnavailable(f"{conn.name}: {redact(str(exc), secrets)}")
    if isinstance(exc, Exception):
        return CallError(
            f"{conn.name}/{tool}: {redact(str(exc), secrets) or type(exc).__name__}"
        )
    return None


def connection_status(conn: Connection, now: float) -> ConnectionStatus:
    """The status of one connection at wall time `now`."""
    state = conn.state
    next_in = None
    if state.next_retry_at is not None:
        next_in = round(max(0.0, state.next_retry_at - now), 3)
    return ConnectionStatus(
        name=conn.name,
        transport=conn.spec.transport,
        endpoint=display_endpoint(conn.spec),
        state=state.phase.value,
        attempt=state.attempt,
        tools=len(state.tools),
        error=state.error,
        next_retry_in=next_in,
        since=state.since,
        pid=state.pid,
        exit_code=state.exit_code,
        enabled=conn.spec.enabled,
        stderr=tuple(conn.stderr)[-10:],
    )
