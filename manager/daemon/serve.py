"""The daemon's lifecycle: startup, serve, shutdown (after uvicorn's `server.py`).

Startup: logging, the event bus and its log sink, run `startup.lua` (a bad script
at startup is fatal: there is no last good state to keep), the control socket, the
manager with the declared set. Serve: signals in their own task; SIGHUP reloads.
Shutdown (SIGINT/SIGTERM): every connection is cancelled in parallel and each
teardown is bounded, so the daemon exits within a few seconds with no child
left; a second SIGINT skips the graceful part.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import signal
import sqlite3
from dataclasses import dataclass, replace
from pathlib import Path

import anyio
import anyio.abc

from .. import __version__
from ..control.paths import attach_socket_path
from ..control.server import serve_control
from ..core.errors import CallError, ConfigError, ControlError, UnknownTool
from ..core.events import ApprovalAsked, ToolChanged
from ..core.info import OTLP_OFF, DaemonInfo, StartSlots
from ..core.login import CallbackReply, LoginResult, LoginStart, LogoutReply
from ..core.redact import SecretRegistry, redact
from ..core.replies import (
    ApproveReply,
    CallLogReply,
    CatalogRow,
    ConnectionDetails,
    ReconnectReply,
    ReloadSummary,
    TokenReply,
    UpdateReply,
)
from ..core.spec import spec_summary
from ..core.status import ConnectionStatus
from ..core.text import meant
from ..engine.bus import EventBus, Subscription
from ..engine.calllog import read
from ..engine.logins import Logins
from ..engine.manager import Manager
from ..engine.policy import Caller
from ..engine.tracing import NO_TRACING
from ..gateway.early import EarlyStart
from ..gateway.options import EndpointError, EndpointOptions
from ..gateway.server import Gateway
from ..logs import LogSink, run_summaries, setup_logging
from ..telemetry import Telemetry, TelemetryConfig, start_telemetry
from ..transport.ops import OPS
from ..transport.stdio.children import CHILD_GROUPS
from ..transport.stdio.confinement import keep_private
from .config_runner import ConfigRunner
from .notify import run_notifications
from .watchdog import DEFAULT_WATCHDOG, Watchdog

__all__ = ["DaemonOptions", "Daemon", "serve", "serve_embedded"]

logger = logging.getLogger("manager")

CLOSE_ALL_LIMIT = 10.0
"""Seconds the graceful shutdown waits for connections to close (each takes ≤ 2 s,
all in parallel); a backstop, never reached unless something is badly wrong."""

FORCED_EXIT_CODE = 130
"""Exit code after a second SIGINT cut the graceful shutdown short."""


@dataclass(frozen=True, slots=True)
class DaemonOptions:
    """How `mcp-manager run` was asked to run.

    Attributes:
        config: Path of startup.lua.
        socket: Path of the control socket.
        log_level: Logging level name.
        log_format: `text` or `json`.
        hud: Show the terminal HUD.
        endpoint: Serve the aggregated MCP endpoint over HTTP there.
        stdio_early: The first stdin line, read (and maybe answered) before
            the daemon loaded (`gateway.early`).
        stdio: Serve the aggregated MCP endpoint on stdin/stdout; the daemon
            stops when the client closes stdin.
        control: Serve the control socket.
        otlp_endpoint: `--otlp-endpoint`: OTLP base URL for traces and metrics.
        otlp_protocol: `--otlp-protocol`: `grpc` or `http/protobuf`.
        telemetry: False for `--no-telemetry` (else the `OTEL_*` variables rule).
        start_slots: `--start-slots`: concurrent stdio starts (CPU count if None).
        watchdog: `--watchdog`: seconds of a stuck event loop before its stack is
            logged; 0 = no watchdog.
    """

    config: Path
    socket: Path
    log_level: str = "INFO"
    log_format: str = "text"
    hud: bool = False
    endpoint: EndpointOptions | None = None
    stdio: bool = False
    stdio_early: EarlyStart | None = None
    control: bool = True
    otlp_endpoint: str | None = None
    otlp_protocol: str | None = None
    telemetry: bool = True
    start_slots: int | None = None
    watchdog: float = DEFAULT_WATCHDOG


class Daemon:
    """The running daemon: what the control API and Lua see of it.

    Args:
        options: Startup options.
        bus: The event bus.
        manager: The connection manager (entered).
    """

    def __init__(self, options: DaemonOptions, bus: EventBus, manager: Manager) -> None:
        self.options = options
        self.bus = bus
        self.manager = manager
        self.config = ConfigRunner(options.config, manager, bus)
        self.telemetry: Telemetry | None = None
        self.gateway: Gateway | None = None
        self.logins = Logins(manager)

    # --- ControlBackend ----------------------------------------------------------

    def status(self) -> list[ConnectionStatus]:
        """Status of every connection (control API, the in-process HUD)."""
        return self.manager.statuses()

    def _starts(self) -> StartSlots:
        starts = self.manager.starts
        if starts is None:
            return StartSlots()
        return StartSlots(
            slots=starts.size, starting=starts.in_use, waiting=starts.waiting
        )

    def info(self) -> DaemonInfo:
        """Daemon-wide facts for the HUD and `status`."""
        return DaemonInfo(
            version=__version__,
            pid=os.getpid(),
            config=str(self.options.config),
            last_reload=self.config.last_reload,
            watching=self.config.watching,
            dropped=self.bus.dropped(),
            connections=len(self.manager.specs),
            otlp=self.telemetry.info() if self.telemetry is not None else OTLP_OFF,
            starts=self._starts(),
            listener_errors=self.bus.listener_errors,
            guardian=CHILD_GROUPS.guardian_pid,
            profiles=tuple(self.manager.profiles),
            attached=self.gateway.attached.clients if self.gateway else (),
            endpoint=self.gateway.url if self.gateway else None,
            endpoint_token=(
                self.options.endpoint.token_from
                if self.options.endpoint is not None
                else None
            ),
        )

    def result(self, result_id: str) -> dict[str, object]:
        """A whole tool result that `max_output` cut (control API)."""
        text = self.manager.results.get(result_id)
        if text is None:
            raise CallError(
                f"no result {result_id!r}, or it is no longer kept (whole results "
                "stay an hour); call the tool again"
            )
        whole: dict[str, object] = json.loads(text)
        return whole

    def token(self, rotate: bool) -> TokenReply:
        """Where the endpoint's token is; with `rotate`, replace it first."""
        if self.gateway is None:
            raise EndpointError("this daemon serves no HTTP endpoint")
        return self.gateway.token_reply(rotate)

    async def call_log(self) -> CallLogReply:
        """Write the call log's queued rows now (so `mcp-manager log` right
        after a call shows it); where the log is."""
        log = self.manager.calls
        await anyio.to_thread.run_sync(log.flush)
        return CallLogReply(path=str(log.path), dropped=log.dropped)

    def reconnect(self, server: str) -> ReconnectReply:
        """Skip `server`'s backoff wait (control API)."""
        status = self.manager.status(server)
        retrying = self.manager.reconnect(server)
        state = status.state if status is not None else ""
        return ReconnectReply(server=server, retrying=retrying, state=state)

    def details(self, server: str) -> ConnectionDetails:
        """`server`'s spec (secrets masked), last stderr lines, tool names."""
        conn = self.manager.connection(server)
        if conn is None:
            raise self.manager.unknown(server)
        keep = ("time", "client", "tool", "outcome", "error", "duration", "verdict")
        try:
            calls = read(self.manager.calls.path.parent, server=server, limit=10)
        except sqlite3.Error:  # boundary: the log is a nicety here
            calls = []
        # and those of the last second, not written yet
        calls = [*calls, *self.manager.calls.queued(server)][-10:]
        return ConnectionDetails(
            spec=spec_summary(conn.spec),
            stderr=tuple(conn.stderr),
            tools=tuple(tool.name for tool in conn.tools),
            calls=tuple({key: call.get(key, "") for key in keep} for call in calls),
            beside=conn.upstream.beside() if conn.upstream is not None else "",
        )

    async def login(
        self,
        server: str,
        timeout: float,  # noqa: ASYNC109 - the login's own deadline
        device: bool = False,
    ) -> LoginStart:
        """Begin a login (`device`: RFC 8628); answer with the authorization URL
        (a device login: the address and the user code) once the flow has it,
        or how it ended, if it ended first."""
        login = await self.logins.begin(server, timeout, device=device)
        if login is None:  # connected already: nothing to log in
            return LoginStart(
                server=server, done=True, connected=True, state="connected"
            )
        conn = self.manager.connection(server)
        limit = (conn.spec.connect_timeout if conn is not None else 30.0) + 5.0
        await self.logins.first_answer(login, limit)
        return LoginStart.of(
            self._login_result(server),
            login.url,
            login.redirect_uri,
            login.user_code,
            login.url_complete,
        )

    async def login_wait(self, server: str, timeout: float) -> LoginResult:  # noqa: ASYNC109 - how long the caller waits
        """Wait until the login of `server` ended (at most `timeout`)."""
        login = self.logins.last(server)
        if login is not None:
            with anyio.move_on_after(timeout):
                await login.done.wait()
        return self._login_result(server)

    def _login_result(self, server: str) -> LoginResult:
        login = self.logins.last(server)
        conn = self.manager.connection(server)
        state = conn.phase.value if conn is not None else "removed"
        done = login is None or login.done.is_set()
        error = login.error if login is not None and done else None
        if done and error is None and state != "connected" and conn is not None:
            error = conn.state.error or f"the connection is {state}"
        return LoginResult(
            server=server,
            done=done,
            connected=state == "connected",
            state=state,
            error=error,
            unsupported=login is not None and login.unsupported,
        )

    def login_callback(self, server: str, url: str) -> CallbackReply:
        """A redirect URL pasted by the user (`login --manual`)."""
        return CallbackReply(server=server, message=self.logins.feed(server, url))

    def changes(self, server: str | None) -> list[ToolChanged]:
        """Definitions that differ from their pins (`tools --changed`)."""
        return self.manager.changes(server)

    def approve(self, server: str, items: list[str]) -> ApproveReply:
        """Pin what `server` lists now (`mcp-manager approve`)."""
        return ApproveReply(
            server=server, approved=tuple(self.manager.approve(server, items))
        )

    async def update(self, server: str, take: bool, version: str) -> UpdateReply:
        """`mcp-manager update`: the launch lock of `server`, and taking the
        newer release it was shown (`engine.launches`)."""
        if take:
            try:
                done = await self.manager.launch_take(server, version)
            except ValueError as exc:
                raise ControlError(redact(str(exc), self.manager.secrets)) from None
            # What it took is what it starts now: no registry asked again.
            return UpdateReply(
                server=server, package=done.package, locked=done.after, taken=True
            )
        shown = await self.manager.launch_offer(server)
        # A registry's error may quote what the server's env gave it.
        return replace(shown, note=redact(shown.note, self.manager.secrets))

    def pending(self) -> list[ApprovalAsked]:
        """The calls waiting for the user's approval (`mcp-manager pending`)."""
        return self.manager.policy.pending()

    def grants(self) -> list[dict[str, str]]:
        """The standing approvals (`mcp-manager grants`)."""
        return self.manager.policy.grants()

    def revoke(self, server: str, tool: str | None) -> list[dict[str, str]]:
        """Take back standing approvals (`mcp-manager revoke`)."""
        return self.manager.policy.revoke(server, tool)

    def decide(
        self, approval: str, verdict: str, scope: str, by: str = "cli"
    ) -> ApprovalAsked:
        """The user's answer (`allow`, `deny`) through the control socket
        (`by`: `cli`, or `hud` for an attached HUD) or the daemon's own HUD."""
        try:
            return self.manager.policy.answer(approval, verdict, scope, by=by)
        except KeyError:
            raise ControlError(
                f"no call waits for approval {approval!r} (answered, or it ended); "
                "see mcp-manager pending"
            ) from None
        except ValueError as exc:
            raise ControlError(str(exc)) from None

    def logout(self, server: str) -> LogoutReply:
        """Forget `server`'s tokens and registration; it restarts into needs_login."""
        return LogoutReply(server=server, forgot=self.logins.logout(server))

    def subscribe(self, name: str, since: int | None = None) -> Subscription:
        """A new bus subscription for a control client (`since`: replay first)."""
        return self.bus.subscribe(name, since=since)

    async def reload(self) -> ReloadSummary:
        """Run the script again; apply its desired set only if it succeeds.

        Raises:
            ConfigError: The script failed; nothing was changed.
        """
        return self.load("reload command")

    async def call(
        self,
        server: str,
        tool: str,
        args: dict[str, object],
        timeout: float | None,  # noqa: ASYNC109 - the MCP call timeout, passed on
        answer: dict[str, object] | None = None,
    ) -> dict[str, object]:
        """A tool call through the manager, as a JSON-ready result dict;
        `answer` answers what the server asks meanwhile (`call --answer`).
        Logged as the client `cli` (`engine.calllog`)."""
        caller = Caller(client="cli")
        conn = self.manager.connection(server)
        values = conn is not None and conn.spec.log_arguments
        with self.manager.calls.track(
            caller, server, tool, args, values=values, secrets=self.manager.secrets
        ) as logged:
            self._listed(server, tool)
            result = await self.manager.call(
                server,
                tool,
                args,
                call_timeout=timeout,
                answer=answer,
                caller=caller,
            )
            data = dict(result.data)
            logged.ended(result.is_error, data)
            return data

    def _listed(self, server: str, tool: str) -> None:
        """A tool the server does not list is no call the CLI makes: said
        with the names it lists (exit 2), where the server's own "Unknown
        tool" result read as the tool's error (exit 1). Unchecked while the
        server has listed nothing yet. The endpoint passes such a call on,
        as a client straight at the server would send it."""
        names = {info.name for info in self.manager.tools(server)}
        if names and tool not in names:
            raise UnknownTool(
                f"{server} lists no tool {tool!r}{meant(tool, names)} "
                f"(it lists: {', '.join(sorted(names))})"
            )

    async def request(
        self,
        server: str,
        op: str,
        target: str,
        args: dict[str, object],
        timeout: float | None,  # noqa: ASYNC109 - the MCP request timeout, passed on
    ) -> dict[str, object]:
        """Read a resource or get a prompt through the manager (control API)."""
        method, make = OPS[op]
        return await self.manager.request(
            server, method, target, make(target, args), timeout=timeout
        )

    def catalog(self, kind: str, server: str | None) -> list[CatalogRow]:
        """Each connection's tools, prompts or resources (control API)."""
        if server is not None and self.manager.connection(server) is None:
            raise self.manager.unknown(server)
        from ..gateway.listing import catalog_rows  # mcp's server side: on demand

        # The gateway lists them in the rows' wire form; read back as typed.
        rows = catalog_rows(self.manager.connections(), kind, server)
        return [CatalogRow.from_dict(row, kind) for row in rows]

    # --- config ---------------------------------------------------------------------

    def load(self, trigger: str = "daemon at start") -> ReloadSummary:
        """Run startup.lua and reconcile; publish `config_loaded` or `config_error`.

        Raises:
            ConfigError: The script failed; the running set is unchanged.
        """
        return self.config.load(trigger)


