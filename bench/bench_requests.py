"""Requests besides tools through the endpoint: `resources/read` and `prompts/get`.

Run: `.venv/bin/python bench/bench_requests.py [--quick]`.

For the demo server over stdio and over streamable HTTP, it measures sequential
`resources/read demo://readme`, `prompts/get greet` and (for reference)
`tools/call echo`, directly with the SDK's client and through `mcp-manager run
--listen`, in interleaved rounds, and prints p50/p99 and what the endpoint adds.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from mcp import ClientSession
from private_state import use_private_state

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gateway import (
    child,
    demo_argv,
    free_port,
    http_session,
    manager_gateway,
    percentile,
    ready,
    stdio_session,
)

Op = Callable[[ClientSession, str], Awaitable[object]]


async def read(session: ClientSession, head: str) -> object:
    return await session.read_resource("demo://readme")


async def prompt(session: ClientSession, head: str) -> object:
    return await session.get_prompt(f"{head}greet", {"name": "Ada"})


async def call(session: ClientSession, head: str) -> object:
    return await session.call_tool(f"{head}echo", {"text": "hi"})


OPS: dict[str, Op] = {
    "resources/read": read,
    "prompts/get": prompt,
    "tools/call": call,
}


async def timed(op: Op, session: ClientSession, head: str) -> float:
    started = time.perf_counter()
    await op(session, head)
    return time.perf_counter() - started


async def run(upstream: str, rounds: int, per: int, work: Path) -> None:
    with contextlib.ExitStack() as stack:
        if upstream == "http":
            port = free_port()
            argv = [*demo_argv(), "--transport", "http", "--port", str(port)]
            stack.enter_context(child(argv, work / "upstream.log", port))
            url = f"http://127.0.0.1:{port}/mcp"
        else:
            url = "stdio"
        endpoint = stack.enter_context(manager_gateway(url, work))
        await ready(endpoint, "demo__echo")
        async with contextlib.AsyncExitStack() as sessions:
            if upstream == "http":
                direct = await sessions.enter_async_context(http_session(url))
            else:
                direct = await sessions.enter_async_context(stdio_session(demo_argv()))
            through = await sessions.enter_async_context(http_session(endpoint))
            paths = {"direct SDK": (direct, ""), "mcp-manager": (through, "demo__")}
            samples = {(p, o): [] for p in paths for o in OPS}  # type: ignore[var-annotated]
            for session, head in paths.values():  # warm up
                for op in OPS.values():
                    for _ in range(20):
                        await op(session, head)
            for _ in range(rounds):
                for name, (session, head) in paths.items():
                    for op_name, op in OPS.items():
                        for _ in range(per):
                            samples[(name, op_name)].append(
                                await timed(op, session, head)
                            )
    print(f"\nupstream: demo server over {upstream} (sequential, ms)")
    print(
        f"{'request':<16} {'direct p50':>10} {'via p50':>8} {'via p99':>8} {'added':>7}"
    )
    for op_name in OPS:
        direct_p50 = percentile(samples[("direct SDK", op_name)], 0.5)
        via = samples[("mcp-manager", op_name)]
        via_p50, via_p99 = percentile(via, 0.5), percentile(via, 0.99)
        print(
            f"{op_name:<16} {direct_p50 * 1000:>10.2f} {via_p50 * 1000:>8.2f} "
            f"{via_p99 * 1000:>8.2f} {(via_p50 - direct_p50) * 1000:>+7.2f}"
        )


def main() -> int:
    use_private_state()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests")
    args = parser.parse_args()
    rounds, per = (2, 100) if args.quick else (5, 200)
    work = Path(tempfile.mkdtemp(prefix="bench-rq-", dir="/tmp"))
    os.chmod(work, 0o700)
    try:
        for upstream in ("stdio", "http"):
            anyio.run(run, upstream, rounds, per, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
