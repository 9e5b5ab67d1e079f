"""Peer benchmark: mcp-manager beside Node's mcp-hub and FastMCP's proxy, one run.

Run (from the repository root, with the project's venv):

    .venv/bin/python bench/bench_peers.py --install-mcp-hub --install-fastmcp
    .venv/bin/python bench/bench_peers.py [--quick] [--node PATH]

`--install-mcp-hub` runs `npm install --prefix /tmp/mcp-manager-mcphub
mcp-hub@4.2.1` (Node's mcp-hub, by ravitemer; pinned), `--install-fastmcp` creates
FastMCP's venv as `bench_gateway.py` does; both are outside the repository and
neither is a dependency of mcp-manager. Without one, its rows are skipped. Node:
the `node` on PATH (mcp-hub 4.2.1 runs on Node 20) or `--node PATH`.

For each upstream (the SDK demo server `python -m manager.demo_server` over stdio,
then over streamable HTTP), every path below calls `echo` in the same run, in
interleaved rounds (sequential calls, then 16 concurrent callers on one session,
path after path, in reverse order every other round), so that background load
and a path's place in the round weigh on all of them alike:

- direct SDK: `ClientSession` straight to the upstream;
- mcp-manager HTTP: `mcp-manager run --listen` (streamable HTTP), `demo__echo`;
- mcp-manager stdio: `mcp-manager stdio` spawned by the client, `demo__echo`;
- mcp-hub SSE /mcp: mcp-hub's MCP endpoint. In 4.2.1 it is the legacy SSE
  transport only (`GET /mcp` opens the stream, `POST /messages?sessionId=`
  carries requests; nothing answers `POST /mcp`, whatever the README says), so
  it is called with the SDK's `sse_client`. Tools are named
  `<server name, non-alphanumerics as _>__<tool>`: `demo__echo`. (Closing an
  SSE session sets off a loop of close callbacks in 4.2.1: a few thousand
  "client disconnected" log lines ending in "Maximum call stack size
  exceeded", for a few hundred ms. It happens only as sessions close, outside
  the measured rounds.);
- mcp-hub REST: `POST /api/servers/tools` with `{server_name, tool, arguments}`
  (httpx2 on one keep-alive pool, `bare_client`); not MCP, listed for
  completeness;
- mcp-manager HTTP raw: the same endpoint as mcp-manager HTTP, called as
  mcp-hub REST is: a `tools/call` JSON-RPC POST (with the session's headers)
  from the same bare client (`bare_client`), so that what the proxy adds is compared
  without the SDK client's own cost on one side only;
- FastMCP proxy: `bench/fastmcp_proxy.py` (streamable HTTP), `echo`.

Each upstream gets up to 5 rounds (`--quick`: 2) after a warm-up, and no round
starts that would end past 65 s (25 s) of measuring (`--budget`), so that even a
loaded machine is done in about three minutes. It prints, per upstream, p50/p99
(sequential and at 16 callers), the p50 added over direct, calls/s at 16
callers, and each proxy process's CPU time per call during the 16-caller batches
(utime+stime from /proc/PID/stat; the upstream's CPU is not in it). Then a
summary: mcp-manager's added p50 over the best peer's (<= 1 favours mcp-manager)
and its calls/s over the best peer's (>= 1 favours mcp-manager). "REST,
same client" is the one comparison of like with like: our raw POST and
mcp-hub's REST front, the same bare client, one request and one JSON answer
each. "MCP, SDK clients" compares MCP fronts through the SDK's clients, but
not the same one: mcp-hub 4.2.1 serves only legacy SSE, whose client posts
and reads the answer off a stream it holds open, where ours is streamable
HTTP, a POST and its answer (the SDK's streamable HTTP pair is the slower:
straight at the SDK's demo server, 5.2 ms per call against 2.7 ms over SSE,
same run, this machine). The "clients differ" rows
(the SDK's client here, the bare one there) carry the SDK client's whole
cost, 2-3 ms per call over the bare one.
Where a path is faster than direct (an added p50 below 0, as through a lean
front to a streamable HTTP upstream, whose direct SDK client is the slow
part), the ratio means nothing: the summary names who adds less and by how
much ("ours -0.67ms").

Network namespace: mcp-hub fetches a marketplace catalogue from the internet at
start and listens on all interfaces. So when mcp-hub is to be measured, the
bench re-executes itself inside a private network namespace that has only
loopback up (`unshare -n sh -c 'ip link set lo up; exec python ...'`; `unshare
-r -n` when not root): the catalogue fetch fails at once (mcp-hub carries on
with an empty catalogue) and nothing is reachable from outside. Every path,
direct, mcp-manager, FastMCP and mcp-hub, then runs in that same namespace and
the same run; no path crosses it. mcp-hub's HOME and XDG directories point into
the bench's temporary directory, so its logs and workspace cache stay there.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psutil
from mcp import ClientSession
from mcp.client.sse import sse_client
from private_state import use_private_state

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gateway import (
    AUTH,
    CALLERS,
    ROOT,
    START_TIMEOUT,
    Figures,
    Samples,
    child,
    demo_argv,
    fastmcp_proxy_process,
    find_fastmcp,
    free_port,
    http_session,
    install_fastmcp,
    manager_gateway_process,
    ms,
    stdio_front_argv,
    stdio_session,
)

from manager.transport.http.pool import PoolTransport

MCPHUB_VERSION = "4.2.1"
MCPHUB_PREFIX = Path("/tmp/mcp-manager-mcphub")
MCPHUB_CLI = MCPHUB_PREFIX / "node_modules" / "mcp-hub" / "dist" / "cli.js"
IN_NETNS = "MCP_MANAGER_BENCH_NETNS"  # set once the bench runs in its namespace
TICK = os.sysconf("SC_CLK_TCK")

DIRECT = "direct SDK"
OURS_HTTP = "mcp-manager HTTP"
OURS_STDIO = "mcp-manager stdio"
OURS_RAW = "mcp-manager HTTP raw"
HUB_SSE = "mcp-hub SSE /mcp"
HUB_REST = "mcp-hub REST"
FASTMCP = "FastMCP proxy"
PEERS = (HUB_SSE, HUB_REST, FASTMCP)
MCP_PEERS = (HUB_SSE, FASTMCP)  # the peers an MCP client can use as they are

Call = Callable[[str], Awaitable[float]]


# ------------------------------------------------------------------ mcp-hub


def install_mcp_hub() -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm not found: needed for --install-mcp-hub")
    subprocess.run(
        [npm, "install", "--prefix", str(MCPHUB_PREFIX), "--no-audit", "--no-fund"]
        + [f"mcp-hub@{MCPHUB_VERSION}"],
        check=True,
    )


def mcp_hub_config(upstream: str, path: Path) -> Path:
    """mcp-hub's config: one server `demo`, stdio (command/args) or `url`."""
    if upstream.startswith("http"):
        server: dict[str, object] = {"url": upstream}
    else:
        argv = demo_argv()
        # mcp-hub gives a stdio server only a default environment plus `env`
        server = {
            "command": argv[0],
            "args": argv[1:],
            "cwd": str(ROOT),
            "env": {"PYTHONPATH": str(ROOT)},
        }
    path.write_text(json.dumps({"mcpServers": {"demo": server}}, indent=2))
    return path


