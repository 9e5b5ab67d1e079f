"""The call log: one row per call, argument shapes never values, bounded.

The writer is the real one (SQLite in the test's state directory); the
endpoint and the CLI are real too. Rows are written in batches every second
by the daemon; tests flush the batch themselves (`CallLog.flush`) or stop the
daemon (the last batch is written on the way out) instead of waiting.
"""

from __future__ import annotations

import json
import signal
import stat
from pathlib import Path

import anyio
import pytest
from mcp import Client
from memory import MemoryServers
from servers import lua_stdio, raw_command
from servers.daemon import DaemonProcess, DaemonThread
from support.gateway import demo_memory, running_gateway

from manager.cli import main
from manager.core.profile import parse_profile
from manager.engine import calllog
from manager.engine.calllog import (
    CallLog,
    CallRecord,
    logged_arguments,
    read,
    shape_of,
)
from manager.files import default_state_dir

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]


def _record(tool: str = "t", at: float = 1.0, outcome: str = "ok") -> CallRecord:
    return CallRecord(at, "c", "", "s", tool, "{}", outcome, "", 0.1, 3)


def test_a_shape_names_keys_and_types_never_values() -> None:
    shape = shape_of(
        {"token": "s3cret", "n": 3, "ok": True, "tags": ["a"], "x": None, "o": {}}
    )
    assert json.loads(shape) == {
        "token": "string",
        "n": "number",
        "ok": "boolean",
        "tags": "array",
        "x": "null",
        "o": "object",
    }
    assert "s3cret" not in shape and shape_of(None) == "{}"


def test_a_shape_is_written_the_same_whatever_came_before() -> None:
    """Shapes are remembered (every call's path) in a bounded table: the
    same keys in any order give one text, a value's type still counts, and
    a table that filled up starts again without changing any answer."""
    first = shape_of({"b": 1, "a": "x"})
    assert first == shape_of({"a": "y", "b": 2}) == '{"a":"string","b":"number"}'
    assert shape_of({"a": 1, "b": 2}) == '{"a":"number","b":"number"}'
    for n in range(calllog.SHAPES_KEPT + 10):
        assert shape_of({f"k{n}": n}) == f'{{"k{n}":"number"}}'
    assert shape_of({"b": 1, "a": "x"}) == first


def test_rows_are_written_in_batches_private_and_bounded(tmp_path: Path) -> None:
    log = CallLog(tmp_path / "state", keep_days=1, max_rows=3)
    for i in range(5):
        log.record(_record(f"t{i}", at=9e9))  # far future: not too old
    log.flush()
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600
    rows = read(tmp_path / "state")
    assert [row["tool"] for row in rows] == ["t2", "t3", "t4"]  # the newest 3
    log.record(_record("old", at=1.0))  # 1970: older than a day
    log.flush()
    assert "old" not in [row["tool"] for row in read(tmp_path / "state")]
    assert read(tmp_path / "nothing") == []


def test_rows_read_in_the_order_the_calls_started(tmp_path: Path) -> None:
    """A row is written when its call ends: a long call started first and
    ended last still reads first (the `time` column is its start)."""
    log = CallLog(tmp_path / "state")
    log.record(_record("short", at=9e9 + 1))  # ended first
    log.record(_record("long", at=9e9))  # started first, ended later
    log.flush()
    assert [row["tool"] for row in read(tmp_path / "state")] == ["long", "short"]


def test_a_full_queue_or_a_bad_disk_drops_and_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(calllog, "QUEUE", 2)
    log = CallLog(tmp_path)
    for _ in range(3):
        log.record(_record())
    assert log.dropped == 1
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    bad = CallLog(blocked)  # its state directory is a file
    bad.record(_record())
    bad.record(_record())
    bad.flush()
    bad.record(_record())
    bad.flush()
    assert bad.dropped == 3
    said = [r for r in caplog.records if "cannot write" in r.getMessage()]
    assert len(said) == 1  # once, not per batch


