"""`mcp-manager import` and `client-config` (cli/importing, clients, translate).

Each client's sample in `samples/` (written from that client's documentation,
whose address its first comment gives) is put where that client keeps it on a
made-up machine ($HOME, $XDG_CONFIG_HOME and the current directory under
tmp_path), imported with `main(["import", CLIENT])`, and the printed Lua is
loaded with the project's own loader (`manager.lua.load_file`, what `check`
runs): each server must come back with the sample's transport, command, args
and URL, and no secret of the sample may appear in what was printed.
`mcp-manager check` itself runs as a subprocess (as `--write` runs it) once,
on the import of every client at once, to keep this file fast.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from manager.cli import main
from manager.cli.clients import (
    ClientServer,
    Section,
    UnreadableFile,
    Unusable,
    candidate_files,
    read_servers,
    strip_jsonc,
)
from manager.cli.config_commands import CLIENTS
from manager.cli.translate import (
    Translator,
    Untranslatable,
    connection_name,
    holds_secret,
    looks_secret,
    lua_statement,
    secret_key,
)
from manager.core.spec import ConnectionSpec
from manager.lua import load_file, run_script

SAMPLES = Path(__file__).parent / "samples"
SAMPLE_PROJECT = "/home/me/code/webapp"
"""The project directory the Claude Code sample names; the test's replaces it."""


