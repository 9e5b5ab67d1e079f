"""`mcp_policy` in a running daemon: rules from startup.lua (a Lua check of the
arguments included) judge `mcp-manager call` and an editor's `attach`, the
user answers an ask with `mcp-manager allow`, and `why` says what was denied.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client, StdioServerParameters
from servers import lua_stdio, raw_command, stdio_command
from servers.daemon import DaemonProcess, DaemonThread
from support.clients import initialize

from manager.cli import main
from manager.core.errors import CallError

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]

RULES = """\
mcp_policy("deny", {tool = "fail"})
mcp_policy("deny", {check = function(args) return args.text == "rm -rf /" end})
mcp_policy("ask", {check = function(a) return a.text == "boom" and a.text.no.x end})
mcp_policy("allow", {read_only = true})
mcp_policy("ask", {timeout = 120})
"""
"""Lines 2-6 of the script (line 1 declares the demo server)."""


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_rules_from_the_script_judge_the_cli_and_attach_and_the_user_answers(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    command, args = stdio_command()
    script = tmp_path / "startup.lua"
    hints = "{annotations = {echo = {readOnlyHint = true}}}"
    script.write_text(lua_stdio("a", command, args, hints) + RULES)
    # A desktop's notifier, standing in for notify-send: it keeps what it shows.
    bin_dir, shown_file = tmp_path / "bin", tmp_path / "notified"
    bin_dir.mkdir()
    notifier = bin_dir / "notify-send"
    notifier.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {shown_file}\n')
    notifier.chmod(0o755)
    # The daemon runs in this process (`DaemonThread`): its environment is ours.
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("DISPLAY", ":0")
    with DaemonThread(script) as daemon:
        daemon.wait_event("connected", "a")
        call = daemon.client.call
        with pytest.raises(CallError, match="denied by policy rule at startup.lua:2"):
            await anyio.to_thread.run_sync(call, "a", "fail", {"message": "x"})
        with pytest.raises(CallError, match="denied by policy rule at startup.lua:3"):
            await anyio.to_thread.run_sync(call, "a", "echo", {"text": "rm -rf /"})
        # A check that fails is an ask, naming its line: denied here, unanswered
        # (the CLI call's own timeout is the deadline).
        with pytest.raises(CallError, match="not approved within 1 s"):
            await anyio.to_thread.run_sync(
                lambda: call("a", "echo", {"text": "boom"}, timeout=1)
            )
        failed = daemon.wait_event("approval_asked", "a")
        assert "startup.lua:4: its check failed" in str(failed["rule"])
        # Read-only by the user's hint (line 5), so allowed at once.
        echoed = await anyio.to_thread.run_sync(call, "a", "echo", {"text": "hi"})
        assert echoed["isError"] is False

        # An editor through attach (2026-07-28): `add` is asked (line 6), and
        # the user allows it from another terminal.
        editor = StdioServerParameters(
            command=sys.executable,
            args=["-m", "manager", "attach", "--socket", str(daemon.socket)],
        )
        got: list[types.CallToolResult] = []
        async with Client(editor) as client:

            async def add() -> None:
                got.append(await client.call_tool("a__add", {"a": 2, "b": 5}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(add)
                asked = await anyio.to_thread.run_sync(
                    lambda: daemon.wait_event(
                        "approval_asked",
                        "a",
                        where=lambda e: e["tool"] == "add",
                    )
                )
                socket = ["--socket", str(daemon.socket)]
                assert main(["pending", *socket]) == 0
                approval = str(asked["approval"])
                assert approval in capsys.readouterr().out
                assert main(["allow", approval, *socket]) == 0
                assert "a.add: allowed" in capsys.readouterr().out
            assert not got[0].is_error and "7" in _text(got[0])
            # The desktop was told (the arguments never are).
            with anyio.fail_after(10):
                while approval not in (  # noqa: ASYNC110 - a file it writes
                    shown_file.read_text() if shown_file.exists() else ""
                ):
                    await anyio.sleep(0.05)
            assert "a.add" in shown_file.read_text()
            assert '"a": 2' not in shown_file.read_text()
            assert main(["deny", "no-such-id", *socket]) == 2
        # `why` names what was denied and by which rule, once written.
        with anyio.fail_after(10):
            while not any(  # noqa: ASYNC110 - rows are written a batch a second
                c.get("verdict") for c in daemon.client.details("a").calls
            ):
                await anyio.sleep(0.05)
    assert main(["why"]) == 0
    shown = capsys.readouterr().out
    assert "[denied by rule startup.lua:2]" in shown
    assert "[denied by rule startup.lua:3]" in shown
    assert "not approved in time, rule startup.lua:4" in shown
    assert "allowed by cli (once), rule startup.lua:6" in shown
    assert "rm -rf" not in shown  # argument values are never logged


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
def test_an_attach_client_that_exits_withdraws_its_waiting_call(
    tmp_path: Path, era: str
) -> None:
    """An editor that exits while its call through `attach` waits for
    approval: the call is withdrawn (gone from `pending`, never run)."""
    command, args = stdio_command()
    script = tmp_path / "startup.lua"
    script.write_text(
        lua_stdio("a", command, args, "{}") + 'mcp_policy("ask", {timeout = 600})\n'
    )
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "a__add", "arguments": {"a": 1, "b": 2}},
    }
    hello = initialize("editor")
    if era == "2025-11-25":
        lines = [hello, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call]
    else:
        meta = {
            "io.modelcontextprotocol/protocolVersion": era,
            "io.modelcontextprotocol/clientInfo": {"name": "editor", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        call["params"]["_meta"] = meta  # type: ignore[index]
        lines = [call]
    with DaemonThread(script) as daemon:
        daemon.wait_event("connected", "a")
        editor = subprocess.Popen(
            [sys.executable, "-m", "manager", "attach", "--socket", str(daemon.socket)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        try:
            assert editor.stdin is not None
            for line in lines:
                editor.stdin.write(json.dumps(line).encode() + b"\n")
            editor.stdin.flush()
            asked = daemon.wait_event("approval_asked", "a")
            # the editor exits: attach reads the end of its stdin and finds
            # nobody left reading its stdout
            editor.stdin.close()
            assert editor.stdout is not None
            editor.stdout.close()
            assert editor.wait(timeout=30) == 0
        finally:
            editor.kill()
            editor.wait()
        decided = daemon.wait_event(
            "approval_decided", "a", where=lambda e: e["approval"] == asked["approval"]
        )
        assert (decided["verdict"], decided["by"]) == ("deny", "withdrawn")
        assert daemon.client.pending() == []


async def test_revoke_and_why_take_a_tools_exposed_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`revoke a__add` and `why --tool a__add`: the name clients and
    `mcp-manager tools` show works where the server's own name does."""
    command, args = stdio_command()
    script = tmp_path / "startup.lua"
    script.write_text(
        lua_stdio("a", command, args, "{}") + 'mcp_policy("ask", {tool = "add"})\n'
    )
    with DaemonThread(script) as daemon:
        daemon.wait_event("connected", "a")
        socket = ["--socket", str(daemon.socket)]
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                anyio.to_thread.run_sync,
                lambda: daemon.client.call("a", "add", {"a": 1, "b": 2}),
            )
            asked = await anyio.to_thread.run_sync(
                lambda: daemon.wait_event("approval_asked", "a")
            )
            approval = str(asked["approval"])
            assert main(["allow", approval, "--always", *socket]) == 0
        capsys.readouterr()
        assert main(["revoke", "a__add", *socket]) == 0
        assert capsys.readouterr().out == "a.add: always approval taken back\n"
        with anyio.fail_after(10):
            while not any(  # noqa: ASYNC110 - rows are written a batch a second
                c.get("verdict") for c in daemon.client.details("a").calls
            ):
                await anyio.sleep(0.05)
        assert main(["why", "--tool", "a__add", *socket]) == 0
        assert "allowed by cli (always)" in capsys.readouterr().out


