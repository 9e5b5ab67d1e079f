"""SDK client sessions calling `SERVER__echo` through the daemon's MCP endpoint.

`EchoClients` runs `count` clients (`run(index)` each, in the caller's task
group). Each opens its own streamable HTTP session (a new one if it breaks),
calls `echo` on a random target with a text nobody else sends, and records the
outcome in `CallStats`: ok (the same text came back; latency kept), or failed
by kind (`chaos_report.classify_tool_error` for the gateway's tool errors,
`WRONG` for another text, `hung` for no answer within `timeout`, `protocol
error`, `unknown tool`, `session error`). Coordination: `warm` is set once every
client made an ok call; after `stop()` each finishes its current call and goes
idle with its session still open (`idle` is set once all are); `release()` lets
them close their sessions and end.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import anyio
import httpx2
import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, REQUEST_TIMEOUT

from .chaos_report import CallStats, classify_tool_error

__all__ = ["EchoClients", "echo", "open_session", "text_of"]

HUNG_SLACK = 5.0
"""Seconds past `hung_after` before a call the SDK did not time out is abandoned."""

REOPEN_DELAY = 0.5
"""Seconds a client waits before it opens a new session after one broke."""


def text_of(result: types.CallToolResult) -> str:
    """The text of every text block of a tool result, joined."""
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


@asynccontextmanager
async def open_session(url: str, token: str) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session over streamable HTTP to `url`,
    carrying the endpoint's bearer `token`."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(
            headers=headers, timeout=httpx2.Timeout(30, read=300)
        ) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def echo(
    session: ClientSession, server: str, text: str, hung_after: float, stats: CallStats
) -> bool:
    """Call `SERVER__echo(text)`, record the outcome in `stats`; whether it was ok.

    Args:
        session: An initialized session to the endpoint.
        server: The upstream connection's name.
        text: What to send; the answer must be exactly this.
        hung_after: Seconds before the call counts as hung.
        stats: Where the outcome goes.
    """
    started = time.perf_counter()
    try:
        with anyio.fail_after(hung_after + HUNG_SLACK):
            result = await session.call_tool(
                f"{server}__echo", {"text": text}, read_timeout_seconds=hung_after
            )
    except TimeoutError:
        stats.record_failure("hung", f"{server}: no answer within {hung_after:g} s")
        return False
    except MCPError as exc:
        kinds = {REQUEST_TIMEOUT: "hung", INVALID_PARAMS: "unknown tool"}
        kind = kinds.get(exc.code, "protocol error")
        stats.record_failure(kind, f"{server}: {exc.code} {exc}")
        return False
    elapsed = time.perf_counter() - started
    if not isinstance(result, types.CallToolResult):
        stats.record_failure("not a tool result", f"{server}: {result!r}")
        return False
    got = text_of(result)
    if result.is_error:
        stats.record_failure(classify_tool_error(got), got)
        return False
    if got != text:
        stats.record_failure("WRONG", f"{server}: sent {text!r}, got {got!r}")
        return False
    stats.record_ok(elapsed)
    return True


class EchoClients:
    """`count` clients calling `echo` on random `targets` through `url`.

    Args:
        url: The endpoint, `http://127.0.0.1:PORT/mcp`.
        targets: Connection names to call (each has an `echo` tool).
        stats: Where every outcome goes.
        count: How many clients `run()` will be started for.
        seed: Seeds each client's choice of targets.
        timeout: Seconds before a call counts as hung.
        pause: Seconds a client waits between two calls.
        token: The endpoint's bearer token.
    """

    def __init__(
        self,
        url: str,
        targets: Sequence[str],
        stats: CallStats,
        *,
        count: int,
        seed: int,
        timeout: float,
        pause: float,
        token: str,
    ) -> None:
        self.url = url
        self.token = token
        self.targets = list(targets)
        self.stats = stats
        self.count = count
        self.seed = seed
        self.timeout = timeout
        self.pause = pause
        self.warm = anyio.Event()
        self.idle = anyio.Event()
        self.warmed = 0
        self.idled = 0
        self._stop = anyio.Event()
        self._release = anyio.Event()
        self._calls = 0

    def stop(self) -> None:
        """Finish the current calls, make no more; sessions stay open."""
        self._stop.set()

    def release(self) -> None:
        """Let the idle clients close their sessions and end."""
        self._release.set()

    async def run(self, index: int) -> None:
        """Client `index`: call until `stop()`, idle until `release()`."""
        rng = random.Random(f"{self.seed}/client/{index}")
        warmed = idled = False
        try:
            while not self._stop.is_set():
                try:
                    async with open_session(self.url, self.token) as session:
                        while not self._stop.is_set():
                            ok = await self._call(session, index, rng)
                            if ok and not warmed:
                                warmed = True
                                self._mark_warm()
                            if self.pause > 0:
                                await anyio.sleep(self.pause)
                        idled = True
                        self._mark_idle()
                        await self._release.wait()
                    return
                except Exception as exc:  # boundary: a broken session is a finding
                    self.stats.record_failure(
                        "session error", f"client {index}: {exc!r}"
                    )
                    with anyio.move_on_after(REOPEN_DELAY):
                        await self._stop.wait()
        finally:
            if not idled:
                self._mark_idle()

    async def _call(
        self, session: ClientSession, index: int, rng: random.Random
    ) -> bool:
        self._calls += 1
        text = f"c{index}-{self._calls}-{uuid.uuid4().hex[:8]}"
        server = rng.choice(self.targets)
        return await echo(session, server, text, self.timeout, self.stats)

    def _mark_warm(self) -> None:
        self.warmed += 1
        if self.warmed >= self.count:
            self.warm.set()

    def _mark_idle(self) -> None:
        self.idled += 1
        if self.idled >= self.count:
            self.idle.set()
