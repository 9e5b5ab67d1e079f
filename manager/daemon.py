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
import logging
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc

from . import __version__
from .bus import EventBus, Subscription
from .control import serve_control
from .errors import ConfigError, ControlError
from .logs import LogSink, run_summaries, setup_logging
from .manager import Manager
from .scripting import ConfigRunner

__all__ = ["DaemonOptions", "Daemon", "serve"]

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
    """

    config: Path
    socket: Path
    log_level: str = "INFO"
    log_format: str = "text"
    hud: bool = False


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

    # --- ControlBackend ----------------------------------------------------------

    def status(self) -> list[dict[str, object]]:
        """Status of every connection (control API)."""
        return self.manager.statuses()

    def info(self) -> dict[str, object]:
        """Daemon-wide facts for the HUD and `status`."""
        return {
            "version": __version__,
            "pid": os.getpid(),
            "config": str(self.options.config),
            "last_reload": self.config.last_reload,
            "watching": self.config.watching,
            "dropped": self.bus.dropped(),
            "connections": len(self.manager.specs),
        }

    def reconnect(self, server: str) -> dict[str, object]:
        """Skip `server`'s backoff wait (control API)."""
        return {"server": server, "retrying": self.manager.reconnect(server)}

    def subscribe(self, name: str) -> Subscription:
        """A new bus subscription for a control client."""
        return self.bus.subscribe(name)

    async def reload(self) -> dict[str, object]:
        """Run the script again; apply its desired set only if it succeeds.

        Raises:
            ConfigError: The script failed; nothing was changed.
        """
        return self.load()

    async def call(
        self,
        server: str,
        tool: str,
        args: dict[str, object],
        timeout: float | None,  # noqa: ASYNC109 - the MCP call timeout, passed on
    ) -> dict[str, object]:
        """A tool call through the manager, as a JSON-ready result dict."""
        result = await self.manager.call(server, tool, args, call_timeout=timeout)
        return dict(result.data)

    # --- config ---------------------------------------------------------------------

    def load(self) -> dict[str, object]:
        """Run startup.lua and reconcile; publish `config_loaded` or `config_error`.

        Raises:
            ConfigError: The script failed; the running set is unchanged.
        """
        return self.config.load()


async def serve(options: DaemonOptions) -> int:
    """Run the daemon until SIGINT/SIGTERM. Returns the process exit code."""
    setup_logging(options.log_level, options.log_format)
    bus = EventBus()
    sink = LogSink(bus)
    try:
        return await _serve(options, bus, sink)
    finally:
        sink.close()


async def _serve(options: DaemonOptions, bus: EventBus, sink: LogSink) -> int:
    stop = anyio.Event()
    forced: list[bool] = []
    async with Manager(bus) as manager:
        daemon = Daemon(options, bus, manager)
        async with anyio.create_task_group() as services:
            # The socket first: a second daemon on the same socket must stop
            # before it spawns a single server.
            try:
                await services.start(serve_control, daemon, options.socket)
            except ControlError as exc:
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
            gc.freeze()
            services.start_soon(run_summaries, sink)
            await services.start(daemon.config.run)  # hooks, mcp_call, file watch
            # The signal task lives on through the manager's shutdown below: a
            # second Ctrl-C while connections close must still be heard.
            signals_scope = anyio.CancelScope()
            services.start_soon(_handle_signals, daemon, stop, forced, signals_scope)
            logger.info(
                "mcp-manager %s running: %s connection(s) from %s; control socket %s",
                __version__,
                summary["connections"],
                options.config,
                options.socket,
            )
            await stop.wait()
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


async def _close_all(manager: Manager) -> None:
    """Remove every connection and wait until all have closed (each ≤ 2 s)."""
    closing = manager.connections_and_closing()
    manager.reconcile([])
    for conn in closing:
        await conn.done.wait()


async def _handle_signals(
    daemon: Daemon, stop: anyio.Event, forced: list[bool], scope: anyio.CancelScope
) -> None:
    """SIGHUP reloads; SIGINT/SIGTERM stop gracefully; a second SIGINT forces."""
    with (
        scope,
        anyio.open_signal_receiver(
            signal.SIGINT, signal.SIGTERM, signal.SIGHUP
        ) as signals,
    ):
        async for sig in signals:
            if sig == signal.SIGHUP:
                logger.info("SIGHUP: reloading %s", daemon.options.config)
                try:
                    daemon.load()
                except ConfigError as exc:
                    logger.error("reload failed, keeping the running set: %s", exc)
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
