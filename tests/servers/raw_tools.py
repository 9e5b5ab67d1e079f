"""The tools the two hand-written servers share (`raw_legacy.py` over stdio,
`raw_http.py` over streamable HTTP): standard library only, as they are.

`echo(text)` returns `text`; `pid()` the process id; `crash(code)` exits at
once with `code`, without a reply; with `--sleep-tool`, `sleep(seconds)`
answers `slept SECONDS` after that long; with `--fail-tool`, `fail(message)`
answers a tool error (`isError: true`) whose text is `message`; with
`--tools-file PATH`, the tools in that JSON file (read at every `tools/list`)
plus `relist()`, which each server answers itself (it sends
`notifications/tools/list_changed` its own way).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

TOOLS: list[dict[str, Any]] = [
    {
        "name": "echo",
        "description": "Return the text.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
    {
        "name": "pid",
        "description": "Return the server's process id.",
        "inputSchema": {"type": "object"},
    },
    {
        "name": "crash",
        "description": "Exit at once with a code.",
        "inputSchema": {
            "type": "object",
            "properties": {"code": {"type": "integer"}},
            "required": ["code"],
        },
    },
]

SLEEP: dict[str, Any] = {
    "name": "sleep",
    "description": "Answer after some seconds.",
    "inputSchema": {
        "type": "object",
        "properties": {"seconds": {"type": "number"}},
        "required": ["seconds"],
    },
}

FAIL: dict[str, Any] = {
    "name": "fail",
    "description": "Answer a tool error with the message.",
    "inputSchema": {
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
    },
}

RELIST: dict[str, Any] = {
    "name": "relist",
    "description": "Tell the client that the tool list changed.",
    "inputSchema": {"type": "object"},
}


def text(value: str, *, is_error: bool = False) -> dict[str, Any]:
    """A `tools/call` result of one text block."""
    return {"content": [{"type": "text", "text": value}], "isError": is_error}


def listed(
    tools_file: str | None, sleep_tool: bool, fail_tool: bool = False
) -> list[dict[str, Any]]:
    """What `tools/list` answers."""
    if tools_file is None:
        return [
            *TOOLS,
            *([SLEEP] if sleep_tool else []),
            *([FAIL] if fail_tool else []),
        ]
    with open(tools_file, encoding="utf-8") as file:
        from_file: list[dict[str, Any]] = json.load(file)
    return [*from_file, RELIST]


def call(
    name: object, args: dict[str, Any], *, sleep_tool: bool, fail_tool: bool = False
) -> dict[str, Any]:
    """What `tools/call` answers for every tool but `relist`."""
    if name == "echo":
        return text(str(args.get("text", "")))
    if name == "pid":
        return text(str(os.getpid()))
    if name == "sleep" and sleep_tool:
        time.sleep(float(args.get("seconds", 0)))
        return text(f"slept {args.get('seconds', 0)}")
    if name == "fail" and fail_tool:
        return text(str(args.get("message", "")), is_error=True)
    if name == "crash":
        os._exit(int(args.get("code", 1)))
    return text(f"unknown tool {name!r}", is_error=True)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The flags both servers take (their docstrings say what each does)."""
    parser.add_argument("--crash-after-handshake", action="store_true")
    parser.add_argument("--hang-on-initialize", action="store_true")
    parser.add_argument("--garbage", action="store_true")
    parser.add_argument("--exit-immediately", type=int, metavar="CODE")
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--slow-start", type=float, default=0.0, metavar="SECONDS")
    parser.add_argument("--busy-start", type=float, default=0.0, metavar="SECONDS")
    parser.add_argument("--sleep-tool", action="store_true")
    parser.add_argument("--fail-tool", action="store_true")
    parser.add_argument("--tools-file", metavar="PATH")
