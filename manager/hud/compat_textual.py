"""The one door to textual's private names.

* `App._driver._writer_thread._queue` (`writer_queue`): the bounded queue of
  frames waiting for the terminal. `TerminalOutput` unbinds it once the app
  runs (a stalled terminal would otherwise block the event loop when it
  fills) and watches its length (the app stops drawing while frames back up).
  Looked up defensively: a textual without it only loses that protection.
  Replace with a public way to bound and measure the driver's pending output
  (none in textual 8.x).

`tests/test_compat.py` fails with `WHY` when the installed version lacks it.
"""

from __future__ import annotations

import queue

__all__ = ["WHY", "writer_queue"]

WHY = (
    "mcp-manager reaches into textual's driver (App._driver._writer_thread._queue, "
    "see manager/hud/compat_textual.py): this version no longer has it; "
    "move to the public API named there"
)


def writer_queue(app: object) -> queue.Queue[object] | None:
    """The running `app`'s queue of frames for the terminal, or None."""
    writer = getattr(getattr(app, "_driver", None), "_writer_thread", None)
    pending = getattr(writer, "_queue", None)
    return pending if isinstance(pending, queue.Queue) else None
