"""A process whose event loop gets stuck, as a bug of ours would leave the daemon.

It runs the real `Watchdog` the way the daemon does (heartbeat task, signal
handlers recorded after anyio's), starts a `sleep` child in its own process
group registered in `CHILD_GROUPS`, prints `stuck <child pid>` and then spins in
`spin_forever()` without ever awaiting. SIGTERM must still end it (and its
child). Run: `python tests/servers/stuck_loop.py STALL_AFTER`.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time

import anyio

from manager.daemon.watchdog import Watchdog
from manager.transport.stdio.children import CHILD_GROUPS


def spin_forever() -> None:
    """The bug: a loop that never yields to the event loop."""
    while True:
        time.monotonic()


async def main(stall_after: float, child: int) -> None:
    watchdog = Watchdog(stall_after)
    watchdog.start()
    CHILD_GROUPS.add(child)
    async with anyio.create_task_group() as tg:
        tg.start_soon(watchdog.heartbeat)
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT):
            watchdog.install((signal.SIGTERM, signal.SIGINT))
            await anyio.sleep(0.2)  # a few heartbeats first
            print(f"stuck {child}", flush=True)
            spin_forever()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    anyio.run(main, float(sys.argv[1]), sleeper.pid)
