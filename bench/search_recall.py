"""Tool search, measured on real tools and on queries nobody tuned for.

Run: `.venv/bin/python bench/search_recall.py [--misses] [--heldout-misses]`.
Pure computation, a few seconds, no daemon: `manager.gateway.discovery` as
`search_tools` runs it.

- The corpus: `bench/data/corpus/*.json`, what real MCP servers answer to
  `tools/list`, installed from their registries and listed by
  `bench/corpus_build.py` (no tool text is written here). Each tool is
  exposed as the gateway exposes it, `SERVER__TOOL`.
- The queries: `bench/data/queries/tuning.jsonl` and `heldout.jsonl`, tasks
  in a user's words, each with the tool (or tools) that do it, written before
  any search ran and split in two. `SHA256SUMS` beside them freezes both; the
  held-out figures are printed only while the file still matches it, so a
  held-out query edited after a run shows as such. Tune on the tuning half
  (`--misses` prints its misses); the held-out half is for reporting.
- Figures: recall@1, @3, @5 and MRR per half, over all queries and over the
  indirect ones (at most one content word shared with the right tool's
  text), for the words alone and, when the model is installed
  (`gateway.semantic`; `$MCP_MANAGER_SEARCH_MODEL` names another folder, e.g.
  all-mpnet-base-v2 from a Hugging Face cache), for words and meaning fused;
  the time to build each;
  tokens of the full `tools/list` against the three discovery tools plus one
  median search answer.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import mcp.types as types

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from manager.gateway import semantic  # noqa: E402
from manager.gateway.discovery import (  # noqa: E402
    DEFAULT_LIMIT,
    DISCOVERY_TOOLS,
    ToolIndex,
    _tokens,
    search_result,
)

DATA = ROOT / "bench" / "data"
CORPUS = DATA / "corpus"
QUERIES = DATA / "queries"
HALVES = ("tuning", "heldout")


@dataclass(frozen=True)
class Query:
    text: str
    answers: tuple[str, ...]
    indirect: bool = False
    """Shares at most one content word with every right tool's text."""


def load_corpus() -> tuple[list[types.Tool], dict[str, int]]:
    """Every listed tool, named `SERVER__TOOL`; and the tool count per server."""
    tools: list[types.Tool] = []
    counts: dict[str, int] = {}
    for path in sorted(CORPUS.glob("*.json")):
        listed = json.loads(path.read_text())
        server = listed["server"]
        for raw in listed["tools"]:
            tool = types.Tool.model_validate(raw)
            tools.append(tool.model_copy(update={"name": f"{server}__{tool.name}"}))
        counts[server] = len(listed["tools"])
    return tools, counts


def _words(tool: types.Tool) -> set[str]:
    text = " ".join([tool.name, tool.title or "", tool.description or ""])
    return set(_tokens(text))


