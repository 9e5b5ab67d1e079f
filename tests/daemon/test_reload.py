"""Editing startup.lua while the daemon runs: reload on save, SIGHUP and the CLI;
Lua hooks and calls against real servers."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from servers import raw_command, stdio_command
from servers.daemon import DaemonThread

from manager.cli import main

pytestmark = pytest.mark.usefixtures("no_leaked_children")


def server(name: str, *flags: str, extra: str = "") -> str:
    command, args = raw_command(*flags)
    arg_list = ", ".join(json.dumps(a) for a in args)
    return (
        f"mcp_add({json.dumps(name)}, {{command = {json.dumps(command)}, "
        f"args = {{{arg_list}}}{extra}}})\n"
    )


def save(path: Path, text: str, *, atomic: bool) -> None:
    if atomic:  # the way most editors save: write a new file, rename it over
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    else:
        path.write_text(text)


def seq(event: dict[str, object]) -> int:
    return int(str(event["seq"]))


def test_saving_touches_exactly_the_added_removed_and_changed_connections(
    tmp_path: Path,
) -> None:
    # One daemon, saved in place, then by rename, then in place again: each
    # save touches exactly what it added, removed and changed, whichever way
    # the save before it was made.
    script = tmp_path / "startup.lua"
    script.write_text(server("keep") + server("gone") + server("change"))
    with DaemonThread(script) as daemon:
        for name in ("keep", "gone", "change"):
            daemon.wait_event("connected", name)
        keep_pid = {r.name: r.pid for r in daemon.client.status()}["keep"]
        removed = "gone"
        for hold, atomic in enumerate((False, True, False), start=1):
            added = f"new{hold}"
            mark = daemon.events[-1]
            save(
                script,
                server("keep")
                + server("change", extra=f", hold = {hold}")
                + server(added),
                atomic=atomic,
            )
            loaded = daemon.wait_event("config_loaded", after=seq(mark))
            assert loaded["added"] == [added]
            assert loaded["removed"] == [removed]
            assert loaded["changed"] == ["change"]
            assert loaded["unchanged"] == 1
            daemon.wait_event("connected", added, after=seq(mark))
            daemon.wait_event("connected", "change", after=seq(mark))
            daemon.wait_event("removed", removed, after=seq(mark))
            touched = {str(e["name"]) for e in daemon.events if seq(e) > seq(mark)}
            assert "keep" not in touched
            rows = {r.name: r for r in daemon.client.status()}
            assert rows["keep"].pid == keep_pid
            assert set(rows) == {"keep", "change", added}
            removed = added


BROKEN = [
    ("local = 5\n", 3, "<name> expected near '='"),
    ("local t = nil\nprint(t.field)\n", 4, "attempt to index a nil value"),
    (
        "mcp_add('x', 'http://127.0.0.1:9/mcp', {hold = 'long'})\n",
        3,
        "hold must be a number of seconds",
    ),
    ("while true do end\n", 3, "time budget"),
]
"""Broken endings for a good two-line script: syntax, runtime, type, endless loop;
each with the line and the message its error names."""


def test_a_broken_save_changes_nothing_and_reports_the_line(tmp_path: Path) -> None:
    # One daemon takes every broken save in turn: each is reported with its
    # own line and message and changes nothing, also after a broken save.
    good = server("a") + server("b")
    script = tmp_path / "startup.lua"
    script.write_text(good)
    with DaemonThread(script) as daemon:
        daemon.wait_event("connected", "a")
        daemon.wait_event("connected", "b")
        before = {r.name: r.pid for r in daemon.client.status()}
        first = daemon.events[-1]
        for bad, line, message in BROKEN:
            mark = daemon.events[-1]
            save(script, good + bad, atomic=True)
            error = daemon.wait_event("config_error", after=seq(mark))
            assert error["line"] == line, bad
            assert message in str(error["message"]), bad
            assert not [e for e in daemon.events if seq(e) > seq(mark) and e["name"]]
            assert {r.name: r.pid for r in daemon.client.status()} == before
            last = daemon.client.info().last_reload
            assert last is not None and last.ok is False
            assert last.line == line and message in last.message, bad
        assert not [e for e in daemon.events if seq(e) > seq(first) and e["name"]]


def test_twenty_saves_in_a_second_make_one_reload(tmp_path: Path) -> None:
    script = tmp_path / "startup.lua"
    script.write_text(server("a"))
    with DaemonThread(script) as daemon:
        daemon.wait_event("connected", "a")
        mark = daemon.events[-1]
        for i in range(20):
            save(
                script,
                server("a") + f"-- save {i}\n" + server(f"n{i}"),
                atomic=i % 2 == 0,
            )
            # 20 ms apart: 10x inside the quiet window (RELOAD_QUIET, 0.2 s),
            # and the burst (about 0.4 s) well inside RELOAD_MAX_DELAY (2 s)
            # on a loaded machine too (at 50 ms apart, one loaded run crossed
            # that cap and saw two reloads).
            time.sleep(0.02)
        last = daemon.wait_event("connected", "n19", after=seq(mark))
        loads = [
            e
            for e in daemon.events
            if e["kind"] == "config_loaded" and seq(e) > seq(mark)
        ]
        assert len(loads) == 1
        assert loads[0]["added"] == ["n19"]
        assert seq(last) > seq(loads[0])


def test_cli_reload_reports_what_changed_and_bad_scripts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "startup.lua"
    script.write_text(server("a"))
    with DaemonThread(script) as daemon:
        up = daemon.wait_event("connected", "a")
        sock = ["--socket", str(daemon.socket)]
        assert main(["reload", *sock]) == 0
        out = capsys.readouterr().out
        assert "is unchanged: already applied at" in out
        assert "by the daemon at start; 1 connection(s), nothing to do" in out
        # The watcher applies an edit first: reload says so, not "0 added".
        mark = daemon.wait_event("config_loaded", after=seq(up))  # that reload
        script.write_text(server("a") + server("b"))
        daemon.wait_event("config_loaded", after=seq(mark))
        assert main(["reload", *sock]) == 0
        assert "already applied at" in (out := capsys.readouterr().out)
        assert "by the file watcher; 2 connection(s)" in out
        script.write_bytes(b"")  # an empty script is valid: everything goes
        os.utime(script)
        # a bad script through the CLI: exit 1 with file:line
        script.write_text(server("a") + "error('nope')\n")
        assert main(["reload", *sock]) == 1
        assert "startup.lua:2: nope" in capsys.readouterr().err
        assert [r.name for r in daemon.client.status()] == ["a", "b"]


def test_a_reload_that_changes_only_the_policy_or_a_profile_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, a reload that changed only `mcp_policy` or `mcp_profile` said
    "0 added, 0 removed, 0 changed" (found by an audit)."""
    script = tmp_path / "startup.lua"
    script.write_text(server("a"))
    rules = 'mcp_policy("deny", {tool = "echo"})\nmcp_profile("p", {servers = {"a"}})\n'
    with DaemonThread(script) as daemon:
        up = daemon.wait_event("connected", "a")
        script.write_text(server("a") + rules)
        loaded = daemon.wait_event("config_loaded", after=seq(up))
        assert loaded["settings"] == ["policy", "profile p"]
        assert loaded["changed"] == [] and loaded["unchanged"] == 1
        script.write_text(
            "-- moved down a line: nothing changed\n" + server("a") + rules
        )
        moved = daemon.wait_event("config_loaded", after=seq(loaded))
        assert moved["settings"] == []
        script.write_text(server("a"))
        assert main(["reload", "--socket", str(daemon.socket)]) == 0
        out = capsys.readouterr().out
        assert "also changed: policy, profile p" in out or "already applied" in out
        gone = daemon.wait_event("config_loaded", after=seq(moved))
        assert gone["settings"] == ["policy", "profile p"]


