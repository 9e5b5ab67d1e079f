"""A forwarded call's daemon CPU time, one revision against another, in pairs.

Run: `.venv/bin/python bench/cpu_pairs.py [--base REV] [--head REV]
[--pairs N] [--calls N] [--era 2026|2025-11-25]
[--protocol auto|legacy|2026-07-28] [--upstream stdio|http]`.

CPU time per call on this VM drifts by 10 to 25 % within an hour, so two
revisions are compared in alternating pairs: each pair runs
`bench/profile_calls.py --no-profile` once at each revision (the order
swapped every other pair), and the ratio is taken within the pair. It prints
each pair, the median and mean ratio (head / base), and a bootstrap 90 %
interval of the median. The first pair is left out: it writes each tree's
bytecode. Both revisions are checked out with `git archive` and run this
tree's bench script, as `bench/instructions.py` does; each run keeps its
state in a folder of its own. Run it on an idle machine; 16 pairs of 2000
calls take about 6 minutes here.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import tempfile
from pathlib import Path

from instructions import checkout, run_profile_calls

BOOTSTRAP = 5000


def cpu_per_call(tree: Path, args: argparse.Namespace) -> float:
    """The daemon's CPU per call (ms) of one `profile_calls` run in `tree`."""
    output = run_profile_calls(tree, args.calls, args, [])
    match = re.search(r"daemon CPU per call\s+([\d.]+) ms", output)
    if match is None:
        raise SystemExit(f"{tree.name}: no CPU figure in:\n{output[-2000:]}")
    return float(match.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="2058d4c", help="default: 2058d4c")
    parser.add_argument("--head", default="HEAD")
    parser.add_argument("--pairs", type=int, default=16)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--era", choices=("2026", "2025-11-25"), default="2026")
    parser.add_argument(
        "--protocol", choices=("auto", "legacy", "2026-07-28"), default="2026-07-28"
    )
    parser.add_argument("--upstream", choices=("stdio", "http"), default="stdio")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cpu-pairs-") as tmp:
        base = checkout(args.base, Path(tmp) / "base")
        head = checkout(args.head, Path(tmp) / "head")
        ratios: list[float] = []
        for pair in range(args.pairs + 1):
            order = (base, head) if pair % 2 == 0 else (head, base)
            ms = {tree: cpu_per_call(tree, args) for tree in order}
            if pair == 0:
                continue  # each tree's first run writes its bytecode
            ratios.append(ms[head] / ms[base])
            print(
                f"pair {pair:2}: {args.base} {ms[base]:.3f} ms, "
                f"{args.head} {ms[head]:.3f} ms, ratio {ratios[-1]:.3f}",
                flush=True,
            )
    rng = random.Random(1)
    medians = sorted(
        statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(BOOTSTRAP)
    )
    low, high = medians[BOOTSTRAP // 20], medians[BOOTSTRAP - BOOTSTRAP // 20]
    print(
        f"{args.head} / {args.base}, {len(ratios)} pairs of {args.calls} calls "
        f"({args.era} client, protocol = {args.protocol!r}): median "
        f"{statistics.median(ratios):.3f}, mean {statistics.mean(ratios):.3f}, "
        f"90 % interval of the median {low:.3f}..{high:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
