"""Drive a stdio server process with bare newline-delimited JSON-RPC.

For tests that need what the SDK client hides: the exit status, signals, the
exact bytes on stdout. `open_line_client(command, args)` starts the process
and SIGKILLs and reaps it on the way out if it is still running.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

__all__ = ["LineClient", "open_line_client"]

MAX_LINE = 1 << 20
"""Bytes one stdout line may take before `receive()` gives up."""
REAP_TIMEOUT = 5.0
"""Seconds to wait for a SIGKILLed process to be reaped."""


class LineClient:
    """Just enough JSON-RPC over a child's stdin/stdout to drive a handshake.

    Args:
        process: A process opened with stdin, stdout and stderr pipes.
    """

    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None and process.stderr is not None
        self.process = process
        self.stdin = process.stdin
        self.stdout = BufferedByteReceiveStream(process.stdout)
        self.stderr = BufferedByteReceiveStream(process.stderr)
        self._next_id = 0

    async def send(
        self, method: str, params: dict[str, Any] | None = None, *, request: bool = True
    ) -> None:
        """Send a request (the next id), or a notification if `request` is false."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        if request:
            self._next_id += 1
            message["id"] = self._next_id
        await self.stdin.send(json.dumps(message).encode() + b"\n")

    async def receive(self) -> dict[str, Any]:
        """The next stdout line, parsed.

        Raises:
            json.JSONDecodeError: The line is not JSON.
        """
        line = await self.stdout.receive_until(b"\n", MAX_LINE)
        message: dict[str, Any] = json.loads(line)
        return message

    async def handshake(self) -> None:
        """Initialize and list tools, as a client does before it counts as connected."""
        await self.send(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "line-client", "version": "0"},
            },
        )
        assert "result" in await self.receive()
        await self.send("notifications/initialized", request=False)
        await self.send("tools/list")
        assert "tools" in (await self.receive())["result"]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> None:
        """Send `tools/call` without waiting for the reply."""
        await self.send("tools/call", {"name": name, "arguments": arguments})


@asynccontextmanager
async def open_line_client(
    command: str, args: Sequence[str]
) -> AsyncIterator[LineClient]:
    """Start `command args` with piped stdio and yield a `LineClient` for it.

    The process is SIGKILLed (by PID) and reaped on exit if it still runs.
    """
    async with await anyio.open_process(
        [command, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        try:
            yield LineClient(process)
        finally:
            if process.returncode is None:
                process.kill()
            with anyio.move_on_after(REAP_TIMEOUT, shield=True):
                await process.wait()
