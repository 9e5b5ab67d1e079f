"""Reload benchmarks: save -> new connection, and a no-change reload of 1000.

Run: `.venv/bin/python bench/bench_reload.py`. Both figures run the real daemon
(`python -m manager run`) on a generated startup.lua in a private directory.

- save -> `connecting`: write startup.lua with one more connection, time until
  the daemon publishes `connecting` for it (includes the 0.2 s the watcher waits
  for a burst of saves to settle, `RELOAD_QUIET`).
- no-change reload: a script declaring 1000 connections (closed ports), reloaded
  through the control socket with nothing changed: the script runs again in a
  fresh runtime, the diff is empty, nothing is touched.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from servers.daemon import DaemonProcess  # noqa: E402

from manager.daemon.config_runner import RELOAD_QUIET  # noqa: E402


def table(title: str, rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    print(f"\n{title}")
    print("-" * (width + 24))
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


def bench_save_to_connecting(rounds: int, tmp: Path) -> None:
    script = tmp / "startup.lua"
    lines = ['mcp_add("base", "http://127.0.0.1:9/mcp")']
    script.write_text("\n".join(lines))
    times = []
    with DaemonProcess(script) as daemon:
        daemon.wait_event("connecting", "base")
        for i in range(rounds):
            mark = int(str(daemon.events[-1]["seq"]))
            lines.append(f'mcp_add("n{i}", "http://127.0.0.1:9/mcp")')
            started = time.perf_counter()
            script.write_text("\n".join(lines))
            daemon.wait_event("connecting", f"n{i}", after=mark)
            times.append(time.perf_counter() - started)
            time.sleep(0.3)
    table(
        f"save -> the new connection's `connecting` event ({rounds} saves)",
        [
            ("median", f"{statistics.median(times) * 1000:.0f} ms"),
            ("min / max", f"{min(times) * 1000:.0f} / {max(times) * 1000:.0f} ms"),
            ("of which: settle time for save bursts", f"{RELOAD_QUIET * 1000:.0f} ms"),
        ],
    )


def bench_noop_reload(n: int, rounds: int, tmp: Path) -> None:
    script = tmp / "big.lua"
    script.write_text(
        "\n".join(
            f'mcp_add("c{i}", "http://127.0.0.1:9/mcp", {{connect_timeout = 5}})'
            for i in range(n)
        )
    )
    times = []
    with DaemonProcess(script) as daemon:
        daemon.wait_event("connecting", f"c{n - 1}")
        for _ in range(rounds):
            started = time.perf_counter()
            result = daemon.client.reload()
            times.append(time.perf_counter() - started)
            assert result.unchanged == n and not result.added
    table(
        f"no-change reload of a script declaring {n} connections ({rounds} reloads, "
        "through the control socket)",
        [
            ("median", f"{statistics.median(times) * 1000:.0f} ms"),
            ("min / max", f"{min(times) * 1000:.0f} / {max(times) * 1000:.0f} ms"),
            ("target (design §8: 1000 declarations load)", "< 500 ms"),
        ],
    )


def main() -> None:
    import tempfile

    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        bench_save_to_connecting(10, Path(tmp))
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        bench_noop_reload(1000, 10, Path(tmp))


if __name__ == "__main__":
    main()
