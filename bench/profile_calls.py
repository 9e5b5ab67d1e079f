"""Where a forwarded call's CPU goes: a profile of the endpoint, by package.

Run: `.venv/bin/python bench/profile_calls.py [--calls N] [--upstream stdio|http]
[--era 2025-11-25|2026] [--protocol auto|legacy|2026-07-28] [--top N]
[--no-profile]`.

This process runs the daemon's manager and HTTP endpoint (telemetry off) in
front of the demo server (a subprocess), under cProfile with the process CPU
clock; a client in another process makes N sequential `demo__echo` calls. The
profile covers only the calls (start-up is excluded) and is printed as CPU per
call and each package's share of it (own time of the functions in that
package), with the event-loop turns per call: what a step of issue 14 changes
shows up here.

`--no-profile` prints only the CPU and wall time per call, unprofiled (what
`bench/instructions.py` runs under callgrind).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import defaultdict
from functools import partial
from pathlib import Path

import anyio
from private_state import use_private_state

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from bench_gateway import child, demo_argv, free_port  # noqa: E402

from manager.core.spec import parse_spec  # noqa: E402
from manager.engine.bus import EventBus  # noqa: E402
from manager.engine.manager import Manager  # noqa: E402
from manager.gateway import EndpointOptions, Gateway  # noqa: E402

CLIENT = textwrap.dedent(
    """
    import sys, time, anyio, httpx2
    from contextlib import AsyncExitStack
    from mcp import Client, ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main(url, n, era):
        async with AsyncExitStack() as stack:
            if era == "2026":  # the SDK's default client negotiates 2026-07-28
                s = await stack.enter_async_context(Client(url))
            else:
                http = await stack.enter_async_context(httpx2.AsyncClient())
                r, w, *_ = await stack.enter_async_context(
                    streamable_http_client(url, http_client=http)
                )
                s = await stack.enter_async_context(ClientSession(r, w))
                await s.initialize()
            for i in range(50):
                await s.call_tool("demo__echo", {"text": "warm"})
            print("go", flush=True)
            sys.stdin.readline()
            t0 = time.perf_counter()
            for i in range(n):
                await s.call_tool("demo__echo", {"text": "x"})
            print("done %.6f" % (time.perf_counter() - t0), flush=True)

    anyio.run(main, sys.argv[1], int(sys.argv[2]), sys.argv[3])
    """
)

PACKAGES = (
    "manager",
    "mcp",
    "mcp_types",
    "pydantic",
    "pydantic_core",
    "anyio",
    "asyncio",
    "h11",
    "httpx2",
    "httpcore2",
    "httpcore",
    "uvicorn",
    "starlette",
    "opentelemetry",
    "json",
    "sse_starlette",
)


def package_of(filename: str) -> str:
    if filename.startswith(("~", "<")):
        return "builtins"
    parts = Path(filename).parts
    for name in PACKAGES:
        if name in parts:
            return name
    return "other"


class TurnCounter:
    """Counts event-loop iterations (asyncio's `_run_once`)."""

    def __init__(self) -> None:
        self.turns = 0
        base = asyncio.base_events.BaseEventLoop
        self._original = base._run_once  # type: ignore[attr-defined]
        counter = self

        def counted(loop: asyncio.AbstractEventLoop) -> None:
            counter.turns += 1
            counter._original(loop)

        base._run_once = counted  # type: ignore[attr-defined]


async def run(
    calls: int,
    upstream: str,
    work: Path,
    top: int = 0,
    era: str = "2025-11-25",
    protocol: str = "auto",
    profile: bool = True,
) -> None:
    turns = TurnCounter()
    with_http = upstream == "http"
    bus = EventBus()
    if with_http:
        port = free_port()
        argv = [*demo_argv(), "--transport", "http", "--port", str(port)]
        ctx = child(argv, work / "upstream.log", port)
        ctx.__enter__()
        spec = parse_spec(
            "demo", f"http://127.0.0.1:{port}/mcp", {"protocol": protocol}
        )
    else:
        argv = demo_argv()
        spec = parse_spec(
            "demo", {"command": argv[0], "args": argv[1:]}, {"protocol": protocol}
        )
    async with Manager(bus) as manager, anyio.create_task_group() as tg:
        gateway = Gateway(manager, bus)
        await tg.start(partial(gateway.serve, EndpointOptions("127.0.0.1", 0)))
        manager.add(spec)
        await manager.connection("demo").wait_connected()  # type: ignore[union-attr]
        client = await anyio.open_process(
            [sys.executable, "-c", CLIENT, str(gateway.url), str(calls), era],
            stdout=subprocess.PIPE,
            stdin=subprocess.PIPE,
        )
        assert client.stdout is not None and client.stdin is not None
        lines = client.stdout
        buffer = b""
        while b"go" not in buffer:
            buffer += await lines.receive()
        profiler = cProfile.Profile(time.process_time)
        turns_before = turns.turns
        cpu_before = time.process_time()
        if profile:
            profiler.enable()
        await client.stdin.send(b"\n")
        buffer = b""
        while b"done" not in buffer:
            buffer += await lines.receive()
        profiler.disable()
        cpu = time.process_time() - cpu_before
        loop_turns = turns.turns - turns_before
        wall = float(buffer.split(b"done")[1].split()[0])
        await client.wait()
        await gateway.aclose()
        tg.cancel_scope.cancel()
    if with_http:
        ctx.__exit__(None, None, None)
    print(
        f"\n{calls} calls ({era} client) through the endpoint to the demo server "
        f"over {upstream} (protocol = {protocol!r})"
    )
    print(f"wall per call (client)      {wall / calls * 1000:7.3f} ms")
    print(f"daemon CPU per call         {cpu / calls * 1000:7.3f} ms")
    if not profile:
        return
    stats = pstats.Stats(profiler)
    shares: dict[str, float] = defaultdict(float)
    total = 0.0
    for (filename, _, _), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        shares[package_of(filename)] += tottime
        total += tottime
    print(f"event-loop turns per call   {loop_turns / calls:7.1f}")
    print("CPU by package (own time, share of the profiled total):")
    for name, seconds in sorted(shares.items(), key=lambda kv: -kv[1]):
        if seconds / total >= 0.005:
            print(f"  {name:<16} {seconds / total * 100:5.1f} %")
    if top:
        print(f"The {top} functions with the most own time (µs per call):")
        rows = sorted(
            stats.stats.items(),  # type: ignore[attr-defined]
            key=lambda kv: -kv[1][2],
        )
        for (filename, line, function), (_, ncalls, tottime, _, _) in rows[:top]:
            where = f"{package_of(filename)}:{Path(filename).name}:{line}"
            print(
                f"  {tottime / calls * 1e6:7.1f}  {ncalls / calls:5.1f}x  "
                f"{function} ({where})"
            )


def main() -> int:
    use_private_state()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--upstream", choices=("stdio", "http"), default="stdio")
    parser.add_argument(
        "--top", type=int, default=0, help="also list the N costliest functions"
    )
    parser.add_argument(
        "--era",
        choices=("2025-11-25", "2026"),
        default="2025-11-25",
        help="the client: a handshake ClientSession, or the SDK's default Client "
        "(2026-07-28)",
    )
    parser.add_argument(
        "--protocol",
        choices=("auto", "legacy", "2026-07-28"),
        default="auto",
        help="the demo server's declared protocol (default: auto)",
    )
    parser.add_argument(
        "--no-profile",
        action="store_true",
        help="no cProfile: CPU and wall time per call only",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="profile-calls-"))
    anyio.run(
        run,
        args.calls,
        args.upstream,
        work,
        args.top,
        args.era,
        args.protocol,
        not args.no_profile,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