def test_tools_changed_exits_1_when_a_definition_differs_from_its_pin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As `pins` (and `diff`): a script can tell a changed tool by the exit."""
    command, args = stdio_command()
    script = tmp_path / "startup.lua"
    script.write_text(lua_stdio("a", command, args, "{}"))
    with DaemonThread(script) as daemon:
        daemon.wait_event("connected", "a")
        socket = ["--socket", str(daemon.socket)]
        assert main(["tools", "--changed", *socket]) == 0
        daemon.client.call("a", "add_tool", {"name": "extra"})
        daemon.wait_event("tool_changed", "a")
        capsys.readouterr()
        assert main(["tools", "--changed", *socket]) == 1
        assert "extra" in capsys.readouterr().out
        assert main(["tools", "--changed", "--json", *socket]) == 1
        assert main(["approve", "a", *socket]) == 0
        assert main(["tools", "--changed", *socket]) == 0


def test_a_cli_call_waiting_for_approval_when_the_daemon_stops_is_told_so(
    tmp_path: Path,
) -> None:
    """It was told its server had been removed from the config (found by an
    audit): the daemon's stop removes every connection, and that ended the
    waiting calls before the stop did."""
    command, args = stdio_command()
    script = tmp_path / "startup.lua"
    script.write_text(lua_stdio("a", command, args) + 'mcp_policy("ask", {})\n')
    with DaemonProcess(script) as daemon:
        daemon.wait_event("connected", "a")
        failed: list[BaseException] = []

        def call() -> None:
            try:
                daemon.client.call("a", "echo", {"text": "x"})
            except CallError as exc:
                failed.append(exc)

        caller = threading.Thread(target=call)
        caller.start()
        daemon.wait_event("approval_asked", "a")
        daemon.signal(signal.SIGTERM)
        caller.join(timeout=30)
        assert daemon.wait(30) == 0
    (said,) = failed
    assert "mcp-manager stopped while the call waited for approval" in str(said)
    assert "not sent" in str(said) and "removed" not in str(said)


@pytest.mark.parametrize("surface", ["http", "attach"])
async def test_an_endpoint_call_waiting_for_approval_when_the_daemon_stops_is_told_so(
    tmp_path: Path, surface: str
) -> None:
    """Its client heard "the server may have run it" (found by re-audit):
    the endpoint cut it with the other requests in flight before the stop's
    own answer (not sent) could reach it."""
    from mcp import Client, StdioServerParameters
    from servers import free_port
    from servers.daemon import bearer

    command, args = raw_command()
    script = tmp_path / "startup.lua"
    script.write_text(lua_stdio("a", command, args) + 'mcp_policy("ask", {})\n')
    port = free_port()
    # attach alone: no HTTP endpoint whose own stop would give it time
    listen = ("--listen", f"127.0.0.1:{port}") if surface == "http" else ()
    with DaemonProcess(script, *listen) as daemon:
        await anyio.to_thread.run_sync(daemon.wait_event, "connected", "a")
        url = f"http://127.0.0.1:{port}/mcp"
        attach = StdioServerParameters(
            command=sys.executable,
            args=["-m", "manager", "attach", "--socket", str(daemon.socket)],
        )
        server: Any = bearer(url, daemon.token) if surface == "http" else attach
        said: list[str] = []
        async with Client(server, mode="legacy") as client:
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    result = await client.call_tool("a__echo", {"text": "x"})
                    assert result.is_error
                    said.append(_text(result))

                tg.start_soon(call)
                await anyio.to_thread.run_sync(daemon.wait_event, "approval_asked", "a")
                daemon.signal(signal.SIGTERM)
        assert await anyio.to_thread.run_sync(daemon.wait, 30) == 0
    (text,) = said
    assert "mcp-manager stopped while the call waited for approval" in text, text
    assert "may have run" not in text