async def test_calls_through_the_endpoint_are_logged_with_client_and_profile(
    capsys: pytest.CaptureFixture[str],
) -> None:
    view = parse_profile("view", {"servers": ["a"]})
    async with running_gateway(
        [demo_memory("a")], wait_for=["a"], memory=MemoryServers()
    ) as running:
        gateway, manager, _ = running
        manager.profiles = {"view": view}
        async with Client(f"{gateway.url}/view", mode="legacy") as client:
            await client.call_tool("a__echo", {"text": "s3cret-arg"})
            await client.call_tool("a__fail", {})
        async with Client(str(gateway.url)) as client:  # 2026-07-28
            await client.call_tool("a__echo", {"text": "x"})
        manager.calls.flush()
    rows = read()
    assert [(r["tool"], r["outcome"], r["profile"]) for r in rows] == [
        ("echo", "ok", "view"),
        ("fail", "tool_error", "view"),
        ("echo", "ok", ""),
    ]
    assert rows[0]["client"] == rows[2]["client"] == "mcp"  # the SDK's default name
    assert rows[0]["shape"] == '{"text":"string"}' and rows[0]["bytes"] >= 10
    assert "s3cret-arg" not in (default_state_dir() / "calls.sqlite3").read_text(
        errors="replace"
    )
    assert main(["log", "--failed", "--json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["tool"] == "fail"
    assert main(["log", "--server", "a", "--since", "1h"]) == 0
    header, *printed = capsys.readouterr().out.splitlines()
    assert (
        header.split() == "TIME CALL OUTCOME TOOK SIZE CLIENT ARGUMENTS ERROR".split()
    )
    assert len(printed) == 3 and "a.echo  ok" in printed[0] and "/view" in printed[0]
    assert f"  {rows[0]['bytes']} B  " in printed[0]  # under 1 kB: as it is
    # Columns line up under their titles.
    for title in ("OUTCOME", "CLIENT", "ARGUMENTS"):
        at = header.index(title)
        assert all(line[at - 2 : at] == "  " and line[at] != " " for line in printed)
    assert main(["log", "--since", "yesterday"]) == 2


async def test_a_call_whose_client_hangs_up_is_logged_once_as_cancelled() -> None:
    """An HTTP client that hangs up while its call runs (it reached the
    server), or while it waits for approval (withdrawn), left no row (found
    by an audit): only the CLI's calls were logged however they ended."""
    from manager.core.policy import parse_rule

    ask = parse_rule("ask", {"tool": "echo", "timeout": 60}, "startup.lua:2")
    async with running_gateway(
        [demo_memory("a")], wait_for=["a"], memory=MemoryServers()
    ) as running:
        gateway, manager, rec = running
        manager.policy.set_rules((ask,), None)
        cases: list[tuple[str, dict[str, object], str]] = [
            ("a__sleep", {"seconds": 30}, "call_started"),
            ("a__echo", {"text": "x"}, "approval_asked"),
        ]
        for tool, arguments, waits_for in cases:
            async with anyio.create_task_group() as tg:

                async def call(
                    tool: str = tool, arguments: dict[str, object] = arguments
                ) -> None:
                    async with Client(str(gateway.url), mode="legacy") as client:
                        await client.call_tool(tool, arguments)

                tg.start_soon(call)
                await rec.wait_for(waits_for, "a")
                tg.cancel_scope.cancel()  # the client hangs up
            await rec.wait_for(
                "call_failed" if tool == "a__sleep" else "approval_decided", "a"
            )
        manager.calls.flush()
    rows = [(r["tool"], r["outcome"], r["error"], r["verdict"]) for r in read()]
    assert rows[0] == ("sleep", "failed", "Cancelled", "")
    assert rows[1][:3] == ("echo", "failed", "Cancelled")
    assert rows[1][3].startswith("withdrawn by its caller")
    assert len(rows) == 2


async def test_a_secret_in_a_client_s_name_or_an_argument_s_name_is_masked() -> None:
    """A client named after a secret, or a secret used as an argument's
    name, was shown whole by `pending`, the approval events and `log`
    (found by an audit): masked like a secret value."""
    from mcp.types import Implementation

    from manager.core.policy import parse_rule

    secret = "supersecretvalue-XYZZY-123456"
    ask = parse_rule("ask", {"tool": "echo", "timeout": 60}, "startup.lua:2")
    async with running_gateway(
        [demo_memory("a")], wait_for=["a"], memory=MemoryServers()
    ) as running:
        gateway, manager, rec = running
        manager.secrets.add([secret])
        manager.policy.set_rules((ask,), None)
        me = Implementation(name=f"evil-{secret}", version="1")
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                async with Client(
                    str(gateway.url), mode="legacy", client_info=me
                ) as client:
                    await client.call_tool("a__echo", {"text": "x", secret: 1})

            tg.start_soon(call)
            asked = await rec.wait_for("approval_asked", "a")
            (pending,) = manager.policy.pending()
            manager.policy.answer(pending.approval, "allow", "once", "cli")
        # A tool name is a client's too (the server answers "unknown tool").
        async with Client(str(gateway.url), mode="legacy") as client:
            await client.call_tool(f"a__{secret}", {})
        manager.calls.flush()
    # The call's events (its tool's name) too: the HUD, `events`, the spans.
    shown = [repr(pending), json.dumps(read()), *map(repr, rec.events)]
    assert all(secret not in text for text in shown), shown
    assert any(getattr(e, "tool", "") == "***" for e in rec.events)
    assert "evil-***" in repr(asked)


async def test_a_cli_call_is_logged_and_the_last_rows_outlive_the_daemon(
    tmp_path: Path,
) -> None:
    command, args = raw_command()
    script = tmp_path / "startup.lua"
    script.write_text(lua_stdio("fast", command, args))
    with DaemonProcess(script) as daemon:
        daemon.wait_event("connected", "fast")
        await anyio.to_thread.run_sync(
            daemon.client.call, "fast", "echo", {"text": "hi"}
        )
        # The details show it at once, written or still queued.
        (shown,) = daemon.client.details("fast").calls
        assert (shown["client"], shown["tool"], shown["outcome"]) == (
            "cli",
            "echo",
            "ok",
        )
        daemon.signal(signal.SIGTERM)
        assert await anyio.to_thread.run_sync(daemon.wait, 10) == 0
    (row,) = read()
    assert (row["client"], row["server"], row["tool"], row["outcome"]) == (
        "cli",
        "fast",
        "echo",
        "ok",
    )


def test_log_and_details_show_a_call_at_once_not_a_batch_later(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The daemon writes its log in batches (here: an hour apart). `details`
    adds the calls still queued, and `mcp-manager log` has the daemon write
    them first: a call shows the moment it returned, and once only."""
    monkeypatch.setattr(calllog, "FLUSH_EVERY", 3600.0)
    command, args = raw_command()
    script = tmp_path / "startup.lua"
    script.write_text(lua_stdio("fast", command, args))
    with DaemonThread(script) as daemon:
        daemon.wait_event("connected", "fast")
        daemon.client.call("fast", "echo", {"text": "hi"})
        (shown,) = daemon.client.details("fast").calls
        assert (shown["client"], shown["tool"]) == ("cli", "echo")
        assert read() == []  # not written yet
        assert main(["log", "--json", "--socket", str(daemon.socket)]) == 0
        (line,) = capsys.readouterr().out.splitlines()
        assert json.loads(line)["tool"] == "echo"
        assert len(read()) == 1
        assert len(daemon.client.details("fast").calls) == 1  # not twice
    assert capsys.readouterr().err == ""  # nothing dropped, nothing said


def test_log_without_a_daemon_reads_the_file_and_says_nothing_of_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log = CallLog(default_state_dir())
    log.record(_record("kept", at=9e9))
    log.flush()
    assert main(["log", "--json", "--socket", "/nonexistent/control.sock"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["tool"] == "kept" and out.err == ""


async def test_log_arguments_keeps_values_with_secrets_masked() -> None:
    token = "ghp_" + "x" * 36
    spec = demo_memory("a", log_arguments=True)
    async with running_gateway(
        [spec, demo_memory("b")], wait_for=["a", "b"], memory=MemoryServers()
    ) as (
        gateway,
        manager,
        _,
    ):
        async with Client(str(gateway.url)) as client:
            await client.call_tool("a__echo", {"text": f"visible {token}"})
            await client.call_tool("b__echo", {"text": "hidden"})
        manager.calls.flush()
    shapes = {row["server"]: row["shape"] for row in read()[-2:]}
    assert json.loads(shapes["a"]) == {"text": "***"}  # a token's shape: masked
    assert shapes["b"] == '{"text":"string"}'  # values only where asked
    assert logged_arguments({"text": "plain", "n": 2}, True) == '{"text":"plain","n":2}'
    assert logged_arguments({"api_key": "abcdefghij"}, True) == '{"api_key":"***"}'
