"""The operator examples in config/: the Lua module and the systemd unit."""

from __future__ import annotations

import configparser
import shlex
from pathlib import Path

import pytest

from manager.cli.commands import build_parser
from manager.core.errors import ConfigError
from manager.lua import run_script

CONFIG = Path(__file__).resolve().parent.parent / "config"


def declare(source: str) -> dict[str, object]:
    result = run_script(source, config_dir=CONFIG, getenv=lambda name: None)
    return {spec.name: spec for spec in result.specs}


def test_servers_module_declares_common_servers() -> None:
    specs = declare(
        'local servers = require("servers")\n'
        'servers.demo("demo")\n'
        'servers.filesystem("files", "/srv/a", "/srv/b", {hold = 1})\n'
        'servers.memory("memory")\n'
        'servers.fetch("fetch")\n'
        'servers.git("git", "/srv/repo")\n'
        'servers.github("github")\n'
        'servers.http_with_token("internal", "https://mcp.example.com/mcp", "TOK")\n'
    )
    files = specs["files"]
    assert files.command == "npx"  # type: ignore[attr-defined]
    assert files.args[-2:] == ("/srv/a", "/srv/b")  # type: ignore[attr-defined]
    assert files.hold == 1  # type: ignore[attr-defined]
    assert specs["git"].args[-2:] == ("--repository", "/srv/repo")  # type: ignore[attr-defined]
    github = specs["github"]
    assert github.transport == "http"  # type: ignore[attr-defined]
    assert dict(github.headers) == {"Authorization": "Bearer ${env:GITHUB_TOKEN}"}  # type: ignore[attr-defined]
    assert dict(specs["internal"].headers)["Authorization"] == "Bearer ${env:TOK}"  # type: ignore[attr-defined]
    assert specs["demo"].args == ("-m", "manager.demo_server")  # type: ignore[attr-defined]


def test_servers_module_errors_point_at_the_module_line() -> None:
    with pytest.raises(ConfigError) as info:
        declare('local servers = require("servers")\nservers.filesystem("files")\n')
    assert info.value.file == "servers.lua"
    assert "give at least one directory" in info.value.message


def test_systemd_unit_runs_the_daemon_with_flags_the_cli_accepts() -> None:
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(CONFIG / "mcp-manager.service")
    service = unit["Service"]
    argv = shlex.split(service["ExecStart"])
    assert argv[0].endswith("/.venv/bin/mcp-manager")
    args = build_parser().parse_args(argv[1:])
    assert args.command == "run" and args.no_hud and args.log_format == "json"
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert service["KillMode"] == "mixed"  # SIGTERM to the daemon; it closes servers
    assert unit["Install"]["WantedBy"] == "default.target"
