"""A hand-written stdio MCP server: newline-delimited JSON-RPC, standard library only.

It starts in tens of milliseconds (no `import mcp`), so reconnect tests and
benchmarks can restart it hundreds of times. It speaks the handshake era like a
third-party 1.x server: `initialize` answers protocol `2025-06-18`, plus `ping`,
`tools/list` and `tools/call`; anything else gets -32601 (Method not found),
including `server/discover`.

Tools: `echo(text)` returns `text`; `pid()` returns the process id;
`crash(code)` exits at once with `code`, without a reply.

Run as a script: `python tests/servers/raw_legacy.py [flags]`. Flags:

- `--crash-after-handshake`: exit with code 3, 50 ms after the first
  `tools/list` reply.
- `--hang-on-initialize`: read requests, never answer; exit on stdin EOF.
- `--garbage`: write a non-JSON line at start and for every line read, never a
  real reply; exit on stdin EOF.
- `--exit-immediately CODE`: exit at once with `CODE`.
- `--ignore-sigterm`: ignore SIGTERM and stdin EOF; only SIGKILL ends it.
- `--slow-start SECONDS`: sleep before reading stdin.
- `--busy-start SECONDS`: burn CPU that long before reading stdin (a heavy
  start, like an SDK server's imports on a loaded machine).
- `--sleep-tool`: also list `sleep(seconds)`, which answers `slept SECONDS`
  after that long (nothing else is served meanwhile).
- `--fail-tool`: also list `fail(message)`, which answers a result with
  `isError: true` and `message` as its text (a tool error, not a dead server).
- `--tools-file PATH`: list the tools in that JSON file (read at every
  `tools/list`, so a test can change them) plus `relist()`, which sends
  `notifications/tools/list_changed` before its reply.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import raw_tools
else:  # `servers.raw_tools` when the tests import this file, `raw_tools` when
    # it runs as a script (`python -S tests/servers/<name>.py`): a sibling
    raw_tools = importlib.import_module(
        f"{__package__}.raw_tools" if __package__ else "raw_tools"
    )

__all__ = ["PROTOCOL_VERSION", "SERVER_NAME", "main"]

SERVER_NAME = "raw-legacy"
PROTOCOL_VERSION = "2025-06-18"
CRASH_AFTER_HANDSHAKE_CODE = 3
CRASH_AFTER_HANDSHAKE_DELAY = 0.05
"""Seconds between the first `tools/list` reply and the exit."""
GARBAGE_LINE = "this is not JSON-RPC\n"
METHOD_NOT_FOUND = -32601


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


_TOOLS_FILE: list[str] = []  # --tools-file, if given
_SLEEP_TOOL: list[bool] = []  # --sleep-tool, if given
_FAIL_TOOL: list[bool] = []  # --fail-tool, if given


def _call_tool(params: dict[str, Any]) -> dict[str, Any]:
    name, args = params.get("name"), params.get("arguments") or {}
    if name == "relist":
        _send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        return raw_tools.text("told")
    return raw_tools.call(
        name, args, sleep_tool=bool(_SLEEP_TOOL), fail_tool=bool(_FAIL_TOOL)
    )


def _result(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The result for a request, or `None` when the method is not served."""
    if method == "initialize":
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": SERVER_NAME, "version": "1.0"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {
            "tools": raw_tools.listed(
                next(iter(_TOOLS_FILE), None), bool(_SLEEP_TOOL), bool(_FAIL_TOOL)
            )
        }
    if method == "tools/call":
        return _call_tool(params)
    return None


def _serve(*, crash_after_handshake: bool) -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue  # a notification: nothing to answer
        method = message.get("method", "")
        result = _result(method, message.get("params") or {})
        if result is None:
            error = {"code": METHOD_NOT_FOUND, "message": f"Method not found: {method}"}
            _send({"jsonrpc": "2.0", "id": message["id"], "error": error})
            continue
        _send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        if crash_after_handshake and method == "tools/list":
            time.sleep(CRASH_AFTER_HANDSHAKE_DELAY)
            os._exit(CRASH_AFTER_HANDSHAKE_CODE)


def _drain(reply: str | None) -> None:
    """Read stdin to EOF, writing `reply` (if any) for every line."""
    if reply is not None:
        sys.stdout.write(reply)
        sys.stdout.flush()
    for _line in sys.stdin:
        if reply is not None:
            sys.stdout.write(reply)
            sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Serve on stdin/stdout until EOF, misbehaving as the flags say.

    Args:
        argv: Arguments without the program name; `sys.argv[1:]` by default.

    Returns:
        The process exit code.
    """
    parser = argparse.ArgumentParser(description="hand-written MCP stdio server")
    raw_tools.add_flags(parser)
    args = parser.parse_args(argv)
    if args.sleep_tool:
        _SLEEP_TOOL.append(True)
    if args.fail_tool:
        _FAIL_TOOL.append(True)
    if args.tools_file:
        _TOOLS_FILE.append(args.tools_file)
    if args.exit_immediately is not None:
        return int(args.exit_immediately)
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(args.slow_start)
    busy_until = time.process_time() + args.busy_start
    while time.process_time() < busy_until:
        pass
    if args.garbage:
        _drain(GARBAGE_LINE)
    elif args.hang_on_initialize:
        _drain(None)
    else:
        _serve(crash_after_handshake=args.crash_after_handshake)
    while args.ignore_sigterm:
        signal.pause()  # stdin is closed; wait for the SIGKILL
    return 0


if __name__ == "__main__":
    sys.exit(main())
