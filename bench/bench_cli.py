"""How long a CLI client command takes, wall clock, against a running daemon.

Run: `.venv/bin/python bench/bench_cli.py [--runs N]`. Starts the daemon on a
script of 20 connections to closed ports (nothing else needed), then times each
command N times as a new process, the way scripts and shells run it, next to the
floor: the interpreter starting and doing nothing. Bytecode is cached, as on a
user's machine. Design §8: `status --json` < 50 ms median.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from servers.daemon import DaemonProcess  # noqa: E402

CLI = str(Path(sys.executable).with_name("mcp-manager"))


# As on a user's machine: bytecode cached (this workplace sets
# PYTHONDONTWRITEBYTECODE, which makes every run compile our modules again).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(argv: list[str], runs: int) -> list[float]:
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=ENV)  # warm
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=ENV)
        times.append(time.perf_counter() - started)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        script = Path(tmp) / "startup.lua"
        script.write_text(
            "\n".join(f'mcp_add("c{i}", "http://127.0.0.1:9/mcp")' for i in range(20))
        )
        with DaemonProcess(script) as daemon:
            daemon.wait_event("connect_failed", "c19")
            sock = ["--socket", str(daemon.socket)]
            rows = {
                "python -c pass (floor)": timed(
                    [sys.executable, "-c", "pass"], args.runs
                ),
                "mcp-manager --version": timed([CLI, "--version"], args.runs),
                "mcp-manager status --json": timed(
                    [CLI, "status", "--json", *sock], args.runs
                ),
                "mcp-manager status (table)": timed([CLI, "status", *sock], args.runs),
            }
    print(f"\nCLI wall time, {args.runs} runs each (20 connections declared)")
    print("-" * 72)
    for name, times in rows.items():
        ordered = sorted(times)
        p90 = ordered[int(len(ordered) * 0.9)]
        print(
            f"{name:<30} median {statistics.median(times) * 1000:6.1f} ms"
            f"   p90 {p90 * 1000:6.1f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
