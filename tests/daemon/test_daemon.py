"""The whole daemon as an operator runs it: a child process, a real startup.lua,
real servers, signals, the control socket."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from servers import lua_stdio, raw_command
from servers.daemon import DaemonProcess

from manager.cli import main
from manager.core.info import DaemonInfo

pytestmark = pytest.mark.usefixtures("no_leaked_children")


def lua_string(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid Lua string literal here


def raw_server(name: str, *flags: str, **opts: str) -> str:
    command, args = raw_command(*flags)
    arg_list = ", ".join(lua_string(a) for a in args)
    extra = "".join(f", {k} = {v}" for k, v in opts.items())
    return (
        f"mcp_add({lua_string(name)}, {{command = {lua_string(command)}, "
        f"args = {{{arg_list}}}{extra}}})\n"
    )


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def bare_daemon(
    script: Path, sock: Path, log: Path, **popen: Any
) -> subprocess.Popen[bytes]:
    """`mcp-manager run` as its own process, with nothing of `DaemonProcess`
    between the test and it (its start, its descriptors, its signals)."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "manager", "run", str(script), "--no-hud"]
            + ["--no-telemetry", "--socket", str(sock)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            **popen,
        )


def gone(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


INFO_KEYS = (
    "version",
    "pid",
    "config",
    "last_reload",
    "watching",
    "dropped",
    "connections",
    "otlp",
    "starts",
    "listener_errors",
    "guardian",
    "profiles",
    "attached",
    "endpoint",
    "endpoint_token",
)
"""The keys of `info` on the wire, in order."""


def test_daemon_serves_status_calls_and_the_cli_and_revives_a_killed_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write(
        tmp_path / "startup.lua",
        raw_server("fast")
        + 'mcp_add("down", "http://127.0.0.1:9/mcp", {hold = 0.2})\n',
    )
    with DaemonProcess(script) as daemon:
        daemon.wait_event("connected", "fast")
        daemon.wait_event("connect_failed", "down")
        rows = {row.name: row for row in daemon.client.status()}
        assert rows["fast"].state == "connected"
        assert rows["down"].state == "reconnecting"
        assert "connection refused" in str(rows["down"].error)
        pid = rows["fast"].pid
        assert isinstance(pid, int)

        wire = daemon.client.request({"cmd": "info"})  # as any client reads it
        assert isinstance(wire, dict) and list(wire) == list(INFO_KEYS)
        info = DaemonInfo.from_dict(wire)
        assert info.config.endswith("startup.lua") and info.connections == 2
        assert info.last_reload is not None and info.last_reload.ok
        assert info.otlp == "off" and info.starts.slots > 0

        result = daemon.client.call("fast", "echo", {"text": "hello"})
        assert result["isError"] is False and "hello" in json.dumps(result)

        # The CLI commands talk to it.
        sock = ["--socket", str(daemon.socket)]
        assert main(["status", "--json", *sock]) == 0
        listed = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
        assert listed["fast"]["state"] == "connected"
        for key in ("transport", "attempt", "tools", "error", "next_retry_in"):
            assert key in listed["fast"]
        assert main(["call", "fast", "echo", '{"text": "x"}', *sock]) == 0
        assert json.loads(capsys.readouterr().out)["isError"] is False
        assert main(["call", "nope", "echo", *sock]) == 2
        assert "no connection named 'nope'" in capsys.readouterr().err
        # A tool it does not list: no call (it read as the tool's own error,
        # exit 1), and the one it is likely to be.
        assert main(["call", "fast", "ehco", *sock]) == 2
        said = capsys.readouterr().err
        assert "failed (UnknownTool): fast lists no tool 'ehco'" in said
        assert "(did you mean 'echo'?)" in said
        # Pins: nothing changed on first sight; approving what is not there
        # names what is.
        assert main(["tools", "--changed", *sock]) == 0
        assert "no changed definitions" in capsys.readouterr().out
        assert main(["approve", "nope", *sock]) == 2
        assert "declared: down, fast" in capsys.readouterr().err
        assert main(["approve", "fast", "ehco", *sock]) == 2
        assert "it lists: crash, echo, pid" in capsys.readouterr().err
        assert main(["approve", "fast", "echo", *sock]) == 0  # pinned at first sight
        assert capsys.readouterr().out == (
            "fast: nothing to approve: what it lists is as approved "
            "(see tools --changed)\n"
        )
        # Launch locks: this server's command fetches nothing to lock.
        assert main(["update", "fast", *sock]) == 2  # nothing it could take
        assert capsys.readouterr().out == (
            "fast: its command does not fetch from a registry\n"
        )
        assert main(["update", "nope", *sock]) == 2
        assert "no connection named 'nope'" in capsys.readouterr().err

        seen = daemon.events[-1]["seq"]
        os.kill(pid, signal.SIGKILL)
        lost = daemon.wait_event("disconnected", "fast", after=int(str(seen)))
        assert lost["exit_code"] == -9
        back = daemon.wait_event("connected", "fast", after=int(str(lost["seq"])))
        assert back["pid"] != pid

        daemon.signal(signal.SIGTERM)
        assert daemon.wait(within=10) == 0
        assert gone(int(str(back["pid"])))
    assert "stopped" in daemon.log()


def test_sighup_reloads_and_a_bad_reload_keeps_the_running_set(tmp_path: Path) -> None:
    script = write(tmp_path / "startup.lua", raw_server("a"))
    with DaemonProcess(script) as daemon:
        first = daemon.wait_event("connected", "a")
        write(script, raw_server("a") + raw_server("b"))
        daemon.signal(signal.SIGHUP)
        loaded = daemon.wait_event("config_loaded", after=int(str(first["seq"])))
        assert loaded["added"] == ["b"]
        daemon.wait_event("connected", "b")

        write(script, raw_server("a") + "mcp_add('c', {command = ''})\n")
        daemon.signal(signal.SIGHUP)
        error = daemon.wait_event("config_error", after=int(str(loaded["seq"])))
        assert error["line"] == 2 and "command is empty" in str(error["message"])
        # named as the script was given, as config_loaded names it
        assert error["file"] == loaded["file"] == str(script)
        names = {row.name: row.state for row in daemon.client.status()}
        assert names == {"a": "connected", "b": "connected"}


def test_a_bad_script_at_startup_exits_1_naming_file_and_line(tmp_path: Path) -> None:
    script = write(
        tmp_path / "startup.lua",
        'mcp_add("ok", "http://127.0.0.1:9/mcp")\n'
        'mcp_add("web", "http://127.0.0.1:9/mcp", {connect_timeout = "soon"})\n',
    )
    socket_dir = Path(f"/tmp/mm-bad-{os.getpid()}")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "manager",
            "run",
            str(script),
            "--socket",
            str(socket_dir / "c.sock"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1
    assert "startup.lua:2: mcp_add('web'): connect_timeout must be a number" in (
        done.stderr
    )
    if socket_dir.exists():
        for child in socket_dir.iterdir():
            child.unlink()
        socket_dir.rmdir()


def test_a_second_ctrl_c_stops_at_once_even_with_a_stubborn_server(
    tmp_path: Path,
) -> None:
    script = write(tmp_path / "startup.lua", raw_server("stubborn", "--ignore-sigterm"))
    with DaemonProcess(script) as daemon:
        ev = daemon.wait_event("connected", "stubborn")
        pid = int(str(ev["pid"]))
        daemon.signal(signal.SIGINT)
        daemon.wait_log("stopping gracefully")  # the graceful stop has begun
        started = time.monotonic()
        daemon.signal(signal.SIGINT)
        assert daemon.wait(within=10) == 130
        assert time.monotonic() - started < 1.0
        assert gone(pid)


def test_a_sigterm_as_the_daemon_starts_is_a_graceful_stop(tmp_path: Path) -> None:
    """A service manager that stops the daemon as soon as its socket is there:
    the signal handlers come first, so SIGTERM is a graceful stop (exit 0)
    that leaves no server behind. They came after the servers were spawned:
    SIGTERM then was the default death (exit 143), and the stdio servers
    already started lived on (found by a check of the CI's failures)."""
    command, args = raw_command()
    mark = f"startup-sigterm-{os.getpid()}-{time.monotonic_ns()}"
    script = write(
        tmp_path / "startup.lua",
        "".join(
            f"mcp_add({json.dumps(f's{i}')}, {{command = {json.dumps(command)}, "
            f"args = {{{', '.join(json.dumps(a) for a in args)}}}, "
            f"env = {{MARK = {json.dumps(mark)}}}}})\n"
            for i in range(3)
        ),
    )
    sock = tmp_path / "control.sock"
    log = tmp_path / "daemon.log"
    daemon = bare_daemon(script, sock, log)
    try:
        deadline = time.monotonic() + 60
        while not sock.exists():
            assert daemon.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.002)
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=60) == 0, log.read_text()
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    left = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("MARK") == mark:
                left.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    assert left == []