async def serve(options: DaemonOptions) -> int:
    """Run the daemon until SIGINT/SIGTERM. Returns the process exit code."""
    # The one secret registry: what connections resolve, what Lua reads through
    # env(), the endpoint's token; every log line, event, span and status is
    # masked with it.
    secrets = SecretRegistry()
    if options.endpoint is not None and options.endpoint.token:
        secrets.add([options.endpoint.token])
    setup_logging(options.log_level, options.log_format, secrets=secrets)
    bus = EventBus()
    sink = LogSink(bus)
    config = TelemetryConfig.from_env(
        os.environ,
        endpoint=options.otlp_endpoint,
        protocol=options.otlp_protocol,
        disable=not options.telemetry,
    )
    # The global tracer provider: the MCP SDK records its own request spans
    # (children of ours) only through it. One daemon per process, so this is safe.
    telemetry = start_telemetry(
        config, bus, set_global=True, capture_logs=True, secrets=secrets
    )
    watchdog = Watchdog(options.watchdog)
    watchdog.start(armed=False)  # armed once running: starting holds the loop
    _keep_inherited_descriptors()
    _raise_open_files_limit()
    CHILD_GROUPS.start_guardian()  # no server outlives even a SIGKILLed daemon
    try:
        return await _serve(options, bus, sink, secrets, telemetry, watchdog)
    finally:
        sink.close()
        await telemetry.aclose()  # bounded: about 1 s at most
        watchdog.stop()
        CHILD_GROUPS.stop_guardian()