@dataclass(frozen=True)
class Machine:
    """A made-up machine: its home and the project directory we stand in."""

    home: Path
    project: Path


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Machine:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("USERPROFILE", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("APPDATA", str(home / "AppData" / "Roaming"))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    # No daemon here (nor a real one of this machine's) to check profiles with.
    monkeypatch.setenv("MCP_MANAGER_SOCKET", str(tmp_path / "none" / "control.sock"))
    monkeypatch.chdir(project)
    return Machine(home, project)


@dataclass(frozen=True)
class Server:
    """What must survive the round trip (secrets are `${env:NAME}` by then)."""

    transport: str
    command: str = ""
    args: tuple[str, ...] = ()
    url: str = ""


@dataclass(frozen=True)
class Case:
    """One client's sample files, where they go, and what they declare.

    Attributes:
        files: (sample file, index in `candidate_files(client)`).
        servers: What the import must declare; `{project}` in an arg is the
            project directory.
        secrets: Values that must never be printed.
        exports: Variables stderr must tell the user to export.
    """

    files: tuple[tuple[str, int], ...]
    servers: dict[str, Server]
    secrets: tuple[str, ...]
    exports: tuple[str, ...] = field(default=())


NPX = "npx"
CASES: dict[str, Case] = {
    "claude-desktop": Case(
        files=(("claude_desktop_config.json", 0),),
        servers={
            "filesystem": Server(
                "stdio",
                NPX,
                (
                    "-y",
                    "@modelcontextprotocol/server-filesystem",
                    "/Users/me/Desktop",
                    "/Users/me/Downloads",
                ),
            ),
            "github": Server(
                "stdio", NPX, ("-y", "@modelcontextprotocol/server-github")
            ),
            "linear": Server(
                "stdio",
                NPX,
                (
                    "-y",
                    "mcp-remote",
                    "https://mcp.linear.app/sse",
                    "--header",
                    "Authorization: Bearer ${env:LINEAR_AUTHORIZATION}",
                ),
            ),
        },
        secrets=(
            "ghp_YFXRaeR4hIWbFUtS56G811emx2aPeGeUzUNk",
            "lin_api_KrlUzxH0146wlQyJf5ZaBsD1Utptb23C",
        ),
        exports=("GITHUB_PERSONAL_ACCESS_TOKEN", "LINEAR_AUTHORIZATION"),
    ),
    "claude-code": Case(
        files=((".claude.json", 0), (".mcp.json", 1)),
        servers={
            "sentry": Server("http", url="https://mcp.sentry.dev/mcp"),
            "stripe": Server("http", url="https://mcp.stripe.com"),
            "asana": Server("sse", url="https://mcp.asana.com/sse"),
            "airtable": Server("stdio", NPX, ("-y", "airtable-mcp-server")),
            "postgres": Server(
                "stdio",
                NPX,
                (
                    "-y",
                    "@modelcontextprotocol/server-postgres",
                    "postgresql://app:${env:POSTGRES_URL_PASSWORD}@localhost:5432/webapp",
                ),
            ),
            "api-server": Server("http", url="https://api.example.com/mcp"),
            "playwright": Server("stdio", NPX, ("@playwright/mcp@latest",)),
        },
        secrets=(
            "sk_live_Qgvb8J8mvsHhwbm1ItJh0koYlPK4TH2S",
            "patX7dnmPLASAP3iCYdZQLgIAaIspX.4652cc2736d77b05a5cf9b27507344ef",
            "s3cr3t-Pw0rd",
        ),
        exports=("STRIPE_AUTHORIZATION", "AIRTABLE_API_KEY", "API_KEY"),
    ),
    "cursor": Case(
        files=(("mcp.json", 0),),
        servers={
            "brave-search": Server(
                "stdio", NPX, ("-y", "@modelcontextprotocol/server-brave-search")
            ),
            "context7": Server("http", url="https://mcp.context7.com/mcp"),
            "slack": Server("sse", url="https://slack-mcp.example.com/sse"),
        },
        secrets=("BSAtt0PndAmXXRWnx7dnmPLASAP3iC", "xoxb-uhOUSzTAG1-py9SM1XwOkZv"),
        exports=("BRAVE_API_KEY", "SLACK_AUTHORIZATION", "CONTEXT7_API_KEY"),
    ),
    "vscode": Case(
        files=((".vscode/mcp.json", 2),),
        servers={
            "perplexity": Server("stdio", NPX, ("-y", "server-perplexity-ask")),
            "repo-tools": Server(
                "stdio", "node", ("{project}/tools/mcp.js", "--verbose")
            ),
            "github": Server("http", url="https://api.githubcopilot.com/mcp/"),
            "legacy": Server("sse", url="http://localhost:3001/sse"),
        },
        secrets=(
            "sk-proj-HfirHpo0TrpHW4jqVHAdcBu1XfkWbBp6GaXvgO0b",
            "glpat-0JcCqBPktxbjrKuJGfgX",
        ),
        exports=("PERPLEXITY_KEY", "OPENAI_API_KEY", "GITHUB_AUTHORIZATION"),
    ),
    "windsurf": Case(
        files=(("mcp_config.json", 0),),
        servers={
            "github": Server(
                "stdio", NPX, ("-y", "@modelcontextprotocol/server-github")
            ),
            "figma": Server("http", url="https://mcp.figma.com/mcp"),
            "zapier": Server(
                "sse", url="https://actions.zapier.com/mcp/${env:ZAPIER_URL_SECRET}/sse"
            ),
            "puppeteer": Server(
                "stdio", NPX, ("-y", "@modelcontextprotocol/server-puppeteer")
            ),
        },
        secrets=(
            "ghp_YFXRaeR4hIWbFUtS56G811emx2aPeGeUzUNk",
            "figd_tt0PndAmXXRWnx7dnmPLASAP3iCYdZQLgIAaIspX",
            "Qgvb8J8mvsHhwbm1ItJh0koYlPK4TH2S",
        ),
        exports=("FIGMA_AUTHORIZATION", "ZAPIER_URL_SECRET"),
    ),
    "gemini": Case(
        files=(("settings.json", 0),),
        servers={
            "pythonTools": Server(
                "stdio", "python", ("-m", "my_mcp_server", "--port", "8080")
            ),
            "httpServerWithAuth": Server("http", url="http://localhost:3000/mcp"),
            "sseServer": Server("sse", url="https://api.example.com/sse"),
            "filteredServer": Server("stdio", "python", ("-m", "my_mcp_server")),
        },
        secrets=("xoxb-uhOUSzTAG1-py9SM1XwOkZv", "Qgvb8J8mvsHhwbm1ItJh0koYlPK4TH2S"),
        exports=("SLACK_BOT_TOKEN", "DB_CONNECTION_STRING", "EXTERNAL_API_KEY"),
    ),
    "codex": Case(
        files=(("config.toml", 0),),
        servers={
            "context7": Server("stdio", NPX, ("-y", "@upstash/context7-mcp")),
            "docs": Server("stdio", "docs-server", ("--port", "4000")),
            "figma": Server("http", url="https://mcp.figma.com/mcp"),
            "internal": Server("http", url="https://mcp.internal.example.com/mcp"),
        },
        secrets=(
            "ctx7sk-4652cc27-36d7-7b05-a5cf-9b27507344ef",
            "tt0PndAmXXRWnx7dnmPLASAP3iCYdZQLgIAaIspX",
        ),
        exports=("CONTEXT7_API_KEY", "INTERNAL_AUTHORIZATION", "FIGMA_OAUTH_TOKEN"),
    ),
}
ALL_SECRETS = sorted({secret for case in CASES.values() for secret in case.secrets})


def place(client: str, machine: Machine) -> list[Path]:
    """Put `client`'s samples where it keeps them; return their paths."""
    placed = []
    for sample, index in CASES[client].files:
        destination = candidate_files(client)[index]
        destination.parent.mkdir(parents=True, exist_ok=True)
        text = (SAMPLES / client / sample).read_text(encoding="utf-8")
        project = json.dumps(str(machine.project))[1:-1]
        destination.write_text(text.replace(SAMPLE_PROJECT, project), encoding="utf-8")
        placed.append(destination)
    return placed


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def declared(text: str, where: Path) -> dict[str, Server]:
    """What `text` declares, read by the project's Lua loader."""
    where.write_text(text, encoding="utf-8")
    return {
        spec.name: Server(spec.transport, spec.command, spec.args, spec.url)
        for spec in load_file(where).specs
    }


# ------------------------------------------------------------------ round trip


@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_s_servers_come_back_from_the_lua_with_no_secret_printed(
    client: str, machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    case = CASES[client]
    files = place(client, machine)

    code, out, err = run(capsys, "import", client)

    assert code == 0, err
    expected = {
        name: Server(
            server.transport,
            server.command,
            tuple(a.replace("{project}", str(machine.project)) for a in server.args),
            server.url,
        )
        for name, server in case.servers.items()
    }
    assert declared(out, machine.project / "imported.lua") == expected
    for secret in ALL_SECRETS:
        assert secret not in out and secret not in err, secret
    for export in case.exports:
        assert export in err
    for path in files:
        assert f"read {path}" in err
        assert f"-- from {path}" in out


def test_importing_every_client_passes_check_and_names_duplicates_once(
    machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    for client in CLIENTS:
        place(client, machine)

    code, everything, err = run(capsys, "import")  # no argument: every client

    assert code == 0, err
    path = machine.project / "imported.lua"
    path.write_text(everything, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "manager", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    imported = sum(len(case.servers) for case in CASES.values()) - 4
    assert f"imported.lua: OK, {imported} connections" in done.stdout
    # github is in the Claude Desktop, VS Code and Windsurf samples, context7
    # and figma in Cursor's or Windsurf's and Codex's: the first file read
    # wins, the others are named as skipped.
    assert everything.count('mcp_add("github"') == 1
    desktop = candidate_files("claude-desktop")[0]
    assert (
        f"{candidate_files('windsurf')[0]}: github: skipped: 'github' was already "
        f"imported from {desktop} (the first one wins)"
    ) in err
    # Claude Code's other project is not this directory's: left, and said so.
    assert "elsewhere-only" not in everything
    assert "1 other project(s) have servers of their own" in err
    for secret in ALL_SECRETS:
        assert secret not in everything and secret not in err


def test_client_settings_become_mcp_add_options(
    machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    by_client = {}
    for client in ("codex", "gemini", "windsurf"):
        place(client, machine)
        code, out, _ = run(capsys, "import", client)
        assert code == 0
        path = machine.project / f"{client}.lua"
        path.write_text(out, encoding="utf-8")
        by_client[client] = {spec.name: spec for spec in load_file(path).specs}
    specs = by_client["codex"]

    internal = specs["internal"]  # codex: enabled = false, enabled_tools, headers
    assert not internal.enabled
    assert internal.exposure.tools.allow == ("search", "summarize")
    assert dict(internal.headers) == {
        "Authorization": "Bearer ${env:INTERNAL_AUTHORIZATION}",
        "X-Tenant": "${env:TENANT_ID}",
    }
    context7 = specs["context7"]  # codex: timeouts, env
    assert (context7.connect_timeout, context7.call_timeout) == (20.0, 60.0)
    assert dict(context7.env) == {"CONTEXT7_API_KEY": "${env:CONTEXT7_API_KEY}"}
    assert dict(specs["docs"].env) == {"DOCS_TOKEN": "${env:DOCS_TOKEN}"}
    assert dict(specs["figma"].headers) == {
        "Authorization": "Bearer ${env:FIGMA_OAUTH_TOKEN}",
        "X-Figma-Region": "us-east-1",
    }
    specs = by_client["gemini"]
    python_tools = specs["pythonTools"]  # gemini: $VAR, ${VAR}, ms timeouts, cwd
    assert dict(python_tools.env) == {
        "API_KEY": "${env:EXTERNAL_API_KEY}",
        "DATABASE_URL": "${env:DB_CONNECTION_STRING}",
        "SLACK_BOT_TOKEN": "${env:SLACK_BOT_TOKEN}",
    }
    assert python_tools.call_timeout == 15.0
    assert python_tools.cwd == "/home/me/mcp-servers/python"
    assert specs["filteredServer"].exposure.tools.allow == (
        "safe_tool",
        "file_reader",
        "data_processor",
    )
    assert not by_client["windsurf"]["puppeteer"].enabled  # "disabled": true


# ---------------------------------------------------------------- bad input


def test_unparseable_json_is_named_with_its_line_and_column(
    machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    path = candidate_files("cursor")[0]
    path.parent.mkdir(parents=True)
    path.write_text('{\n  "mcpServers": {\n    "a": {"command": "x"}\n    "b": {}\n}}')

    code, out, err = run(capsys, "import", "cursor")

    assert code == 2
    assert out == ""
    assert f"{path}:4:5: not valid JSON: Expecting ',' delimiter" in err


def test_unparseable_toml_is_named_with_its_line_and_column(
    machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    path = machine.project / "config.toml"
    path.write_text('[mcp_servers.a]\ncommand = "x"\nargs = "a" "b"\n')

    code, _, err = run(capsys, "import", str(path))

    assert code == 2
    assert f"{path}:3:12: not valid TOML: " in err


def test_a_broken_file_does_not_hide_the_others_but_stops_a_write(
    machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    place("codex", machine)
    broken = candidate_files("cursor")[0]
    broken.parent.mkdir(parents=True)
    broken.write_text("{ not json")

    code, out, err = run(capsys, "import")
    assert code == 2
    assert 'mcp_add("docs"' in out
    assert f"{broken}:1:3: not valid JSON" in err

    code, out, err = run(capsys, "import", "--write")
    assert code == 2
    assert "nothing written to startup.lua" in err
    assert not (machine.project / "startup.lua").exists()


def test_servers_that_cannot_be_expressed_are_named_and_the_others_imported(
    machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    path = machine.project / ".vscode" / "mcp.json"
    path.parent.mkdir()
    path.write_text(
        """{"servers": {
        "fine": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"]},
        "dotenv": {"type": "stdio", "command": "node", "envFile": ".env"},
        "socket": {"type": "websocket", "url": "ws://localhost:9000"},
        "nothing": {"type": "stdio", "args": ["--flag"]},
        "picker": {"type": "stdio", "command": "x", "args": ["${command:pickFile}"]}
        }}"""
    )

    code, out, err = run(capsys, "import", str(path))

    assert code == 1
    assert declared(out, machine.project / "imported.lua") == {
        "fine": Server("stdio", "uvx", ("mcp-server-fetch",))
    }
    assert f"{path}: dotenv: not imported: envFile loads variables from a file" in err
    assert f"{path}: socket: not imported: type 'websocket' is no transport" in err
    assert f'{path}: nothing: not imported: a stdio entry needs "command"' in err
    assert f"{path}: picker: not imported: args[1] uses ${{command:pickFile}}" in err


def test_names_become_connection_names_and_the_renames_are_said(
    machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    path = machine.project / "mcp.json"
    long = "x" * 70
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "My Server!": {"command": "a"},
                    "my__tools": {"command": "b"},
                    "-dash": {"command": "c"},
                    long: {"command": "d"},
                }
            }
        )
    )

    code, out, err = run(capsys, "import", str(path))

    assert code == 0
    names = list(declared(out, machine.project / "imported.lua"))
    assert names == ["My-Server", "my_tools", "dash", "x" * 64]
    assert f"{path}: My Server!: renamed to 'My-Server'" in err


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("github", "github"),
        ("a.b-c_d", "a.b-c_d"),
        ("My Server (prod)", "My-Server-prod"),
        ("a__b", "a_b"),
        ("@scope/pkg", "scope-pkg"),
        ("___", "server"),
    ],
)
def test_connection_name_keeps_valid_names_and_mends_the_others(
    name: str, expected: str
) -> None:
    assert connection_name(name) == expected


# ---------------------------------------------------------------------- write


def test_a_write_that_check_refuses_leaves_the_file_byte_identical(
    machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    place("vscode", machine)
    config = machine.project / "startup.lua"
    # "github" declared through a variable: the textual skip misses it, and
    # the VS Code github server then makes the file declare it twice.
    before = b'local name = "github"\r\nmcp_add(name, {command = "other"})'
    config.write_bytes(before)

    code, _, err = run(capsys, "import", "vscode", "--write", "--yes")

    assert code == 2
    assert "startup.lua:" in err and "declared twice" in err
    assert "nothing written: startup.lua would not load" in err
    assert config.read_bytes() == before
    assert sorted(p.name for p in machine.project.iterdir()) == [
        ".vscode",
        "startup.lua",
    ]


def test_a_write_appends_after_check_and_keeps_the_old_file(
    machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    (source,) = place("vscode", machine)
    config = machine.project / "startup.lua"
    before = b'mcp_add("legacy", {command = "my-legacy-server"})'
    config.write_bytes(before)

    code, out, err = run(capsys, "import", "vscode", "--write", "--yes")

    assert code == 0, err
    assert out == (
        "startup.lua: added 3 connections (perplexity, repo-tools, github); "
        "the previous file is startup.lua.bak\n"
    )
    assert f"{source}: legacy: skipped: startup.lua already declares 'legacy'" in err
    assert (machine.project / "startup.lua.bak").read_bytes() == before
    after = config.read_bytes()
    assert after.startswith(before + b"\n\n-- from ")
    names = [spec.name for spec in load_file(config).specs]
    assert names == ["legacy", "perplexity", "repo-tools", "github"]

    # Again, with one more server: the first backup stays, the next is .bak.1.
    text = source.read_text().replace(
        '"servers": {', '"servers": {"new": {"command": "n"},'
    )
    source.write_text(text)
    code, out, err = run(capsys, "import", "vscode", "--write", "--yes")
    assert code == 0, err
    assert "added 1 connection (new); the previous file is startup.lua.bak.1" in out
    assert (machine.project / "startup.lua.bak.1").read_bytes() == after
    assert (machine.project / "startup.lua.bak").read_bytes() == before

    code, out, err = run(capsys, "import", "vscode", "--write", "--yes")
    assert code == 0
    assert "nothing to add: startup.lua is unchanged" in err


def test_a_project_files_servers_are_guarded_and_written_only_with_consent(
    machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    """`.vscode/mcp.json` came with the folder: its servers are imported with
    `pin = "strict"` (and stdio ones sandboxed), and `--write` shows each
    exact command and writes nothing without consent (no terminal here)."""
    place("vscode", machine)
    config = machine.project / "startup.lua"

    code, out, err = run(capsys, "import", "vscode")
    assert 'pin = "strict"' in out and 'sandbox = "strict"' in out
    assert "from a project file: imported with pin" in err

    code, _, err = run(capsys, "import", "vscode", "--write")
    assert code == 2 and not config.exists()
    assert "these servers come from a project file and would run:" in err
    assert "repo-tools (" in err and "run again with --yes" in err

    code, _, err = run(capsys, "import", "vscode", "--write", "--yes")
    assert code == 0, err
    specs = {spec.name: spec for spec in load_file(config).specs}
    assert all(spec.pin == "strict" for spec in specs.values())
    assert all(
        spec.sandbox.mode == "strict"
        for spec in specs.values()
        if spec.transport == "stdio"
    )


def test_a_project_file_named_by_its_path_is_guarded_too(
    machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    """`import proj/.mcp.json` from outside the project: the same guard and
    consent as from inside it (it had neither)."""
    clone = machine.project / "proj"
    clone.mkdir()
    (clone / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"repo-tool": {"command": "npx", "args": ["x"]}}}),
        encoding="utf-8",
    )
    config = machine.project / "startup.lua"
    code, out, err = run(capsys, "import", "proj/.mcp.json")
    assert 'pin = "strict"' in out and 'sandbox = "strict"' in out
    code, _, err = run(capsys, "import", "proj/.mcp.json", "--write")
    assert code == 2 and not config.exists()
    assert "repo-tool (" in err and "run again with --yes" in err


def test_the_user_s_own_cursor_file_is_no_project_s(
    machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    """~/.cursor/mcp.json is the user's: not guarded as a project's, and its
    `${workspaceFolder}` depends on the folder Cursor has open (it became the
    home directory)."""
    (machine.home / ".cursor").mkdir()
    (machine.home / ".cursor" / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "mine": {"command": "node", "args": ["/opt/s.js"]},
                    "here": {"command": "node", "args": ["${workspaceFolder}/s.js"]},
                }
            }
        ),
        encoding="utf-8",
    )
    code, out, err = run(capsys, "import", "cursor")
    assert code == 1
    assert "pin" not in out and "mine" in out
    assert "${workspaceFolder}, which depends on the folder the editor has open" in err
    assert str(machine.home / "s.js") not in out


# -------------------------------------------------------------- client-config


class _AnySocket:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and other.endswith("control.sock")


ANY_SOCKET = _AnySocket()


@pytest.mark.parametrize("client", CLIENTS)
def test_client_config_prints_an_entry_that_runs_attach(
    client: str, machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "client-config", client, "--profile", "work")

    assert code == 0
    if client == "codex":
        entry = tomllib.loads(out)["mcp_servers"]["mcp-manager"]
    else:
        top = "servers" if client == "vscode" else "mcpServers"
        entry = json.loads(out)[top]["mcp-manager"]
    # The socket is named: the client passes on no XDG_RUNTIME_DIR.
    assert entry["args"] == ["attach", "--socket", ANY_SOCKET, "--profile", "work"]
    assert Path(entry["args"][2]).name == "control.sock"
    command = entry["command"]
    assert command == "mcp-manager" or Path(command).is_absolute()
    assert Path(command).name.startswith("mcp-manager")
    if client == "vscode":
        assert entry["type"] == "stdio"
    assert str(candidate_files(client)[0]) in err


def test_client_config_quotes_an_odd_name(
    machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "client-config", "codex", "--name", 'my "hub"')
    assert code == 0
    args = tomllib.loads(out)["mcp_servers"]['my "hub"']["args"]
    assert args[:2] == ["attach", "--socket"] and len(args) == 3


def test_client_commands_import_no_heavy_library(machine: Machine) -> None:
    sample = SAMPLES / "cursor" / "mcp.json"
    script = (
        "import sys\n"
        "from manager.cli import main\n"
        "main(['client-config', 'cursor'])\n"
        f"main(['import', {str(sample)!r}])\n"
        "heavy = ('anyio', 'mcp', 'lupa', 'textual', 'opentelemetry', 'rich')\n"
        "print('LOADED', [m for m in heavy if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stdout


# ----------------------------------------------------------- the pure helpers


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("GITHUB_PERSONAL_ACCESS_TOKEN", True),
        ("API_KEY", True),
        ("Authorization", True),
        ("X-Api-Key", True),
        ("DB_PASSWORD", True),
        ("GITHUB_PAT", True),
        ("AUTH_HEADER", True),
        ("clientCredential", True),
        ("PATH", False),
        ("PYTHONPATH", False),
        ("LOG_LEVEL", False),
        ("Accept", False),
        # Names that only mention a secret's word hold none (import asked the
        # user to export each of these as a secret):
        ("MAX_TOKENS", False),
        ("max-tokens", False),
        ("TOKENIZER", False),
        ("KEYBOARD_LAYOUT", False),
        ("PRIMARY_KEY_COLUMN", False),
        ("SSH_AUTH_SOCK", False),
        ("TOKEN_URL", False),
        ("PASSWORD_FILE", False),
        ("key-file", False),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("SLACK_BOT_TOKEN", True),
        ("apiKey", True),
    ],
)
def test_secret_key_knows_a_secret_s_name(key: str, secret: bool) -> None:
    assert secret_key(key) is secret


@pytest.mark.parametrize(
    ("value", "secret"),
    [
        ("Bearer abc", True),
        ("ghp_YFXRaeR4hIWbFUtS56G811emx2aPeGeUzUNk", True),
        ("sk-ant-api03-abcdefghijklmnop", True),
        ("xoxp-1234-5678-abcdefgh", True),
        ("glpat-0JcCqBPktxbjrKuJGfgX", True),
        ("4652cc2736d77b05a5cf9b27507344ef", True),
        ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY123", True),
        ("postgres://app:pw@localhost/db", True),
        ("https://api.example.com/mcp", False),
        ("@modelcontextprotocol/server-filesystem", False),
        ("mcp-server-filesystem-2024", False),
        ("python3.11-site-packages-2024", False),
        ("/Users/me/Desktop/projects/2024-report", False),
        ("getUserProfileInformation2", False),
        ("true", False),
    ],
)
def test_looks_secret_tells_tokens_from_words_paths_and_versions(
    value: str, secret: bool
) -> None:
    assert looks_secret(value) is secret


def test_strip_jsonc_blanks_comments_and_trailing_commas_but_not_strings() -> None:
    text = '{\n  // a comment\n  "url": "http://x//y", /* more */\n  "a": [1, 2,],\n}'
    stripped = strip_jsonc(text)
    assert json.loads(stripped) == {"url": "http://x//y", "a": [1, 2]}
    assert [len(line) for line in stripped.splitlines()] == [
        len(line) for line in text.splitlines()
    ]


def test_the_lua_strings_written_read_back_the_same(
    machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = ['quote " here', "back\\slash", "line\nbreak", "bell\a1", "ünï", "]]=]"]
    path = machine.project / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"odd": {"command": "x", "args": odd}}}))

    code, out, _ = run(capsys, "import", str(path))

    assert code == 0
    (spec,) = run_script(out).specs
    assert list(spec.args) == odd


