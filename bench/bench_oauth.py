"""What OAuth costs a call: the auth door on the hot path, and a login.

Run: `.venv/bin/python bench/bench_oauth.py [--calls N]`.

One daemon manager in this process, the demo server over streamable HTTP on
127.0.0.1 behind the test authorization server (`tests/servers/oauth.py`),
three connections to it called in interleaved rounds through `Manager.call`:

* `oauth = false` on an open copy of the server: no auth door at all;
* nothing declared on the same open server: the door is there (it would start
  a login on a `Bearer` 401) but has no token to add;
* client credentials: a token added to every request.

It prints p50/p99 per call and 16-caller calls/s for each, then the time from
`mcp-manager login`'s start to connected (the browser stood in for by a GET).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
from bench_gateway import percentile  # noqa: E402
from fakes import Recorder  # noqa: E402
from servers.oauth import CLIENT_ID, SECRET, oauth_demo  # noqa: E402

from manager.core.spec import parse_spec  # noqa: E402
from manager.engine.bus import EventBus  # noqa: E402
from manager.engine.logins import Logins  # noqa: E402
from manager.engine.manager import Manager  # noqa: E402
from manager.transport.connect import McpTransport  # noqa: E402

FAST = {"hold": 5, "ping_interval": 0}


async def sequential(manager: Manager, name: str, n: int) -> list[float]:
    times = []
    for _ in range(n):
        began = time.perf_counter()
        await manager.call(name, "echo", {"text": "hi"})
        times.append(time.perf_counter() - began)
    return times


async def concurrent(manager: Manager, name: str, n: int, callers: int = 16) -> float:
    async def caller() -> None:
        for _ in range(n // callers):
            await manager.call(name, "echo", {"text": "hi"})

    began = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(callers):
            tg.start_soon(caller)
    return (n // callers * callers) / (time.perf_counter() - began)


async def main(calls: int) -> None:
    state = Path(tempfile.mkdtemp(prefix="mm-bench-oauth-"))
    async with oauth_demo() as guarded, oauth_demo() as open_server:
        # The open server lets requests without a token through (the empty
        # token is valid there), so "off" and "auto" reach it as they are.
        open_server.valid[""] = time.time() + 3600
        open_server.scopes[""] = "tools"
        open_url = f"{open_server.base}/mcp"
        transport = McpTransport(getenv={"S": SECRET}.get, state_dir=state)
        async with Manager(EventBus(), transport) as manager:
            oauth = {
                "grant": "client_credentials",
                "client_id": CLIENT_ID,
                "client_secret": "${env:S}",
                "issuer": guarded.base,
            }
            specs = {
                "no door (oauth = false)": parse_spec(
                    "off", open_url, {**FAST, "oauth": False}
                ),
                "door, no token": parse_spec("auto", open_url, FAST),
                "client credentials": parse_spec(
                    "cc", f"{guarded.base}/mcp", {**FAST, "oauth": oauth}
                ),
            }
            for spec in specs.values():
                manager.add(spec)
            for spec in specs.values():
                conn = manager.connection(spec.name)
                assert conn is not None
                with anyio.fail_after(20):
                    await conn.wait_connected()
            samples: dict[str, list[float]] = {label: [] for label in specs}
            rounds = 10
            for _ in range(rounds):
                for label, spec in specs.items():
                    samples[label] += await sequential(
                        manager, spec.name, calls // rounds
                    )
            rates = {
                label: await concurrent(manager, spec.name, calls)
                for label, spec in specs.items()
            }
        print(f"{'path':<26} {'p50 ms':>8} {'p99 ms':>8} {'16 callers/s':>13}")
        for label, times in samples.items():
            p50 = percentile(times, 0.5) * 1000
            p99 = percentile(times, 0.99) * 1000
            print(f"{label:<26} {p50:8.3f} {p99:8.3f} {rates[label]:13.0f}")

        # A login: from its start to connected, the browser a GET.
        login_state = Path(tempfile.mkdtemp(prefix="mm-bench-login-"))
        bus = EventBus()
        rec = Recorder(bus)
        async with Manager(bus, state_dir=login_state) as m:
            m.add(parse_spec("tracker", f"{guarded.base}/mcp", FAST))
            conn = m.connection("tracker")
            assert conn is not None
            await rec.wait_for("needs_login", "tracker")
            began = time.perf_counter()
            login = await Logins(m).begin("tracker", 30)
            assert login is not None
            await login.url_ready.wait()
            assert login.url is not None
            callback = await guarded.approve(login.url)
            async with httpx2.AsyncClient() as client:
                await client.get(callback)
            await conn.wait_connected()
            took = time.perf_counter() - began
        print(f"\nlogin (begin -> connected, browser = one GET): {took * 1000:.0f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    anyio.run(main, args.calls)
