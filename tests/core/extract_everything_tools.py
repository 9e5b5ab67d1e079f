"""Write `everything_tools.json`: the reference server's definitions, as sent.

`test_suspicious` reads them as a clean corpus (ordinary descriptions that
must not be flagged) without starting a process. Run this again after bumping
`@modelcontextprotocol/server-everything` in `tests/node/package.json`:

    python tests/core/extract_everything_tools.py [NODE_MODULES]

It starts the server over stdio, advertises sampling, elicitation and roots
(so the tools gated on them are listed too), and saves `tools/list`,
`prompts/list` and `resources/templates/list` with the package's version.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

PACKAGE = "@modelcontextprotocol/server-everything"
HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "everything_tools.json"
NODE_MODULES = HERE.parent / "node" / "node_modules"
LISTS = (
    ("tools/list", "tools"),
    ("prompts/list", "prompts"),
    ("resources/templates/list", "resourceTemplates"),
)


def _reply(server: subprocess.Popen[str], request_id: int) -> dict[str, Any]:
    """The response to `request_id`; requests from the server get empty roots."""
    assert server.stdin is not None and server.stdout is not None
    for line in server.stdout:
        message: dict[str, Any] = json.loads(line)
        if "method" in message and "id" in message:
            answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"roots": []}}
            server.stdin.write(json.dumps(answer) + "\n")
            server.stdin.flush()
        elif message.get("id") == request_id:
            return message
    raise RuntimeError(f"{PACKAGE} closed stdout before answering {request_id}")


def extract(node_modules: Path) -> dict[str, Any]:
    """Every list the server offers, and the package's version."""
    package = node_modules / PACKAGE
    version = json.loads((package / "package.json").read_text())["version"]
    node = shutil.which("node") or "node"
    server = subprocess.Popen(
        [node, str(package / "dist" / "index.js"), "stdio"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        return _lists(server, version)
    finally:
        if server.stdin is not None:
            server.stdin.close()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.terminate()
            server.wait(timeout=5)


def _lists(server: subprocess.Popen[str], version: str) -> dict[str, Any]:
    def send(message: dict[str, Any]) -> None:
        assert server.stdin is not None
        server.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        server.stdin.flush()

    capabilities = {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}}
    client = {"name": "extract_everything_tools", "version": "0"}
    send(
        {
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": capabilities,
                "clientInfo": client,
            },
        }
    )
    _reply(server, 1)
    send({"method": "notifications/initialized"})
    result: dict[str, Any] = {"package": PACKAGE, "version": version}
    for request_id, (method, key) in enumerate(LISTS, start=2):
        send({"id": request_id, "method": method, "params": {}})
        page = _reply(server, request_id)["result"]
        if "nextCursor" in page:
            raise RuntimeError(f"{method} is paged; follow nextCursor")
        result[key] = page[key]
    return result


def main(argv: list[str]) -> int:
    node_modules = Path(argv[0]) if argv else NODE_MODULES
    OUTPUT.write_text(json.dumps(extract(node_modules), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