# ------------------------------------------------------- reading clients' files


def read_one(tmp_path: Path, filename: str, text: str) -> ClientServer | Unusable:
    """The one server of a file `filename` holding `text`."""
    path = tmp_path / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    ((_, servers),) = read_servers(path).sections
    (server,) = servers
    return server


@pytest.mark.parametrize(
    ("filename", "text", "reason"),
    [
        (
            "mcp.json",
            '{"mcpServers": {"s": {"command": "x", "url": "http://h/mcp"}}}',
            "has both a command and 'url': keep one",
        ),
        (
            "mcp.json",
            '{"mcpServers": {"s": {"url": "http://a/mcp", "serverUrl": "http://b"}}}',
            "has url and serverUrl: keep one URL",
        ),
        (
            "mcp.json",
            '{"mcpServers": {"s": {"command": "x", "headersHelper": "get-token"}}}',
            "headersHelper runs a program",
        ),
        ("mcp.json", '{"mcpServers": {"s": {}}}', 'no "command" to run and no "url"'),
        ("mcp.json", '{"mcpServers": {"s": {"command": " "}}}', '"command" is empty'),
        (
            "mcp.json",
            '{"mcpServers": {"s": {"command": "x", "args": "a b"}}}',
            "'args' must be a list of strings, got a string",
        ),
        (
            "mcp.json",
            '{"mcpServers": {"s": {"command": "x", "env": ["A=1"]}}}',
            "'env' must be an object of strings, got a list",
        ),
        (
            "mcp.json",
            '{"mcpServers": {"s": {"command": "x", "args": [{"a": 1}]}}}',
            "'args' must be a string, got an object",
        ),
        (
            "mcp.json",
            '{"mcpServers": {"s": {"command": 1}}}',
            "'command' must be a string, got a number",
        ),
        (
            "mcp.json",
            '{"mcpServers": {"s": {"type": "http", "command": "x"}}}',
            "type 'http' with a command",
        ),
        (
            "mcp.json",
            '{"mcpServers": {"s": "npx server"}}',
            "expected an object of settings, got a string",
        ),
        (
            ".gemini/settings.json",
            '{"mcpServers": {"s": {"httpUrl": "https://h/mcp", '
            '"authProviderType": "google_credentials"}}}',
            "Gemini's own login",
        ),
        (
            ".vscode/mcp.json",
            '{"servers": {"s": {"type": "stdio", "command": ""}}}',
            '"command" is empty',
        ),
        (
            ".vscode/mcp.json",
            '{"servers": {"s": {"type": "http"}}}',
            'no "command" to run and no "url"',
        ),
        (
            ".vscode/mcp.json",
            '{"servers": {"s": {"type": "http", "url": "unix:///tmp/s.sock"}}}',
            "must be an http:// or https:// URL",
        ),
        (  # Claude Code's documented form: the host comes from a variable
            ".mcp.json",
            '{"mcpServers": {"s": {"type": "http", '
            '"url": "${API_BASE_URL:-https://api.example.com}/mcp"}}}',
            "starts with a variable (${API_BASE_URL:-https://api.example.com}/mcp)"
            ": mcp-manager needs the scheme and host written out; write the URL "
            "(with its default: https://api.example.com/mcp)",
        ),
        ("config.toml", '[mcp_servers.s]\nargs = ["x"]\n', "no command to run"),
        (
            "config.toml",
            '[mcp_servers.s]\ncommand = "x"\nurl = "https://h/mcp"\n',
            "has both a command and a url",
        ),
        ("config.toml", '[mcp_servers.s]\ncommand = ""\n', "command is empty"),
        (
            "config.toml",
            '[mcp_servers.s]\ncommand = "x"\nexperimental_environment = "remote"\n',
            "Codex's remote executor",
        ),
        (
            "config.toml",
            '[mcp_servers.s]\ncommand = "x"\n'
            'env_vars = [{ name = "T", source = "remote" }]\n',
            "Codex's remote executor",
        ),
        (
            "config.toml",
            '[mcp_servers.s]\ncommand = "x"\nenv_vars = "T"\n',
            "env_vars must be a list of names, got a string",
        ),
        (
            "config.toml",
            '[mcp_servers.s]\nurl = "https://h/mcp"\nbearer_token_env_var = "a b"\n',
            "bearer_token_env_var must name an environment variable",
        ),
    ],
)
def test_an_entry_mcp_manager_cannot_express_says_why(
    tmp_path: Path, filename: str, text: str, reason: str
) -> None:
    server = read_one(tmp_path, filename, text)
    assert isinstance(server, Unusable)
    assert reason in server.reason


