"""The one door to anyio's (and asyncio's) private names.

* `anyio.abc.Process` on asyncio wraps an `asyncio.subprocess.Process`
  (`._process`) whose `._transport` holds the child's pipes and pidfd until
  garbage collection; after we reaped a stdio server we close it at once, so a
  fleet that restarts servers all day does not pile up file descriptors.
  anyio's `Process.aclose()` closes the pipes and waits for the exit, but
  closes the transport only when cancelled. Replace with a public way to
  release it (none in anyio 4.x).

`tests/test_compat.py` fails with `WHY` when the installed version lacks it.
"""

from __future__ import annotations

import contextlib

import anyio.abc

__all__ = ["WHY", "release_process"]

WHY = (
    "mcp-manager reaches into anyio's asyncio process (._process._transport, "
    "see manager/transport/compat_anyio.py): this version no longer has it; "
    "move to the public API named there"
)


def release_process(process: anyio.abc.Process) -> None:
    """Close the asyncio subprocess transport of a reaped `process` now (a
    no-op where there is none, e.g. on trio)."""
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with contextlib.suppress(PermissionError):
            close()