def _keep_inherited_descriptors() -> None:
    """What the daemon's own launcher left open to it (an editor's pipes, a
    shell's descriptors) is not passed on to the servers it starts: uvloop's
    spawn has no `close_fds` and hands a child every inheritable descriptor.
    Python opens its own non-inheritable (PEP 446); these are the rest."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:  # not Linux
        names = os.listdir("/dev/fd") if os.path.isdir("/dev/fd") else []
    for name in names:
        fd = int(name)
        if fd > 2:
            with contextlib.suppress(OSError):  # the listing's own, closed
                os.set_inheritable(fd, False)


OPEN_FILES = 65536
"""Descriptors the daemon asks for (up to the hard limit): a stdio server
holds four (stdin, stdout, stderr, its pidfd), an HTTP one a few sockets;
300 servers pass a desktop session's usual soft limit of 1024."""


def _raise_open_files_limit() -> None:
    """The soft limit of open files up to `OPEN_FILES`, never past the hard
    limit. The servers it starts inherit it, as from a shell that raised it."""
    try:
        import resource
    except ImportError:  # not POSIX
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = OPEN_FILES if hard == resource.RLIM_INFINITY else min(hard, OPEN_FILES)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


async def serve_embedded(options: DaemonOptions, stop: anyio.Event) -> int:
    """Run the daemon in an event loop of a process that is not its own (a
    test's worker, an application embedding it) until `stop` is set.

    What belongs to a daemon's own process is left to that process: logging
    setup, telemetry, the watchdog, the guardian of server processes,
    signals and the collector. Everything else is `serve`'s: the control
    socket, the endpoint, startup.lua and its reloads, the connections.
    Returns the exit code `serve` would.
    """
    secrets = SecretRegistry()
    if options.endpoint is not None and options.endpoint.token:
        secrets.add([options.endpoint.token])
    bus = EventBus()
    sink = LogSink(bus)
    try:
        return await _serve(options, bus, sink, secrets, stop=stop)
    finally:
        sink.close()