@pytest.mark.parametrize(
    ("filename", "text", "note"),
    [
        (
            "mcp.json",
            '{"mcpServers": {"s": {"command": "x", "frobnicate": 1}}}',
            "ignored 'frobnicate' (mcp-manager has no such setting)",
        ),
        (
            "mcp.json",
            '{"mcpServers": {"s": {"command": "x", "timeout": 30}}}',
            "ignored 'timeout' (its unit differs between clients)",
        ),
        (
            "mcp.json",
            '{"mcpServers": {"s": {"command": "x", "headers": {"A": "b"}}}}',
            "ignored 'headers' (a stdio server gets no headers)",
        ),
        (
            "mcp.json",
            '{"mcpServers": {"s": {"url": "https://h/mcp", "env": {"A": "b"}}}}',
            "ignored 'env' (a remote server runs no program)",
        ),
        (
            "mcp.json",
            '{"mcpServers": {"s": {"url": "https://h/m", "oauth": {"clientId": "c"}}}}',
            "its OAuth settings were not imported",
        ),
        (
            ".gemini/settings.json",
            '{"mcpServers": {"s": {"command": "x", "timeout": -5}}}',
            "ignored 'timeout': outside 0 to 24 hours",
        ),
        (
            ".gemini/settings.json",
            '{"mcpServers": {"s": {"command": "x", "timeout": "soon"}}}',
            "ignored 'timeout': not a number",
        ),
        (
            "mcp.json",
            '{"mcpServers": {"s": {"command": "x", "env": {"A": null}}}}',
            "ignored env.A (null: unset in the client)",
        ),
        (
            ".vscode/mcp.json",
            '{"servers": {"s": {"url": "https://h/mcp", "oauth": {"clientId": "c"}}}}',
            "its OAuth settings were not imported",
        ),
        (
            "config.toml",
            '[mcp_servers.s]\nurl = "https://h/mcp"\nscopes = ["read"]\n',
            "its OAuth settings were not imported",
        ),
    ],
)
def test_what_an_entry_loses_on_the_way_is_noted(
    tmp_path: Path, filename: str, text: str, note: str
) -> None:
    server = read_one(tmp_path, filename, text)
    assert isinstance(server, ClientServer)
    assert any(n.startswith(note) for n in server.notes), server.notes


