"""Open an upstream session: the real `Transport`, over stdio, HTTP or SSE.

`McpTransport.open(spec, hooks)` is an async context manager that connects
(spawns a stdio server, or opens streamable HTTP / legacy SSE), runs `initialize`
and lists *all* tool pages, all under `connect_timeout`, and yields an `Upstream`.
Leaving it closes the session and the transport within `TEARDOWN_TIMEOUT`
(shielded), and for stdio reaps the server and sweeps its process group.

Every failure leaves as a `TransportError` (`ConnectFailed`, `ConnectTimeout`,
`Disconnected`) with a one-line, redacted message (`errors`).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import anyio.abc
import mcp.types as types
from mcp import ClientSession
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from .. import __version__
from ..core.errors import (
    AuthMismatch,
    AuthorizationRefused,
    ConfigError,
    ConnectFailed,
    ConnectTimeout,
    Disconnected,
    LoginRequired,
    TransportError,
)
from ..core.redact import SecretRegistry, redact_url
from ..core.resolve import references, resolve_spec
from ..core.spec import ConnectionSpec
from ..files import default_state_dir
from .base import (
    APP_MIME_TYPE,
    HANDSHAKE,
    MODERN,
    TASKS_EXTENSION,
    UI_EXTENSION,
    Hooks,
    LossReport,
    Streams,
    Upstream,
)
from .eras import PROBE_TIMEOUT, EraMemory
from .errors import (
    describe_error,
    flatten,
    http_refusal,
    map_failure,
    refused,
    status_failure,
)
from .handshake import handshake, message_handler
from .http.probe import tcp_precheck
from .http.sse import open_sse_streams
from .http.status import HttpStatus
from .http.streams import environment_proxy, open_http_streams
from .oauth.door import oauth_auth, uses_oauth
from .oauth.login import LoginDesk
from .oauth.tokens import (
    FileTokens,
    forget_tokens,
    stored_expiry,
    token_path,
)
from .relay import NO_SEND_SPAN, SendSpan
from .requests import server_request_callbacks
from .session import McpSession
from .side import EraSide, ListSources
from .signals import EOF_REPORT, EofSignalingReadStream, LostSignal
from .stdio.confinement import confined_as
from .stdio.locks import LaunchLocks
from .stdio.process import stdio_streams
from .stdio.starts import Slot, StartSlots
from .tasks import task_claims

__all__ = ["CLIENT_NAME", "TEARDOWN_TIMEOUT", "McpTransport", "StreamOpener"]

CLIENT_NAME = "mcp-manager"
"""`clientInfo.name` upstreams see, so their logs can tell us apart."""

TEARDOWN_TIMEOUT = 2.0
"""Seconds closing a session and its transport may take, whatever the server does."""


StreamOpener = Callable[
    [ConnectionSpec, Hooks, LostSignal, float],
    AbstractAsyncContextManager[Streams],
]
"""Opens one attempt's streams: (spec, hooks, loss signal, deadline) -> an async
context manager yielding its `Streams` (read, write, pid, the transport's own
sender, the HTTP session id). It reports the server's end on the loss signal
when the read stream alone cannot tell."""

ReadSecrets = Callable[
    [str, frozenset[tuple[str, str]]], Awaitable[dict[tuple[str, str], str]]
]
"""(connection, secret references) -> their values (`engine.vault`)."""


class McpTransport:
    """The real transport: stdio subprocesses, streamable HTTP and legacy SSE.

    Args:
        getenv: Reads `${env:NAME}` values at connect time.
        starts: Bounds concurrent stdio starts (`starts.StartSlots`); by default
            a bound of its own from the CPU count.
        open_streams: Opens the message streams of one attempt (the seam
            tests use to run a server in memory); by default stdio, HTTP or
            SSE as the spec says.
        secrets: Where the values `${env:...}`, headers and stdio env resolve
            to are registered, so they are masked wherever they would show
            (a registry of its own if None).
        state_dir: Where OAuth tokens are kept (`files.default_state_dir()`
            if None).
        send_span: The SDK's span around a `tools/call` the stdio relay
            sends itself (`Tracing.send_span`; none by default).
        read_secrets: Reads the secret references a spec names
            (`engine.vault.Vault.read`); without it a reference is an error.
        locks_read_only: Launch locks are read, never made (`pins check`).

    A stdio server launched from a registry (`npx pkg`, `uvx pkg`, ...)
    starts the version its launch lock says (`stdio.locks`); `launches.run()`
    looks for newer releases while the owner runs it.
    """

    def __init__(
        self,
        getenv: Callable[[str], str | None] = os.environ.get,
        starts: StartSlots | None = None,
        open_streams: StreamOpener | None = None,
        secrets: SecretRegistry | None = None,
        state_dir: Path | None = None,
        send_span: SendSpan = NO_SEND_SPAN,
        read_secrets: ReadSecrets | None = None,
        locks_read_only: bool = False,
    ) -> None:
        self._send_span = send_span
        self._read_secrets = read_secrets
        self.secrets = secrets if secrets is not None else SecretRegistry()
        self.state_dir = state_dir if state_dir is not None else default_state_dir()
        self.eras = EraMemory(self.state_dir / "eras.json")
        self._getenv = getenv
        self._starts = starts if starts is not None else StartSlots()
        self._open_streams = open_streams or self._streams
        self.logins = LoginDesk()
        self.launches = LaunchLocks(self.state_dir / "locks", read_only=locks_read_only)
        """Registry launches locked to one version (`stdio.locks`)."""

    @property
    def starts(self) -> StartSlots:
        """The start slots of stdio servers."""
        return self._starts

    def confinement(self, spec: ConnectionSpec) -> str:
        return confined_as(spec)

    def token_expiry(self, name: str) -> float | None:
        """When `name`'s stored OAuth access token expires (wall time), if known."""
        return stored_expiry(token_path(self.state_dir, name))

    def forget(self, name: str) -> bool:
        """Delete `name`'s stored tokens and client registration (`logout`)."""
        return forget_tokens(token_path(self.state_dir, name))

    def open(
        self, spec: ConnectionSpec, hooks: Hooks
    ) -> AbstractAsyncContextManager[Upstream]:
        return self._open(spec, hooks)

    async def resolved(self, spec: ConnectionSpec) -> ConnectionSpec:
        """`spec` with its `${env:...}` and secret references read (and
        registered as secrets).

        Raises:
            ConfigError: A variable is not set, or a reference cannot be read.
        """
        named = references(spec)
        read = None
        if named:
            if self._read_secrets is None:
                raise ConfigError(
                    f"mcp_add({spec.name!r}): secret references need the daemon",
                    connection=spec.name,
                )
            read = await self._read_secrets(spec.name, named)
        return resolve_spec(spec, self._getenv, self.secrets, read)

    @asynccontextmanager
    async def _open(
        self, spec: ConnectionSpec, hooks: Hooks
    ) -> AsyncIterator[Upstream]:
        resolved = await self.resolved(spec)
        if resolved.transport == "stdio":
            resolved = await self.launches.apply(resolved, hooks.on_launch)
        async with self._slotted(resolved, hooks) as upstream:
            yield upstream

    @asynccontextmanager
    async def _session(
        self,
        resolved: ConnectionSpec,
        hooks: Hooks,
        slot: Slot | None,
        lists: bool = True,
    ) -> AsyncIterator[McpSession]:
        deadline = anyio.current_time() + resolved.connect_timeout
        login = self.logins.pending(resolved.name)
        if login is not None:
            # The user is logging in: the try may wait for the browser that long.
            deadline = max(deadline, login.deadline + resolved.connect_timeout)
        lost = LostSignal()
        upstream: McpSession | None = None
        body_error: BaseException | None = None
        # A process beside a stdio one (`_beside`) has lists of its own: a
        # change told here takes a list back from it.
        sources = ListSources()
        own_hooks = sources.here(hooks) if resolved.transport == "stdio" else hooks
        # The outer scope bounds teardown: once the body is done, closing the
        # session and the transport may take at most TEARDOWN_TIMEOUT.
        with anyio.CancelScope() as outer:
            try:
                async with self._open_streams(
                    resolved, hooks, lost, deadline
                ) as streams:
                    read, write, pid = streams.read, streams.write, streams.pid

                    def on_eof() -> None:
                        # stdio reports the end itself, with the exit code
                        if resolved.transport != "stdio":
                            lost.set(EOF_REPORT)

                    # Built here, not by the session, so that tools/call can
                    # be relayed through it (`McpSession`).
                    dispatcher = JSONRPCDispatcher[Any](
                        EofSignalingReadStream(read, on_eof), write
                    )
                    session = ClientSession(
                        dispatcher=dispatcher,
                        message_handler=message_handler(resolved.name, own_hooks),
                        # 2026-07-28 servers log only for requests that ask:
                        # every level, filtered for each client downstream.
                        log_level="debug",
                        client_info=types.Implementation(
                            name=CLIENT_NAME, version=__version__
                        ),
                        # A task (SEP-2663) is passed on, for clients that
                        # declare the extension (each request says so).
                        # MCP Apps: views are carried to the clients that
                        # host them (`gateway/apps.py`).
                        extensions={
                            TASKS_EXTENSION: {},
                            UI_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]},
                        },
                        result_claims=task_claims(),
                        **server_request_callbacks(hooks),
                    )
                    async with session:
                        upstream = await handshake(
                            resolved,
                            session,
                            streams,
                            lost,
                            pid,
                            deadline,
                            slot,
                            dispatcher=dispatcher,
                            eras=self.eras,
                            hooks=own_hooks,
                            # A user at the consent page: the probe waits too.
                            probe_timeout=None if login is not None else PROBE_TIMEOUT,
                            lists=lists,
                        )
                        if slot is not None:
                            slot.release()  # started: the next server may begin
                        try:
                            async with self._beside(resolved, hooks, upstream, sources):
                                yield upstream
                        except BaseException as exc:
                            body_error = exc
                            raise
                        finally:
                            outer.deadline = anyio.current_time() + TEARDOWN_TIMEOUT
                            await upstream.aclose()
            except (ConfigError, LoginRequired, AuthMismatch):
                raise  # ours, and not a refusal of the credentials we sent
            except TransportError as exc:
                if upstream is None and lost.refusals:
                    raise refused(resolved, lost.refusals[-1]) from exc
                said = upstream is None and status_failure(exc, lost.statuses)
                if said:
                    raise said from exc
                raise
            except Exception as exc:  # boundary: map SDK/httpx/OS failures once
                if body_error is not None and any(
                    leaf is body_error for leaf in flatten(exc)
                ):
                    raise
                leaves = flatten(exc)
                # Several requests may meet the same wall at once: a refusal
                # (counted towards the login limit) says more than a plain
                # "log in", which another request raises for the same cause.
                for wanted in (AuthorizationRefused | AuthMismatch, LoginRequired):
                    for leaf in leaves:
                        if isinstance(leaf, wanted):
                            raise leaf from exc
                refusal = lost.refusals[-1] if lost.refusals else http_refusal(exc)
                if upstream is None and refusal is not None:
                    raise refused(resolved, refusal) from exc
                said = upstream is None and status_failure(exc, lost.statuses)
                if said:
                    raise said from exc
                for leaf in flatten(exc):
                    if isinstance(leaf, TransportError):
                        raise leaf from exc
                if upstream is None:
                    raise map_failure(exc, "") from exc
                raise Disconnected(f"lost the server: {describe_error(exc)}") from exc

    @asynccontextmanager
    async def _beside(
        self,
        resolved: ConnectionSpec,
        hooks: Hooks,
        upstream: McpSession,
        sources: ListSources,
    ) -> AsyncIterator[None]:
        """While the body runs: a session of the other era beside this one
        (`side.EraSide`) under `auto`, in a task group whose end is the
        body's (its own error leaves as itself). Streamable HTTP spoken to in
        2026-07-28: a handshake session for handshake-era clients that can be
        asked. stdio spoken to in the handshake era: a second process in
        2026-07-28 for 2026-07-28 clients, unless the server was found not to
        have it (`EraMemory.recall_beside`).

        Not for a server we hold OAuth tokens for, yet: the session beside
        would be a second user of them, and two refreshes of a rotating
        refresh token burn it."""
        handshake_era = upstream.info.protocol in HANDSHAKE_PROTOCOL_VERSIONS
        if resolved.protocol != "auto":
            era = None
        elif resolved.transport == "http" and not handshake_era:
            era = HANDSHAKE
        elif resolved.transport == "stdio" and handshake_era:
            era = MODERN
        else:
            era = None
        known = self.eras.recall_beside(resolved) if era is not None else None
        if (
            era is None
            or known is False
            or token_path(self.state_dir, resolved.name).exists()
        ):
            yield
            return
        pinned = dataclasses.replace(
            resolved, protocol="legacy" if era == HANDSHAKE else MODERN
        )
        try:
            async with anyio.create_task_group() as tg:
                side = EraSide(
                    resolved.name,
                    era,
                    # Its lists are read once it says one changed.
                    lambda: self._slotted(pinned, side_hooks, lists=False),
                    tg,
                    resolved.connect_timeout,
                    # A server never met in that era: a request waits no
                    # longer than a probe would before going the old way.
                    first_wait=PROBE_TIMEOUT if known is None else None,
                    capabilities=self.eras.recall_beside_capabilities(resolved),
                    on_outcome=lambda offered: self.eras.learn_beside(
                        resolved, offered
                    ),
                )
                side_hooks = side.hooks(hooks, sources)
                if era == MODERN:  # a process of its own: lists of its own
                    upstream.sources = sources
                upstream.side = side
                try:
                    yield
                finally:
                    upstream.side = None
                    upstream.sources = None
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            if len(group.exceptions) == 1:
                raise group.exceptions[0]  # noqa: B904 - the body's own error
            raise

    @asynccontextmanager
    async def _slotted(
        self, resolved: ConnectionSpec, hooks: Hooks, lists: bool = True
    ) -> AsyncIterator[McpSession]:
        """A session (a connection's own, or one beside it): a stdio start
        waits for a slot first; connect_timeout starts after."""
        slot = await self._starts.acquire() if resolved.transport == "stdio" else None
        try:
            async with self._session(resolved, hooks, slot, lists) as upstream:
                yield upstream
        finally:
            if slot is not None:
                slot.release()

    @asynccontextmanager
    async def _streams(
        self, spec: ConnectionSpec, hooks: Hooks, lost: LostSignal, deadline: float
    ) -> AsyncIterator[Streams]:
        if spec.transport == "stdio":
            async with stdio_streams(spec, hooks, lost, self._send_span) as streams:
                yield streams
            return
        proxy = environment_proxy(spec.url)
        if proxy is not None and not proxy.lower().startswith(("http://", "https://")):
            raise ConnectFailed(
                f"the proxy {redact_url(proxy)} (HTTPS_PROXY, HTTP_PROXY or "
                "ALL_PROXY) is not an http:// or https:// proxy, the only kinds "
                "supported; list this server's host in NO_PROXY to reach it directly"
            )
        try:  # through a proxy, the proxy is what must listen
            await tcp_precheck(proxy or spec.url, deadline)
        except (ConnectFailed, ConnectTimeout) as exc:
            if proxy is None:
                raise
            raise type(exc)(f"the proxy {redact_url(proxy)}: {exc}") from None
        auth = None
        if uses_oauth(spec):
            issuer = spec.oauth.issuer if spec.oauth is not None else None
            tokens = FileTokens(
                token_path(self.state_dir, spec.name), issuer, secrets=self.secrets
            )
            auth = oauth_auth(spec, tokens, self.logins, hooks.on_auth)
        if spec.transport == "sse":
            # The SDK's client waits for the stream's headers and its
            # `endpoint` event with the stream's read timeout (minutes): a
            # server that takes the connection and says nothing must fail
            # at `connect_timeout` like any other.
            opened = False
            foreign: list[str] = []

            def refuse(endpoint: str) -> None:
                foreign.append(endpoint)
                opening.cancel()

            def gone(status: HttpStatus) -> None:
                reason = f"the server forgot the session ({status.said()})"
                lost.set(LossReport(reason, error_type="SessionForgotten"))

            with anyio.CancelScope(deadline=deadline) as opening:
                async with open_sse_streams(spec, auth, refuse, gone) as streams:
                    opened, opening.deadline = True, math.inf
                    yield streams
            if not opened and foreign:
                raise ConnectFailed(_foreign_endpoint(spec.url, foreign[0]))
            if not opened:
                raise ConnectTimeout(
                    f"no SSE stream with its endpoint within connect_timeout "
                    f"{spec.connect_timeout:g} s (the server took the connection "
                    "and said nothing)"
                )
            return
        async with open_http_streams(
            spec,
            lost.suspect,
            hooks.links,
            lost.refusals,
            auth,
            self._send_span,
            hooks.on_log,
            proxy=proxy,
            statuses=lost.statuses,
        ) as streams:
            yield streams


def _foreign_endpoint(url: str, endpoint: str) -> str:
    """What to say of an SSE server whose `endpoint` event names another
    origin than its URL (the SDK's client will not post there)."""
    here, there = urlsplit(url), urlsplit(endpoint)
    instead = urlunsplit((there.scheme, there.netloc, here.path, here.query, ""))
    return (
        "the server's SSE stream names its message endpoint on another origin "
        f"({redact_url(endpoint)}) than the URL declared ({redact_url(url)}); "
        "the MCP SDK posts only to the URL's own origin, so nothing was sent: "
        f"declare url = {redact_url(instead)!r} if that is the same server, or "
        "fix the address the server announces (its public URL)"
    )
