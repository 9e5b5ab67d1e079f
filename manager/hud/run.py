"""Running the HUD: inside the daemon, or attached to one through its socket.

`run_inline` is one more task of `mcp-manager run`: the HUD reads its own
bounded bus subscription, its frames run on the daemon's event loop (bounded
work each), and while it owns the terminal nothing else may write there
(`terminal.OutputCapture`: logging, warnings and fd 2 go into its log; what
arrives as it closes is printed after it). Quitting the HUD (`q`, Ctrl-C) stops
the daemon gracefully, as SIGINT does; SIGINT/SIGTERM from outside close the
HUD first; a terminal that hangs up stops the daemon like any foreground
program.

`run_attached` is `mcp-manager hud`: a worker thread follows the control
socket's event stream into a bounded queue; when the daemon goes away it shows
"daemon unreachable, retrying" and tries again every `RETRY_INTERVAL`, starting
over from a fresh snapshot each time it gets through.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import threading
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Protocol

import anyio
import anyio.to_thread

from ..core.errors import ManagerError
from ..core.events import Event
from ..core.info import DaemonInfo
from ..core.replies import ConnectionDetails, ReconnectReply, ReloadSummary
from ..core.status import ConnectionStatus
from ..core.text import first_line
from .app import HudApp
from .feed import (
    EventSource,
    FeedItem,
    QueueFeed,
    Snapshot,
    SubscriptionFeed,
    Unreachable,
)
from .terminal import OutputCapture, TerminalOutput

__all__ = [
    "HUD_QUEUE_SIZE",
    "RETRY_INTERVAL",
    "AttachedReader",
    "ControlView",
    "DaemonView",
    "run_attached",
    "run_inline",
]

logger = logging.getLogger("manager.hud")

HUD_QUEUE_SIZE = 20_000
"""Events the in-daemon HUD may fall behind by before it loses the oldest."""

RETRY_INTERVAL = 1.0
"""Seconds between two tries to reach the daemon while it is unreachable."""

# ------------------------------------------------------------------- inline


class _Bus(Protocol):
    def subscribe(self, name: str, maxlen: int) -> EventSource: ...

    @property
    def last_seq(self) -> int: ...


class _Options(Protocol):
    @property
    def socket(self) -> Path: ...


class DaemonView(Protocol):
    """The part of `manager.daemon.serve.Daemon` the inline HUD uses."""

    @property
    def bus(self) -> _Bus: ...

    @property
    def options(self) -> _Options: ...

    def status(self) -> list[ConnectionStatus]: ...

    def info(self) -> DaemonInfo: ...

    def reconnect(self, server: str) -> ReconnectReply: ...

    def details(self, server: str) -> ConnectionDetails: ...

    def decide(
        self, approval: str, verdict: str, scope: str, by: str = "cli"
    ) -> object: ...

    async def reload(self) -> ReloadSummary: ...


class _DaemonBackend:
    """`HudBackend` straight onto the daemon (same event loop, no I/O)."""

    def __init__(self, daemon: DaemonView) -> None:
        self._daemon = daemon

    async def snapshot(self) -> Snapshot:
        return Snapshot(self._daemon.status(), self._daemon.info())

    async def info(self) -> DaemonInfo:
        return self._daemon.info()

    async def reload(self) -> ReloadSummary:
        return await self._daemon.reload()

    async def reconnect(self, server: str) -> ReconnectReply:
        return self._daemon.reconnect(server)

    async def details(self, server: str) -> ConnectionDetails:
        return self._daemon.details(server)

    async def decide(self, approval: str, verdict: str, scope: str) -> None:
        self._daemon.decide(approval, verdict, scope, by="hud")


class _CombinedFeed:
    """The bus subscription plus the captured output."""

    def __init__(self, events: SubscriptionFeed, output: OutputCapture) -> None:
        self._events = events
        self._output = output

    def poll(self, limit: int) -> list[FeedItem]:
        items: list[FeedItem] = list(self._output.poll(limit))
        items.extend(self._events.poll(limit))
        return items


async def run_inline(
    daemon: DaemonView,
    stop: anyio.Event,
    *,
    run_app: Callable[[HudApp], Awaitable[str | None]] | None = None,
) -> None:
    """Show the HUD until it is quit (then set `stop`) or `stop` is set.

    If the HUD itself fails, the daemon keeps running without it and says so.

    Args:
        daemon: The running daemon.
        stop: Set to stop the daemon; setting it closes the HUD too.
        run_app: How to run the app (tests run it headless with a pilot);
            default `app.run_async()` on the terminal.
    """
    subscription = daemon.bus.subscribe("hud", HUD_QUEUE_SIZE)
    first_seen = daemon.bus.last_seq + 1  # no await since subscribing
    try:
        loop = asyncio.get_running_loop()
        factory = loop.get_task_factory()
        terminal = TerminalOutput()
        output = OutputCapture(exclusive=os.isatty(2), events_from=first_seen)

        def ready() -> None:
            # textual (Python >= 3.12) makes the loop's tasks eager; the daemon's
            # own tasks were written for the default factory, so put it back.
            loop.set_task_factory(factory)
            terminal.unbind(app)

        app = HudApp(
            _DaemonBackend(daemon),
            _CombinedFeed(SubscriptionFeed(subscription), output),
            initial=Snapshot(daemon.status(), daemon.info()),
            subtitle=f"pid {os.getpid()} · socket {daemon.options.socket}",
            on_ready=ready,
            terminal_state=lambda: terminal.state(app),
        )
        with terminal, output:
            async with anyio.create_task_group() as tg:

                async def close_on_stop() -> None:
                    await stop.wait()
                    output.hold()  # shutdown lines belong on the terminal
                    terminal.close_soon()
                    app.exit("stopped")

                tg.start_soon(close_on_stop)
                result = await (run_app or _run_on_terminal)(app)
                tg.cancel_scope.cancel()
    finally:
        subscription.close()
    if result == "quit":
        logger.info("HUD closed: stopping (Ctrl-C again to force)")
        stop.set()
    elif result == "hangup":
        logger.warning("the terminal went away: stopping")
        stop.set()
    elif not stop.is_set():
        logger.error(
            "the HUD stopped unexpectedly; the daemon keeps running without it "
            "(Ctrl-C stops it)"
        )


async def _run_on_terminal(app: HudApp) -> str | None:
    return await app.run_async()


# ----------------------------------------------------------------- attached


class _Stream(Protocol):
    def __enter__(self) -> _Stream: ...

    def __exit__(self, *exc_info: object) -> None: ...

    def __iter__(self) -> Iterator[Event]: ...

    def close(self) -> None: ...


class ControlView(Protocol):
    """The part of `manager.control.client.ControlClient` the attached HUD uses."""

    @property
    def path(self) -> Path: ...

    def status(self) -> list[ConnectionStatus]: ...

    def info(self) -> DaemonInfo: ...

    def reload(self) -> ReloadSummary: ...

    def reconnect(self, server: str) -> ReconnectReply: ...

    def details(self, server: str) -> ConnectionDetails: ...

    def decide(
        self, approval: str, verdict: str, scope: str = "once", by: str = "cli"
    ) -> object: ...

    def subscribe(self) -> _Stream: ...


class _ClientBackend:
    """`HudBackend` over the blocking control client, one thread per call."""

    def __init__(self, client: ControlView) -> None:
        self._client = client

    async def snapshot(self) -> Snapshot:
        def both() -> Snapshot:
            return Snapshot(self._client.status(), self._client.info())

        return await anyio.to_thread.run_sync(both)

    async def info(self) -> DaemonInfo:
        return await anyio.to_thread.run_sync(self._client.info)

    async def reload(self) -> ReloadSummary:
        return await anyio.to_thread.run_sync(self._client.reload)

    async def reconnect(self, server: str) -> ReconnectReply:
        return await anyio.to_thread.run_sync(self._client.reconnect, server)

    async def details(self, server: str) -> ConnectionDetails:
        return await anyio.to_thread.run_sync(self._client.details, server)

    async def decide(self, approval: str, verdict: str, scope: str) -> None:
        await anyio.to_thread.run_sync(
            partial(self._client.decide, approval, verdict, scope, by="hud")
        )


class AttachedReader:
    """Follows the daemon's event stream on a thread, reconnecting forever.

    Each time it gets through it subscribes first and then takes a snapshot,
    so no event falls between the two. When the daemon is unreachable it puts
    an `Unreachable` into the feed (once per distinct reason) and retries every
    `retry` seconds.

    Args:
        client: The control client.
        feed: The bounded queue the app polls.
        retry: Seconds between tries.
    """

    def __init__(
        self, client: ControlView, feed: QueueFeed, *, retry: float = RETRY_INTERVAL
    ) -> None:
        self._client = client
        self._feed = feed
        self._retry = retry
        self._stop = threading.Event()
        self._stream: _Stream | None = None
        self._thread = threading.Thread(
            target=self._run, name="hud-events", daemon=True
        )

    def start(self) -> None:
        """Start following."""
        self._thread.start()

    def stop(self) -> None:
        """Stop following and wait (briefly) for the thread."""
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.close()
        self._thread.join(timeout=2.0)

    def _put(self, item: FeedItem) -> bool:
        # Blocking while the HUD is behind is the point: the daemon's queue for
        # this client then fills and tells us, with a count, what we lost.
        while not self._stop.is_set():
            with contextlib.suppress(queue.Full):
                self._feed.queue.put(item, timeout=0.2)
                return True
        return False

    def _run(self) -> None:
        reported: str | None = None
        while not self._stop.is_set():
            reason = "the daemon closed the event stream (stopping or restarting)"
            try:
                with self._client.subscribe() as stream:
                    self._stream = stream
                    if self._stop.is_set():
                        break
                    snapshot = Snapshot(self._client.status(), self._client.info())
                    if not self._put(snapshot):
                        break
                    reported = None
                    for event in stream:
                        if not self._put(event):
                            break
            except ManagerError as exc:
                reason = first_line(exc)
            finally:
                self._stream = None
            if self._stop.is_set():
                break
            if reason != reported:
                reported = reason
                self._put(Unreachable(reason))
            self._stop.wait(self._retry)


def run_attached(
    client: ControlView, *, run: Callable[[HudApp], object] | None = None
) -> int:
    """Run the HUD against the daemon behind `client` until quit.

    Args:
        client: The control client.
        run: How to run the app (tests run it headless); default `app.run()`.

    Returns:
        The exit code: 0 when quit, 1 if the HUD failed.
    """
    feed = QueueFeed()
    reader = AttachedReader(client, feed)
    terminal = TerminalOutput()
    app = HudApp(
        _ClientBackend(client),
        feed,
        attached=True,
        subtitle=f"attached to {client.path}",
        on_ready=lambda: terminal.unbind(app),
        terminal_state=lambda: terminal.state(app),
    )
    reader.start()
    try:
        with terminal:
            if run is None:
                app.run()
            else:
                run(app)
    finally:
        reader.stop()
    return 0 if app.return_code in (None, 0) else 1
