"""Gateway benchmark: call latency and throughput, direct vs mcp-manager vs FastMCP.

Run: `.venv/bin/python bench/bench_gateway.py [--quick] [--fastmcp-python PATH]`.

For each upstream (the SDK demo server over stdio, and over streamable HTTP) it
measures `echo` calls three ways, in the same run, with the official SDK client:

- direct: a `ClientSession` straight to the upstream;
- mcp-manager: `mcp-manager run --listen` (the aggregated endpoint, streamable
  HTTP) in front of the upstream, called as `demo__echo`;
- mcp-manager stdio: `mcp-manager stdio` (spawned by the client, as an editor
  does) in front of the upstream, called as `demo__echo`;
- FastMCP: FastMCP's proxy (`create_proxy`, formerly `FastMCP.as_proxy`) with one
  connected upstream client, served over streamable HTTP (`fastmcp_proxy.py`).

Figures: p50/p99 of sequential calls (one caller), then p50/p99 per call and
total calls/s with 16 concurrent callers on one session; then mcp-manager next
to FastMCP as ratios (p50 ratio < 1 and calls/s ratio > 1 favour mcp-manager).
All three paths run at once and are measured in interleaved rounds (sequential
batch, then concurrent batch, path after path), so background load on the
machine weighs on each of them alike.

FastMCP is not a dependency of mcp-manager. It runs from its own venv, by default
`/tmp/mcp-manager-fastmcp-venv` (`--install-fastmcp` creates it):

    python3 -m venv /tmp/mcp-manager-fastmcp-venv
    /tmp/mcp-manager-fastmcp-venv/bin/pip install 'fastmcp==4.1.2' 'mcp==2.3.0'

(4.1.2: later 4.1.x releases require a certifi newer than the package index here
has.) Without it the FastMCP rows are skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from private_state import use_private_state

ROOT = Path(__file__).resolve().parent.parent
FASTMCP_VENV = Path("/tmp/mcp-manager-fastmcp-venv")
FASTMCP_PINS = ("fastmcp==4.1.2", "mcp==2.3.0")
CALLERS = 16
START_TIMEOUT = 30.0
TOKEN = os.environ.setdefault("MCP_MANAGER_TOKEN", secrets.token_urlsafe(24))
"""The bearer token of the daemons started here (they inherit it); every
client here sends it to every peer alike (`AUTH`), which the others ignore."""
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@dataclass
class Figures:
    """One path's numbers (seconds, calls/s)."""

    seq_p50: float
    seq_p99: float
    con_p50: float
    con_p99: float
    rate: float


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_port(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", port), timeout=0.2),
        ):
            return
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{proc.args} did not listen:\n{log.read_text()}")
        time.sleep(0.02)


