"""What confinement costs a start: sandboxed against unconfined, same run.

Run: `.venv/bin/python bench/bench_sandbox.py [--rounds N]`. For the demo
server (Python) and the official reference server (Node, when `make test`
installed it in tests/node), each round starts the server once with
`sandbox = "strict"` and once without, alternating, in one `Manager` (the
real transport): the time from `add` to `connected` (spawn, `initialize`,
every list). Confined, the daemon starts `manager/confine.py` (`python -I
-S`), which sets up Landlock and execs the server: the extra cost is that
interpreter's start. Printed: the medians and their ratio (issue 37's bar is
1.10 at most).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from servers import stdio_command  # noqa: E402
from servers.everything import EverythingNotInstalled, everything_stdio_command  # noqa: E402

from manager.core.events import Event  # noqa: E402
from manager.core.spec import parse_spec  # noqa: E402
from manager.engine.bus import EventBus  # noqa: E402
from manager.engine.manager import Manager  # noqa: E402
from manager.transport.stdio.process import landlock_abi  # noqa: E402


async def start_times(
    command: str, args: list[str], rounds: int
) -> tuple[list[float], list[float]]:
    """(confined, unconfined) seconds from add to connected, one of each per round."""
    bus = EventBus()
    connected: dict[str, anyio.Event] = {}

    def seen(event: Event) -> None:
        if event.kind == "connected" and event.name in connected:
            connected[event.name].set()

    bus.add_listener(seen)
    confined: list[float] = []
    plain: list[float] = []
    async with Manager(bus) as manager:
        for n in range(rounds):
            for sandbox, into in (("strict", confined), ("off", plain)):
                name = f"s{n}-{sandbox}"
                spec = parse_spec(
                    name, {"command": command, "args": args}, {"sandbox": sandbox}
                )
                connected[name] = anyio.Event()
                started = time.perf_counter()
                manager.add(spec)
                with anyio.fail_after(60):
                    await connected[name].wait()
                into.append(time.perf_counter() - started)
                manager.remove(name)
                await anyio.sleep(0.2)  # let it stop before the next start
    return confined, plain


def report(label: str, confined: list[float], plain: list[float]) -> None:
    a, b = statistics.median(confined), statistics.median(plain)
    print(
        f"{label:<34} confined {a * 1000:6.0f} ms   unconfined {b * 1000:6.0f} ms"
        f"   ratio {a / b:.2f}   ({len(confined)} starts each)"
    )


async def main(rounds: int) -> None:
    if landlock_abi() < 1:
        print("no Landlock on this kernel: nothing to compare")
        return
    print(f"Landlock ABI {landlock_abi()}; time from add to connected")
    command, args = stdio_command(fork=False)  # as users run it, not forked
    report("demo server (Python, SDK)", *await start_times(command, args, rounds))
    try:
        command, args = everything_stdio_command()
    except EverythingNotInstalled:
        print("reference server: not installed (make test installs it)")
        return
    report("reference server (Node)", *await start_times(command, args, rounds))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    anyio.run(main, parser.parse_args().rounds)
