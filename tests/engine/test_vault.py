"""Secret references: `${keyring:...}`, `${cmd:...}`, `${op://...}`.

The keychain is keyring's own plain-file backend (`keyrings.alt`), a real
backend without a desktop session; `keyring.backends.fail` stands for a
machine with none. Commands are real processes.
"""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import keyring
import pytest
from keyring.backends.fail import Keyring as NoKeyring
from keyrings.alt.file import PlaintextKeyring  # type: ignore[import-untyped]
from servers import lua_stdio
from servers.daemon import DaemonProcess
from servers.ledgers import LEDGER_SCRIPT

from manager.cli import main
from manager.core.errors import ConfigError
from manager.core.redact import SecretRegistry
from manager.core.resolve import references, resolve_spec
from manager.core.spec import parse_reference, parse_spec
from manager.engine.vault import Vault, store

pytestmark = pytest.mark.anyio


@pytest.fixture
def keychain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """keyring's plain-file backend in this test's folder, for this process
    and for the daemons it starts (by environment)."""
    data = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyrings.alt.file.PlaintextKeyring")
    before = keyring.get_keyring()
    keyring.set_keyring(PlaintextKeyring())
    try:
        yield data
    finally:
        keyring.set_keyring(before)


def test_references_are_parsed_and_anything_else_is_a_clear_error() -> None:
    assert parse_reference("keyring:github/token") == ("keyring", "github/token")
    assert parse_reference("cmd:pass show github") == ("cmd", "pass show github")
    assert parse_reference("op://Private/GitHub/token") == (
        "op",
        "op://Private/GitHub/token",
    )
    for bad in ("keyring:nothing", "cmd:", "op://only/two", "vault:x", "env:1X"):
        assert parse_reference(bad) is None
        with pytest.raises(ConfigError, match=r"the forms are \$\{env:NAME\}"):
            parse_spec("x", {"command": "c", "env": {"T": "${" + bad + "}"}}, {})
    spec = parse_spec(
        "x",
        {
            "command": "c",
            "args": ["${cmd:pass show a}"],
            "env": {"T": "${keyring:svc/t}", "U": "${env:HOME}"},
        },
        {},
    )
    assert references(spec) == {("cmd", "pass show a"), ("keyring", "svc/t")}