@contextlib.contextmanager
def child(
    argv: list[str],
    log: Path,
    port: int | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """A subprocess (its output in `log`), killed and reaped at the end."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        if port is not None:
            wait_port(port, proc, log)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@asynccontextmanager
async def http_session(url: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(
            headers=AUTH,
            timeout=httpx2.Timeout(30, read=300),
            # expire idle connections before the servers do (uvicorn: 5 s);
            # sessions sit idle while the other paths are measured
            limits=httpx2.Limits(keepalive_expiry=2.0),
        ) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def stdio_session(argv: list[str]) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@dataclass
class Samples:
    """Raw timings of one path, gathered over interleaved rounds."""

    sequential: list[float] = field(default_factory=list)
    concurrent: list[float] = field(default_factory=list)
    calls: int = 0
    wall: float = 0.0

    def figures(self) -> Figures:
        return Figures(
            seq_p50=statistics.median(self.sequential),
            seq_p99=percentile(self.sequential, 0.99),
            con_p50=statistics.median(self.concurrent),
            con_p99=percentile(self.concurrent, 0.99),
            rate=self.calls / self.wall,
        )


async def warm_up(session: ClientSession, tool: str) -> None:
    await session.list_tools()  # the SDK validates results against listed schemas
    for i in range(30):
        await call(session, tool, f"warm {i}")


async def call(session: ClientSession, tool: str, text: str) -> float:
    started = time.perf_counter()
    result = await session.call_tool(tool, {"text": text})
    elapsed = time.perf_counter() - started
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {result.content}")
    return elapsed


async def measure_round(
    session: ClientSession, tool: str, seq: int, per: int, into: Samples
) -> None:
    """One round: `seq` sequential calls, then CALLERS callers of `per` calls."""
    for i in range(seq):
        into.sequential.append(await call(session, tool, f"seq {i}"))

    async def caller(n: int) -> None:
        for i in range(per):
            into.concurrent.append(await call(session, tool, f"c{n} {i}"))

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for n in range(CALLERS):
            tg.start_soon(caller, n)
    into.wall += time.perf_counter() - started
    into.calls += CALLERS * per


def demo_argv() -> list[str]:
    return [sys.executable, "-m", "manager.demo_server"]


def demo_script(upstream: str, path: Path) -> Path:
    """A startup.lua with one connection `demo` to `upstream` (a URL or stdio)."""
    if upstream.startswith("http"):
        path.write_text(f'mcp_add("demo", "{upstream}")\n')
    else:
        argv = demo_argv()
        args = ", ".join(f'"{a}"' for a in argv[1:])
        path.write_text(
            f'mcp_add("demo", {{command = "{argv[0]}", args = {{{args}}}}})\n'
        )
    return path


def stdio_front_argv(upstream: str, work: Path) -> list[str]:
    """`mcp-manager stdio` in front of `upstream`, as a client would spawn it."""
    script = demo_script(upstream, work / f"stdio-front-{free_port()}.lua")
    log = work / "stdio-front.log"
    return [
        sys.executable,
        "-m",
        "manager",
        "stdio",
        str(script),
        "--log-file",
        str(log),
    ]


@contextlib.contextmanager
def manager_gateway(upstream: str, work: Path) -> Iterator[str]:
    """`mcp-manager run --listen` with one connection `demo`; yields the URL."""
    with manager_gateway_process(upstream, work) as (url, _):
        yield url


@contextlib.contextmanager
def manager_gateway_process(
    upstream: str, work: Path
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`manager_gateway`, also yielding the `mcp-manager run` process."""
    port = free_port()
    script = demo_script(upstream, work / f"startup-{port}.lua")
    argv = [
        sys.executable,
        "-m",
        "manager",
        "run",
        str(script),
        "--log-level",
        "WARNING",
    ]
    argv += ["--socket", str(work / f"c-{port}.sock"), "--listen", f"127.0.0.1:{port}"]
    with child(argv, work / "manager.log", port) as proc:
        yield f"http://127.0.0.1:{port}/mcp", proc


@contextlib.contextmanager
def fastmcp_proxy(python: Path, upstream: str, work: Path) -> Iterator[str]:
    with fastmcp_proxy_process(python, upstream, work) as (url, _):
        yield url


@contextlib.contextmanager
def fastmcp_proxy_process(
    python: Path, upstream: str, work: Path
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`fastmcp_proxy`, also yielding the proxy's process."""
    port = free_port()
    argv = [str(python), str(ROOT / "bench" / "fastmcp_proxy.py"), "--port", str(port)]
    argv += ["--url", upstream] if upstream.startswith("http") else ["--", *demo_argv()]
    with child(argv, work / "fastmcp.log", port) as proc:
        yield f"http://127.0.0.1:{port}/mcp", proc


async def ready(url: str, tool: str) -> None:
    """Wait until a call through the proxy succeeds (upstream connected)."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            async with http_session(url) as session:
                result = await session.call_tool(tool, {"text": "ready?"})
                if not result.is_error:
                    return
        except Exception:  # boundary: not up yet, try again
            if time.monotonic() > deadline:
                raise
        await anyio.sleep(0.2)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:6.2f}"


def report(upstream: str, rows: dict[str, Figures]) -> None:
    print(f"\nupstream: demo server over {upstream}; {CALLERS} concurrent callers")
    print(
        f"{'path':<18} {'seq p50':>8} {'seq p99':>8} {'16x p50':>8} {'16x p99':>8}"
        f" {'calls/s':>8}   (ms)"
    )
    for name, f in rows.items():
        print(
            f"{name:<18} {ms(f.seq_p50):>8} {ms(f.seq_p99):>8} {ms(f.con_p50):>8}"
            f" {ms(f.con_p99):>8} {f.rate:8.0f}"
        )
    ours, theirs = rows.get("mcp-manager"), rows.get("FastMCP proxy")
    if ours and theirs:
        print(
            f"mcp-manager / FastMCP: seq p50 {ours.seq_p50 / theirs.seq_p50:.2f}x, "
            f"16x p50 {ours.con_p50 / theirs.con_p50:.2f}x, "
            f"calls/s {ours.rate / theirs.rate:.2f}x "
            "(target: p50 <= 0.85x, calls/s >= 1.00x)"
        )
    direct = rows.get("direct SDK")
    if direct and ours:
        print(
            f"overhead over direct: mcp-manager +{ms(ours.seq_p50 - direct.seq_p50)} ms"
            + (f", FastMCP +{ms(theirs.seq_p50 - direct.seq_p50)} ms" if theirs else "")
            + " (seq p50)"
        )
    if direct:
        for name, f in rows.items():
            if name != "direct SDK":
                print(
                    f"  {name}: +{ms(f.seq_p50 - direct.seq_p50)} ms p50, "
                    f"{f.rate / direct.rate:.2f}x direct throughput"
                )


def install_fastmcp() -> Path:
    python = FASTMCP_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(FASTMCP_VENV)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", *FASTMCP_PINS], check=True
    )
    return python


def find_fastmcp(given: str | None) -> Path | None:
    candidates = [given] if given else [str(FASTMCP_VENV / "bin" / "python")]
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            probe = subprocess.run(
                [candidate, "-c", "import fastmcp"], capture_output=True, check=False
            )
            if probe.returncode == 0:
                return Path(candidate)
    return None


async def compare(
    paths: dict[str, tuple[str | list[str], str]], rounds: int, seq: int, per: int
) -> dict[str, Figures]:
    """Open a session per path, then measure them in interleaved rounds, so that
    load from elsewhere on the machine hits every path alike."""
    samples = {name: Samples() for name in paths}
    async with contextlib.AsyncExitStack() as stack:
        sessions: dict[str, tuple[ClientSession, str]] = {}
        for name, (target, tool) in paths.items():
            if isinstance(target, list):
                session = await stack.enter_async_context(stdio_session(target))
            else:
                await ready(target, tool)
                session = await stack.enter_async_context(http_session(target))
            await warm_up(session, tool)
            sessions[name] = (session, tool)
        for _ in range(rounds):
            for name, (session, tool) in sessions.items():
                await measure_round(session, tool, seq, per, samples[name])
    return {name: s.figures() for name, s in samples.items()}


INITIALIZE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
    b'"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}\n'
)


def first_answer(argv: list[str], runs: int = 7) -> float:
    """Median seconds from spawn to the answer to `initialize` on stdout."""
    times = []
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for _ in range(runs):
        started = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(INITIALIZE)
        proc.stdin.flush()
        proc.stdout.readline()
        times.append(time.perf_counter() - started)
        proc.stdin.close()
        proc.wait(10)
    return statistics.median(times)


async def main_async(args: argparse.Namespace, fastmcp_python: Path | None) -> None:
    rounds, seq, per = (2, 60, 10) if args.quick else (5, 120, 20)
    work = Path(tempfile.mkdtemp(prefix="bench-gw-", dir="/tmp"))
    os.chmod(work, 0o700)
    try:
        front = first_answer(stdio_front_argv("stdio", work))
        alone = first_answer(demo_argv())
        print(
            f"\nspawn to first answer (initialize), median of 7: mcp-manager stdio "
            f"{front * 1000:.0f} ms; the demo server itself {alone * 1000:.0f} ms "
            "(target < 500 ms)"
        )
        for upstream in ("stdio", "http"):
            with contextlib.ExitStack() as stack:
                if upstream == "http":
                    port = free_port()
                    argv = [*demo_argv(), "--transport", "http", "--port", str(port)]
                    stack.enter_context(child(argv, work / "upstream.log", port))
                    url = f"http://127.0.0.1:{port}/mcp"
                    target: str | list[str] = url
                else:
                    url, target = "stdio", demo_argv()
                paths: dict[str, tuple[str | list[str], str]] = {
                    "direct SDK": (target, "echo"),
                    "mcp-manager": (
                        stack.enter_context(manager_gateway(url, work)),
                        "demo__echo",
                    ),
                    "mcp-manager stdio": (stdio_front_argv(url, work), "demo__echo"),
                }
                if fastmcp_python is not None:
                    proxy = stack.enter_context(
                        fastmcp_proxy(fastmcp_python, url, work)
                    )
                    paths["FastMCP proxy"] = (proxy, "echo")
                rows = await compare(paths, rounds, seq, per)
            report(upstream, rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    use_private_state()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls")
    parser.add_argument("--fastmcp-python", help="a Python with fastmcp installed")
    parser.add_argument(
        "--install-fastmcp",
        action="store_true",
        help=f"create {FASTMCP_VENV} with {' '.join(FASTMCP_PINS)} first",
    )
    args = parser.parse_args()
    if args.install_fastmcp:
        install_fastmcp()
    python = find_fastmcp(args.fastmcp_python)
    if python is None:
        print(
            "FastMCP not found: its rows are skipped. Install it apart from the "
            f"project with --install-fastmcp (creates {FASTMCP_VENV}).",
            file=sys.stderr,
        )
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    anyio.run(main_async, args, python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