@pytest.mark.parametrize(
    ("url", "transport"),
    [
        ("https://h/mcp", "http"),
        ("https://h/sse", "sse"),
        ("https://h/sse/?key=1", "sse"),
        ("https://h/sse-like", "http"),
    ],
)
def test_a_url_without_a_type_is_sse_only_when_its_path_ends_in_sse(
    tmp_path: Path, url: str, transport: str
) -> None:
    text = json.dumps({"mcpServers": {"s": {"url": url}}})
    server = read_one(tmp_path, ".cursor/mcp.json", text)
    assert isinstance(server, ClientServer)
    assert server.transport == transport


def test_scalar_values_become_strings(tmp_path: Path) -> None:
    text = '{"mcpServers": {"s": {"command": "x", "args": [1, 2.5, true]}}}'
    server = read_one(tmp_path, "mcp.json", text)
    assert isinstance(server, ClientServer)
    assert server.args == ("1", "2.5", "true")


@pytest.mark.parametrize(
    ("filename", "text", "client"),
    [
        ("claude_desktop_config.json", '{"mcpServers": {}}', "claude-desktop"),
        ("home/.claude.json", '{"mcpServers": {}}', "claude-code"),
        ("exported.json", '{"projects": {}}', "claude-code"),
        ("proj/.mcp.json", '{"mcpServers": {}}', "claude-code"),
        ("proj/.cursor/mcp.json", '{"mcpServers": {}}', "cursor"),
        ("mcp_config.json", '{"mcpServers": {}}', "windsurf"),
        ("a.json", '{"mcpServers": {"s": {"serverUrl": "https://h"}}}', "windsurf"),
        ("a.json", '{"mcpServers": {"s": {"httpUrl": "https://h"}}}', "gemini"),
        ("proj/.gemini/settings.json", '{"mcpServers": {}}', "gemini"),
        ("settings.json", '{"mcp": {"servers": {}}}', "vscode"),
        ("a.json", '{"servers": {}}', "vscode"),
        ("a.toml", "[mcp_servers]\n", "codex"),
        ("a.json", '{"mcpServers": {}}', "mcpServers"),
    ],
)
def test_a_file_s_name_and_shape_tell_which_client_wrote_it(
    tmp_path: Path, filename: str, text: str, client: str
) -> None:
    path = tmp_path / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    assert read_servers(path).client == client


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"[]", "found no MCP servers: expected"),
        (b'{"other": 1}', "found no MCP servers: expected"),
        (b'{"mcpServers": []}', "'mcpServers' must be an object of servers"),
        (b'{"mcp": {"servers": 1}}', '"mcp": {"servers" must be an object'),
        (b'{"mcpServers": {}} /* open', "not valid JSON: Unterminated /* comment"),
        (b'{"mcpServers": {"\xff": {}}}', "not UTF-8 text (byte 17)"),
    ],
)
def test_a_file_that_is_no_client_s_is_refused_with_the_reason(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(content)
    with pytest.raises(UnreadableFile, match=re.escape(message)):
        read_servers(path)


def test_import_of_something_that_is_neither_client_nor_file_fails(
    machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "import", "emacs")
    assert code == 2
    assert "emacs is neither a client (claude-desktop, claude-code" in err
    code, _, err = run(capsys, "import", "cursor")
    assert code == 2
    assert "found no Cursor's configuration; looked for " in err


# ------------------------------------------------------------------ translate


def stdio(*args: str, **env: str) -> ClientServer:
    return ClientServer("s", "stdio", command="x", args=args, env=tuple(env.items()))


VSCODE_PROJECT = Section(Path("/p/.vscode/mcp.json"), "vscode", workspace=Path("/p"))
CLAUDE_CODE = Section(Path("/p/.mcp.json"), "claude-code", workspace=Path("/p"))
GEMINI = Section(Path("/home/me/.gemini/settings.json"), "gemini")
VSCODE_USER = Section(Path("/home/me/.config/Code/User/mcp.json"), "vscode")


@pytest.mark.parametrize(
    ("section", "arg", "expected"),
    [
        (VSCODE_PROJECT, "${workspaceFolder}/a", "/p/a"),
        (VSCODE_PROJECT, "${workspaceFolderBasename}", "p"),
        (VSCODE_PROJECT, "${userHome}/x", "/home/me/x"),
        (VSCODE_PROJECT, "a${pathSeparator}b", f"a{os.sep}b"),
        (VSCODE_PROJECT, "${env:TOKEN_FILE}", "${env:TOKEN_FILE}"),
        (VSCODE_PROJECT, "${input:api-key}", "${env:API_KEY}"),
        (CLAUDE_CODE, "${HOME}/x", "${env:HOME}/x"),
        (CLAUDE_CODE, "${PORT:-8080}", "${env:PORT}"),
        (GEMINI, "$HOME/x and ${USER}", "${env:HOME}/x and ${env:USER}"),
        (CLAUDE_CODE, "$HOME", "$HOME"),  # only Gemini expands a bare $NAME
    ],
)
def test_client_templates_become_env_references_or_what_they_stand_for(
    section: Section, arg: str, expected: str
) -> None:
    declaration = Translator(Path("/home/me")).declaration("s", stdio(arg), section)
    assert declaration.fields["args"] == [expected]


@pytest.mark.parametrize(
    ("section", "arg", "reason"),
    [
        (VSCODE_USER, "${workspaceFolder}/a", "depends on the folder the editor"),
        (VSCODE_PROJECT, "${HOME}", "uses ${HOME}, which mcp-manager cannot fill in"),
        (CLAUDE_CODE, "${command:pick}", "cannot fill in"),
        pytest.param(CLAUDE_CODE, "\ud800", "not valid Unicode", id="surrogate"),
        pytest.param(CLAUDE_CODE, "nul\x00", "NUL bytes", id="nul"),
    ],
)
def test_what_mcp_add_would_refuse_is_untranslatable(
    section: Section, arg: str, reason: str
) -> None:
    with pytest.raises(Untranslatable, match=re.escape(reason)):
        Translator(Path("/home/me")).declaration("s", stdio(arg), section)


@pytest.mark.parametrize(
    ("value", "held"),
    [
        ('{"Authorization": "Bearer ntn_1234567890abc", "Notion-Version": "1"}', True),
        ("Server=db;User Id=sa;Password=Sup3rS3cret!;", True),
        ("host=db user=app password=hunter22 sslmode=require", True),
        ("see postgres://app:pw@localhost/db for the data", True),
        ("--header=X-Key ghp_YFXRaeR4hIWbFUtS56G811emx2aPeGeUzUNk", True),
        ('{"Notion-Version": "2022-06-28"}', False),
        ("Basic configuration of the server", False),
        ("region=eu;mode=fast;max_tokens=4096", False),
        ("https://example.com/a@b", False),
    ],
)
def test_holds_secret_finds_a_credential_among_other_text(
    value: str, held: bool
) -> None:
    assert holds_secret(value) is held


def test_a_value_holding_a_secret_becomes_a_reference_whole() -> None:
    """Notion's documented setup puts its token in a JSON env value, a .NET
    server its password in a connection string: neither key names a secret,
    and both were written to startup.lua in clear."""
    translator = Translator(Path("/home/me"))
    headers = '{"Authorization": "Bearer ntn_1234567890abc", "Notion-Version": "1"}'
    connection = "Server=db;User Id=sa;Password=Sup3rS3cret!;"
    got = translator.declaration(
        "notion",
        stdio(OPENAPI_MCP_HEADERS=headers, CONNECTION_STRING=connection, MODE="x"),
        CLAUDE_CODE,
    )
    assert got.fields["env"] == {
        "OPENAPI_MCP_HEADERS": "${env:OPENAPI_MCP_HEADERS}",
        "CONNECTION_STRING": "${env:CONNECTION_STRING}",
        "MODE": "x",
    }
    assert lua_statement(got).count("ntn_") == 0
    assert "Sup3rS3cret" not in lua_statement(got)


def test_a_secret_value_gets_one_name_and_two_values_never_share_one() -> None:
    translator = Translator(Path("/home/me"))
    first = translator.declaration("a", stdio(API_KEY="one-secret"), CLAUDE_CODE)
    same = translator.declaration("b", stdio(API_KEY="one-secret"), CLAUDE_CODE)
    other = translator.declaration("c", stdio(API_KEY="another-secret"), CLAUDE_CODE)
    again = translator.declaration("c2", stdio(**{"1KEY": "third"}), CLAUDE_CODE)

    assert first.fields["env"] == {"API_KEY": "${env:API_KEY}"}
    assert same.fields["env"] == {"API_KEY": "${env:API_KEY}"}
    assert other.fields["env"] == {"API_KEY": "${env:C_API_KEY}"}
    assert again.fields["env"] == {"1KEY": "${env:C2_1KEY}"}
    assert [(e.name, e.secret) for e in translator.exports] == [
        ("API_KEY", True),
        ("C_API_KEY", True),
        ("C2_1KEY", True),
    ]
    assert translator.secrets.redact("one-secret another-secret") == "*** ***"


def test_secrets_in_arguments_headers_and_urls_become_references() -> None:
    translator = Translator(Path("/home/me"))
    args = translator.declaration(
        "tool",
        stdio(
            "-e",
            "GITHUB_TOKEN=ghp_YFXRaeR4hIWbFUtS56G811emx2aPeGeUzUNk",
            "--token",
            "abc",
            "--api-key=xyz",
            "--key-file",
            "/etc/key.pem",
            "--verbose",
            "true",
            "X-Api-Key: k",
            "4652cc2736d77b05a5cf9b27507344ef",
            "https://u:pw@h.example.com/a",
            "https://v:pw2@h.example.com/${env:PATH_PART}",
            "--token=${env:MINE}",
        ),
        CLAUDE_CODE,
    )
    assert args.fields["args"] == [
        "-e",
        "GITHUB_TOKEN=${env:GITHUB_TOKEN}",
        "--token",
        "${env:TOOL_TOKEN}",
        "--api-key=${env:TOOL_API_KEY}",
        "--key-file",
        "/etc/key.pem",
        "--verbose",
        "true",
        "X-Api-Key: ${env:TOOL_X_API_KEY}",
        "${env:TOOL_SECRET}",
        "https://u:${env:TOOL_URL_PASSWORD}@h.example.com/a",
        "https://v:${env:TOOL_URL_PASSWORD_2}@h.example.com/${env:PATH_PART}",
        "--token=${env:MINE}",
    ]
    remote = ClientServer(
        "web",
        "http",
        url="https://h.example.com/v1/4652cc2736d77b05a5cf9b27507344ef/mcp"
        "?api_key=k1&region=eu&t=${env:T}#top",
        headers=(("X-Api-Key", "k2"), ("Accept", "text/event-stream")),
    )
    fields = translator.declaration("web", remote, CLAUDE_CODE).fields
    assert fields["url"] == (
        "https://h.example.com/v1/${env:WEB_URL_SECRET}/mcp"
        "?api_key=${env:WEB_API_KEY}&region=eu&t=${env:T}#top"
    )
    assert fields["headers"] == {
        "X-Api-Key": "${env:WEB_X_API_KEY}",
        "Accept": "text/event-stream",
    }
    assert [e.name for e in translator.exports if not e.secret] == [
        "MINE",
        "PATH_PART",
        "T",
    ]


def test_what_the_user_switched_off_in_the_client_stays_off(
    machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    """Windsurf's `disabledTools` hide those tools; a project server turned
    down in Claude Code (`disabledMcpjsonServers` in ~/.claude.json) is
    declared `enabled = false`. Both came back on."""
    windsurf = machine.project / "windsurf.json"
    windsurf.write_text(
        json.dumps(
            {"mcpServers": {"demo": {"command": "demo", "disabledTools": ["crash"]}}}
        ),
        encoding="utf-8",
    )
    (machine.project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"kept": {"command": "a"}, "no": {"command": "b"}}}),
        encoding="utf-8",
    )
    (machine.home / ".claude.json").write_text(
        json.dumps(
            {"projects": {str(machine.project): {"disabledMcpjsonServers": ["no"]}}}
        ),
        encoding="utf-8",
    )
    code, out, err = run(capsys, "import", str(windsurf))
    assert code == 0, err
    (demo,) = load_file_text(out, machine.project / "w.lua")
    assert demo.exposure.tools.deny == ("crash",)
    code, out, err = run(capsys, "import", ".mcp.json", "--yes")
    assert code == 0, err
    specs = {s.name: s for s in load_file_text(out, machine.project / "c.lua")}
    assert specs["kept"].enabled and not specs["no"].enabled
    assert "turned down in Claude Code" in err