async def _serve(
    options: DaemonOptions,
    bus: EventBus,
    sink: LogSink,
    secrets: SecretRegistry,
    telemetry: Telemetry | None = None,
    watchdog: Watchdog | None = None,
    *,
    stop: anyio.Event | None = None,
) -> int:
    """The daemon's life. Its own process (`stop` None) freezes what it
    imported out of the collector's passes and hears signals; embedded, it
    leaves the process's collector and signals alone and stops when `stop`
    is set."""
    embedded = stop is not None
    stop = stop if stop is not None else anyio.Event()
    forced: list[bool] = []
    watchdog = watchdog or Watchdog(0)
    tracing = telemetry.tracing if telemetry is not None else NO_TRACING
    async with Manager(
        bus, tracing=tracing, start_slots=options.start_slots, secrets=secrets
    ) as manager:
        daemon = Daemon(options, bus, manager)
        daemon.telemetry = telemetry
        if telemetry is not None:
            telemetry.observe_states(
                lambda: [
                    (conn.name, conn.phase.value) for conn in manager.connections()
                ]
            )
        async with anyio.create_task_group() as services:
            # Signals before anything else: a SIGTERM while the daemon starts
            # (a service manager stopping it at once) is a graceful stop, not
            # the default death that would leave the servers it spawned. The
            # signal task lives on through the manager's shutdown below: a
            # second Ctrl-C while connections close must still be heard.
            signals_scope = anyio.CancelScope()
            if not embedded:
                await services.start(
                    _handle_signals, daemon, stop, forced, signals_scope, watchdog
                )
            if watchdog.stall_after > 0:
                services.start_soon(watchdog.heartbeat)
            # The socket next: a second daemon on the same socket must stop
            # before it spawns a single server.
            key = ""
            try:
                if options.control:
                    key = await services.start(serve_control, daemon, options.socket)
                    keep_private(options.socket.parent)  # its key is there
            except ControlError as exc:
                logger.error("not starting: %s", exc)
                services.cancel_scope.cancel()
                return 2
            gateway = None
            if options.endpoint is not None or options.stdio or options.control:
                gateway = daemon.gateway = Gateway(manager, bus, config_pending=True)
                try:  # bound before any server is spawned, like the socket
                    await services.start(_serve_gateway, gateway, options, stop, key)
                except EndpointError as exc:
                    logger.error("not starting: %s", exc)
                    services.cancel_scope.cancel()
                    return 2
            try:
                summary = daemon.load()
            except ConfigError as exc:
                logger.error("not starting: %s", exc)
                services.cancel_scope.cancel()
                return 1
            # Everything imported and declared so far lives as long as the daemon;
            # keep it out of the cyclic collector's full passes (each would walk
            # tens of MB of module objects for nothing).
            if not embedded:
                gc.freeze()
            services.start_soon(run_summaries, sink)
            services.start_soon(run_notifications, bus)  # approvals, if a desktop
            if telemetry is not None:
                services.start_soon(telemetry.run)
            await services.start(daemon.config.run)  # hooks, mcp_call, file watch
            if options.hud:
                services.start_soon(_run_hud, daemon, stop)
            logger.info(
                "mcp-manager %s running: %s connection(s) from %s; control socket %s",
                __version__,
                summary.connections,
                options.config,
                options.socket if options.control else "none",
            )
            watchdog.arm()
            await stop.wait()
            watchdog.disarm()  # the heartbeat ends before the teardown does
            # Calls waiting for approval end as a stop (not sent), before the
            # removals below would say their servers were removed.
            manager.policy.stop()
            if gateway is not None:
                await gateway.aclose()  # downstream clients first (bounded)
            logger.info("stopping: closing %d connection(s)", len(manager.specs))
            daemon.config.close()  # no reload or Lua hook may revive anything now
            with anyio.move_on_after(CLOSE_ALL_LIMIT, shield=True):
                await _close_all(manager)
            signals_scope.cancel()
            services.cancel_scope.cancel()
    if forced:
        logger.warning("stopped by force")
        return FORCED_EXIT_CODE
    logger.info("stopped")
    return 0


