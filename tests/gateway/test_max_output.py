"""`max_output` through the endpoint: a 200 k-token result reaches the client
as at most the limit, with a link that returns the whole, in both eras.

The upstream is the demo server over stdio; its `echo` returns what it is
given, so the test sends a text of about 225 k tokens (900 k characters).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client
from memory import MemoryServers
from servers import free_port, stdio_command
from servers.daemon import DaemonThread, bearer
from support.gateway import demo_memory, running_gateway

from manager.cli import main
from manager.core.output import RESULTS_PREFIX, estimate_tokens
from manager.core.profile import parse_profile

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]

BIG = "\n".join(f"row {i:06d} " + "v" * 80 for i in range(10_000))
"""About 225 k tokens (estimated as characters / 4)."""

MEDIUM = BIG[:40_000]
"""About 10 k tokens: over a max_output of 2000, quick to send around."""


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_large_result_is_cut_to_the_limit_and_the_whole_is_one_read_away(
    mode: Any,
) -> None:
    assert estimate_tokens(BIG) > 200_000
    # The connection allows 50 000, the profile 20 000: the smaller counts.
    spec = demo_memory("big", max_output=50_000)
    small = parse_profile("small", {"max_output": 20_000})
    async with running_gateway([spec], wait_for=["big"], memory=MemoryServers()) as (
        gateway,
        manager,
        _,
    ):
        manager.profiles = {"small": small}
        with anyio.fail_after(60):
            async with Client(f"{gateway.url}/small", mode=mode) as client:
                result = await client.call_tool("big__echo", {"text": BIG})
                wire = result.model_dump(by_alias=True, mode="json", exclude_none=True)
                assert estimate_tokens(wire) <= 20_000
                assert not result.is_error
                shown, note, link = result.content
                assert isinstance(shown, types.TextContent)
                assert BIG.startswith(shown.text.removesuffix("…"))
                assert isinstance(note, types.TextContent) and "max_output" in note.text
                assert isinstance(link, types.ResourceLink)
                uri = str(link.uri)
                assert uri.startswith(RESULTS_PREFIX) and uri in note.text

                whole = await client.read_resource(uri)
                (contents,) = whole.contents
                assert isinstance(contents, types.TextResourceContents)
                kept = json.loads(contents.text)
                assert kept["content"][0]["text"] == BIG

                gone = RESULTS_PREFIX + "0" * 32
                with pytest.raises(Exception, match="no such result"):
                    await client.read_resource(gone)

            # Through the whole endpoint only the connection's limit applies.
            async with Client(str(gateway.url), mode=mode) as client:
                result = await client.call_tool("big__echo", {"text": BIG})
                wire = result.model_dump(by_alias=True, mode="json", exclude_none=True)
                assert 20_000 < estimate_tokens(wire) <= 50_000
                small_result = await client.call_tool("big__echo", {"text": "hi"})
                assert [c.type for c in small_result.content] == ["text"]  # as is


async def test_the_cli_prints_the_whole_result_a_link_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    command, args = stdio_command()
    listed = ", ".join(json.dumps(a) for a in args)
    script = tmp_path / "startup.lua"
    script.write_text(
        f"mcp_add('big', {{command = {json.dumps(command)}, args = {{{listed}}}, "
        "max_output = 2000})\n"
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with DaemonThread(script, "--listen", f"127.0.0.1:{port}") as daemon:
        daemon.wait_event("connected", "big")
        with anyio.fail_after(60):
            async with Client(bearer(url, daemon.token)) as client:
                result = await client.call_tool("big__echo", {"text": MEDIUM})
        link = result.content[-1]
        assert isinstance(link, types.ResourceLink)
        argv = ["result", str(link.uri), "--socket", str(daemon.socket)]
        assert await anyio.to_thread.run_sync(main, argv) == 0
        printed = json.loads(capsys.readouterr().out)
        assert printed["content"][0]["text"] == MEDIUM
        gone = ["result", "0" * 32, "--socket", str(daemon.socket)]
        assert await anyio.to_thread.run_sync(main, gone) == 2
        assert "no longer kept" in capsys.readouterr().err