def test_editing_a_module_reloads_even_in_a_config_dir_made_after_the_start(
    tmp_path: Path,
) -> None:
    """The README: saving `config/*.lua` modules reloads too. Before, the
    watcher saw the save but compared only startup.lua's content ("saved
    without changes"), and a `config/` made after the start was not watched
    (found by an audit)."""
    script = tmp_path / "startup.lua"
    script.write_text(server("a"))
    with DaemonThread(script) as daemon:
        up = daemon.wait_event("connected", "a")
        modules = tmp_path / "config"
        modules.mkdir()
        (modules / "more.lua").write_text("return 5\n")
        script.write_text(
            'local t = require("more")\n' + server("a", extra=", connect_timeout = t")
        )
        first = daemon.wait_event(
            "config_loaded", after=seq(up), where=lambda e: e["changed"] == ["a"]
        )
        (modules / "more.lua").write_text("return 6\n")
        again = daemon.wait_event("config_loaded", after=seq(first))
        assert again["changed"] == ["a"]
        spec = daemon.client.details("a").spec
        assert spec["connect_timeout"] == 6


def test_a_save_that_empties_the_file_first_does_not_remove_everything(
    tmp_path: Path,
) -> None:
    """An editor or a script that truncates the file and writes it a moment
    later: the empty file in between is not applied at once (it would
    remove every connection and start them again; found by an audit)."""
    script = tmp_path / "startup.lua"
    script.write_text(server("a"))
    with DaemonThread(script) as daemon:
        up = daemon.wait_event("connected", "a")
        script.write_bytes(b"")
        daemon.wait_log("startup.lua is empty: waiting 2 s for the rest of the save")
        script.write_text(server("a") + server("b"))
        loaded = daemon.wait_event("config_loaded", after=seq(up))
        assert loaded["added"] == ["b"] and loaded["removed"] == []
        assert not [e for e in daemon.events if e["kind"] == "removed"]
        script.write_bytes(b"")  # and meant: applied once the wait is over
        gone = daemon.wait_event("config_loaded", after=seq(loaded))
        assert gone["removed"] == ["a", "b"]


