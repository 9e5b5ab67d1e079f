"""Pinned definitions as a client of the endpoint sees them: under `strict` a
changed tool is gone from `tools/list` and a call to it says why and how to
approve it; approved, it is back (both eras)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from servers import raw_command
from support.gateway import running_gateway, wait_until

from manager.core.spec import parse_spec
from manager.gateway.listing import catalog_rows

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]

ECHO = {
    "name": "echo",
    "description": "Return the text.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def test_a_held_tool_is_neither_listed_nor_callable_until_approved(
    tmp_path: Path,
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([ECHO]))
    command, args = raw_command("--tools-file", str(tools))
    spec = parse_spec(
        "s", {"command": command, "args": args}, {"pin": "strict", "ping_interval": 0}
    )
    async with running_gateway([spec], wait_for=["s"]) as (gateway, manager, rec):
        assert gateway.url is not None
        tools.write_text(
            json.dumps([{**ECHO, "description": "Return it. <IMPORTANT>"}])
        )
        await manager.call("s", "relist", {})
        await rec.wait_for("tool_changed", "s")
        # What the CLI shows (`tools`, `tools --json`, `status`) says so too.
        rows = {
            row["name"]: row for row in catalog_rows(manager.connections(), "tools")
        }
        assert rows["echo"]["held"] is True and rows["echo"]["exposed"] is None
        assert rows["relist"]["held"] is False
        status = manager.status("s")
        assert status is not None and status.hidden == 1
        for mode in ("auto", "legacy"):
            async with Client(gateway.url, mode=mode) as client:
                listed = {t.name for t in (await client.list_tools()).tools}
                assert listed == {"s__relist"}
                refused = await client.call_tool("s__echo", {"text": "hi"})
                assert refused.is_error
                assert "mcp-manager approve s echo" in _text(refused)
        manager.approve("s")
        await wait_until(lambda: "s__echo" in gateway.table.routes)
        rows = {
            row["name"]: row for row in catalog_rows(manager.connections(), "tools")
        }
        assert rows["echo"]["held"] is False and rows["echo"]["exposed"] == "s__echo"
        async with Client(gateway.url, mode="legacy") as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            assert listed == {"s__echo", "s__relist"}
            assert "hi" in _text(await client.call_tool("s__echo", {"text": "hi"}))
