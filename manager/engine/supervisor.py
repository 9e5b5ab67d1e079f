"""The supervisor of one connection: the attempt → watch → retry loop.

`Supervisor.run(transport)` is the connection's only task: it opens and closes
its own transport (cancel scopes are task-bound), watches for death (EOF/exit
from the transport, failed pings), re-lists on `list_changed`, and waits out
the backoff between tries, forever. Its own state is the loop's: the retry
wait in progress (`retry_now` cuts it), a login that wants a try now, the lists
to fetch again. What it learns it records on the `Connection` (`set_connected`,
`signal`, ...), whose state machine decides delays and events.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from ..core.errors import ConfigError, TransportError
from ..core.redact import SecretRegistry, redact
from ..core.state import AttemptError, Phase, SessionLost, ToolsListed, WentIdle
from ..core.text import first_line
from ..transport.base import LossReport, Transport, Upstream
from .tracing import NO_TRACING, OUTCOME, PID, Tracing, attempt_attributes

if TYPE_CHECKING:
    from .connection import Connection

__all__ = ["EXIT_REPORT_WAIT", "Supervisor"]

logger = logging.getLogger("manager.engine.connection")

EXIT_REPORT_WAIT = 0.6
"""Seconds a failed ping of a stdio server waits for the process's own exit report."""

IDLE_STOP = "IdleStop"
"""The `error_type` of a session an on-demand connection ends for lack of use."""


