"""A raw-socket streamable HTTP MCP server that closes its connections.

Standard library only, one thread per TCP connection. It answers MCP over HTTP
the way servers behind some proxies (and any server while it shuts down) do:
each response ends the TCP connection. Modes (`--mode`):

- `close`: HTTP/1.1, `Connection: close`, a `Content-Length` body, then close.
- `http10`: an `HTTP/1.0` response (no keep-alive), then close.
- `sse-close`: HTTP/1.1, `Connection: close`, the JSON-RPC reply as one SSE
  event in a body delimited by the close itself (no length, not chunked).
- `mid-body`: announces a longer body than it sends, then closes.
- `before-headers`: reads the request and closes without a byte of answer.

The first two and `sse-close` are working servers (calls succeed); the last two
never complete a handshake. It hands out a session id, answers the GET stream
with 405 and DELETE with 200. Tools: `echo(text)`, `pid()`.

Run: `python tests/servers/closing_http.py --mode close --port N`.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import uuid
from collections.abc import Sequence
from typing import Any

__all__ = ["MODES", "main"]

MODES = ("close", "http10", "sse-close", "mid-body", "before-headers")
PROTOCOL_VERSION = "2025-06-18"
_TOOLS = [
    {
        "name": "echo",
        "description": "Return the text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
    {
        "name": "pid",
        "description": "The server's pid.",
        "inputSchema": {"type": "object"},
    },
]


def _result(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    if method == "initialize":
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "closing-http", "version": "1.0"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": _TOOLS}
    if method == "tools/call":
        args = params.get("arguments") or {}
        text = str(os.getpid()) if params.get("name") == "pid" else args.get("text")
        return {"content": [{"type": "text", "text": str(text)}], "isError": False}
    return None


def _read_request(conn: socket.socket) -> tuple[str, dict[str, str], bytes] | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method = lines[0].split(" ")[0]
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return method, headers, body


def _answer(
    conn: socket.socket, mode: str, status: str, body: bytes, ctype: str
) -> None:
    version = "HTTP/1.0" if mode == "http10" else "HTTP/1.1"
    head = [
        f"{version} {status}",
        f"Content-Type: {ctype}",
        f"Mcp-Session-Id: {SESSION}",
    ]
    if mode == "sse-close" and ctype == "text/event-stream":
        head.append("Connection: close")  # the body ends where the connection does
    elif mode == "mid-body":
        head += ["Connection: close", f"Content-Length: {len(body) + 100}"]
    else:
        if mode != "http10":
            head.append("Connection: close")
        head.append(f"Content-Length: {len(body)}")
    conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)


SESSION = uuid.uuid4().hex


def _serve_one(conn: socket.socket, mode: str) -> None:
    with conn:
        request = _read_request(conn)
        if request is None or mode == "before-headers":
            return
        method, _headers, body = request
        if method == "GET":
            _answer(conn, mode, "405 Method Not Allowed", b"", "text/plain")
            return
        if method == "DELETE":
            _answer(conn, mode, "200 OK", b"", "text/plain")
            return
        message = json.loads(body)
        if "id" not in message:  # a notification
            _answer(conn, mode, "202 Accepted", b"", "text/plain")
            return
        result = _result(message.get("method", ""), message.get("params") or {})
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        if result is None:
            reply["error"] = {"code": -32601, "message": "Method not found"}
        else:
            reply["result"] = result
        payload = json.dumps(reply).encode()
        if mode == "sse-close":
            event = b"event: message\r\ndata: " + payload + b"\r\n\r\n"
            _answer(conn, mode, "200 OK", event, "text/event-stream")
        else:
            _answer(conn, mode, "200 OK", payload, "application/json")


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until killed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=MODES, default="close")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--transport", default="http")  # accepted, always http
    args = parser.parse_args(argv)
    listener = socket.create_server((args.host, args.port), reuse_port=False)
    print(f"closing-http ({args.mode}) on {args.host}:{args.port}", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_serve_one, args=(conn, args.mode), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