def load_file_text(text: str, where: Path) -> list[ConnectionSpec]:
    where.write_text(text, encoding="utf-8")
    return list(load_file(where).specs)


def test_a_template_of_the_entry_s_own_variable_reads_its_value() -> None:
    """mcp-remote's documented `--header "Authorization:${AUTH_HEADER}"` with
    AUTH_HEADER in the entry's env: the argument reads what the env holds
    (its keychain reference with --keychain), not the daemon's $AUTH_HEADER,
    which nobody sets (the connection failed)."""
    server = ClientServer(
        "linear",
        "stdio",
        command="npx",
        args=("mcp-remote", "https://mcp.linear.app/sse", "--header",
              "Authorization:${AUTH_HEADER}", "--region=${REGION}"),
        env=(("AUTH_HEADER", "Bearer lin_api_0123456789abcdef"), ("REGION", "eu")),
    )  # fmt: skip
    desktop = Section(Path("/home/me/claude_desktop_config.json"), "claude-desktop")
    stored = Translator(Path("/home/me"), keychain=lambda reference: None)
    fields = stored.declaration("linear", server, desktop).fields
    assert fields["args"] == [
        "mcp-remote",
        "https://mcp.linear.app/sse",
        "--header",
        "Authorization:${keyring:mcp-manager/AUTH_HEADER}",
        "--region=eu",
    ]
    assert [e.name for e in stored.exports] == ["AUTH_HEADER"]


