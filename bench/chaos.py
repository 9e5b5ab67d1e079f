"""Chaos campaign: the real daemon under random faults for a given time, one table.

Run: `.venv/bin/python bench/chaos.py --seconds 300 [--seed N]`. Starts five HTTP
upstreams, ~30 stdio servers and the daemon with `--listen`, keeps four SDK
sessions calling `echo` through the aggregated endpoint, injects a fault every
~0.3 s (SIGKILL / SIGSTOP+SIGCONT a stdio server, stop or kill an HTTP upstream
and start it again, reloads adding or removing a server), then checks that
everything came back and nothing leaked (`tests/servers/chaos.py` says what each
row means). Progress goes to stderr; the table to stdout. Exit status 1 when a
check failed. The workdir (startup.lua, server logs, `daemon.log`,
`events.jsonl`, `faults.jsonl`: every fault done) is kept.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
# Real processes only: the test harness's preloader (tests/servers/preload.py)
# would fork the daemon and HTTP servers from this process.
os.environ["MM_TESTS_FORK"] = "0"

from servers.chaos import ChaosCampaign, ChaosConfig  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300.0, help="chaos phase")
    parser.add_argument("--seed", type=int, default=None, help="default: random")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--raw", type=int, default=26, help="raw stdio servers")
    parser.add_argument("--demo", type=int, default=4, help="SDK demo stdio servers")
    parser.add_argument("--interval", type=float, default=0.3, help="between faults")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mm-chaos-"))
    config = ChaosConfig(
        workdir=workdir,
        seconds=args.seconds,
        seed=args.seed,
        clients=args.clients,
        raw_servers=args.raw,
        demo_servers=args.demo,
        fault_interval=args.interval,
    )
    report = anyio.run(ChaosCampaign(config).run)
    print(report.table())
    if report.log_lines:
        print("\ndaemon log (ERROR / Traceback):")
        print("\n".join(report.log_lines))
    print(f"\nworkdir: {workdir}")
    return 1 if report.failures() else 0


if __name__ == "__main__":
    sys.exit(main())
