"""A stdio MCP server whose one tool has a side effect: it writes to a ledger.

`record(text, seconds)` appends `text` and a newline to the ledger file (the
one argument), flushed to disk at once, then takes `seconds` (default 30)
before it answers `recorded TEXT`: a payment, a commit, a message sent, the
kind of call that must never run twice. A test counts the lines to know how
often the call ran, and waits for the line to know the call is under way.

Each request is served on its own thread, so `ping` is answered while a
`record` sleeps. Handshake era (`2025-11-25`), standard library only.

Run: `python tests/servers/ledger.py LEDGER`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

__all__ = ["main"]

PROTOCOL_VERSION = "2025-11-25"

RECORD = {
    "name": "record",
    "description": "Append a line to the ledger, then take a while.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}, "seconds": {"type": "number"}},
        "required": ["text"],
    },
}

_out = threading.Lock()


def _send(message: dict[str, Any]) -> None:
    with _out:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def _record(ledger: str, args: dict[str, Any]) -> dict[str, Any]:
    text = str(args.get("text", ""))
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, text.encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    time.sleep(float(args.get("seconds", 30)))
    return {"content": [{"type": "text", "text": f"recorded {text}"}]}


def _answer(ledger: str, message: dict[str, Any]) -> None:
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "ledger", "version": "1.0"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": [RECORD]}
    elif method == "tools/call" and params.get("name") == "record":
        result = _record(ledger, params.get("arguments") or {})
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        _send({"jsonrpc": "2.0", "id": message["id"], "error": error})
        return
    _send({"jsonrpc": "2.0", "id": message["id"], "result": result})


def main() -> int:
    """Serve on stdin/stdout until EOF."""
    ledger = sys.argv[1]
    for line in sys.stdin:
        message = json.loads(line)
        if "id" in message and "method" in message:
            threading.Thread(
                target=_answer, args=(ledger, message), daemon=True
            ).start()
    return 0


if __name__ == "__main__":
    sys.exit(main())
