"""The one door to anyio's (and asyncio's) private names.

* `anyio.abc.Process` on asyncio wraps an `asyncio.subprocess.Process`
  (`._process`) whose `._transport` holds the child's pipes and pidfd until
  garbage collection; after we reaped a stdio server we close it at once, so a
  fleet that restarts servers all day does not pile up file descriptors.
  anyio's `Process.aclose()` closes the pipes and waits for the exit, but
  closes the transport only when cancelled. Replace with a public way to
  release it (none in anyio 4.x).

* anyio's asyncio `ByteSendStream` for a process's stdin wraps an
  `asyncio.StreamWriter` (`._stream`); its `send` ends with a checkpoint that
  costs every request written to a stdio server an event-loop turn.
  `write_at_once` writes a line straight to the writer when its buffer is
  empty (nothing to wait for; the caller has just checked for cancellation),
  else the caller sends it anyio's way. Replace with a public non-blocking
  write (none in anyio 4.x).

`tests/test_compat.py` fails with `WHY` when the installed version lacks it.
"""

from __future__ import annotations

import contextlib

import anyio.abc

__all__ = ["WHY", "release_process", "write_at_once"]

WHY = (
    "mcp-manager reaches into anyio's asyncio process (._process._transport, "
    "a stdin stream's ._stream, "
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


def write_at_once(stream: anyio.abc.ByteSendStream, data: bytes) -> bool:
    """Write `data` to the pipe under `stream` now if nothing is queued there;
    False (nothing written) when the caller must `send` it (a full or closing
    pipe, or no asyncio writer underneath)."""
    writer = getattr(stream, "_stream", None)
    transport = getattr(writer, "transport", None)
    if (
        writer is None
        or transport is None
        or transport.is_closing()
        or transport.get_write_buffer_size()
    ):
        return False
    writer.write(data)
    return True
