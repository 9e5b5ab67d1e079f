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
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from fakes import accepting
from mcp import Client, StdioServerParameters
from servers import HttpServerProcess, free_port, lua_stdio, stdio_command
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


def _hearing(said: list[str]) -> tuple[Any, Any]:
    """A client's log and progress callbacks, each noting the text it heard."""

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        said.append(str(params.data))

    async def on_progress(
        progress: float, total: float | None, message: str | None
    ) -> None:
        said.append(str(message))

    return on_log, on_progress


async def test_eight_clients_with_the_same_ids_only_ever_hear_their_own(
    tmp_path: Path, backchannel_http: HttpServerProcess
) -> None:
    argv = [str(BACKCHANNEL), "--transport", "stdio"]
    script = tmp_path / "startup.lua"
    script.write_text(
        f"mcp_add('h', {json.dumps(backchannel_http.url)})\n"
        + lua_stdio("s", sys.executable, argv)
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
            on_log, on_progress = _hearing(said)

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


PAIR_CALLS = 500
"""Calls of each client of a pair: 1000 interleaved calls per pair."""

IN_FLIGHT = 16
"""Calls each client keeps in flight at once."""


@pytest.mark.timeout(300)  # 1000 calls beside three other campaigns (-n 4)
@pytest.mark.parametrize("front", ["/mcp legacy", "/mcp 2026", "attach", "stdio"])
async def test_a_pair_with_the_same_ids_over_a_thousand_calls_never_crosses(
    tmp_path: Path, backchannel_http: HttpServerProcess, front: str
) -> None:
    """Two clients with the same JSON-RPC ids, through one front of one
    daemon, 500 calls each, interleaved (16 in flight each): `tell`
    (progress and a log line) to the back-channel server over HTTP and over
    stdio, and the demo server's `ask_user` over stdio (an elicitation the
    client answers with its own name: on the back-channel for a handshake
    client, in input rounds for a 2026-07-28 one). Every result is the
    caller's own, and no progress, log line or question of one ever reaches
    the other."""
    argv = [str(BACKCHANNEL), "--transport", "stdio"]
    command, args = stdio_command()
    script = tmp_path / "startup.lua"
    # `hold`: the stdio front runs this script in a process of its own,
    # whose servers connect while the pair's first calls arrive; a call waits
    # for its server (however slow the machine) instead of being told
    # "connecting" after the default 5 s.
    script.write_text(
        f"mcp_add('h', {json.dumps(backchannel_http.url)}, {{hold = 60}})\n"
        + lua_stdio("s", sys.executable, argv, "{hold = 60}")
        + lua_stdio("d", command, args, "{hold = 60}")
    )
    port = free_port()
    heard: dict[str, list[str]] = {}
    wrong: list[tuple[str, str]] = []
    with DaemonProcess(script, "--listen", f"127.0.0.1:{port}") as daemon:
        for name in ("h", "s", "d"):
            daemon.wait_event("connected", name)
        url, token = f"http://127.0.0.1:{port}/mcp", daemon.token

        def where() -> Any:
            if front.startswith("/mcp"):
                return bearer(url, token)
            if front == "attach":
                args = ["-m", "manager", "attach", "--socket", str(daemon.socket)]
            else:
                log = str(tmp_path / f"stdio-{len(heard)}.log")
                args = ["-m", "manager", "stdio", str(script), "--log-file", log]
            env = {"XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]}
            return StdioServerParameters(command=sys.executable, args=args, env=env)

        async def client(me: str) -> None:
            said = heard.setdefault(me, [])
            mode: Any = "auto" if front in ("/mcp 2026", "stdio") else "legacy"
            on_log, on_progress = _hearing(said)

            async def answer(context: Any, params: Any) -> types.ElicitResult:
                said.append(str(getattr(params, "message", "")))
                return types.ElicitResult(action="accept", content={"answer": me})

            # A handshake-era stdio server's questions name no request: its
            # clients that can be asked take turns once it has asked one
            # (README); the first one is asked before the pair begins.
            await warm_up.wait()

            async with Client(
                where(), mode=mode, logging_callback=on_log, elicitation_callback=answer
            ) as session:
                slots = anyio.Semaphore(IN_FLIGHT)

                async def call(n: int) -> None:
                    server = "h" if n % 2 else "s"
                    async with slots:
                        if n % 4 < 2:
                            got = await session.call_tool(
                                f"{server}__tell",
                                {"text": me, "steps": 1},
                                progress_callback=on_progress,
                            )
                            want = me
                        else:
                            got = await session.call_tool(
                                "d__ask_user", {"message": me}
                            )
                            want = f'accept: {{"answer": "{me}"}}'
                    text = "".join(getattr(c, "text", "") for c in got.content)
                    if text != want:
                        wrong.append((me, text))

                async with anyio.create_task_group() as tg:
                    for n in range(PAIR_CALLS):
                        tg.start_soon(call, n)

        warm_up = anyio.Event()
        with anyio.fail_after(300):
            async with Client(
                bearer(url, token), elicitation_callback=accepting("warm-up")
            ) as first:
                await first.call_tool("d__ask_user", {"message": "warm-up"})
            warm_up.set()
            async with anyio.create_task_group() as tg:
                for me in ("client-a", "client-b"):
                    tg.start_soon(client, me)
    assert not wrong, wrong[:5]
    for me, messages in heard.items():
        foreign = sorted({m for m in messages if m != me})
        assert not foreign, (me, foreign)
    assert sorted(heard) == ["client-a", "client-b"]
