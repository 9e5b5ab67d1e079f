"""What a watcher beside each request costs: a bare task, or a task group.

Run: `.venv/bin/python bench/bench_tasks.py [--requests N]`. Each "request"
starts a watcher that waits on an event, yields once, and cancels it, the way
`gateway/exchange.py:watch_beside` watches a 2026-07-28 request's response
stream; once with a bare asyncio task (what `watch_beside` does), once with an
anyio task group, spawn and cancel (the package's idiom everywhere else).
Prints the CPU per request of each, three rounds, taking turns.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import anyio
import anyio.lowlevel


async def _watcher(never: anyio.Event) -> None:
    await never.wait()


async def with_group(requests: int) -> float:
    """CPU seconds per request with a task group per request."""
    never = anyio.Event()
    started = time.process_time()
    for _ in range(requests):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watcher, never)
            await anyio.lowlevel.checkpoint()
            tg.cancel_scope.cancel()
    return (time.process_time() - started) / requests


async def bare(requests: int) -> float:
    """CPU seconds per request with a bare task, cancelled at the end."""
    never = anyio.Event()
    started = time.process_time()
    for _ in range(requests):
        watcher = asyncio.get_running_loop().create_task(_watcher(never))
        try:
            await anyio.lowlevel.checkpoint()
        finally:
            watcher.cancel()
    return (time.process_time() - started) / requests


async def run(requests: int) -> None:
    print(f"watcher beside a request, CPU per request ({requests} requests a round)")
    for round_ in range(1, 4):
        group, task = await with_group(requests), await bare(requests)
        difference = (group - task) * 1e6
        print(
            f"round {round_}: task group {group * 1e6:6.1f} µs   "
            f"bare task {task * 1e6:6.1f} µs   difference {difference:6.1f} µs"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    anyio.run(run, parser.parse_args().requests)


if __name__ == "__main__":
    main()
