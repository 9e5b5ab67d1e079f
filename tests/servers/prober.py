"""A stdio MCP server that tries what a sandbox should stop, and says how it went.

Its one tool, `probe`, reads the file `read`, writes the file `write`,
opens a TCP connection to `127.0.0.1:port`, asks the daemon listening on the
control socket `control` for its status (with the key beside the socket, if
it can read it), and sends signal 0 to the process `signal`, each only if
given, and answers with a JSON object: for each, `ok` or the error's name
(`PermissionError` under a sandbox that refuses it; `refused` for a control
request the daemon turned away). Handshake era (`2025-11-25`), standard
library only, one request at a time.

Run: `python tests/servers/prober.py`.
"""

from __future__ import annotations

import json
import os
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
            "control": {"type": "string"},
            "signal": {"type": "integer"},
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
    if "control" in args:
        out["control"] = _ask_control(args["control"])
    if "signal" in args:
        out["signal"] = _try(lambda: os.kill(args["signal"], 0))
    return out


def _ask_control(path: str) -> str:
    """`status` on the control socket at `path`, as a rogue client would."""
    request: dict[str, Any] = {"cmd": "status"}
    try:
        with open(os.path.join(os.path.dirname(path), "control.key")) as file:
            request["key"] = file.read().strip()
    except OSError:
        pass  # cannot read it: ask without
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(path)
            sock.sendall(json.dumps(request).encode() + b"\n")
            answer = json.loads(sock.makefile("rb").readline())
    except OSError as exc:
        return type(exc).__name__
    return "ok" if answer.get("ok") is True else "refused"


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
