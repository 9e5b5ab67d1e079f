"""`mcp-manager pins check`: each server's listing against its pins, no daemon.

The server is the stdlib raw server with its tools from a file, so a test
changes a definition by writing the file; the pins are the real files in the
test's state directory.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from fakes import Recorder
from servers import raw_command

from manager.cli import main
from manager.core.spec import parse_spec
from manager.engine.bus import EventBus
from manager.engine.manager import Manager
from manager.files import default_state_dir

pytestmark = pytest.mark.usefixtures("no_leaked_children")

ECHO = {
    "name": "echo",
    "description": "Return the text.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}


def _script(tmp_path: Path, tools: Path) -> Path:
    command, args = raw_command("--tools-file", str(tools))
    listed = ", ".join(json.dumps(a) for a in args)
    script = tmp_path / "startup.lua"
    script.write_text(
        f"mcp_add('s', {{command = {json.dumps(command)}, args = {{{listed}}}}})\n"
        "mcp_add('down', 'http://127.0.0.1:9/mcp', {connect_timeout = 1})\n"
        "mcp_add('loose', 'http://127.0.0.1:9/mcp', {pin = 'off'})\n"
    )
    return script


async def _first_use(command: tuple[str, list[str]]) -> None:
    """What a daemon does the first time it lists `s`: pin it."""
    bus = EventBus()
    rec = Recorder(bus)
    spec = parse_spec("s", {"command": command[0], "args": command[1]}, {})
    async with Manager(bus) as manager:
        manager.add(spec)
        await rec.wait_for("connected", "s")
        manager.reconcile([])


def test_pins_check_says_unpinned_then_approved_then_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([ECHO]))
    script = _script(tmp_path, tools)
    pins = default_state_dir() / "pins"

    assert main(["pins", "check", "--config", str(script)]) == 2
    out = capsys.readouterr().out
    assert "s: never pinned" in out and "down: cannot check" in out
    assert "loose" not in out  # pin = off: nothing to check
    assert not (pins / "s.json").exists()  # a check writes nothing

    anyio.run(_first_use, raw_command("--tools-file", str(tools)))
    assert (pins / "s.json").exists()
    assert main(["pins", "check", "s", "--config", str(script)]) == 0
    assert capsys.readouterr().out.strip() == "s: as approved (2 items)"

    tools.write_text(json.dumps([{**ECHO, "description": "Return it. <IMPORTANT>"}]))
    assert main(["pins", "check", "s", "--config", str(script)]) == 1
    out = capsys.readouterr().out
    assert "s: 1 not as approved" in out and "+" in out and "<IMPORTANT>" in out

    assert main(["pins", "check", "nope", "--config", str(script)]) == 2
    assert "declares no nope" in capsys.readouterr().err
