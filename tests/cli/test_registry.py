"""`mcp-manager add REF`: real `server.json` documents (the official
registry's published examples: an npm package, a PyPI package, a remote),
read from a file, a URL and a name at a local registry stand-in, become
`mcp_add` statements that `check` accepts: exact versions, pinned, sandboxed."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from manager.cli import main
from manager.lua import load_file

SAMPLES = Path(__file__).parent / "samples" / "registry"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def registry() -> Iterator[str]:
    """A registry stand-in on 127.0.0.1: each sample by its server name, at
    the path the official registry's API gives a version, as it wraps it."""
    documents = {
        json.loads(path.read_text())["name"]: json.loads(path.read_text())
        for path in SAMPLES.glob("*.json")
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            from urllib.parse import unquote

            parts = self.path.split("/")
            name = unquote(parts[3]) if len(parts) > 3 else ""
            found = documents.get(name)
            if self.path.endswith(".json"):
                found = json.loads((SAMPLES / parts[-1]).read_text())
                body = json.dumps(found).encode()
            elif found is None or parts[1:3] != ["v0.1", "servers"]:
                self.send_error(404)
                return
            else:
                body = json.dumps({"server": found, "_meta": {}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_three_kinds_of_server_json_become_configs_check_accepts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], registry: str
) -> None:
    config = tmp_path / "startup.lua"
    for ref in (
        str(SAMPLES / "npm.json"),  # a file
        f"{registry}/pypi.json",  # a URL
        "io.github.user/remote-weather",  # a name at the registry
    ):
        code, out, err = run(
            capsys, "add", ref, "--registry", registry, "--write", "--yes",
            "--config", str(config),
        )  # fmt: skip
        assert code == 0, err
        assert "would run:" in err
    specs = {spec.name: spec for spec in load_file(config).specs}
    weather, db, remote = (
        specs["local-weather"],
        specs["database-query-mcp"],
        specs["remote-weather"],
    )
    assert (weather.command, weather.args) == (
        "npx",
        ("-y", "@modelcontextprotocol/server-weather@1.0.0", "--port", "8080"),
    )
    assert dict(weather.env) == {"API_KEY": "${env:API_KEY}"}
    assert (db.command, db.args) == ("uvx", ("database-query-mcp==1.0.0",))
    assert remote.url == "https://api.example.com/mcp"
    assert dict(remote.headers) == {"Authorization": "${env:AUTHORIZATION}"}
    assert all(spec.pin == "strict" for spec in specs.values())
    assert weather.sandbox.mode == db.sandbox.mode == "strict"


def test_nothing_is_written_without_consent_and_gaps_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "startup.lua"
    code, out, err = run(capsys, "add", str(SAMPLES / "npm.json"))
    assert code == 0 and out.startswith("-- from the MCP registry")
    assert 'pin = "strict"' in out and 'sandbox = "strict"' in out
    # the secret it reads is named, and how to give it (found by an audit)
    assert (
        "local-weather reads API_KEY from the environment the daemon starts "
        "with: export API_KEY=... there" in err
    )
    code, _, err = run(
        capsys, "add", str(SAMPLES / "npm.json"), "--write", "--config", str(config)
    )
    assert code != 0 and not config.exists()
    assert "would run: npx -y @modelcontextprotocol/server-weather@1.0.0" in err
    assert "run again with --yes" in err
    open_value = tmp_path / "open.json"
    document = json.loads((SAMPLES / "npm.json").read_text())
    document["packages"][0]["packageArguments"][0]["isRequired"] = True
    open_value.write_text(json.dumps(document))
    code, _, err = run(capsys, "add", str(open_value))
    assert code != 0
    assert "a positional argument (config_path) needs a value" in err