async def test_a_command_is_run_once_until_a_reload(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    command = f"sh -c 'echo run >> {runs}; echo s3cret-value'"
    vault = Vault()
    reference = ("cmd", command)
    assert await vault.read("x", [reference]) == {reference: "s3cret-value"}
    assert await vault.read("x", [reference]) == {reference: "s3cret-value"}
    assert runs.read_text().count("run") == 1
    vault.forget()
    await vault.read("x", [reference])
    assert runs.read_text().count("run") == 2


@pytest.mark.parametrize(
    ("command", "said"),
    [
        ("sh -c 'exit 3'", "exited with status 3"),
        ("true", "printed nothing"),
        ("no-such-program-here --x", "cannot run 'no-such-program-here'"),
        ("sleep 30", "took longer than 0.5 s"),
        ("sh -c 'unbalanced", "cannot split the command"),
    ],
)
async def test_a_command_that_fails_says_how(command: str, said: str) -> None:
    with pytest.raises(ConfigError, match=said) as failed:
        await Vault(timeout=0.5).read("web", [("cmd", command)])
    assert failed.value.connection == "web"
    assert "mcp_add('web')" in str(failed.value)


async def test_op_needs_the_1password_cli_on_path() -> None:
    vault = Vault(which=lambda program: None)
    with pytest.raises(ConfigError, match="needs the 1Password CLI `op`"):
        await vault.read("x", [("op", "op://Private/GitHub/token")])


async def test_the_keychain_gives_what_secret_set_stored(
    keychain: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("gh-s3cret\n"))
    assert main(["secret", "set", "github/token"]) == 0
    said = capsys.readouterr()
    assert "${keyring:github/token}" in said.out
    # the plain-file backend is not a keychain: said, never silently
    assert "(PlaintextKeyring)" in said.out
    assert "a plain file (~/.local/share/python_keyring)" in said.err
    reference = ("keyring", "github/token")
    assert await Vault().read("gh", [reference]) == {reference: "gh-s3cret"}
    with pytest.raises(ConfigError, match="store it with `mcp-manager secret set"):
        await Vault().read("gh", [("keyring", "github/other")])
    monkeypatch.setattr(sys, "stdin", io.StringIO("x"))
    assert main(["secret", "set", "no-slash"]) == 2
    assert "name it SERVICE/NAME" in capsys.readouterr().err


async def test_without_a_keychain_the_reference_is_a_clear_error() -> None:
    before = keyring.get_keyring()
    keyring.set_keyring(NoKeyring())  # type: ignore[no-untyped-call]
    try:
        with pytest.raises(ConfigError, match="no keychain this daemon can use"):
            await Vault().read("gh", [("keyring", "github/token")])
        with pytest.raises(ConfigError, match="no keychain to store"):
            store("github/token", "x")
    finally:
        keyring.set_keyring(before)


def test_resolved_secrets_are_registered_and_masked() -> None:
    spec = parse_spec("x", {"command": "c", "args": ["--key", "${keyring:svc/k}"]}, {})
    secrets = SecretRegistry()
    resolved = resolve_spec(
        spec, lambda name: None, secrets, {("keyring", "svc/k"): "v4lue-k3y"}
    )
    assert resolved.args == ("--key", "v4lue-k3y")
    assert "v4lue-k3y" not in secrets.redact("the key is v4lue-k3y")
    with pytest.raises(ConfigError, match="was not read"):
        resolve_spec(spec, lambda name: None, SecretRegistry(), {})


async def test_a_daemon_starts_a_server_with_a_secret_from_the_keychain(
    keychain: Path, tmp_path: Path
) -> None:
    ledger = tmp_path / "private-ledger.txt"
    store("mcp-test/ledger", str(ledger))
    args = ["-S", str(LEDGER_SCRIPT), "${keyring:mcp-test/ledger}"]
    script = tmp_path / "startup.lua"
    script.write_text(lua_stdio("ledger", sys.executable, args))
    with DaemonProcess(script) as daemon:
        daemon.wait_event("connected", "ledger")
        result = await anyio.to_thread.run_sync(
            daemon.client.call, "ledger", "record", {"text": "paid", "seconds": 0}
        )
        assert not result.get("isError"), result
        assert ledger.read_text().splitlines() == ["paid"]
        shown = [
            daemon.log(),
            json.dumps(daemon.events),
            json.dumps([row.to_dict() for row in daemon.client.status()]),
            json.dumps(daemon.client.details("ledger").to_dict()),
        ]
    assert all(str(ledger) not in text for text in shown)


def test_import_can_move_the_secrets_it_finds_into_the_keychain(
    keychain: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    client_file = tmp_path / "mcp.json"
    client_file.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "gh": {
                        "command": "npx",
                        "args": ["-y", "@modelcontextprotocol/server-github"],
                        "env": {"GITHUB_TOKEN": "ghp_YFXRaeR4hIWbFUtS56G811emx2aPeGeU"},
                    }
                }
            }
        )
    )
    startup = tmp_path / "startup.lua"
    # a preview (no --write) shows the lines and stores nothing
    assert main(["import", str(client_file), "--keychain"]) == 0
    captured = capsys.readouterr()
    assert "${keyring:mcp-manager/GITHUB_TOKEN}" in captured.out
    assert "nothing stored: this is a preview" in captured.err
    assert keyring.get_password("mcp-manager", "GITHUB_TOKEN") is None
    write = ["import", str(client_file), "--keychain", "--write", "--config"]
    assert main([*write, str(startup)]) == 0
    captured = capsys.readouterr()
    assert "${keyring:mcp-manager/GITHUB_TOKEN}" in startup.read_text()
    assert "ghp_" not in captured.out + captured.err + startup.read_text()
    assert "secret(s) in the OS keychain (PlaintextKeyring)" in captured.err
    assert "export" not in captured.err
    assert "warning: the keychain found here is PlaintextKeyring" in captured.err
    stored = keyring.get_password("mcp-manager", "GITHUB_TOKEN")
    assert stored == "ghp_YFXRaeR4hIWbFUtS56G811emx2aPeGeU"
    before = keyring.get_keyring()
    keyring.set_keyring(NoKeyring())  # type: ignore[no-untyped-call]
    try:
        assert main(["import", str(client_file), "--keychain"]) == 2
        assert "nothing was imported" in capsys.readouterr().err
    finally:
        keyring.set_keyring(before)


def test_import_never_overwrites_a_secret_the_keychain_holds_for_another_server(
    keychain: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # an earlier import (or `secret set`) keeps another account's token there
    keyring.set_password(
        "mcp-manager", "GITHUB_TOKEN", "ghp_theWorkAccountsTokenXXXXXXXXXXXX"
    )
    keyring.set_password("mcp-manager", "SLACK_TOKEN", "xoxb-same-value-123456789012")
    client_file = tmp_path / "mcp.json"
    servers = {
        "gh": {
            "command": "npx",
            "env": {"GITHUB_TOKEN": "ghp_thePersonalOneYYYYYYYYYYYYYYYYYY"},
        },
        "slack": {
            "command": "npx",
            "env": {"SLACK_TOKEN": "xoxb-same-value-123456789012"},
        },
    }
    client_file.write_text(json.dumps({"mcpServers": servers}))
    startup = tmp_path / "startup.lua"
    write = ["import", str(client_file), "--keychain", "--write", "--config"]
    assert main([*write, str(startup)]) == 0
    text = startup.read_text()
    assert "${keyring:mcp-manager/GITHUB_TOKEN}" not in text
    assert "${keyring:mcp-manager/SLACK_TOKEN}" in text  # the same value: shared
    work = keyring.get_password("mcp-manager", "GITHUB_TOKEN")
    assert work == "ghp_theWorkAccountsTokenXXXXXXXXXXXX"
    (reference,) = re.findall(r"\$\{keyring:mcp-manager/(GH[A-Z_0-9]*)\}", text)
    mine = keyring.get_password("mcp-manager", reference)
    assert mine == "ghp_thePersonalOneYYYYYYYYYYYYYYYYYY"
    said = capsys.readouterr()
    assert "ghp_" not in said.out + said.err
    assert "mcp-manager/GITHUB_TOKEN already holds another secret" in said.err
