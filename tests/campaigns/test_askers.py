"""Many clients asked at once through one stdio server: the real daemon, 4
or 8 clients of both eras, half through `/mcp` and half through `attach`,
each making 50 calls at once of a tool that elicits (the demo server's
`ask_user`). Every call must be asked of its own client and none refused.

The demo server speaks both eras. Declared with nothing but its command
(`auto`), the handshake-era clients are served by its handshake process
(clients that can be asked take turns there: `gateway.requests.Turns`) and
the 2026-07-28 ones by the process beside it (`transport.side.EraSide`,
asked in their own calls' rounds); declared `protocol = "legacy"`, one
handshake process serves all of them, as a handshake-only server would."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from fakes import accepting
from mcp import Client, StdioServerParameters
from servers import free_port, lua_stdio, stdio_command
from servers.daemon import DaemonProcess, bearer

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]

CALLS = 50
ROUNDS = 3
"""Input rounds a 2026-07-28 client's call may take. `ask_user` asks once; a
handshake-era stdio server's question names no call, so one may reach its
client in another of its calls' rounds, but none collects the others' (the
SDK's own limit, 10, was passed at af31808)."""


@pytest.mark.timeout(300)  # its own bound is 240 s; 400 calls beside 3 campaigns
@pytest.mark.parametrize("clients", [4, 8])
@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_clients_of_both_eras_through_http_and_attach_each_get_theirs(
    tmp_path: Path, protocol: str, clients: int
) -> None:
    command, args = stdio_command()
    script = tmp_path / "startup.lua"
    options = f"{{protocol = {json.dumps(protocol)}}}"
    script.write_text(lua_stdio("demo", command, args, options))
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
                where,
                mode=mode,
                elicitation_callback=accepting(name),
                input_required_max_rounds=ROUNDS,
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
                for k in range(clients):
                    tg.start_soon(client, k)
    assert sorted(results) == sorted(f"client{k}" for k in range(clients))
    for name, texts in results.items():
        assert texts == [f'accept: {{"answer": "{name}"}}'] * CALLS, (name, texts[:2])
