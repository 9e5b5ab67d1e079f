"""`sandbox`: a stdio server confined by Landlock.

The prober server (`servers/prober.py`) tries to read a file, write one and
connect to a listening TCP port. Under `sandbox = "strict"` each outside its
rules is refused; with `sandbox = "off"` each works; a table opens exactly
what it names. The demo server runs under `strict` too. Skipped where the
kernel has no Landlock with TCP rules (ABI 4).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import Recorder
from servers import stdio_command

from manager.cli import main
from manager.core.errors import ConfigError, ConnectFailed
from manager.core.sandbox import starved
from manager.core.spec import parse_spec
from manager.engine.bus import EventBus
from manager.engine.manager import Manager
from manager.transport.stdio.confinement import LAUNCHER, landlock_abi, launcher_rules

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]

landlocked = pytest.mark.skipif(
    landlock_abi() < 4, reason="no Landlock with TCP rules on this kernel"
)

PROBER = Path(__file__).parent.parent / "servers" / "prober.py"


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that accepts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock.getsockname()[1]


def _spec(sandbox: object, name: str = "p") -> Any:
    opts = {} if sandbox is None else {"sandbox": sandbox}
    return parse_spec(name, {"command": sys.executable, "args": [str(PROBER)]}, opts)


async def _probe(spec: Any, **args: object) -> dict[str, str]:
    bus = EventBus()
    rec = Recorder(bus)
    async with Manager(bus) as manager:
        manager.add(spec)
        await rec.wait_for("connected", spec.name)
        result = await manager.call(spec.name, "probe", dict(args))
        manager.reconcile([])
    content: Any = result.data["content"]
    return json.loads(content[0]["text"])  # type: ignore[no-any-return]


@landlocked
async def test_strict_refuses_reads_writes_and_connections_outside_its_rules(
    tmp_path: Path, listener: int
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    args = {"read": str(secret), "write": str(tmp_path / "out.txt"), "port": listener}
    assert await _probe(_spec(None), **args) == {
        "read": "ok",
        "write": "ok",
        "connect": "ok",
    }
    (tmp_path / "out.txt").unlink()
    assert await _probe(_spec("strict"), **args) == {
        "read": "PermissionError",
        "write": "PermissionError",
        "connect": "PermissionError",
    }
    assert not (tmp_path / "out.txt").exists()
    opened = {"read": [str(tmp_path)], "write": [str(tmp_path)], "network": [listener]}
    assert await _probe(_spec(opened), **args) == {
        "read": "ok",
        "write": "ok",
        "connect": "ok",
    }


async def _echo_confined(
    command: str, args: list[str], arguments: dict[str, object]
) -> str:
    """Start `command` under `strict`, call its `echo`: the text it answers
    (and it ran confined, as `status` and the HUD say)."""
    spec = parse_spec("s", {"command": command, "args": args}, {"sandbox": "strict"})
    bus = EventBus()
    rec = Recorder(bus)
    async with Manager(bus) as manager:
        manager.add(spec)
        await rec.wait_for("connected", "s")
        result = await manager.call("s", "echo", arguments)
        status = manager.status("s")
        assert status is not None and status.confinement == "landlock"
        manager.reconcile([])
    content: Any = result.data["content"]
    return str(content[0]["text"])


@landlocked
async def test_the_demo_server_runs_under_strict() -> None:
    command, args = stdio_command()
    assert await _echo_confined(command, args, {"text": "confined"}) == "confined"


def test_sandbox_is_for_stdio_and_says_its_forms() -> None:
    with pytest.raises(ConfigError, match="applies to stdio servers"):
        parse_spec("h", "http://127.0.0.1:1/mcp", {"sandbox": "strict"})
    with pytest.raises(ConfigError, match='sandbox must be "off", "strict"'):
        parse_spec("s", {"command": "x"}, {"sandbox": "tight"})
    with pytest.raises(ConfigError, match="sandbox.network must be"):
        parse_spec("s", {"command": "x"}, {"sandbox": {"network": ["example.com"]}})
    with pytest.raises(ConfigError, match="must be an absolute path"):
        parse_spec("s", {"command": "x"}, {"sandbox": {"read": ["data"]}})
    with pytest.raises(ConfigError, match="sandbox_required without sandbox"):
        parse_spec("s", {"command": "x"}, {"sandbox_required": True})


def test_without_landlock_a_sandbox_is_refused_or_said_never_silent(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from manager.transport.stdio import confinement as stdio

    monkeypatch.setattr(stdio, "landlock_abi", lambda: 0)  # an older kernel
    monkeypatch.setattr(stdio, "_unconfined_told", set())
    with pytest.raises(ConnectFailed, match="sandbox is required and cannot be set"):
        stdio.confinement(
            parse_spec(
                "p", {"command": "x"}, {"sandbox": "strict", "sandbox_required": True}
            ),
            {},
        )
    loose = _spec("strict")
    for _ in range(2):
        argv, tmpdir = stdio.confinement(loose, {})
        assert argv == [sys.executable, str(PROBER)] and tmpdir is None
    said = [r.getMessage() for r in caplog.records if "UNCONFINED" in r.getMessage()]
    assert len(said) == 1 and "sandbox_required = true" in said[0]
    # What `status` and the HUD show for each (a mark: `!` unconfined).
    assert stdio.confined_as(loose).startswith("UNCONFINED: this kernel has no")
    required = {"sandbox": "strict", "sandbox_required": True}
    assert stdio.confined_as(parse_spec("p", {"command": "x"}, required)) == "refused"
    assert stdio.confined_as(_spec(None)) == "off"
    assert stdio.confined_as(parse_spec("h", "http://127.0.0.1:1/mcp")) == ""


def test_details_say_what_a_server_is_confined_to() -> None:
    from manager.core.spec import spec_summary

    shown = spec_summary(_spec({"read": ["~/d"], "network": [5432]}))
    assert shown["sandbox"] == {
        "mode": "strict",
        "read": ["~/d"],
        "write": [],
        "network": [5432],
        "required": False,
    }
    assert spec_summary(_spec("strict"))["sandbox"]["network"] == "none"  # type: ignore[index]
    assert "sandbox" not in spec_summary(_spec(None))


def test_import_keeps_vs_codes_confinement_or_refuses_it_loudly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from manager.cli import main

    servers = {
        "boxed": {"type": "stdio", "command": "npx", "args": ["-y", "pkg"],
                  "sandboxEnabled": True},
        "ruled": {"type": "stdio", "command": "npx", "args": ["-y", "other"],
                  "sandboxEnabled": True,
                  "sandbox": {"filesystem": {"allowWrite": ["/tmp/x"]}}},
        "open": {"type": "stdio", "command": "npx", "args": ["-y", "third"]},
    }  # fmt: skip
    # The user's own file (VS Code's profile folder), not a project's: a
    # project's servers are all confined on import, whatever they say.
    folder = tmp_path / "Code" / "User"
    folder.mkdir(parents=True)
    (folder / "mcp.json").write_text(json.dumps({"servers": servers}))
    assert main(["import", str(folder / "mcp.json")]) == 1  # one not imported
    captured = capsys.readouterr()
    assert 'mcp_add("boxed"' in captured.out and 'sandbox = "strict"' in captured.out
    assert 'mcp_add("open"' in captured.out
    assert 'mcp_add("ruled"' not in captured.out
    assert "ruled: not imported: VS Code confines it with rules" in captured.err
    assert captured.out.count("sandbox") == 1  # only boxed is confined


@landlocked
async def test_the_reference_server_runs_under_strict(
    everything_stdio: tuple[str, list[str]],
) -> None:
    """The official reference server (Node) under `strict`: it starts, lists,
    answers; its own package is read, nothing else is opened for it."""
    command, args = everything_stdio
    echoed = await _echo_confined(command, args, {"message": "confined"})
    assert echoed == "Echo: confined"


def test_the_launcher_refuses_what_is_not_a_rule() -> None:
    """`confine.py` takes `read=`, `write=`, `port=` and `net=limited` only,
    and a command after `--`: anything else exits 2 and runs nothing."""

    def run(*argv: str) -> int:
        command = [sys.executable, "-I", "-S", str(LAUNCHER), *argv]
        return subprocess.run(command, check=False, timeout=30).returncode

    assert run("bogus", "--", "/bin/true") == 2
    assert run("port=x", "--", "/bin/true") == 2
    assert run("read=/usr") == 2
    assert run("read=/usr", "--") == 2
    assert launcher_rules({"read": ["/a"], "write": ["/t"], "ports": [5432]}) == [
        "read=/a",
        "write=/t",
        "port=5432",
        "net=limited",
    ]
    assert launcher_rules({"read": [], "write": [], "ports": None}) == []


@pytest.mark.parametrize(
    ("command", "args", "sandbox", "lacks"),
    [
        ("npx", ["-y", "pkg"], "strict", "no TCP port 443 and no write to ~/.npm"),
        ("npx", ["-y", "pkg"], {"network": [443]}, "no write to ~/.npm"),
        ("uvx", ["mcp-server-git"], {"network": "all"}, "no write to ~/.cache/uv"),
        (
            "npx",
            ["-y", "pkg"],
            {"network": [443], "read": ["~/.npm"], "write": ["~/.npm"]},
            None,
        ),
        ("uvx", ["x"], {"network": "all", "write": ["~/.cache"]}, None),
        ("/usr/bin/node", ["server.js"], "strict", None),
        ("npx", ["-y", "pkg"], "off", None),
    ],
)
def test_a_sandbox_that_keeps_a_package_runner_from_its_registry_is_said(
    command: str, args: list[str], sandbox: object, lacks: str | None
) -> None:
    """`npx -y pkg` under `sandbox = "strict"` hangs fetching its package
    (found by the policy audit: only "no complete handshake within
    connect_timeout" was said); the reason and the fix are said instead."""
    spec = parse_spec("s", {"command": command, "args": args}, {"sandbox": sandbox})
    said = starved(spec.command or "", spec.args, spec.sandbox)
    if lacks is None:
        assert said is None
        return
    assert said is not None and f"its sandbox allows {lacks}," in said
    assert "sandbox = {network = {443}" in said


def test_check_warns_of_a_sandbox_that_starves_its_package_runner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "startup.lua"
    script.write_text(
        'mcp_add("fs", {command = "npx", args = {"-y", "@scope/server"}}, '
        '{sandbox = "strict"})\n'
    )
    assert main(["check", str(script)]) == 0
    err = capsys.readouterr().err
    assert "warning: fs: its sandbox allows no TCP port 443" in err
    assert "'npx' fetches @scope/server from its registry" in err


@landlocked
async def test_a_confined_server_refused_a_file_is_told_where_to_allow_it(
    tmp_path: Path,
) -> None:
    """A server that exits on a file the sandbox refused it (a developer's
    editable install outside the venv, say): the connection's error says the
    sandbox may be why, and where to allow it."""
    outside = tmp_path / "source.py"
    outside.write_text("x = 1\n")
    code = f"open({str(outside)!r}).read()"
    spec = parse_spec(
        "p", {"command": sys.executable, "args": ["-c", code]}, {"sandbox": "strict"}
    )
    bus = EventBus()
    rec = Recorder(bus)
    async with Manager(bus) as manager:
        manager.add(spec)
        failed = await rec.wait_for("connect_failed", "p")
    error = str(failed.error)  # type: ignore[attr-defined]
    assert "PermissionError" in error and str(outside) in error
    assert (
        "the sandbox may have refused it: give the path in its sandbox's read" in error
    )


@landlocked
def test_a_confined_server_cannot_drive_the_daemon_nor_signal_it(
    tmp_path: Path,
) -> None:
    """A server under `strict` ran as the user: it connected to the control
    socket, asked for an `ask` call of another server and allowed it itself
    (found by an audit). Now the socket asks for a key the sandbox cannot
    read, and (Landlock ABI 6) the server cannot signal the daemon."""
    from servers import lua_stdio
    from servers.daemon import DaemonProcess

    script = tmp_path / "startup.lua"
    script.write_text(
        lua_stdio("p", sys.executable, [str(PROBER)], "{sandbox = 'strict'}")
    )
    with DaemonProcess(script) as daemon:
        daemon.wait_event("connected", "p")
        key = daemon.socket.with_name("control.key")
        assert key.stat().st_mode & 0o777 == 0o600
        probe: dict[str, object] = {"read": str(key), "control": str(daemon.socket)}
        # As root (a container), the daemon's environment stays its own: the
        # capabilities that let root read it are dropped (found by re-audit).
        environ = f"/proc/{daemon.process.pid}/environ"
        if landlock_abi() >= 6:
            probe["signal"] = daemon.process.pid
        result = daemon.client.call("p", "probe", probe)
        content: Any = result["content"]
        found = json.loads(content[0]["text"])
        assert found.pop("read") == "PermissionError"
        assert found.pop("control") == "refused"
        again = daemon.client.call("p", "probe", {"read": environ})
        content = again["content"]
        assert json.loads(content[0]["text"]) == {"read": "PermissionError"}
        assert found.pop("signal", "PermissionError") == "PermissionError"
        assert "control: refused pid" in daemon.log()
        assert daemon.client.ping()  # its own clients still drive it
