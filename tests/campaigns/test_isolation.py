"""Clients never hear each other: eight clients, both eras, at once.

Every SDK client numbers its requests from the same start, so the clients
here all use the same JSON-RPC ids, as CVE-2026-25536's shared transport
had them. Each calls the back-channel server's `tell` with its own text:
the server reports progress and logs that text on the call's own stream.
Through `/mcp`, with the server behind the daemon over streamable HTTP and
over stdio, every client must get its own result and never a progress
message or log line with another client's text (a log line sent while
several clients' calls are in flight may reach nobody: that is allowed, a
foreign one is not).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client
from servers import HttpServerProcess, free_port
from servers.daemon import DaemonProcess, bearer

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.campaign,
    pytest.mark.usefixtures("no_leaked_children"),
]

BACKCHANNEL = Path(__file__).parent.parent / "servers" / "backchannel.py"
CLIENTS = 8
CALLS = 10
STEPS = 2


async def test_eight_clients_with_the_same_ids_only_ever_hear_their_own(
    tmp_path: Path, backchannel_http: HttpServerProcess
) -> None:
    argv = [str(BACKCHANNEL), "--transport", "stdio"]
    stdio = ", ".join(json.dumps(a) for a in argv)
    python = json.dumps(sys.executable)
    script = tmp_path / "startup.lua"
    script.write_text(
        f"mcp_add('h', {json.dumps(backchannel_http.url)})\n"
        f"mcp_add('s', {{command = {python}, args = {{{stdio}}}}})\n"
    )
    port = free_port()
    heard: dict[str, list[str]] = {}
    results: dict[str, list[str]] = {}
    with DaemonProcess(script, "--listen", f"127.0.0.1:{port}") as daemon:
        daemon.wait_event("connected", "h")
        daemon.wait_event("connected", "s")
        url, token = f"http://127.0.0.1:{port}/mcp", daemon.token

        async def client(k: int) -> None:
            me = f"client-{k}"
            mode: Any = "legacy" if k % 2 else "auto"
            said = heard.setdefault(me, [])

            async def on_log(params: types.LoggingMessageNotificationParams) -> None:
                said.append(str(params.data))

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                said.append(str(message))

            async with Client(
                bearer(url, token), mode=mode, logging_callback=on_log
            ) as session:

                async def call(server: str) -> None:
                    got = await session.call_tool(
                        f"{server}__tell",
                        {"text": me, "steps": STEPS},
                        progress_callback=on_progress,
                    )
                    text = "".join(getattr(c, "text", "") for c in got.content)
                    results.setdefault(me, []).append(text)

                async with anyio.create_task_group() as tg:
                    for n in range(CALLS):
                        tg.start_soon(call, "h" if n % 2 else "s")

        with anyio.fail_after(240):
            async with anyio.create_task_group() as tg:
                for k in range(CLIENTS):
                    tg.start_soon(client, k)
    assert sorted(results) == sorted(f"client-{k}" for k in range(CLIENTS))
    for me, texts in results.items():
        assert texts == [me] * CALLS, (me, texts[:3])
    for me, messages in heard.items():
        foreign = sorted({m for m in messages if m != me})
        assert not foreign, (me, foreign)
        assert messages, me  # progress reached it, at least
