"""How long a CLI client command takes against a running daemon: wall clock,
and the CPU it costs over a bare interpreter's.

Run: `.venv/bin/python bench/bench_cli.py [--runs N]`. Starts the daemon on a
script of 20 connections to closed ports (nothing else needed), then runs each
command N times as a new process, the way scripts and shells run it, taking
turns with the floor: the interpreter starting and doing nothing. Bytecode is
cached, as on a user's machine. Design §8: `status --json` < 50 ms median.
Wall time on a shared 2-core VM swings by tens of milliseconds within a
minute; the minimum CPU over the floor's is the figure that holds still (issue
36's budget for `status --json`: +40 ms).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from private_state import use_private_state

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from servers.daemon import DaemonProcess  # noqa: E402

CLI = str(Path(sys.executable).with_name("mcp-manager"))
FLOOR = "python -c pass (floor)"


# As on a user's machine: bytecode cached (this workplace sets
# PYTHONDONTWRITEBYTECODE, which makes every run compile our modules again).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def once(argv: list[str]) -> tuple[float, float]:
    """One run of `argv`: (wall, CPU) seconds, CPU being the child's user+sys."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=ENV)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def timed(
    commands: dict[str, list[str]], runs: int
) -> dict[str, list[tuple[float, float]]]:
    """Every command `runs` times, taking turns (a slow spell of this machine
    lands on all of them alike), after one warm-up run each."""
    for argv in commands.values():
        once(argv)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            samples[name].append(once(argv))
    return samples


def main() -> int:
    use_private_state()
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
            rows = timed(
                {
                    FLOOR: [sys.executable, "-c", "pass"],
                    "mcp-manager --version": [CLI, "--version"],
                    "mcp-manager status --json": [CLI, "status", "--json", *sock],
                    "mcp-manager status (table)": [CLI, "status", *sock],
                },
                args.runs,
            )
    floor = min(cpu for _, cpu in rows[FLOOR])
    print(f"\nCLI, {args.runs} runs each, taking turns (20 connections declared)")
    print("wall median and p90; CPU (user+sys) min, and min over the floor's")
    print("-" * 86)
    for name, samples in rows.items():
        walls = sorted(wall for wall, _ in samples)
        cpu = min(c for _, c in samples)
        p90 = walls[int(len(walls) * 0.9)]
        over = "" if name == FLOOR else f"   +{(cpu - floor) * 1000:5.1f} ms"
        print(
            f"{name:<28} wall {statistics.median(walls) * 1000:6.1f} ms"
            f"  p90 {p90 * 1000:6.1f} ms   CPU min {cpu * 1000:6.1f} ms{over}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
