"""A forwarded call's daemon cost in instructions, one revision against another.

Run: `.venv/bin/python bench/instructions.py [--base REV] [--head REV]
[--calls N] [--era 2026|2025-11-25] [--protocol auto|legacy|2026-07-28]
[--cache-sim]`.

CPU time per call on this VM moves by about 10 % between runs of the same
code, so a change of a few percent needs many alternating runs to show.
Instructions counted by valgrind's callgrind do not move with the machine's
load: the same code and inputs count the same to about 0.1 %. Each revision
is checked out (`git archive`) into a folder of its own and runs
`bench/profile_calls.py --no-profile` (this tree's copy, so both run the same
bench) under callgrind twice, with 100 and with 100 + N calls; the difference
over N is the instructions one call costs the daemon (its process: endpoint,
engine, call log writer), start-up excluded. The four runs go two at a time.

Needs valgrind (`apt-get install valgrind`). 1000 calls take 4 minutes on an
idle 2-core VM. Run it on an idle machine: the count does not follow the
load's speed, but a loaded machine changes how requests interleave (event-loop
turns), which moved one count by 5 %.
An instruction is not a nanosecond (memory and system calls differ), so say
both: this for the direction of a change, `profile_calls.py` for its time.
`--cache-sim` adds the misses of valgrind's simulated caches per call, the
memory behaviour that instructions alone do not show.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXED = 100
"""Calls in the short run, whose count is taken off the long one's."""


def checkout(rev: str, into: Path) -> Path:
    """`rev`'s tree in `into`, with this tree's `bench/profile_calls.py` (and
    the helper it imports)."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    for name in ("profile_calls.py", "private_state.py"):
        shutil.copy(ROOT / "bench" / name, into / "bench" / name)
    return into


def run_profile_calls(
    tree: Path, calls: int, args: argparse.Namespace, wrapper: list[str]
) -> str:
    """Run `tree`'s `bench/profile_calls.py --no-profile` (under `wrapper`, e.g.
    valgrind) with the options of `args`; its output."""
    argv = [
        *wrapper,
        sys.executable,
        "bench/profile_calls.py",
        "--no-profile",
        *("--calls", str(calls), "--era", args.era, "--protocol", args.protocol),
        *("--upstream", args.upstream),
    ]
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        argv, cwd=tree, env=env, capture_output=True, text=True, timeout=3600
    )
    if done.returncode != 0:
        raise SystemExit(f"{tree.name}: the bench failed:\n{done.stderr[-2000:]}")
    return done.stdout


def counted(
    tree: Path, calls: int, args: argparse.Namespace, out: Path
) -> dict[str, int]:
    """Callgrind's totals of one bench process, by event (`Ir`: instructions;
    with `--cache-sim`, the simulated cache's reads, writes and misses)."""
    valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    if args.cache_sim:
        valgrind.append("--cache-sim=yes")
    run_profile_calls(tree, calls, args, valgrind)
    text = out.read_text()
    events = re.search(r"^events: (.+)$", text, re.M)
    totals = re.search(r"^(?:summary|totals): (.+)$", text, re.M)
    if events is None or totals is None:
        raise SystemExit(f"{out}: no totals")
    return dict(
        zip(events.group(1).split(), map(int, totals.group(1).split()), strict=True)
    )


MISSES = {
    "first-level data misses": ("D1mr", "D1mw"),
    "last-level misses": ("ILmr", "DLmr", "DLmw"),
}
"""What `--cache-sim` adds to the report: misses of valgrind's simulated caches
(the machine's own sizes), each a sum of callgrind's events."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="2058d4c", help="default: 2058d4c")
    parser.add_argument("--head", default="HEAD")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--era", choices=("2026", "2025-11-25"), default="2026")
    parser.add_argument(
        "--protocol", choices=("auto", "legacy", "2026-07-28"), default="2026-07-28"
    )
    parser.add_argument("--upstream", choices=("stdio", "http"), default="stdio")
    parser.add_argument(
        "--cache-sim",
        action="store_true",
        help="also count simulated cache misses per call (about twice as slow)",
    )
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("needs valgrind: apt-get install valgrind", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="instructions-") as tmp:
        work = Path(tmp)
        trees = {
            rev: checkout(rev, work / f"tree{i}")
            for i, rev in enumerate((args.base, args.head))
        }
        jobs = [(rev, n) for rev in trees for n in (FIXED, FIXED + args.calls)]
        with ThreadPoolExecutor(2) as pool:
            totals: dict[tuple[str, int], dict[str, int]] = dict(
                zip(
                    jobs,
                    pool.map(
                        lambda job: counted(
                            trees[job[0]],
                            job[1],
                            args,
                            work / f"{trees[job[0]].name}-{job[1]}.out",
                        ),
                        jobs,
                    ),
                    strict=True,
                )
            )

    calls: int = args.calls

    def per_call(rev: str, names: tuple[str, ...]) -> float:
        long, short = totals[(rev, FIXED + calls)], totals[(rev, FIXED)]
        return sum(long[name] - short[name] for name in names) / calls

    print(
        f"{args.calls} calls, {args.era} client, demo server over {args.upstream}, "
        f"protocol = {args.protocol!r}: per call, in the daemon"
    )
    rows = {"instructions": ("Ir",), **(MISSES if args.cache_sim else {})}
    for what, names in rows.items():
        print(f"  {what}")
        counts = {rev: per_call(rev, names) for rev in trees}
        for rev, count in counts.items():
            print(f"    {rev:<12} {count / 1e3:10.1f} k")
        base, head = counts[args.base], counts[args.head]
        print(f"    {args.head} / {args.base}: {head / base:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
