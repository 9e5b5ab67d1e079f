"""The HTTP endpoint answers only its own user: a bearer token by default.

`run --listen` with no token setting makes one (the daemon's own file, 0600,
kept across restarts); a request without it, or with a wrong one, gets 401
and reaches no server. `client-config CLIENT --http` writes an entry that
carries it, and SDK clients of both eras work with that entry. `token
--rotate` replaces it: streams opened with the old one end, requests with it
get 401. The token never shows in the log, events or status.

The first end-to-end test runs the daemon as a process, so everything it
writes (not only its logger) is searched for the token; the others run it in
the test's process (`DaemonThread`): what they check is the endpoint's.

The upstream is `servers/ledger.py`, whose `record` tool appends a line to a
file: the line count says whether a call reached the server.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from servers import free_port
from servers.daemon import DaemonProcess, DaemonThread, bearer
from servers.ledgers import ledger_lines, ledger_startup

from manager.cli import main
from manager.gateway.options import (
    TOKEN_ENV,
    TOKEN_FILE,
    endpoint_options,
    own_token_path,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]

STREAM = {"accept": "application/json, text/event-stream"}
MODERN = {
    **STREAM,
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
    "mcp-name": "ledger__record",
}
"""The headers of a 2026-07-28 `tools/call` of `ledger__record` (`_record`)."""
HANDSHAKE = "2025-11-25"


def _record(text: str, request_id: int = 1) -> dict[str, Any]:
    """A 2026-07-28 `tools/call` of `ledger__record`, envelope and all."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "curl", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {
            "name": "ledger__record",
            "arguments": {"text": text, "seconds": 0},
            "_meta": meta,
        },
    }