def test_descriptors_the_daemon_inherits_are_not_passed_to_its_servers(
    tmp_path: Path,
) -> None:
    """An inheritable descriptor its launcher left open (an editor's pipe)
    stays with the daemon: its servers get their stdio, not that. And a
    low limit of open files is raised (a stdio server holds four)."""
    command, args = raw_command()
    script = tmp_path / "startup.lua"
    script.write_text(lua_stdio("fast", command, args))
    sock = tmp_path / "control.sock"
    read, leaked = os.pipe()
    os.set_inheritable(leaked, True)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    log = tmp_path / "daemon.log"
    daemon = bare_daemon(
        script,
        sock,
        log,
        pass_fds=(leaked,),
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)),
    )
    os.close(leaked)
    try:
        pipe = f"pipe:[{os.fstat(read).st_ino}]"
        assert pipe in {os.readlink(f"/proc/{daemon.pid}/fd/{leaked}")}
        deadline = time.monotonic() + 30
        server = None
        while server is None:  # the daemon's one stdio server, once started
            assert time.monotonic() < deadline, log.read_text()
            kids = [
                p
                for p in psutil.Process(daemon.pid).children()
                if "raw_legacy" in " ".join(p.cmdline())
            ]
            server = kids[0] if kids else None
            time.sleep(0.05)
        held = {
            os.readlink(f"/proc/{server.pid}/fd/{fd}")
            for fd in os.listdir(f"/proc/{server.pid}/fd")
        }
        assert pipe not in held
        soft = psutil.Process(daemon.pid).rlimit(psutil.RLIMIT_NOFILE)[0]
        assert soft == (65536 if hard == resource.RLIM_INFINITY else min(hard, 65536))
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(15) == 0
        os.close(read)