@contextlib.contextmanager
def mcp_hub(
    node: str, upstream: str, work: Path
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """mcp-hub in front of `upstream`; yields its base URL and its node process."""
    port = free_port()
    home = work / f"mcp-hub-{port}"
    home.mkdir()
    env = dict(os.environ, HOME=str(home))
    for name in ("STATE", "CONFIG", "CACHE", "DATA"):
        env[f"XDG_{name}_HOME"] = str(home / name.lower())
    config = mcp_hub_config(upstream, work / f"mcp-hub-{port}.json")
    argv = [node, str(MCPHUB_CLI), "--port", str(port), "--config", str(config)]
    with child(argv, work / "mcp-hub.log", port, env=env) as proc:
        yield f"http://127.0.0.1:{port}", proc


async def mcp_hub_ready(base: str) -> None:
    """Wait until mcp-hub says it is ready and `demo` is connected."""
    deadline = time.monotonic() + START_TIMEOUT
    health: Any = None
    async with httpx2.AsyncClient(timeout=5) as http:
        while True:
            with contextlib.suppress(httpx2.HTTPError, ValueError):
                health = (await http.get(f"{base}/api/health")).json()
                states = {s["name"]: s["status"] for s in health.get("servers", [])}
                if health.get("state") == "ready" and states.get("demo") == "connected":
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"mcp-hub not ready: {health}")
            await anyio.sleep(0.1)


