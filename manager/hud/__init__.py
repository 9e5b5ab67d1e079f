"""The terminal HUD: every connection live, in one screen.

The package is split by what each part may import, so that `mcp-manager status`
never pays for textual and the reducer stays testable without a terminal:

* `state`: the pure reducer. `HudState.apply(event, now)` folds typed bus events
  (the attached HUD decodes the socket's with `event_from_dict`) into one `Row` per
  connection, a bounded log and the footer facts. No rich, no textual, no I/O.
  `folding` holds its one handler per kind of event, loaded with the first
  event, so the `status` table (a snapshot) loads no event type.
* `view`: pure presentation shared by both renderers: columns and their
  responsive layout, the cells of a row (text + style name), the log, header and
  footer lines.
* `render`: rich. `render_status(rows, now, ...)` is the one-shot table that
  `mcp-manager status` prints.
* `feed`: where events come from (a bus subscription, or a queue filled from
  the control socket) and what the keys ask of the daemon (`HudBackend`).
* `widgets`, `details` and `app`: textual. `HudApp` redraws at most
  `FRAME_RATE` times a second from a feed it polls; it never blocks the daemon.
  `asks`: what its keys ask of the daemon, each answer told in a toast.
* `terminal`: while the HUD owns the terminal, logging, warnings and fd 2 go
  into its log, and textual's output can neither raise nor block the daemon.
* `run`: the two ways to run it: inside the daemon (`run_inline`, a bus
  subscriber with its own bounded queue) and attached to a running daemon
  through the control socket (`run_attached`, which survives daemon restarts).
* `compat_textual`: the only place that uses textual's private names.

This file imports nothing, so importing `manager.hud.render` does not load textual.
"""

from __future__ import annotations

__all__: list[str] = []