async def _serve_gateway(
    gateway: Gateway,
    options: DaemonOptions,
    stop: anyio.Event,
    key: str,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """The MCP endpoint(s); the daemon stops when a stdio client goes away.
    `key` is the control socket's, asked of `attach` clients too."""
    await gateway.serve(
        options.endpoint,
        stdio=options.stdio,
        on_stdio_closed=stop.set,
        early=options.stdio_early,
        attach=(attach_socket_path(options.socket), key) if options.control else None,
        task_status=task_status,
    )


async def _run_hud(daemon: Daemon, stop: anyio.Event) -> None:
    """The terminal HUD, one more bus subscriber; quitting it stops the daemon."""
    from ..hud.run import run_inline  # textual is loaded only when the HUD shows

    await run_inline(daemon, stop)


async def _close_all(manager: Manager) -> None:
    """Remove every connection and wait until all have closed (each ≤ 2 s)."""
    closing = manager.connections_and_closing()
    manager.reconcile([])
    for conn in closing:
        await conn.done.wait()


async def _handle_signals(
    daemon: Daemon,
    stop: anyio.Event,
    forced: list[bool],
    scope: anyio.CancelScope,
    watchdog: Watchdog,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """SIGHUP reloads; SIGINT/SIGTERM stop gracefully; a second SIGINT forces.

    The watchdog hears SIGINT/SIGTERM too, so a stuck loop cannot ignore them.
    Started (`task_status`) once the handlers are in place.
    """
    with (
        scope,
        anyio.open_signal_receiver(
            signal.SIGINT, signal.SIGTERM, signal.SIGHUP
        ) as signals,
    ):
        if watchdog.stall_after > 0:
            watchdog.install((signal.SIGINT, signal.SIGTERM))
        task_status.started()
        async for sig in signals:
            if sig == signal.SIGHUP:
                logger.info("SIGHUP: reloading %s", daemon.options.config)
                with contextlib.suppress(ConfigError):  # logged as config_error
                    daemon.load("SIGHUP")
            elif not stop.is_set():
                logger.info(
                    "%s: stopping gracefully (Ctrl-C again to force)",
                    signal.Signals(sig).name,
                )
                stop.set()
            elif sig == signal.SIGINT and not forced:
                forced.append(True)
                _kill_children(daemon.manager)


def _kill_children(manager: Manager) -> None:
    """Forced stop: SIGKILL every stdio server's process group at once.

    The graceful teardown still running then finds the servers dead and ends
    within milliseconds.
    """
    for conn in manager.connections_and_closing():
        pid = conn.state.pid
        if pid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