@asynccontextmanager
async def sse_session(url: str) -> AsyncIterator[ClientSession]:
    async with (
        sse_client(url, timeout=30) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def bare_client() -> httpx2.AsyncClient:
    """The bare client of mcp-hub REST and mcp-manager HTTP raw (the same for
    both): httpx2 over the daemon's own HTTP/1.1 pool (`PoolTransport`, asyncio
    and httptools). With httpx2's default transport the client spent about
    1.6 ms of CPU per call, more than either proxy; on a 2-core machine the
    16-caller rate then measured the client more than the proxy behind it."""
    return httpx2.AsyncClient(
        headers=AUTH,
        timeout=httpx2.Timeout(30),
        transport=PoolTransport(keepalive_expiry=2.0),
    )


def rest_call(http: httpx2.AsyncClient, base: str) -> Call:
    url = f"{base}/api/servers/tools"

    async def call(text: str) -> float:
        body = {"server_name": "demo", "tool": "echo", "arguments": {"text": text}}
        started = time.perf_counter()
        response = await http.post(url, json=body)
        elapsed = time.perf_counter() - started
        result = response.json().get("result") if response.is_success else None
        if not result or result.get("isError"):
            raise RuntimeError(f"mcp-hub REST echo failed: {response.text}")
        return elapsed

    return call


async def raw_mcp_call(http: httpx2.AsyncClient, url: str) -> Call:
    """`demo__echo` as a bare JSON-RPC POST on an initialized session."""
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
    }
    opened = await http.post(
        url,
        headers=headers,
        json={
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        },
    )
    headers["mcp-session-id"] = opened.headers["mcp-session-id"]
    await http.post(
        url,
        headers=headers,
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
    )
    ids = iter(range(1, 1 << 62))

    async def call(text: str) -> float:
        body = {
            "jsonrpc": "2.0",
            "id": next(ids),
            "method": "tools/call",
            "params": {"name": "demo__echo", "arguments": {"text": text}},
        }
        started = time.perf_counter()
        response = await http.post(url, json=body, headers=headers)
        elapsed = time.perf_counter() - started
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            data = [
                line[6:] for line in response.text.splitlines() if line[:6] == "data: "
            ]
            answer = json.loads(data[-1])
        else:
            answer = response.json()
        result = answer.get("result")
        if not result or result.get("isError"):
            raise RuntimeError(f"mcp-manager raw echo failed: {response.text}")
        return elapsed

    return call