def _initialize(request_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": HANDSHAKE,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }


# ------------------------------------------------------------------ options


def test_the_daemon_makes_its_own_token_once_and_keeps_it(
    tmp_path: Path,
) -> None:
    first = endpoint_options("127.0.0.1:0", env={})
    path = own_token_path()
    assert first.token_path == path and path.name == TOKEN_FILE
    assert first.token and len(first.token) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert first.token_from == str(path) and first.token not in repr(first)
    # A restart reads the same one.
    assert endpoint_options("127.0.0.1:0", env={}).token == first.token
    # The environment, then a file, win over the daemon's own (left alone).
    by_env = endpoint_options("127.0.0.1:0", env={"MCP_MANAGER_TOKEN": "e"})
    assert (by_env.token, by_env.token_from, by_env.token_path) == (
        "e",
        "$MCP_MANAGER_TOKEN",
        None,
    )
    mine = tmp_path / "mine"
    mine.write_text("f\n")
    mine.chmod(0o600)
    by_file = endpoint_options(
        "127.0.0.1:0", token_file=str(mine), env={"MCP_MANAGER_TOKEN": "e"}
    )
    assert (by_file.token, by_file.token_path) == ("f", mine)
    assert path.read_text().strip() == first.token


def test_token_prints_the_one_the_next_daemon_will_use_and_rotates_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nobody = tmp_path / "control.sock"  # no daemon answers there
    assert main(["token", "--socket", str(nobody)]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == own_token_path().read_text().strip()
    assert endpoint_options("127.0.0.1:0", env={}).token == printed
    assert main(["token", "--rotate", "--socket", str(nobody)]) == 0
    rotated = capsys.readouterr().out.strip()
    assert rotated != printed and rotated == own_token_path().read_text().strip()


# --------------------------------------------------------------- end to end


async def test_without_the_token_nothing_reaches_a_server_and_a_configured_client_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "ledger.txt"
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with DaemonProcess(
        ledger_startup(tmp_path, ledger), "--listen", f"127.0.0.1:{port}"
    ) as d:
        d.wait_event("connected", "ledger")
        token = d.token
        async with httpx2.AsyncClient(timeout=30) as http:
            for auth in (None, "Bearer wrong", token, f"Bearer {token}x", "Basic x"):
                headers = {**MODERN, **({"authorization": auth} if auth else {})}
                for body in (_record("stolen"), _initialize()):
                    refused = await http.post(url, json=body, headers=headers)
                    assert refused.status_code == 401, (auth, refused.text)
                    assert refused.headers["www-authenticate"].startswith("Bearer")
        assert ledger_lines(ledger) == []

        # What `client-config cursor --http` writes is all a client needs.
        argv = ["client-config", "cursor", "--http", "--socket", str(d.socket)]
        assert await anyio.to_thread.run_sync(main, argv) == 0
        entry = json.loads(capsys.readouterr().out)["mcpServers"]["mcp-manager"]
        assert entry["url"] == url
        assert entry["headers"] == {"Authorization": f"Bearer {token}"}
        with anyio.fail_after(60):
            for mode in ("legacy", "auto"):
                async with Client(bearer(url, token), mode=mode) as client:
                    done = await client.call_tool(
                        "ledger__record", {"text": mode, "seconds": 0}
                    )
                    assert not done.is_error, done
        assert ledger_lines(ledger) == ["legacy", "auto"]

        # Nothing says the token itself; the start-up line and status say where.
        info = d.client.info()
        assert info.endpoint_token == str(own_token_path())
        shown = [
            d.log(),
            json.dumps(d.events),
            json.dumps(info.to_dict()),
            json.dumps([row.to_dict() for row in d.client.status()]),
        ]
        assert all(token not in text for text in shown)
        assert f"(bearer token: {own_token_path()})" in d.log()


async def test_a_rotation_ends_the_streams_of_the_old_token_and_refuses_it(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger.txt"
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with DaemonThread(
        ledger_startup(tmp_path, ledger), "--listen", f"127.0.0.1:{port}"
    ) as d:
        d.wait_event("connected", "ledger")
        old = {**STREAM, "authorization": f"Bearer {d.token}"}
        async with httpx2.AsyncClient(timeout=30) as http:
            opened = await http.post(url, json=_initialize(), headers=old)
            assert opened.status_code == 200, opened.text
            session = {"mcp-session-id": opened.headers["mcp-session-id"]}
            headers = {**old, **session, "mcp-protocol-version": HANDSHAKE}
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await http.post(url, json=note, headers=headers)).is_success
            with anyio.fail_after(30):
                async with http.stream("GET", url, headers=headers) as listening:
                    assert listening.status_code == 200
                    reply = await anyio.to_thread.run_sync(d.client.token, True)
                    assert reply.rotated and reply.streams_ended == 1
                    assert [chunk async for chunk in listening.aiter_bytes()] in (
                        [],
                        [b""],
                    )  # ended, cleanly
            again = await http.post(url, json=_record("old"), headers=headers)
            assert again.status_code == 401
            new = {**MODERN, "authorization": f"Bearer {d.token}"}
            assert new != old
            done = await http.post(url, json=_record("new"), headers=new)
            assert done.status_code == 200 and "recorded new" in done.text, done.text
        assert ledger_lines(ledger) == ["new"]
        assert d.token not in d.log()


async def test_no_token_serves_loopback_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "ledger.txt"
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    args = ("--listen", f"127.0.0.1:{port}", "--no-token")
    with DaemonThread(ledger_startup(tmp_path, ledger), *args) as d:
        d.wait_event("connected", "ledger")
        async with httpx2.AsyncClient(timeout=30) as http:
            done = await http.post(url, json=_record("open"), headers=MODERN)
            assert done.status_code == 200 and "recorded open" in done.text
        assert "takes no token (--no-token)" in d.log()
        assert d.client.info().endpoint_token == "none (--no-token)"
        assert not own_token_path().exists()
        # client-config's entry has no token, and says so (not that it has one)
        argv = ["client-config", "cursor", "--http", "--socket", str(d.socket)]
        assert await anyio.to_thread.run_sync(main, argv) == 0
        out, err = capsys.readouterr()
        entry = json.loads(out)["mcpServers"]["mcp-manager"]
        assert entry == {"url": url}
        assert "takes no token" in err and "holds the endpoint's bearer" not in err
    assert not own_token_path().exists()


async def test_client_config_refuses_an_entry_without_the_token_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The daemon reads its token from $MCP_MANAGER_TOKEN and this shell has
    none: an entry without it would get 401, so none is printed (it was, with
    "the entry holds the endpoint's bearer token" on stderr)."""
    ledger = tmp_path / "ledger.txt"
    port = free_port()
    monkeypatch.setenv(TOKEN_ENV, "a-token-from-the-environment")
    args = ("--listen", f"127.0.0.1:{port}")
    with DaemonThread(ledger_startup(tmp_path, ledger), *args) as d:
        d.wait_event("connected", "ledger")
        monkeypatch.delenv(TOKEN_ENV)
        argv = ["client-config", "cursor", "--http", "--socket", str(d.socket)]
        assert await anyio.to_thread.run_sync(main, argv) != 0
        out, err = capsys.readouterr()
        assert out == ""
        assert f"${TOKEN_ENV} in its environment, which this shell does not" in err


@pytest.mark.parametrize(
    "url", ["windsurf", "127.0.0.1:8765", "ftp://h/mcp", "http:///mcp"]
)
def test_client_config_takes_only_an_http_url(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["client-config", "cursor", "--http", url]) != 0
    out, err = capsys.readouterr()
    assert out == "" and "--http takes the daemon's endpoint URL" in err


def test_client_config_does_not_add_a_profile_its_url_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "http://127.0.0.1:8765/mcp/coding"
    argv = ["client-config", "cursor", "--http", url, "--profile", "coding"]
    assert main(argv) == 0
    entry = json.loads(capsys.readouterr().out)["mcpServers"]["mcp-manager"]
    assert entry["url"] == url
    # A profile named as the endpoint's own path is still added.
    base = "http://127.0.0.1:8765/mcp"
    assert main(["client-config", "cursor", "--http", base, "--profile", "mcp"]) == 0
    entry = json.loads(capsys.readouterr().out)["mcpServers"]["mcp-manager"]
    assert entry["url"] == base + "/mcp"


async def test_http_on_a_unix_socket_is_private_and_still_wants_the_token(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger.txt"
    folder = tmp_path / "sock"
    folder.mkdir(mode=0o700)
    path = folder / "http.sock"
    with DaemonThread(
        ledger_startup(tmp_path, ledger), "--listen", f"unix:{path}"
    ) as d:
        d.wait_event("connected", "ledger")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert d.client.info().endpoint == f"unix:{path}"
        url = "http://localhost/mcp"
        transport = httpx2.AsyncHTTPTransport(uds=str(path))
        async with httpx2.AsyncClient(transport=transport, timeout=30) as http:
            refused = await http.post(url, json=_record("stolen"), headers=MODERN)
            assert refused.status_code == 401
            auth = {**MODERN, "authorization": f"Bearer {d.token}"}
            done = await http.post(url, json=_record("local"), headers=auth)
            assert done.status_code == 200 and "recorded local" in done.text
        assert ledger_lines(ledger) == ["local"]
    assert not path.exists()  # removed when the daemon stopped


def test_a_unix_socket_in_an_open_directory_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from manager.gateway.http import _bind_unix
    from manager.gateway.options import EndpointError

    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o755)
    open_dir.chmod(0o755)
    with pytest.raises(EndpointError, match=r"accessible to other users .*chmod 700"):
        _bind_unix(open_dir / "h.sock")
    assert not (open_dir / "h.sock").exists()
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    kept = private / "notes.txt"  # not a socket: never removed to make room
    kept.write_text("mine")
    with pytest.raises(EndpointError, match="is not a socket"):
        _bind_unix(kept)
    assert kept.read_text() == "mine"
    script = tmp_path / "startup.lua"
    script.write_text("")
    assert main(["run", str(script), "--listen", "unix:relative.sock"]) == 2
    assert "absolute path" in capsys.readouterr().err
