"""The call log's cost: answering questions on a day of calls, and writing a row.

Run: `.venv/bin/python bench/bench_calllog.py [--rows N]`.

1. Fills a fresh log (a temporary state directory) with N synthetic rows
   (default 100 000: a busy day, in the log's own batches) over 30 servers and
   their tools, 3 % of them failed, a few denied by the call policy; then
   times the questions `mcp-manager log` and `why` answer, through the same
   `calllog.read` they use, best of 5: the calls of one tool, the failures of
   the last hour, what the policy denied.
2. The write path's CPU per call: `CallLog.record` on the call path plus its
   share of the batched `flush` (a worker thread's job in the daemon), per
   row, against the daemon's CPU per forwarded call measured in the same run
   by `bench/profile_calls.py` (HTTP front, stdio upstream, 500 calls): the
   ratio is what the log adds to a call.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from private_state import use_private_state

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from manager.engine.calllog import CallLog, CallRecord, read  # noqa: E402


def _fill(log: CallLog, rows: int, now: float) -> None:
    rng = random.Random(7)
    servers = [f"server{i}" for i in range(30)]
    batch = 2000
    for start in range(0, rows, batch):
        for i in range(start, min(rows, start + batch)):
            failed = rng.random() < 0.03
            denied = rng.random() < 0.002
            log.record(
                CallRecord(
                    time=now - 86400 + i * 86400 / rows,
                    client=rng.choice(["claude-code", "cursor", "cli"]),
                    profile="",
                    server=rng.choice(servers),
                    tool=f"tool{rng.randrange(12)}",
                    shape='{"path":"string","n":"number"}',
                    outcome="failed" if failed or denied else "ok",
                    error="PolicyDenied" if denied else "CallTimeout" if failed else "",
                    duration=rng.random(),
                    bytes=rng.randrange(10_000),
                    verdict="denied by rule startup.lua:4" if denied else "",
                )
            )
        log.flush()


def _best(fn: object, times: int = 5) -> tuple[float, int]:
    best, count = float("inf"), 0
    for _ in range(times):
        started = time.perf_counter()
        rows = fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - started)
        count = len(rows)
    return best, count


def _daemon_cpu_per_call() -> float | None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "profile_calls.py"),
            "--calls",
            "500",
            "--upstream",
            "stdio",
            "--top",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    ).stdout
    for line in out.splitlines():
        if line.startswith("daemon CPU per call"):
            return float(line.split()[-2]) / 1000
    return None


def main() -> int:
    use_private_state()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    now = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        log = CallLog(state, max_rows=max(args.rows, 200_000))
        started = time.process_time()
        _fill(log, args.rows, now)
        write_cpu = (time.process_time() - started) / args.rows
        print(
            f"{args.rows} rows written; CPU per row (record + flush) "
            f"{write_cpu * 1e6:.1f} µs"
        )
        for label, query in (
            (
                "one tool's calls (log --server --tool)",
                lambda: read(state, server="server3", tool="tool5", limit=100),
            ),
            (
                "failures of the last hour (log --failed --since 1h)",
                lambda: read(state, failed=True, since=now - 3600, limit=100),
            ),
            (
                "what the policy denied (why)",
                lambda: read(state, policy=True, limit=100),
            ),
        ):
            took, count = _best(query)
            print(f"{label:55s} {took * 1000:7.1f} ms  ({count} rows)")
        if log._db is not None:
            log._db.close()
    per_call = _daemon_cpu_per_call()
    if per_call is None:
        print("profile_calls gave no daemon CPU per call; no ratio")
        return 0
    print(
        f"daemon CPU per forwarded call (profile_calls, same run): "
        f"{per_call * 1000:.2f} ms"
    )
    print(f"the log's share of a call's daemon CPU: {write_cpu / per_call:.2%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