# ------------------------------------------------------------------ measuring


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` (all its threads, not its children)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()  # fields[0] is field 3, state
    return (int(fields[11]) + int(fields[12])) / TICK


def spawned_by_us(argv: list[str]) -> int | None:
    """The PID of our child process running exactly `argv` (a stdio front)."""
    for proc in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            if proc.cmdline() == argv:
                return int(proc.pid)
    return None


def session_call(session: ClientSession, tool: str) -> Call:
    async def call(text: str) -> float:
        started = time.perf_counter()
        result = await session.call_tool(tool, {"text": text})
        elapsed = time.perf_counter() - started
        if result.is_error:
            raise RuntimeError(f"{tool} failed: {result.content}")
        return elapsed

    return call


@dataclass
class Target:
    """One path being measured: how to call it, and whose CPU to read."""

    call: Call
    pid: int | None = None
    samples: Samples = field(default_factory=Samples)
    cpu: float = 0.0  # seconds of the proxy's CPU during the concurrent batches


async def measure_round(target: Target, seq: int, per: int) -> None:
    """`seq` sequential calls, then CALLERS callers of `per` calls each."""
    into = target.samples
    for i in range(seq):
        into.sequential.append(await target.call(f"seq {i}"))

    async def caller(n: int) -> None:
        for i in range(per):
            into.concurrent.append(await target.call(f"c{n} {i}"))

    cpu = cpu_seconds(target.pid) if target.pid else 0.0
    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for n in range(CALLERS):
            tg.start_soon(caller, n)
    into.wall += time.perf_counter() - started
    if target.pid:
        target.cpu += cpu_seconds(target.pid) - cpu
    into.calls += CALLERS * per


async def until_ok(attempt: Callable[[], Awaitable[object]]) -> None:
    """Retry `attempt` until it succeeds (the proxy's upstream connected)."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            await attempt()
            return
        except Exception:  # boundary: not up yet, try again
            if time.monotonic() > deadline:
                raise
        await anyio.sleep(0.2)


async def open_session(
    stack: contextlib.AsyncExitStack,
    opener: Callable[[], contextlib.AbstractAsyncContextManager[ClientSession]],
    tool: str,
) -> Call:
    """A session on which `tool` answers (its proxy's upstream is connected)."""
    session = await stack.enter_async_context(opener())
    call = session_call(session, tool)
    await until_ok(lambda: call("ready?"))
    await session.list_tools()  # the SDK validates results against listed schemas
    return call


@dataclass
class Row:
    figures: Figures
    cpu_per_call: float | None  # seconds


@dataclass
class Plan:
    """Up to `rounds` rounds of `seq` sequential calls and CALLERS x `per`
    concurrent ones per path; no new round once `budget` seconds have gone."""

    rounds: int
    seq: int
    per: int
    budget: float


async def run_upstream(
    upstream: str,
    work: Path,
    node: str | None,
    fastmcp_python: Path | None,
    plan: Plan,
) -> tuple[dict[str, Row], str]:
    """Measure every path in front of one upstream; the rows, and how it went."""
    setup = time.monotonic()
    with contextlib.ExitStack() as procs:
        if upstream == "http":
            port = free_port()
            argv = [*demo_argv(), "--transport", "http", "--port", str(port)]
            procs.enter_context(child(argv, work / "upstream.log", port))
            url = f"http://127.0.0.1:{port}/mcp"
        else:
            url = "stdio"
        ours, daemon = procs.enter_context(manager_gateway_process(url, work))
        front = stdio_front_argv(url, work)
        hub = procs.enter_context(mcp_hub(node, url, work)) if node else None
        fast = (
            procs.enter_context(fastmcp_proxy_process(fastmcp_python, url, work))
            if fastmcp_python
            else None
        )
        async with contextlib.AsyncExitStack() as stack:
            targets: dict[str, Target] = {}
            if upstream == "http":
                targets[DIRECT] = Target(
                    await open_session(stack, lambda: http_session(url), "echo")
                )
            else:
                targets[DIRECT] = Target(
                    await open_session(
                        stack, lambda: stdio_session(demo_argv()), "echo"
                    )
                )
            targets[OURS_HTTP] = Target(
                await open_session(stack, lambda: http_session(ours), "demo__echo"),
                daemon.pid,
            )
            raw_http = await stack.enter_async_context(bare_client())
            targets[OURS_RAW] = Target(await raw_mcp_call(raw_http, ours), daemon.pid)
            targets[OURS_STDIO] = Target(
                await open_session(stack, lambda: stdio_session(front), "demo__echo"),
                spawned_by_us(front),
            )
            if hub:
                base, hub_proc = hub
                await mcp_hub_ready(base)
                targets[HUB_SSE] = Target(
                    await open_session(
                        stack, lambda: sse_session(f"{base}/mcp"), "demo__echo"
                    ),
                    hub_proc.pid,
                )
                http = await stack.enter_async_context(bare_client())
                rest = rest_call(http, base)
                await until_ok(lambda: rest("ready?"))
                targets[HUB_REST] = Target(rest, hub_proc.pid)
            if fast:
                proxy, fast_proc = fast
                targets[FASTMCP] = Target(
                    await open_session(stack, lambda: http_session(proxy), "echo"),
                    fast_proc.pid,
                )
            for target in targets.values():
                for i in range(30):
                    await target.call(f"warm {i}")
            started, done, measured = time.monotonic(), 0, 0.0
            setup = started - setup
            # no round that would end past the budget, judging by the last one
            while done < plan.rounds and (
                done == 0 or measured + measured / done <= plan.budget
            ):
                # Every other round in reverse: where a path sits in a round
                # moved its CPU per call by up to ~20 % in A/B runs here.
                order = list(targets.values())
                for target in order if done % 2 == 0 else reversed(order):
                    await measure_round(target, plan.seq, plan.per)
                done += 1
                measured = time.monotonic() - started
    rows = {
        name: Row(
            t.samples.figures(), t.cpu / t.samples.calls if t.pid is not None else None
        )
        for name, t in targets.items()
    }
    return (
        rows,
        f"{done}/{plan.rounds} rounds in {measured:.0f} s (setup {setup:.0f} s)",
    )


# ------------------------------------------------------------------ reporting


def best(rows: dict[str, Row], names: tuple[str, ...], key: str) -> str | None:
    """The peer among `names` with the least added p50 or the most calls/s."""
    present = [n for n in names if n in rows]
    if not present:
        return None
    if key == "p50":
        return min(present, key=lambda n: rows[n].figures.seq_p50)
    return max(present, key=lambda n: rows[n].figures.rate)


def report(upstream: str, rows: dict[str, Row], how: str) -> None:
    direct = rows[DIRECT].figures
    print(
        f"\nupstream: demo server over {upstream}; {CALLERS} concurrent callers; {how}"
    )
    print(
        f"{'path':<18} {'seq p50':>8} {'seq p99':>8} {'+p50':>7} {'16x p50':>8}"
        f" {'16x p99':>8} {'calls/s':>8} {'CPU/call':>9}   (ms; CPU in µs)"
    )
    for name, row in rows.items():
        f = row.figures
        added = "" if name == DIRECT else ms(f.seq_p50 - direct.seq_p50)
        cpu = "" if row.cpu_per_call is None else f"{row.cpu_per_call * 1e6:9.0f}"
        print(
            f"{name:<18} {ms(f.seq_p50):>8} {ms(f.seq_p99):>8} {added:>7}"
            f" {ms(f.con_p50):>8} {ms(f.con_p99):>8} {f.rate:8.0f} {cpu:>9}"
        )
    print(
        "  +p50: sequential p50 minus direct's; CPU/call: the proxy process's "
        "utime+stime over the 16-caller batches / calls (mcp-hub's two fronts "
        "share one node process)"
    )

    print(
        f"\nsummary, {upstream} upstream "
        "(added p50 ratio <= 1 and calls/s ratio >= 1 favour mcp-manager)"
    )
    print(
        f"{'ours':<20} {'vs':<19} {'added p50 ratio':>16}  {'best peer':<17}"
        f" {'calls/s ratio':>13}  {'best peer':<17}"
    )
    pairs = (
        (OURS_HTTP, (("MCP, SDK clients", MCP_PEERS), ("any, clients differ", PEERS))),
        (OURS_RAW, (("REST, same client", (HUB_REST,)),)),
        (OURS_STDIO, (("MCP, SDK clients", MCP_PEERS), ("any, clients differ", PEERS))),
    )
    for ours, against in pairs:
        if ours not in rows:
            continue
        mine = rows[ours].figures
        for label, peers in against:
            by_p50, by_rate = best(rows, peers, "p50"), best(rows, peers, "rate")
            if by_p50 is None or by_rate is None:
                continue
            their_added = rows[by_p50].figures.seq_p50 - direct.seq_p50
            my_added = mine.seq_p50 - direct.seq_p50
            if their_added > 0 and my_added >= 0:
                ratio = f"{my_added / their_added:.2f}"
            else:  # the path is faster than direct: a ratio means nothing
                verdict = "ours" if my_added <= their_added else "theirs"
                ratio = f"{verdict} {(my_added - their_added) * 1000:+.2f}ms"
            rate = mine.rate / rows[by_rate].figures.rate
            print(
                f"{ours:<20} {label:<19} {ratio:>16}  {by_p50:<17}"
                f" {rate:13.2f}  {by_rate:<17}"
            )
    print(
        "  REST, same client: one bare client for both; MCP, SDK clients: the "
        "SDK's streamable HTTP client (ours) vs its SSE client (mcp-hub); clients "
        "differ: the SDK's client here, the bare one there"
    )
    for ours in (OURS_HTTP, OURS_RAW):
        daemon = rows[ours].cpu_per_call if ours in rows else None
        if daemon is not None:
            print(
                f"mcp-manager daemon CPU per call, {ours}, {CALLERS} callers: "
                f"{daemon * 1e6:.0f} µs (utime+stime of `mcp-manager run`)"
            )


# ------------------------------------------------------------------ main


def find_node(given: str | None) -> str | None:
    """A node that can run the installed mcp-hub, or None (rows skipped)."""
    if not MCPHUB_CLI.exists():
        return None
    node = given or shutil.which("node")
    if node is None:
        return None
    probe = subprocess.run(
        [node, str(MCPHUB_CLI), "--help"], capture_output=True, check=False
    )
    return node if probe.returncode == 0 else None


def reexec_in_netns() -> None:
    """Run this bench again inside a network namespace with only loopback up."""
    unshare = ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-r", "-n"]
    argv = [
        *unshare,
        "sh",
        "-c",
        'ip link set lo up && exec "$0" "$@"',
        sys.executable,
        str(Path(__file__).resolve()),
        *sys.argv[1:],
    ]
    os.environ[IN_NETNS] = "1"
    sys.stdout.flush()
    os.execvp(argv[0], argv)


async def main_async(
    args: argparse.Namespace, node: str | None, fastmcp_python: Path | None
) -> None:
    plan = Plan(2, 50, 10, 25.0) if args.quick else Plan(5, 100, 20, 65.0)
    if args.budget is not None:
        plan.budget = args.budget
    work = Path(tempfile.mkdtemp(prefix="bench-peers-", dir="/tmp"))
    os.chmod(work, 0o700)
    try:
        for upstream in ("stdio", "http"):
            rows, how = await run_upstream(upstream, work, node, fastmcp_python, plan)
            report(upstream, rows, how)
    finally:
        if args.keep:
            print(f"\nlogs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    use_private_state()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls")
    parser.add_argument(
        "--budget",
        type=float,
        help="seconds of measuring per upstream: no round starts that would end "
        "past it (default 65, --quick 25), so a loaded machine ends in ~3 minutes",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary logs and configs"
    )
    parser.add_argument("--node", help="the node binary for mcp-hub")
    parser.add_argument("--fastmcp-python", help="a Python with fastmcp installed")
    parser.add_argument(
        "--install-mcp-hub",
        action="store_true",
        help=f"npm install mcp-hub@{MCPHUB_VERSION} into {MCPHUB_PREFIX} first",
    )
    parser.add_argument(
        "--install-fastmcp", action="store_true", help="create FastMCP's venv first"
    )
    parser.add_argument(
        "--no-mcp-hub", action="store_true", help="skip mcp-hub (and the namespace)"
    )
    args = parser.parse_args()
    inside = os.environ.get(IN_NETNS) == "1"
    if not inside:  # the namespace has no network: install before entering it
        if args.install_mcp_hub:
            install_mcp_hub()
        if args.install_fastmcp:
            install_fastmcp()
    node = None if args.no_mcp_hub else find_node(args.node)
    if node is None and not args.no_mcp_hub:
        print(
            f"mcp-hub not found at {MCPHUB_CLI} (or node cannot run it): its rows "
            "are skipped. Install it apart from the project with --install-mcp-hub.",
            file=sys.stderr,
        )
    if node is not None and not inside:
        reexec_in_netns()
    fastmcp_python = find_fastmcp(args.fastmcp_python)
    if fastmcp_python is None:
        print("FastMCP not found: its rows are skipped (--install-fastmcp).")
    where = "private network namespace, loopback only" if inside else "host network"
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; {where}")
    if node:
        version = subprocess.run(
            [node, "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
        print(f"mcp-hub {MCPHUB_VERSION} on node {version}")
    anyio.run(main_async, args, node, fastmcp_python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