def load_queries(half: str, by_name: dict[str, types.Tool]) -> list[Query]:
    queries = []
    for line in (QUERIES / f"{half}.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        answers = tuple(row["answers"])
        unknown = [name for name in answers if name not in by_name]
        if unknown:
            raise SystemExit(f"{half}: {row['query']!r} names no tool: {unknown}")
        said = set(_tokens(row["query"]))
        shared = max(len(said & _words(by_name[name])) for name in answers)
        queries.append(Query(row["query"], answers, indirect=shared <= 1))
    return queries


def frozen(half: str) -> bool:
    """Whether `half`'s file still has the hash `SHA256SUMS` froze."""
    sums = QUERIES / "SHA256SUMS"
    if not sums.exists():
        return False
    digest = hashlib.sha256((QUERIES / f"{half}.jsonl").read_bytes()).hexdigest()
    return f"{digest}  {half}.jsonl" in sums.read_text().splitlines()


@dataclass
class Figures:
    count: int
    at1: float
    at3: float
    at5: float
    mrr: float


def figures(ranks: list[int | None]) -> Figures:
    n = len(ranks) or 1

    def at(k: int) -> float:
        return sum(1 for r in ranks if r is not None and r <= k) / n

    mrr = sum(1 / r for r in ranks if r is not None) / n
    return Figures(len(ranks), at(1), at(3), at(5), mrr)


def rank_of(index: ToolIndex, query: Query) -> tuple[int | None, list[str]]:
    hits = index.search(query.text, 10) or index.nearest(query.text, 10)
    names = [hit.name for hit in hits]
    ranks = [names.index(a) + 1 for a in query.answers if a in names]
    return (min(ranks) if ranks else None), names


def _listing(tools: list[types.Tool] | tuple[types.Tool, ...]) -> str:
    return types.ListToolsResult(tools=list(tools)).model_dump_json(
        by_alias=True, exclude_none=True
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--misses", action="store_true", help="the tuning misses")
    parser.add_argument(
        "--heldout-misses",
        action="store_true",
        help="the held-out misses too (read them only to report, not to tune)",
    )
    args = parser.parse_args()

    tools, counts = load_corpus()
    by_name = {tool.name: tool for tool in tools}
    print(f"corpus: {len(tools)} tools over {len(counts)} servers")
    print("  " + ", ".join(f"{name} {n}" for name, n in sorted(counts.items())))
    started = time.perf_counter()
    index = ToolIndex(tools)
    build = time.perf_counter() - started
    print(f"words index build: {build * 1000:.0f} ms (first, caches cold)")
    rankers = [("words", index)]
    started = time.perf_counter()
    model = semantic.encoder()
    if model is None:
        print("meaning: no model installed (see gateway/semantic.py): words only")
    else:
        loaded = time.perf_counter() - started
        fused = ToolIndex(tools)
        started = time.perf_counter()
        fused.attach_meaning(model)
        took = time.perf_counter() - started
        print(
            f"meaning: {semantic.find_model()} ({loaded:.2f} s to load, "
            f"{len(tools)} tools in {took:.1f} s; another: ${semantic.MODEL_ENV})"
        )
        rankers.append(("words+meaning", fused))
    for label, ranker in rankers:
        print(f"\n== {label}")
        answers = report(ranker, by_name, args)
    full = len(_listing(tools))
    three = len(_listing(DISCOVERY_TOOLS))
    median = statistics.median(answers) if answers else 0
    print(
        f"\ncharacters a client reads (tokens ~ /4): tools/list {full:,}; "
        f"3 discovery tools {three:,} + one median search answer {median:,.0f} "
        f"= {full / (three + median):.0f}x fewer"
    )
    return 0


def report(
    index: ToolIndex, by_name: dict[str, types.Tool], args: argparse.Namespace
) -> list[int]:
    """Print each half's figures; return the lengths of the search answers."""
    header = f"{'half':<10} {'queries':>7} {'@1':>5} {'@3':>5} {'@5':>5} {'MRR':>5}"
    print(f"{header}   (indirect: at most one content word in common)")
    answers: list[int] = []
    for half in HALVES:
        queries = load_queries(half, by_name)
        if half == "heldout" and not frozen(half):
            print(f"{half:<10} not frozen (no hash in SHA256SUMS): not reported")
            continue
        ranked = [rank_of(index, q) for q in queries]
        ranks = [rank for rank, _ in ranked]
        for label, rows in (
            (half, ranks),
            (
                "  indirect",
                [r for r, q in zip(ranks, queries, strict=True) if q.indirect],
            ),
        ):
            f = figures(rows)
            print(
                f"{label:<10} {f.count:>7} {f.at1:>5.2f} {f.at3:>5.2f} "
                f"{f.at5:>5.2f} {f.mrr:>5.2f}"
            )
        show = args.misses if half == "tuning" else args.heldout_misses
        if show:
            for (rank, names), q in zip(ranked, queries, strict=True):
                if rank is None or rank > 3:
                    where = f"rank {rank}" if rank else "not in the first 10"
                    print(f"    {q.text!r}: wants {'/'.join(q.answers)} ({where})")
                    print(f"      got {', '.join(names[:3])}")
        answers.extend(
            len(search_result(index.search(q.text, DEFAULT_LIMIT))) for q in queries
        )
    return answers


if __name__ == "__main__":
    raise SystemExit(main())