def test_a_secret_never_takes_a_name_another_server_reads() -> None:
    """weather writes its key out, maps reads $API_KEY from the environment:
    weather's key is not named API_KEY (maps would get it)."""
    weather = stdio(API_KEY="wx_live_0123456789abcdef0123")
    maps = ClientServer("maps", "stdio", command="m", env=(("API_KEY", "${API_KEY}"),))
    translator = Translator(Path("/home/me"))
    for server in (weather, maps):
        translator.reserve(server, CLAUDE_CODE)
    first = translator.declaration("weather", weather, CLAUDE_CODE)
    second = translator.declaration("maps", maps, CLAUDE_CODE)
    assert first.fields["env"] == {"API_KEY": "${env:WEATHER_API_KEY}"}
    assert second.fields["env"] == {"API_KEY": "${env:API_KEY}"}


def test_two_servers_whose_names_mend_alike_are_both_imported(
    machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    """'my server' and 'my-server' are two servers; so are '日本語' and '中文'.
    The second of each was dropped as 'already imported'."""
    names = machine.project / "names.json"
    pairs = [("my server", "a"), ("my-server", "b"), ("日本語", "c"), ("中文", "d")]
    servers = {name: {"command": command} for name, command in pairs}
    names.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    code, out, err = run(capsys, "import", str(names))
    assert code == 0, err
    specs = {s.name: s.command for s in load_file_text(out, machine.project / "n.lua")}
    assert specs == {
        "my-server": "a",
        "my-server-2": "b",
        "server": "c",
        "server-2": "d",
    }
    assert "renamed to 'my-server-2' ('my-server' is 'my server''s" in err


def test_a_relative_cwd_is_the_project_s_folder_or_refused() -> None:
    """A relative `cwd` ran the server in the daemon's own directory."""
    server = ClientServer("s", "stdio", command="x", cwd="./tools")
    translator = Translator(Path("/home/me"))
    declared = translator.declaration("s", server, CLAUDE_CODE)
    assert declared.fields["cwd"] == "/p/tools"
    assert "cwd './tools' is the project's folder's: /p/tools" in declared.notes
    with pytest.raises(Untranslatable, match="relative to where the client was"):
        translator.declaration("s", server, GEMINI)


def test_mcp_manager_s_own_entry_is_not_imported(
    machine: Machine, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's flow pastes `client-config` into the client's file;
    importing that file again declared `mcp-manager attach` as a server, and
    the daemon attached to itself, its tool list growing without end (found
    by an audit)."""
    path = candidate_files("cursor")[0]
    path.parent.mkdir(parents=True)
    servers = {
        "mcp-manager": {
            "command": "/opt/venv/bin/mcp-manager",
            "args": ["attach", "--socket", "/run/user/1/mcp-manager/control.sock"],
        },
        "by-module": {"command": "python3", "args": ["-m", "manager", "stdio"]},
        "fs": {"command": "npx", "args": ["-y", "server-filesystem", "/src"]},
    }
    path.write_text(json.dumps({"mcpServers": servers}))

    code, out, err = run(capsys, "import", "cursor")

    assert 'mcp_add("fs"' in out
    assert "attach" not in out and '"stdio"' not in out
    assert "mcp-manager: skipped: it is mcp-manager itself" in err
    assert "by-module: skipped: it is mcp-manager itself" in err
    assert code == 0
