"""Run a piece of Lua in a copy of the daemon that can be stopped, whatever it does.

The count hook stops a runaway Lua loop, but not one call into C: a string
pattern that backtracks (`("rm -r "):rep(400):find("rm.*%-.*r.*f")`) runs
for minutes inside `string.find`, and the daemon's loop with it. A policy
rule's `check` runs on arguments an agent chose, so it runs here instead: in
a forked child (a copy of the runtime, closures and all), whose answer comes
back as JSON on a pipe; at the deadline the child is killed (its own timer
kills it too, should the daemon be gone). What the check changes in its copy
is not kept: a check is a function of the arguments.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import warnings
from collections.abc import Callable

__all__ = ["SLACK", "run_isolated"]

SLACK = 1.0
"""Seconds the child may take beyond its budget (a fork, a busy machine)
before it counts as run out."""

_PR_SET_PDEATHSIG = 1


async def run_isolated(work: Callable[[], object], budget: float) -> object | None:
    """`work()` in a forked child; what it returned (JSON-able), or None when
    the child did not answer within `budget` + `SLACK` seconds (killed) or
    died without answering. The fork is on the caller's thread (the loop's,
    which owns the runtime); the wait is not: the loop runs on meanwhile."""
    import anyio

    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns that a multi-threaded process forks: the child
        # touches no lock of another thread but by accident, and then its
        # timer ends it.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: never returns
        _child(work, write_end, budget + SLACK)
    os.close(write_end)
    data: bytes | None = None
    try:
        os.set_blocking(read_end, False)
        with anyio.move_on_after(budget + SLACK):
            data = await _read_all(read_end)
    finally:
        os.close(read_end)
        if data is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with anyio.CancelScope(shield=True):  # reaped, even when cancelled
            await anyio.to_thread.run_sync(_reap, pid)
    if not data:
        return None
    try:
        answer: object = json.loads(data)
    except ValueError:
        return None
    return answer


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


async def _read_all(fd: int) -> bytes:
    """Everything written to `fd` until its end."""
    import anyio

    chunks: list[bytes] = []
    while True:
        await anyio.wait_readable(fd)
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            continue
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _child(work: Callable[[], object], out: int, limit: float) -> None:
    try:
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
            signal.signal(number, signal.SIG_DFL)
        with contextlib.suppress(ValueError, OSError):
            signal.set_wakeup_fd(-1)  # the parent's loop's, not ours
        signal.setitimer(signal.ITIMER_REAL, limit)  # SIGALRM ends us, C or not
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        data = json.dumps(work()).encode()
        while data:
            data = data[os.write(out, data) :]
    except BaseException:  # the parent reads no answer as a failure
        pass
    finally:
        os._exit(0)