def test_a_startup_lua_symlink_pointed_elsewhere_reloads_and_follows(
    tmp_path: Path,
) -> None:
    """A startup.lua that is a symlink into a dotfiles directory: pointing it
    at another file reloads, and that file's later edits do too (before, the
    watcher watched only the first target's directory; found by an audit)."""
    dots = tmp_path / "dots"
    dots.mkdir()
    (dots / "one.lua").write_text(server("a"))
    (dots / "two.lua").write_text(server("a") + server("b"))
    home = tmp_path / "home"
    home.mkdir()
    script = home / "startup.lua"
    script.symlink_to(dots / "one.lua")
    with DaemonThread(script) as daemon:
        up = daemon.wait_event("connected", "a")
        relinked = home / ".startup.lua.new"
        relinked.symlink_to(dots / "two.lua")
        os.replace(relinked, script)  # ln -sfn, atomically
        first = daemon.wait_event("config_loaded", after=seq(up))
        assert first["added"] == ["b"]
        (dots / "two.lua").write_text(server("a"))  # an edit of the new target
        second = daemon.wait_event("config_loaded", after=seq(first))
        assert second["removed"] == ["b"]


def test_hooks_and_calls_run_against_real_servers(tmp_path: Path) -> None:
    script = tmp_path / "startup.lua"
    script.write_text(
        server("fast")
        + 'mcp_add("down", "http://127.0.0.1:9/mcp", {hold = 0.1})\n'
        + 'mcp_on("connected", function(e)\n'
        + '  if e.name ~= "fast" then return end\n'
        + '  mcp_call("fast", "echo", {text = "from lua"}, function(r, err)\n'
        + '    print("echo:", r.content[1].text)\n'
        + '    mcp_add("spawned", "http://127.0.0.1:9/mcp")\n'
        + "  end)\n"
        + '  mcp_call("down", "echo", {}, function(r, err) print("down:", err) end)\n'
        + "end)\n"
        + 'mcp_on("connected", function(e) error("hook broke on " .. e.name) end)\n'
        + 'mcp_on("added", function(e) while true do end end)\n'
        + "mcp_async(function()\n"
        + '  local r, err = mcp_await("fast", "echo", {text = "awaited"})\n'
        + '  print("await:", r.content[1].text)\n'
        + "end)\n"
    )
    with DaemonThread(script) as daemon:
        daemon.wait_event("added", "spawned")  # added by the mcp_call callback
        failures = [e for e in daemon.events if e["kind"] == "hook_error"]
        assert any(
            e["line"] == 11 and "hook broke on fast" in str(e["message"])
            for e in failures
        )
        daemon.wait_event(
            "hook_error", where=lambda e: "time budget" in str(e["message"])
        )
        assert "spawned" in {r.name for r in daemon.client.status()}
        daemon.wait_log("echo:\tfrom lua")
        daemon.wait_log("await:\tawaited")
        daemon.wait_log("down:\tdown is reconnecting")
        assert "connection refused" in daemon.log()
        # a reload drops the old hooks: the new script has none
        mark = daemon.events[-1]
        script.write_text(server("fast"))
        daemon.wait_event("config_loaded", after=seq(mark))
        daemon.client.reconnect("fast")
        os.kill(int(str(daemon.client.status()[0].pid)), signal.SIGKILL)
        daemon.wait_event("connected", "fast", after=seq(mark))
        assert not [
            e for e in daemon.events if e["kind"] == "hook_error" and seq(e) > seq(mark)
        ]


