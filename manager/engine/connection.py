"""One connection: its supervisor task, the reconnect loop, and its live state.

`Connection` holds what the rest of the daemon reads (state, tools, the live
upstream, captured stderr). `Connection.run(transport)` is the connection's only
task: it opens and closes its own transport (cancel scopes are task-bound),
watches for death (EOF/exit from the transport, failed pings), re-lists tools on
`list_changed`, and waits out the backoff between tries, forever. The decisions
(next state, events, delays) come from the pure `state.transition()`.

Removal is `conn.scope.cancel()` from anywhere; teardown below it is shielded
and bounded by the transport.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
import math
import random
import time
from collections.abc import Callable

import anyio

from ..core.errors import ConfigError, TransportError
from ..core.events import (
    AuthStep,
    CatalogChanged,
    ResourceUpdated,
    ServerLog,
    ServerStderr,
)
from ..core.redact import SecretRegistry, redact
from ..core.spec import ConnectionSpec
from ..core.state import (
    AttemptBegan,
    AttemptError,
    ConnectionState,
    HandshakeDone,
    Phase,
    ProcessSpawned,
    SessionLost,
    Signal,
    StopRequested,
    ToolsListed,
    transition,
)
from ..transport.base import (
    Catalog,
    Hooks,
    LossReport,
    ServerRequestHandler,
    ToolInfo,
    Transport,
    Upstream,
)
from ..transport.errors import describe_error
from .bus import EventBus
from .output import LOG_DATA_LIMIT, STDERR_LINE_LIMIT, StderrTail, log_text
from .tracing import NO_TRACING, OUTCOME, PID, Tracing, attempt_attributes

__all__ = [
    "Connection",
    "ServerRequests",
]

logger = logging.getLogger(__name__)

EXIT_REPORT_WAIT = 0.6
"""Seconds a failed ping of a stdio server waits for the process's own exit report."""


class ServerRequests:
    """Where requests from upstreams go (`sampling`, `elicitation`): the gateway
    sets `handler`; until then they are refused. Log messages go to `on_log`
    too, in the order they came (it returns whether a client request being
    served took the message). Shared by every connection."""

    def __init__(self) -> None:
        self.handler: (
            Callable[[str, str, object, str | None, str | None], object] | None
        ) = None
        self.on_log: Callable[[str, str, str | None, object], bool] | None = None


