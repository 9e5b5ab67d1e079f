"""Many clients asked at once through one stdio server: the real daemon, 8
clients of both eras, half through `/mcp` and half through `attach`, each
making 50 calls at once of a tool that elicits (the demo server's
`ask_user`, a handshake-era stdio upstream). Every call must be asked of its
own client and none refused (clients that can be asked take turns there:
`gateway.requests.Turns`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from fakes import accepting
from mcp import Client, StdioServerParameters
from servers import free_port, stdio_command
from servers.daemon import DaemonProcess, bearer

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]

CLIENTS = 8
CALLS = 50


async def test_eight_clients_of_both_eras_through_http_and_attach_each_get_theirs(
    tmp_path: Path,
) -> None:
    command, args = stdio_command()
    script = tmp_path / "startup.lua"
    listed = ", ".join(json.dumps(a) for a in args)
    script.write_text(
        f"mcp_add('demo', {{command = {json.dumps(command)}, args = {{{listed}}}}})\n"
    )
    port = free_port()
    results: dict[str, list[str]] = {}
    with DaemonProcess(script, "--listen", f"127.0.0.1:{port}") as daemon:
        daemon.wait_event("connected", "demo")
        url = f"http://127.0.0.1:{port}/mcp"
        token = daemon.token
        attach = StdioServerParameters(
            command=sys.executable,
            args=["-m", "manager", "attach", "--socket", str(daemon.socket)],
        )

        async def client(k: int) -> None:
            name = f"client{k}"
            where: Any = bearer(url, token) if k % 2 else attach
            mode: Any = "legacy" if k % 4 < 2 else "auto"
            async with Client(
                where, mode=mode, elicitation_callback=accepting(name)
            ) as session:

                async def call() -> None:
                    got = await session.call_tool("demo__ask_user", {"message": name})
                    text = "".join(getattr(c, "text", "") for c in got.content)
                    results.setdefault(name, []).append(text)

                async with anyio.create_task_group() as tg:
                    for _ in range(CALLS):
                        tg.start_soon(call)

        with anyio.fail_after(240):
            # Turns begin once the server has asked a question: one ask first.
            async with Client(
                bearer(url, token), elicitation_callback=accepting("x")
            ) as first:
                await first.call_tool("demo__ask_user", {"message": "warm-up"})
            async with anyio.create_task_group() as tg:
                for k in range(CLIENTS):
                    tg.start_soon(client, k)
    assert sorted(results) == sorted(f"client{k}" for k in range(CLIENTS))
    for name, texts in results.items():
        assert texts == [f'accept: {{"answer": "{name}"}}'] * CALLS, (name, texts[:2])