def demo(name: str) -> str:
    command, args = stdio_command()
    arg_list = ", ".join(json.dumps(a) for a in args)
    return (
        f"mcp_add({json.dumps(name)}, {{command = {json.dumps(command)}, "
        f"args = {{{arg_list}}}}})\n"
    )


def test_scripts_read_resources_and_get_prompts(tmp_path: Path) -> None:
    script = tmp_path / "startup.lua"
    script.write_text(
        demo("fast")
        + 'mcp_on("connected", function(e)\n'
        + '  mcp_read("fast", "demo://readme", function(r, err)\n'
        + '    print("read:", r.contents[1].uri)\n'
        + "  end)\n"
        + '  mcp_prompt("fast", "greet", {name = "Ada"}, function(r, err)\n'
        + '    print("prompt:", r.messages[1].content.text)\n'
        + "  end)\n"
        + '  mcp_read("fast", "nowhere://x", function(r, err)\n'
        + '    print("missing:", err)\n'
        + "  end)\n"
        + "  mcp_async(function()\n"
        + '    local r = mcp_await_read("fast", "demo://items/7")\n'
        + '    local p = mcp_await_prompt("fast", "greet", {name = "Bo"})\n'
        + '    print("awaited:", r.contents[1].text, p.messages[1].content.text)\n'
        + "  end)\n"
        + "end)\n"
        + 'mcp_on("connected", function(e) mcp_read("fast", "x") end)\n'
    )
    with DaemonThread(script) as daemon:
        daemon.wait_log("read:\tdemo://readme")
        daemon.wait_log("prompt:\tHello, Ada!")
        daemon.wait_log("awaited:\titem 7\tHello, Bo!")
        daemon.wait_log(
            "missing:\tresources/read rejected by the server: "
            "resource not found: nowhere://x (MCP error -32002)"
        )
        daemon.wait_event(
            "hook_error",
            where=lambda e: (
                "mcp_read(server, uri, fn) takes 3 arguments" in str(e["message"])
            ),
        )
