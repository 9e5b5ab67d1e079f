"""The endpoint's own stdin/stdout (`gateway.stdio`), in a real subprocess.

A small program serves `stdio_streams` and answers each request with its id;
while it serves it prints to stdout (which must not reach the wire), and after
it prints again (stdout must be the wire again).
"""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import pytest

pytestmark = pytest.mark.anyio

PROGRAM = r"""
import sys, anyio
import mcp.types as types
from mcp.shared.message import SessionMessage
from manager.gateway.stdio import stdio_streams

async def main():
    async with stdio_streams() as (read, write):
        print("stray output while serving", flush=True)
        async with anyio.create_task_group() as tg:
            async for item in read:
                if isinstance(item, Exception):
                    print("bad line", file=sys.stderr, flush=True)
                    continue
                message = item.message
                answer = types.JSONRPCResponse(
                    jsonrpc="2.0", id=message.id, result={"seen": message.method}
                )
                tg.start_soon(write.send, SessionMessage(answer))
    print("stdout is ours again", flush=True)

anyio.run(main)
"""


def _request(n: int) -> bytes:
    message = {"jsonrpc": "2.0", "id": n, "method": f"m{n}", "params": {}}
    return json.dumps(message).encode() + b"\n"


async def test_stdio_streams_serve_the_wire_and_keep_stray_output_off_it() -> None:
    def run() -> tuple[bytes, bytes]:
        proc = subprocess.run(
            [sys.executable, "-c", PROGRAM],
            # three requests in one write, garbage, and a last line without
            # its newline
            input=_request(1)
            + _request(2)
            + _request(3)
            + b"not json\n"
            + _request(4).rstrip(b"\n"),
            capture_output=True,
            timeout=20,
            check=True,
        )
        return proc.stdout, proc.stderr

    stdout, stderr = await anyio.to_thread.run_sync(run)
    lines = stdout.decode().splitlines()
    assert lines[-1] == "stdout is ours again"
    answers = [json.loads(line) for line in lines[:-1]]
    assert sorted(a["id"] for a in answers) == [1, 2, 3, 4]
    assert all(a["result"] == {"seen": f"m{a['id']}"} for a in answers)
    assert b"stray output while serving" in stderr
    assert b"bad line" in stderr