class Supervisor:
    """The loop of one connection (see the module docstring).

    Args:
        conn: The connection it keeps alive (and records on).
        clock: Wall clock (injectable).
        rand: Random source for jitter (injectable).
        tracing: Makes each connect attempt a current span.
        secrets: Masked in the errors it records.
    """

    def __init__(
        self,
        conn: Connection,
        *,
        clock: Callable[[], float] = time.time,
        rand: Callable[[], float] = random.random,
        tracing: Tracing = NO_TRACING,
        secrets: SecretRegistry | None = None,
    ) -> None:
        self._conn = conn
        self._clock = clock
        self._rand = rand
        self._tracing = tracing
        self._secrets = secrets
        self._retry_scope: anyio.CancelScope | None = None
        self._login_wanted = False
        self._relist: set[str] = set()  # lists to fetch again (list_changed)
        self._list_changed = anyio.Event()
        self._wanted = anyio.Event()  # an on-demand connection is asked for

    def want(self) -> None:
        """A request wants this (on-demand) connection up: start it if idle."""
        self._wanted.set()

    def retry_now(self) -> bool:
        """Cut the current backoff wait short. Returns whether one was cut."""
        if self._retry_scope is None:
            return False
        self._retry_scope.cancel()
        return True

    def try_for_login(self) -> None:
        """A login began: try now, or right after the try in flight."""
        self._login_wanted = True
        self.retry_now()

    def relist(self, kind: str) -> None:
        """The server said its `kind` list changed: fetch it again."""
        self._relist.add(kind)
        if kind == "resources":
            self._relist.add("templates")  # they have no list_changed of their own
        self._list_changed.set()

    async def run(self, transport: Transport) -> None:
        """Connect and reconnect forever (until the connection's `scope` is
        cancelled): the connection's only task.

        The first try starts at once; after a failure or a loss the state
        machine decides the delay (100 ms doubling, capped, jittered; the
        counter resets only after `stable_after` seconds connected). A
        connection in `needs_login` or `refused` waits until `try_for_login`
        or `retry_now`.
        An on-demand connection waits, idle, for a request (`want`) before
        each session, and goes idle again after `idle_stop` seconds unused,
        connected or not.
        """
        spec = self._conn.spec
        if (
            spec.on_demand
            and not self._conn.tools
            and not self._conn.catalog.names("prompts")
        ):
            self._wanted.set()  # nothing known to list yet: start once to learn
        while True:
            if spec.on_demand and self._idle_due():
                self._wanted = anyio.Event()
                reason = (
                    "starts at the first request"
                    if self._conn.phase is Phase.CONNECTING
                    else f"no request for {spec.idle_stop:g} s; starts at the next one"
                )
                self._conn.signal(WentIdle(now=self._clock(), reason=reason))
            if spec.on_demand:
                await self._wanted.wait()
            report = await self._attempt(transport)
            if report is not None:
                self._signal_lost(report)
            next_at = self._conn.state.next_retry_at
            wait = max(0.0, next_at - self._clock()) if next_at is not None else 0.0
            if self._conn.phase in (Phase.NEEDS_LOGIN, Phase.REFUSED):
                wait = math.inf  # until a login, a reload or `reconnect`
            if self._login_wanted:
                wait = 0.0  # a login began during the try
            with anyio.CancelScope() as self._retry_scope:  # retry_now() cancels
                await anyio.sleep(wait)
            self._retry_scope = None

    def _idle_due(self) -> bool:
        """An on-demand connection unused for `idle_stop` (or never asked for)."""
        conn = self._conn
        if not self._wanted.is_set():
            return True
        unused = time.monotonic() - conn.last_used
        return conn.busy == 0 and unused >= conn.spec.idle_stop

    async def _watch(self, upstream: Upstream) -> LossReport:
        """Block until the session dies (or, on demand, is unused); return why."""
        report: list[LossReport] = []

        async def idler(tg_cancel: Callable[[], None]) -> None:
            conn = self._conn
            while not self._idle_due():
                due = conn.last_used + conn.spec.idle_stop - time.monotonic()
                await anyio.sleep(max(due, min(conn.spec.idle_stop, 1.0) / 4))
            conn.set_disconnected()  # no request may take this session now
            report.append(LossReport("idle", error_type=IDLE_STOP))
            tg_cancel()

        async def on_transport(tg_cancel: Callable[[], None]) -> None:
            report.append(await upstream.wait_lost())
            tg_cancel()

        async def pinger(tg_cancel: Callable[[], None]) -> None:
            # Every ping_interval, and at once when the transport suspects the
            # server went away (an HTTP event stream that ended).
            interval = self._conn.spec.ping_interval or math.inf
            while True:
                suspected: str | None = None
                with anyio.move_on_after(interval):
                    suspected = await upstream.wait_suspect()
                try:
                    await upstream.ping(self._conn.spec.ping_timeout)
                except TransportError as exc:
                    if suspected is not None:
                        exc = type(exc)(f"{suspected}; {exc}")
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
                    with anyio.fail_after(self._conn.spec.connect_timeout):
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
                    self._conn.set_catalog(catalog, kinds)
                if tools is not None:
                    self._conn.tools = tools
                    self._conn.review_pins()
                    self._conn.catalog = dataclasses.replace(
                        self._conn.catalog, hints=upstream.catalog.hints
                    )
                    names = tuple(sorted(t.name for t in tools))
                    self._conn.signal(ToolsListed(now=self._clock(), tools=names))

        async with anyio.create_task_group() as tg:
            cancel = tg.cancel_scope.cancel
            tg.start_soon(on_transport, cancel)
            tg.start_soon(relister, cancel)
            tg.start_soon(pinger, cancel)
            if self._conn.spec.on_demand:
                tg.start_soon(idler, cancel)
        return report[0] if report else LossReport("session ended")

    async def _attempt(self, transport: Transport) -> LossReport | None:
        """One try: connect, hold the session until it dies.

        Returns:
            The loss report when a connected session failed by raising, or None
            when the failure or loss is already signalled (a failed try, or a
            loss the watchers saw, signalled before the teardown).
        """
        started = time.monotonic()
        self._login_wanted = False
        self._conn.attempt_began()
        connected = signalled = False
        try:
            async with contextlib.AsyncExitStack() as stack:
                # The attempt span is current while the SDK connects (its
                # initialize/tools/list spans nest under it) and ends once connected.
                attributes = attempt_attributes(
                    self._conn.spec, self._conn.state.attempt
                )
                with self._tracing.span("mcp.connect_attempt", attributes) as span:
                    upstream = await stack.enter_async_context(
                        transport.open(self._conn.spec, self._conn.hooks())
                    )
                    span.set_attribute(OUTCOME, "connected")
                    if upstream.pid is not None:
                        span.set_attribute(PID, upstream.pid)
                connected = True
                self._conn.set_connected(upstream, time.monotonic() - started)
                report = await self._watch(upstream)
                self._conn.set_disconnected()
                # Report the loss now, not after the teardown below: closing a
                # dead HTTP session can take its full 2 s bound, and detection
                # must be ping_interval + ping_timeout, not that plus teardown.
                self._signal_lost(report)
                signalled = True
            return None
        except (TransportError, ConfigError) as exc:
            self._conn.set_disconnected()
            if signalled:
                return None  # the teardown of a session already reported lost
            message = redact(str(exc), self._secrets)
            return self._failed(exc, message, connected)
        except Exception as exc:  # boundary: a bug must not end the retry loop
            self._conn.set_disconnected()
            logger.exception(
                "%s: unexpected error in connection attempt", self._conn.name
            )
            if signalled:
                return None
            message = redact(_unexpected(exc), self._secrets)
            return self._failed(exc, message, connected)

    def _failed(
        self, exc: Exception, message: str, connected: bool
    ) -> LossReport | None:
        """A loss to report (the session was up), or a failed attempt signalled."""
        exit_code = getattr(exc, "exit_code", None)
        if not isinstance(exit_code, int):
            exit_code = None
        retry_after = exc.retry_after if isinstance(exc, TransportError) else None
        if connected:
            return LossReport(message, exit_code, type(exc).__name__)
        self._conn.signal(
            AttemptError(
                now=self._clock(),
                error=message,
                error_type=type(exc).__name__,
                rand=self._rand(),
                exit_code=exit_code,
                retry_after=retry_after,
            )
        )
        # A login waiting for this try hears the state's words ("... after 3
        # logins: ...", "(1 of 3 logins in a row refused)"), not only the error.
        self._conn.settled(self._conn.state.error or message)
        return None

    def _signal_lost(self, report: LossReport) -> None:
        if report.error_type == IDLE_STOP:
            return  # not a loss: `run` tells it as `idle`
        self._conn.signal(
            SessionLost(
                now=self._clock(),
                reason=redact(report.reason, self._secrets),
                rand=self._rand(),
                exit_code=report.exit_code,
                error_type=report.error_type,
            )
        )


def _unexpected(exc: Exception) -> str:
    """One line for an error the transport did not map (a bug): the first
    leaf of a group, its first line, else its type's name."""
    while isinstance(exc, ExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return (first_line(exc) or type(exc).__name__)[:500]
