"""A stdio MCP server that tries what a sandbox should stop, and says how it went.

Its one tool, `probe`, reads the file `read`, writes the file `write`, and
opens a TCP connection to `127.0.0.1:port`, each only if given, and answers
with a JSON object: for each, `ok` or the error's name (`PermissionError`
under a sandbox that refuses it). Handshake era (`2025-11-25`), standard
library only, one request at a time.

Run: `python tests/servers/prober.py`.
"""

from __future__ import annotations

import json
import socket
import sys
from typing import Any

PROBE = {
    "name": "probe",
    "description": "Try to read a file, write a file and connect to a TCP port.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "read": {"type": "string"},
            "write": {"type": "string"},
            "port": {"type": "integer"},
        },
    },
}


def _try(action: Any) -> str:
    try:
        action()
    except OSError as exc:
        return type(exc).__name__
    return "ok"


def _probe(args: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    if "read" in args:
        out["read"] = _try(lambda: open(args["read"]).read())
    if "write" in args:
        out["write"] = _try(lambda: open(args["write"], "w").write("x"))
    if "port" in args:
        out["connect"] = _try(
            lambda: socket.create_connection(("127.0.0.1", args["port"]), 5).close()
        )
    return out


def main() -> int:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        method, params = message.get("method"), message.get("params") or {}
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "prober", "version": "1.0"},
            }
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            result = {"tools": [PROBE]}
        elif method == "tools/call":
            found = _probe(params.get("arguments") or {})
            result = {"content": [{"type": "text", "text": json.dumps(found)}]}
        else:
            error = {"code": -32601, "message": f"Method not found: {method}"}
            print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}))
            sys.stdout.flush()
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
