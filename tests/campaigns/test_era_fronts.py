"""A dual-era HTTP server that asks only the handshake way, met through every
front of the real daemon (`/mcp`, `attach`, `mcp-manager stdio`) by SDK
clients of both eras: each gets what it gets straight at the server.

The server (`servers/backchannel.py`, on the SDK's `MCPServer`) asks on the
handshake back-channel: a handshake-era client is asked, straight and through
us (the daemon opens a handshake session beside its 2026-07-28 one); a
2026-07-28 client is refused by the server straight ("no back-channel"), and
must be refused the same way through us, not answered some other way.
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
from mcp import Client, StdioServerParameters
from servers import HttpServerProcess, free_port
from servers.daemon import DaemonProcess, bearer

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]


async def _answer(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"answer": "blue"})


async def _outcome(where: Any, mode: Any) -> tuple[object, ...]:
    """What a client of `mode` gets from `ask` and the `asking` prompt."""
    try:
        async with Client(where, mode=mode, elicitation_callback=_answer) as client:
            asked = await client.call_tool("ask", {"message": "colour?"})
            text = "".join(getattr(c, "text", "") for c in asked.content)
            try:
                prompt = await client.get_prompt("asking")
                said: object = getattr(prompt.messages[0].content, "text", "")
            except Exception as exc:  # the server's refusal, compared as such
                said = type(exc).__name__
    except Exception as exc:  # a client that fails outright, compared as such
        return ("failed", type(exc).__name__)
    return asked.is_error, "back-channel" in text or text, said


async def test_a_dual_era_server_through_every_front_as_straight(
    tmp_path: Path, backchannel_http: HttpServerProcess
) -> None:
    script = tmp_path / "startup.lua"
    script.write_text(
        f"mcp_add('bc', {json.dumps(backchannel_http.url)}, {{prefix = ''}})\n"
    )
    port = free_port()
    with DaemonProcess(script, "--listen", f"127.0.0.1:{port}") as daemon:
        daemon.wait_event("connected", "bc")
        url, token = f"http://127.0.0.1:{port}/mcp", daemon.token
        fronts: dict[str, Any] = {
            "/mcp": lambda: bearer(url, token),  # a transport is used once
            "attach": StdioServerParameters(
                command=sys.executable,
                args=["-m", "manager", "attach", "--socket", str(daemon.socket)],
            ),
            "stdio": StdioServerParameters(
                command=sys.executable,
                args=["-m", "manager", "stdio", str(script), "--log-file"]
                + [str(tmp_path / "stdio.log")],
                env={"XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]},  # not the user's
            ),
        }
        with anyio.fail_after(120):
            for mode in ("legacy", "auto"):
                straight = await _outcome(backchannel_http.url, mode)
                for front, where in fronts.items():
                    through = await _outcome(
                        where() if callable(where) else where, mode
                    )
                    assert through == straight, (mode, front, straight, through)
        handshake = await _outcome(backchannel_http.url, "legacy")
        assert handshake == (False, "accept: blue", "Write about blue")
