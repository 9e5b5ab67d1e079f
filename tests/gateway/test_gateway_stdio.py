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


async def test_requests_in_flight_are_acknowledged_then_answered_at_the_end() -> None:
    """`fd_streams` on one socket, as `attach`'s: each request is
    acknowledged before it is handed on, an answered one is done, and one
    still in flight when serving is cancelled (the daemon stops) is answered
    with `stopped_error`, after the line a write had begun."""
    import socket

    import mcp.types as types
    from mcp.shared.message import SessionMessage

    from manager.core.once import STOPPED_CODE
    from manager.gateway.stdio import fd_streams

    ours, peer = socket.socketpair()
    ours.setblocking(False)
    peer.settimeout(10)
    lines = peer.makefile("rb")

    async def line() -> dict[str, object]:
        parsed = json.loads(await anyio.to_thread.run_sync(lines.readline))
        assert isinstance(parsed, dict)
        return parsed

    try:
        with anyio.fail_after(10):
            with anyio.CancelScope() as stop:
                async with fd_streams(ours.fileno(), ours.fileno(), acks=True) as (
                    read,
                    write,
                ):
                    peer.sendall(_request(1) + _request(2))
                    first = await read.receive()
                    # Acknowledged before either was handed on.
                    assert await line() == {"ack": [1, 2]}
                    assert isinstance(first, SessionMessage)
                    answer = types.JSONRPCResponse(jsonrpc="2.0", id=1, result={})
                    await write.send(SessionMessage(answer))
                    assert (await line())["id"] == 1
                    await read.receive()  # 2 is served, never answered
                    stop.cancel()
                    await anyio.sleep_forever()
        last = await line()
        error = last["error"]
        assert isinstance(error, dict) and last["id"] == 2
        assert error["code"] == STOPPED_CODE and "m2" in error["message"]
        ours.close()
        assert lines.readline() == b""  # 1 was answered once, and only once
    finally:
        lines.close()
        peer.close()
        ours.close()
