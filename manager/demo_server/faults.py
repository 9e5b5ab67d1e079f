"""The demo server's failure modes (`--crash-after-handshake`, `--garbage`, ...).

They ship with the demo because watching mcp-manager ride out a misbehaving
server is half of what the demo is for; the rest of the package never looks at
them."""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .toolkit import SERVER_NAME
from .tools import DemoServer
from .transports import run

__all__ = ["Faults", "run_with_faults"]

# -- failure modes --------------------------------------------------------------

CRASH_AFTER_HANDSHAKE_CODE = 3
CRASH_AFTER_HANDSHAKE_DELAY = 0.05
"""Seconds between the first `tools/list` reply and the exit, so the reply gets out."""
STDERR_SPAM_INTERVAL = 0.01
"""Seconds between two `--stderr-spam` lines."""


@dataclass(frozen=True)
class Faults:
    """Ways the demo server can be told to misbehave (all off by default).

    Attributes:
        crash_after_handshake: Exit with code 3 shortly after the first
            `tools/list` reply, i.e. once a client is fully connected.
        hang_on_initialize: Never answer `initialize`. On stdio the server is
            wedged: it does not notice stdin closing, only signals end it.
        garbage: stdio only. Write non-JSON lines to stdout, one at start and
            one per line read, never a real reply; exit on stdin EOF.
        exit_immediately: Exit at once with this code, before serving.
        ignore_sigterm: stdio only. Ignore SIGTERM and stdin EOF; only SIGKILL
            ends the process.
        slow_start: Seconds to sleep before serving.
        stderr_spam: Write a line to stderr every 10 ms while serving.
        exit_after: Exit with code 1 this many seconds after starting, like a
            server that crashes now and then (the bundled startup.lua uses it
            to show a reconnect).
        modern_only: Speak only 2026-07-28: refuse `initialize` with -32022
            (unsupported protocol version), naming that revision.
        legacy_only: Speak only the handshake era, as a 1.x server does:
            `server/discover` and every 2026-07-28 request get -32601
            (method not found).
    """

    crash_after_handshake: bool = False
    hang_on_initialize: bool = False
    garbage: bool = False
    exit_immediately: int | None = None
    ignore_sigterm: bool = False
    slow_start: float = 0.0
    stderr_spam: bool = False
    exit_after: float | None = None
    modern_only: bool = False
    legacy_only: bool = False


class _FaultMiddleware:
    """Misbehave at the protocol level: hang on `initialize`, crash after listing."""

    def __init__(self, faults: Faults) -> None:
        self._faults = faults
        self._crash_armed = faults.crash_after_handshake

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method == "initialize" and self._faults.hang_on_initialize:
            await anyio.sleep_forever()
        if ctx.method == "initialize" and self._faults.modern_only:
            raise MCPError(
                UNSUPPORTED_PROTOCOL_VERSION,
                "this server speaks only 2026-07-28 (use server/discover)",
                {"supported": ["2026-07-28"], "requested": ctx.protocol_version},
            )
        if (
            self._faults.legacy_only
            and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        ):
            raise MCPError(METHOD_NOT_FOUND, f"Method not found: {ctx.method}")
        result = await call_next(ctx)
        if ctx.method == "tools/list" and self._crash_armed:
            self._crash_armed = False
            # A timer thread, not a task: the reply must be written first, and
            # the middleware has no task group to start a task in.
            timer = threading.Timer(
                CRASH_AFTER_HANDSHAKE_DELAY,
                os._exit,
                args=(CRASH_AFTER_HANDSHAKE_CODE,),
            )
            timer.daemon = True
            timer.start()
        return result


async def _spam_stderr() -> None:
    count = 0
    while True:
        count += 1
        sys.stderr.write(f"{SERVER_NAME}: stderr spam line {count}\n")
        sys.stderr.flush()
        await anyio.sleep(STDERR_SPAM_INTERVAL)


async def _exit_after(seconds: float) -> None:
    await anyio.sleep(seconds)
    sys.stderr.write(f"{SERVER_NAME}: --exit-after {seconds:g}: exiting with code 1\n")
    sys.stderr.flush()
    os._exit(1)


async def run_with_faults(
    demo: DemoServer, faults: Faults, transport: str, host: str, port: int
) -> None:
    demo.server.middleware.append(_FaultMiddleware(faults))
    async with anyio.create_task_group() as tg:
        if faults.stderr_spam:
            tg.start_soon(_spam_stderr)
        if faults.exit_after is not None:
            tg.start_soon(_exit_after, faults.exit_after)
        await run(demo, transport, host, port, faults.legacy_only)
        if faults.ignore_sigterm:
            await anyio.sleep_forever()
        tg.cancel_scope.cancel()


# -- command line ---------------------------------------------------------------