class Connection:
    """The live record of one declared connection.

    Args:
        spec: What to connect to.
        bus: Where state changes are published.
        clock: Wall clock (injectable).
        rand: Random source for jitter (injectable).
        tracing: Makes each connect attempt a current span (no-op by default).
    """

    def __init__(
        self,
        spec: ConnectionSpec,
        bus: EventBus,
        *,
        clock: Callable[[], float] = time.time,
        rand: Callable[[], float] = random.random,
        tracing: Tracing = NO_TRACING,
        secrets: SecretRegistry | None = None,
        requests: ServerRequests | None = None,
    ) -> None:
        self.spec = spec
        self._secrets = secrets
        self._requests = requests if requests is not None else ServerRequests()
        self._tracing = tracing
        self.scope = anyio.CancelScope()
        self.state = ConnectionState(name=spec.name, since=clock())
        self.upstream: Upstream | None = None
        self.tools: tuple[ToolInfo, ...] = ()
        self.catalog = Catalog()
        self._relist: set[str] = set()  # lists to fetch again (list_changed)
        self.stderr = StderrTail()
        self.done = anyio.Event()
        self.publish_removed = True
        self._retry_scope: anyio.CancelScope | None = None
        self._bus = bus
        self._clock = clock
        self._rand = rand
        self._connected = anyio.Event()
        self._list_changed = anyio.Event()
        self._login_wanted = False
        self._settle_armed = False
        self.on_settled: Callable[[str | None], None] | None = None
        """Called once when the current (or next) try ends: None when it
        connected, else the error (a login waits for it)."""

    @property
    def name(self) -> str:
        """The connection name."""
        return self.spec.name

    @property
    def phase(self) -> Phase:
        """The current phase."""
        return self.state.phase

    def signal(self, sig: Signal) -> None:
        """Feed one signal to the state machine and publish what it decides."""
        self.state, events = transition(
            self.state, sig, self.spec.backoff, self.spec.stable_after
        )
        for event in events:
            self._bus.publish(event)

    async def wait_connected(self) -> bool:
        """Wait until the connection is connected (or removed). Returns connected."""
        # `upstream` goes first: a lost session is torn down (up to 2 s) before
        # the state machine hears of the loss, so the phase still says connected.
        while self.state.phase is not Phase.REMOVED and (
            self.upstream is None or self.state.phase is not Phase.CONNECTED
        ):
            await self._connected.wait()
        return self.state.phase is Phase.CONNECTED

    def retry_now(self) -> bool:
        """Cut the current backoff wait short. Returns whether one was cut."""
        if self._retry_scope is None:
            return False
        self._retry_scope.cancel()
        return True

    def try_for_login(self) -> None:
        """A login began: try now, or right after the try in flight (whose end
        is not the login's: `on_settled` waits for a try that began after)."""
        self._login_wanted = True
        self._settle_armed = False
        self.retry_now()

    async def run(self, transport: Transport) -> None:
        """Connect and reconnect forever (until `scope` is cancelled): the
        connection's only task.

        The first try starts at once; after a failure or a loss the state
        machine decides the delay (100 ms doubling, capped, jittered; the
        counter resets only after `stable_after` seconds connected). A
        connection in `needs_login` waits until `try_for_login` or `retry_now`.
        """
        while True:
            report = await self._attempt(transport)
            if report is not None:
                self._signal_lost(report)
            next_at = self.state.next_retry_at
            wait = max(0.0, next_at - self._clock()) if next_at is not None else 0.0
            if self.phase is Phase.NEEDS_LOGIN:
                wait = math.inf  # until a login, a reload or `reconnect`
            if self._login_wanted:
                wait = 0.0  # a login began during the try
            with anyio.CancelScope() as self._retry_scope:  # retry_now() cancels
                await anyio.sleep(wait)
            self._retry_scope = None

    def _settled(self, error: str | None) -> None:
        if not self._settle_armed:
            return
        hook, self.on_settled = self.on_settled, None
        self._settle_armed = False
        if hook is not None:
            hook(error)

    def stop(self) -> None:
        """Request removal: cancel the supervisor; `done` is set once it closed."""
        self.scope.cancel()

    def disable(self) -> None:
        """Record that the connection is declared with `enabled = false`."""
        self.state = dataclasses.replace(
            self.state, phase=Phase.DISABLED, since=self._clock()
        )

    def mark_removed(self, *, publish: bool = True) -> None:
        """Record the terminal state (called once the supervisor has exited).

        Args:
            publish: Emit `removed`; False when a new spec replaced this one.
        """
        if publish:
            self.signal(StopRequested(now=self._clock()))
        else:
            self.state = dataclasses.replace(self.state, phase=Phase.REMOVED)
        self.upstream = None
        self._connected.set()
        self.done.set()
        self._settle_armed = True  # a login waiting for this one ends too
        self._settled("the connection was removed or replaced")

    # --- hooks from the transport (synchronous) -------------------------------

    def _on_spawn(self, pid: int) -> None:
        self.signal(ProcessSpawned(now=self._clock(), pid=pid))

    def _on_stderr(self, line: str) -> None:
        line = redact(line, self._secrets)[:STDERR_LINE_LIMIT]
        suppressed = self.stderr.add(line)
        if suppressed is None:
            return  # over this second's budget: counted, kept in the tail
        self._bus.publish(
            ServerStderr(name=self.name, line=line, suppressed=suppressed)
        )

    def _on_tools_changed(self) -> None:
        self._on_list_changed("tools")

    def _on_list_changed(self, kind: str) -> None:
        self._relist.add(kind)
        if kind == "resources":
            self._relist.add("templates")  # they have no list_changed of their own
        self._list_changed.set()

    def _on_resource_updated(self, uri: str) -> None:
        self._bus.publish(ResourceUpdated(name=self.name, uri=uri))

    def _on_log(self, level: str, logger_name: str | None, data: object) -> None:
        route = self._requests.on_log
        in_call = route is not None and route(self.name, level, logger_name, data)
        self._bus.publish(
            ServerLog(
                name=self.name,
                level=level,
                logger=logger_name or "",
                data=redact(log_text(data), self._secrets)[:LOG_DATA_LIMIT],
                in_call=in_call,
            )
        )

    async def _on_request(
        self, method: str, params: object, link: str | None, key: str | None = None
    ) -> object:
        handler = self._requests.handler
        if handler is None:
            raise NotImplementedError(method)
        result = handler(self.name, method, params, link, key)
        return await result if inspect.isawaitable(result) else result

    def _on_auth(
        self, step: str, outcome: str, status: int, elapsed: float, error: str
    ) -> None:
        self._bus.publish(
            AuthStep(
                name=self.name,
                step=step,
                outcome=outcome,
                status=status,
                elapsed=elapsed,
                error=redact(error, self._secrets),
            )
        )

    def _roots(self) -> tuple[str, ...]:
        return self.spec.roots

    def _hooks(self) -> Hooks:
        on_request: ServerRequestHandler = self._on_request
        return Hooks(
            on_spawn=self._on_spawn,
            on_stderr=self._on_stderr,
            on_tools_changed=self._on_tools_changed,
            on_list_changed=self._on_list_changed,
            on_resource_updated=self._on_resource_updated,
            on_log=self._on_log,
            on_request=on_request,
            roots=self._roots if self.spec.roots else None,
            on_auth=self._on_auth,
        )

    # --- the loop ---------------------------------------------------------------

    def _set_connected(self, upstream: Upstream, elapsed: float) -> None:
        self.upstream = upstream
        self.tools = upstream.tools
        self.catalog = upstream.catalog
        info = upstream.info
        self.signal(
            HandshakeDone(
                now=self._clock(),
                tools=tuple(sorted(t.name for t in upstream.tools)),
                server_name=info.name,
                server_version=info.version,
                protocol=info.protocol,
                elapsed=elapsed,
            )
        )
        self._connected.set()
        self._settled(None)

    def _set_disconnected(self) -> None:
        self.upstream = None
        if self._connected.is_set():
            self._connected = anyio.Event()

    async def _watch(self, upstream: Upstream) -> LossReport:
        """Block until the session dies; return why."""
        report: list[LossReport] = []

        async def on_transport(tg_cancel: Callable[[], None]) -> None:
            report.append(await upstream.wait_lost())
            tg_cancel()

        async def pinger(tg_cancel: Callable[[], None]) -> None:
            # Every ping_interval, and at once when the transport suspects the
            # server went away (an HTTP event stream that ended).
            interval = self.spec.ping_interval or math.inf
            while True:
                suspected = False
                with anyio.move_on_after(interval):
                    await upstream.wait_suspect()
                    suspected = True
                try:
                    await upstream.ping(self.spec.ping_timeout)
                except TransportError as exc:
                    if suspected:
                        exc = type(exc)(f"the server closed its connections; {exc}")
                    if upstream.pid is not None:
                        # A stdio server that just exited: its exit code is a
                        # moment away and says more than "connection closed".
                        with anyio.move_on_after(EXIT_REPORT_WAIT):
                            report.append(await upstream.wait_lost())
                    if not report:
                        report.append(
                            LossReport(str(exc), error_type=type(exc).__name__)
                        )
                    tg_cancel()
                    return

        async def relister(tg_cancel: Callable[[], None]) -> None:
            while True:
                await self._list_changed.wait()
                self._list_changed = anyio.Event()
                wanted, self._relist = self._relist, set()
                kinds = tuple(sorted(wanted - {"tools"}))
                try:
                    with anyio.fail_after(self.spec.connect_timeout):
                        tools = (
                            await upstream.list_tools() if "tools" in wanted else None
                        )
                        catalog = await upstream.list_catalog(kinds) if kinds else None
                except (TransportError, TimeoutError) as exc:
                    what = "/".join(sorted(wanted))
                    report.append(
                        LossReport(f"{what} list after list_changed failed: {exc}")
                    )
                    tg_cancel()
                    return
                if catalog is not None:
                    self._set_catalog(catalog, kinds)
                if tools is not None:
                    self.tools = tools
                    names = tuple(sorted(t.name for t in tools))
                    self.signal(ToolsListed(now=self._clock(), tools=names))

        async with anyio.create_task_group() as tg:
            cancel = tg.cancel_scope.cancel
            tg.start_soon(on_transport, cancel)
            tg.start_soon(relister, cancel)
            tg.start_soon(pinger, cancel)
        return report[0] if report else LossReport("session ended")

    def _set_catalog(self, catalog: Catalog, kinds: tuple[str, ...]) -> None:
        old, self.catalog = self.catalog, catalog
        for kind in kinds:
            before, after = set(old.names(kind)), set(catalog.names(kind))
            if before == after and getattr(old, kind) == getattr(catalog, kind):
                continue
            self._bus.publish(
                CatalogChanged(
                    name=self.name,
                    items=kind,
                    added=tuple(sorted(after - before)),
                    removed=tuple(sorted(before - after)),
                    count=len(after),
                )
            )

    async def _attempt(self, transport: Transport) -> LossReport | None:
        """One try: connect, hold the session until it dies.

        Returns:
            The loss report when a connected session failed by raising, or None
            when the failure or loss is already signalled (a failed try, or a
            loss the watchers saw, signalled before the teardown).
        """
        started = time.monotonic()
        self._login_wanted = False
        self._settle_armed = self.on_settled is not None
        self.signal(AttemptBegan(now=self._clock()))
        connected = signalled = False
        try:
            async with contextlib.AsyncExitStack() as stack:
                # The attempt span is current while the SDK connects (its
                # initialize/tools/list spans nest under it) and ends once connected.
                attributes = attempt_attributes(self.spec, self.state.attempt)
                with self._tracing.span("mcp.connect_attempt", attributes) as span:
                    upstream = await stack.enter_async_context(
                        transport.open(self.spec, self._hooks())
                    )
                    span.set_attribute(OUTCOME, "connected")
                    if upstream.pid is not None:
                        span.set_attribute(PID, upstream.pid)
                connected = True
                self._set_connected(upstream, time.monotonic() - started)
                report = await self._watch(upstream)
                self._set_disconnected()
                # Report the loss now, not after the teardown below: closing a
                # dead HTTP session can take its full 2 s bound, and detection
                # must be ping_interval + ping_timeout, not that plus teardown.
                self._signal_lost(report)
                signalled = True
            return None
        except (TransportError, ConfigError) as exc:
            self._set_disconnected()
            if signalled:
                return None  # the teardown of a session already reported lost
            message = redact(str(exc), self._secrets)
            return self._failed(exc, message, connected)
        except Exception as exc:  # boundary: a bug must not end the retry loop
            self._set_disconnected()
            logger.exception("%s: unexpected error in connection attempt", self.name)
            if signalled:
                return None
            message = redact(describe_error(exc), self._secrets)
            return self._failed(exc, message, connected)

    def _failed(
        self, exc: Exception, message: str, connected: bool
    ) -> LossReport | None:
        """A loss to report (the session was up), or a failed attempt signalled."""
        exit_code = getattr(exc, "exit_code", None)
        if not isinstance(exit_code, int):
            exit_code = None
        if connected:
            return LossReport(message, exit_code, type(exc).__name__)
        self._settled(message)
        self.signal(
            AttemptError(
                now=self._clock(),
                error=message,
                error_type=type(exc).__name__,
                rand=self._rand(),
                exit_code=exit_code,
            )
        )
        return None

    def _signal_lost(self, report: LossReport) -> None:
        self.signal(
            SessionLost(
                now=self._clock(),
                reason=redact(report.reason, self._secrets),
                rand=self._rand(),
                exit_code=report.exit_code,
                error_type=report.error_type,
            )
        )
