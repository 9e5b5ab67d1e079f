"""`mcp-manager attach` against spawning servers directly, in one run.

Run: `.venv/bin/python bench/bench_attach.py [--rounds N] [--calls N]`.

Prints three tables:

1. **Start to first answer**: a client spawns its "server" and waits for the
   answer to `initialize`. Directly: the stdlib test server (`raw_legacy`, the
   fastest a Python server starts) and the SDK demo server (what a typical
   Python MCP server costs); through the daemon: `mcp-manager attach`.
2. **Per call**: sequential `tools/call echo` p50 over one session: directly
   to the stdlib server, and through `attach` to the same server kept by the
   daemon.
3. **Processes**: five clients attached to a daemon running 10 stdio servers:
   server processes in all, against 50 when each client spawns its own.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from private_state import use_private_state

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from servers import children_of, raw_command, stdio_command  # noqa: E402
from servers.daemon import DaemonProcess  # noqa: E402

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _line(message: dict[str, object]) -> bytes:
    return json.dumps(message).encode() + b"\n"


class Session:
    """A spawned stdio server, spoken to in raw JSON-RPC lines."""

    def __init__(self, command: list[str]) -> None:
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.first_answer = self.ask(INITIALIZE) - self.started
        assert self.proc.stdin is not None
        self.proc.stdin.write(_line(INITIALIZED))
        self.proc.stdin.flush()
        self._ids = 1

    def ask(self, message: dict[str, object]) -> float:
        """Send `message`, read lines until its answer; when it came."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(_line(message))
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.proc.args!r} closed its stdout")
            answer = json.loads(line)
            if answer.get("id") == message["id"]:
                return time.perf_counter()

    def call(self, tool: str, arguments: dict[str, object]) -> float:
        """Seconds one `tools/call` takes."""
        self._ids += 1
        request = {
            "jsonrpc": "2.0",
            "id": self._ids,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        sent = time.perf_counter()
        return self.ask(request) - sent

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:8.1f}"


def _p90(values: list[float]) -> str:
    ordered = sorted(values)
    return f"{ordered[int(0.9 * (len(ordered) - 1))] * 1000:8.1f}"


def main() -> int:
    use_private_state()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="spawns per row")
    parser.add_argument("--calls", type=int, default=300, help="calls per row")
    args = parser.parse_args()

    raw, raw_args = raw_command()
    demo, demo_args = stdio_command()
    entry = str(Path(sys.executable).with_name("mcp-manager"))
    directory = Path(tempfile.mkdtemp(prefix="mm-bench-", dir="/tmp"))
    os.chmod(directory, 0o700)
    control = directory / "control.sock"
    script = directory / "startup.lua"
    script.write_text(
        "".join(
            f"mcp_add({json.dumps(f's{i}')}, {{command = {json.dumps(raw)}, "
            f"args = {{{', '.join(json.dumps(a) for a in raw_args)}}}}})\n"
            for i in range(10)
        )
    )
    attach = [entry, "attach", "--socket", str(control)]
    rows: dict[str, list[float]] = {
        "direct (stdlib server)": [],
        "direct (SDK demo server)": [],
        "mcp-manager attach": [],
    }
    calls: dict[str, list[float]] = {
        "direct (stdlib server)": [],
        "mcp-manager attach": [],
    }
    with DaemonProcess(script, control_socket=control) as daemon:
        for i in range(10):
            daemon.wait_event("connected", f"s{i}")
        for _ in range(args.rounds):  # interleaved, so drift hits every row
            for label, command in (
                ("direct (stdlib server)", [raw, *raw_args]),
                ("direct (SDK demo server)", [demo, *demo_args]),
                ("mcp-manager attach", attach),
            ):
                session = Session(command)
                rows[label].append(session.first_answer)
                session.close()
        direct = Session([raw, *raw_args])
        through = Session(attach)
        for _ in range(args.calls):
            calls["direct (stdlib server)"].append(direct.call("echo", {"text": "x"}))
            calls["mcp-manager attach"].append(through.call("s0__echo", {"text": "x"}))
        direct.close()
        through.close()

        clients = [Session(attach) for _ in range(5)]
        servers = [
            p
            for p in children_of(daemon.process.pid)
            if "raw_legacy" in " ".join(p.cmdline())
        ]
        for client in clients:
            client.close()

    print(f"\nstart to first answer (initialize), {args.rounds} spawns each, ms")
    print(f"{'client spawns':28} {'p50':>8} {'p90':>8}")
    for label, values in rows.items():
        print(f"{label:28} {_ms(values)} {_p90(values)}")
    ratio = statistics.median(rows["mcp-manager attach"]) / statistics.median(
        rows["direct (stdlib server)"]
    )
    print(f"attach / direct stdlib server: {ratio:.2f}x")

    print(f"\nper call (tools/call echo, sequential), {args.calls} calls, ms")
    print(f"{'path':28} {'p50':>8} {'p90':>8}")
    for label, values in calls.items():
        print(f"{label:28} {_ms(values)} {_p90(values)}")
    added = statistics.median(calls["mcp-manager attach"]) - statistics.median(
        calls["direct (stdlib server)"]
    )
    print(f"attach adds {added * 1000:.2f} ms per call (p50)")

    print("\nprocesses: 5 clients attached, 10 stdio servers declared")
    print(f"server processes: {len(servers)} (50 if each client spawned its own)")
    script.unlink()
    directory.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
