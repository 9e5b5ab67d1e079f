"""`HudApp`: the textual view of `HudState`.

Once per frame (at most `FRAME_RATE` a second) the app polls its feed for a
bounded batch (`MAX_ITEMS_PER_FRAME`), folds it into the reducer and repaints
only what changed; a key press repaints at once instead of waiting for the next
frame, and a frame that repainted most of the table (a fleet flapping) makes
the next one skip drawing. Events arriving faster than the frames fold them in
stay in the feed's own bounded queue, which reports what it had to drop
(`lagged`); the HUD shows the count and re-seeds itself from a fresh snapshot.

Keys: `q`/Ctrl-C quit (inside `mcp-manager run`: stop the daemon, as Ctrl-C
would), `r` reload startup.lua, Enter details of the selected connection, `c`
reconnect it now, `/` filter, Escape clear the filter, `v` every event in the
log (retries too) or only the news, `m` mute (or show again) the selected
connection's stderr and log messages in the log.

The frame also watches the terminal (`terminal_state`): while its output backs
up the app skips drawing, and when it hangs up the app exits with "hangup".
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Input, Static
from textual.worker import Worker

from ..core.errors import ManagerError
from .asks import DaemonAsks
from .feed import FeedItem, HudBackend, HudFeed, Note, Snapshot, Unreachable
from .state import HudState, LogLine, Row
from .view import (
    approval_cells,
    counts_text,
    footer_lines,
    header_cells,
    log_cell,
)
from .widgets import ConnectionTable, EventLog, column_titles

__all__ = ["FRAME_RATE", "INFO_INTERVAL", "MAX_ITEMS_PER_FRAME", "HudApp"]

logger = logging.getLogger("manager.hud")

FRAME_RATE = 10.0
"""Frames per second at most: events are folded in and the screen repainted."""

MAX_ITEMS_PER_FRAME = 2000
"""Feed items folded in per frame; the rest wait in the feed's bounded queue, so
a frame never blocks the event loop for more than a few milliseconds."""

INFO_INTERVAL = 2.0
"""Seconds between two fetches of the daemon's info (drops, OTLP status)."""

LOG_INTERVAL = 0.3
"""Seconds between two scrolls of the log while lines pour in."""

LOG_BURST = 10
"""New log lines in one frame that count as pouring in."""

STORM_LINES = 20
"""Table lines repainted in one frame beyond which the next frame is skipped
(at most 5 full repaints a second while a fleet flaps)."""

STATUS_MAX_LINES = 4
"""Lines the footer may take (a long config error wraps)."""

SHORT_TERMINAL = 20
"""Terminal lines below which the footer's lines are cut, not wrapped."""

RESYNC_RETRY = 1.0
"""Seconds before a failed snapshot after a lag is tried again."""


class HudApp(App[str]):
    """The live HUD.

    Args:
        backend: What the keys act on (the daemon, or the control socket).
        feed: Polled once per frame for events and notes.
        initial: A snapshot to start from (the attached HUD gets its own from
            the feed instead).
        attached: Attached to a daemon running elsewhere: `q` only detaches.
        subtitle: Shown in the header (socket path, pid).
        clock: Wall clock (injectable for tests).
        on_ready: Called once the app is mounted.
        terminal_state: `ok`, `busy` (output is backing up: skip drawing) or
            `lost` (the terminal hung up: exit with "hangup"); polled per frame.
    """

    TITLE = "mcp-manager"
    ENABLE_COMMAND_PALETTE = False

    CSS = """
    Screen { layout: vertical; }
    #header { height: 1; background: $panel; text-wrap: nowrap; }
    #header { text-overflow: ellipsis; }
    #columns { height: 1; text-style: bold; text-wrap: nowrap; }
    #log { border-top: solid $panel-lighten-2; }
    #filter { display: none; height: 3; }
    #status { height: 2; background: $panel; }
    #approval { height: auto; max-height: 3; background: $warning-darken-3; }
    #approval { display: none; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("q", "stop", "Stop daemon"),
        Binding("ctrl+c", "stop_or_quit", "Quit", show=False, priority=True),
        Binding("r", "reload", "Reload"),
        Binding("c", "reconnect", "Reconnect"),
        # Priority: handled before the key reaches the table, so characters
        # typed right behind the `/` already land in the filter box.
        Binding("slash", "filter", "Filter", priority=True),
        Binding("v", "verbose", "Verbose"),
        Binding("m", "mute", "Mute"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        # A call waiting for approval (`mcp_policy` `ask`), the oldest first.
        Binding("a", "decide('allow', 'once')", "Allow", show=False),
        Binding("A", "decide('allow', 'always')", "Allow always", show=False),
        Binding("d", "decide('deny', 'once')", "Deny", show=False),
    ]

    def __init__(
        self,
        backend: HudBackend,
        feed: HudFeed,
        *,
        initial: Snapshot | None = None,
        attached: bool = False,
        subtitle: str = "",
        clock: Callable[[], float] = time.time,
        on_ready: Callable[[], None] | None = None,
        terminal_state: Callable[[], str] = lambda: "ok",
    ) -> None:
        super().__init__()
        self.backend = backend
        self.feed = feed
        self.attached = attached
        self.subtitle = subtitle
        self.hud = HudState()
        self.filter = ""
        self.verbose = False
        self.muted: set[str] = set()
        """Connections whose stderr and log messages the log leaves out (`m`)."""
        self.unreachable: str | None = None
        self.frames = 0
        self._clock = clock
        self._on_ready = on_ready
        self._terminal_state = terminal_state
        self.skipped_frames = 0
        self._order: list[Row] = []
        self._drawn: tuple[int, str] = (-1, "")
        self._log_seen = 0
        self._log_due = 0.0
        self._texts: dict[str, object] = {}
        self._attached_once = False
        self._resync_at = 0.0
        self._storm = False
        # Kept, not queried: `query_one` searches the active screen, which is
        # the details screen while it is open, and frames go on meanwhile.
        self.table = ConnectionTable(id="connections")
        self.log_view = EventLog(id="log")
        self.filter_box = Input(
            placeholder="filter: name, state, transport or error", id="filter"
        )
        self._statics = {
            name: Static(id=name)
            for name in ("header", "columns", "approval", "status")
        }
        self.asks = DaemonAsks(
            backend,
            self.hud,
            notify=self.notify,
            show=self.push_screen,
            reconnect=self.reconnect,
            clock=clock,
        )
        """What the keys ask of the daemon (`asks`)."""
        if initial is not None:
            self._take_snapshot(initial, clock())

    # --- layout ---------------------------------------------------------------

    def compose(self) -> ComposeResult:
        """Header, column titles, table, log, filter, status footer, key footer."""
        yield self._statics["header"]
        yield self._statics["columns"]
        yield self.table
        yield self._statics["approval"]
        yield self.log_view
        yield self.filter_box
        yield self._statics["status"]
        yield Footer()

    def on_mount(self) -> None:
        """Start the frame and info timers; draw the first frame."""
        self.log_view.border_title = "events and logs"
        self.table.focus()
        self.set_interval(1.0 / FRAME_RATE, self.frame, name="frame")
        self.set_interval(INFO_INTERVAL, self._fetch_info, name="info")
        self.frame()
        if self._on_ready is not None:
            self._on_ready()

    # --- frames ---------------------------------------------------------------

    def frame(self) -> None:
        """Fold in what the feed has, then repaint what changed."""
        terminal = self._terminal_state()
        if terminal == "lost":
            self.exit("hangup")
            return
        now = self._clock()
        self.ingest(self.feed.poll(MAX_ITEMS_PER_FRAME), now)
        if self.hud.resync_needed and now >= self._resync_at:
            self._resync_at = now + RESYNC_RETRY
            self._spawn("refresh after a lag", self._resync, "resync")
        if terminal == "busy" or self._storm:
            # The terminal is behind (let it catch up), or the last frame
            # repainted most of the table (a flapping fleet): draw every other
            # frame until things calm down.
            self._storm = False
            self.skipped_frames += 1
            return
        self.draw(now)
        self.frames += 1

    def ingest(self, items: Sequence[FeedItem], now: float) -> None:
        """Fold feed items into the state (no drawing)."""
        apply = self.hud.apply
        for item in items:
            if isinstance(item, Note):
                self.hud.note(item.time, item.level, item.text)
            elif isinstance(item, Snapshot):
                self._take_snapshot(item, now)
            elif isinstance(item, Unreachable):
                self._lost_daemon(item.reason, now)
            else:
                apply(item, now)

    def _take_snapshot(self, snapshot: Snapshot, now: float) -> None:
        self.hud.seed(snapshot.rows, now)
        if snapshot.info is not None:
            self.hud.set_info(snapshot.info)
        pid = self.hud.daemon_pid
        who = f"daemon pid {pid}" if pid else "the daemon"
        if self.unreachable is not None:
            self.hud.note(now, "ok", f"reattached to {who}")
        elif self.attached and not self._attached_once:
            self.hud.note(now, "info", f"attached to {who}")
        elif snapshot.reason:
            self.hud.note(now, "info", snapshot.reason)
        self._attached_once = True
        self.unreachable = None
        if self.is_running:
            self.table.set_stale(False)

    def _lost_daemon(self, reason: str, now: float) -> None:
        if reason != self.unreachable:
            self.hud.note(now, "error", f"daemon unreachable: {reason}")
        self.unreachable = reason
        self.table.set_stale(True)

    def draw(self, now: float) -> None:
        """Repaint the table, log, header and footer from the state."""
        key = (self.hud.revision, self.filter)
        if key != self._drawn:
            self._drawn = key
            self._order = self.hud.sorted_rows(self.filter)
        config, facts = footer_lines(self.hud)
        # On a short terminal its two lines stay two (cut, not wrapped): the
        # log keeps the rows a long line would take.
        short = self.size.height < SHORT_TERMINAL
        status = Text(*config, overflow="ellipsis" if short else "fold", no_wrap=short)
        status.append("\n")
        counts = counts_text(self.hud)  # in the header already
        shown = [(text, style) for text, style in facts if text != counts]
        if self.unreachable is not None:
            # The endpoint, its clients and the exporter were the gone
            # daemon's: not shown as if they were still there.
            pid = self.hud.daemon_pid
            who = f"daemon pid {pid}" if pid else "the daemon"
            shown = [(f"{who} unreachable: rows are as it last said", "red")]
        for i, (text, style) in enumerate(shown):
            if i:
                status.append(" │ ", style="dim")
            status.append(text, style=style)
        with self.batch_update():  # one screen update for the whole frame
            repainted = self.table.show(self._order, now)
            self._storm = repainted > STORM_LINES
            self._draw_log()
            self._set_text("header", self._header(now))
            self._set_text("status", status)
            self._draw_approval(now)

    def _draw_approval(self, now: float) -> None:
        """The prompt row (`view.approval_cells`), shown while a call waits."""
        cells = approval_cells(self.hud, now)
        self._statics["approval"].display = bool(cells)
        if cells:
            text = Text(overflow="ellipsis")
            for part, style in cells:
                text.append(part, style=style)
            self._set_text("approval", text)

    def action_decide(self, verdict: str, scope: str) -> None:
        """Answer the oldest call waiting for approval (`a`, `A`, `d`)."""
        waiting = next(iter(self.hud.approvals.values()), None)
        if waiting is None:
            self.notify("no call waits for approval", timeout=2, markup=False)
            return
        self._spawn(
            f"{verdict} {waiting.approval}",
            partial(self.asks.decide, waiting.approval, waiting.tool, verdict, scope),
        )

    def _draw_log(self) -> None:
        new = self.hud.log_total - self._log_seen
        if new <= 0 or time.monotonic() < self._log_due:
            return
        # A scrolling log repaints all its lines: while lines pour in, scroll it
        # a few times a second, not on every frame (the table still is).
        burst = new >= LOG_BURST
        self._log_due = time.monotonic() + LOG_INTERVAL if burst else 0.0
        self._log_seen = self.hud.log_total
        log = self.hud.log
        start = len(log) - min(new, len(log))
        lines = [
            log_cell(line)
            for line in itertools.islice(log, start, None)
            if self._shown(line)
        ]
        if new > len(log):
            lines.insert(0, (f"… {new - len(log)} older lines not shown", "dim"))
        self.log_view.write(lines)

    def _header(self, now: float) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        cells = header_cells(
            self.hud,
            now,
            needle=self.filter,
            shown=len(self._order),
            unreachable=self.unreachable is not None,
            verbose=self.verbose,
            subtitle=self.subtitle,
            muted=self.muted,
        )
        for part, style in cells:
            text.append(part, style=style)
        return text

    def _set_text(self, widget_id: str, text: Text) -> None:
        # Heights are set here, only when they change: a layout pass costs far
        # more than repainting one line, and the header changes every second.
        if self._texts.get(widget_id) == text:
            return
        self._texts[widget_id] = text
        widget = self._statics[widget_id]
        if widget_id == "status":
            width = max(1, widget.size.width or self.size.width)
            lines = min(len(text.wrap(self.console, width)), STATUS_MAX_LINES)
            if widget.styles.height is None or widget.styles.height.value != lines:
                widget.styles.height = lines
            # textual wraps what it draws by its own style, not the Text's
            cut = text.no_wrap is True
            widget.styles.text_wrap = "nowrap" if cut else "wrap"
            widget.styles.text_overflow = "ellipsis" if cut else "fold"
        widget.update(text, layout=False)

    def on_resize(self) -> None:
        """The footer may wrap differently now: recompute it next frame."""
        self._texts.clear()

    def on_connection_table_columns_changed(
        self, message: ConnectionTable.ColumnsChanged
    ) -> None:
        """Keep the column titles over their columns."""
        self._set_text("columns", column_titles(message.columns))

    def _spawn(
        self,
        what: str,
        work: Callable[[], Coroutine[object, object, None]],
        group: str = "",
    ) -> Worker[None]:
        """Run `work()` in the background; a failure is shown, never fatal.

        `work` is called only once the worker starts: an exclusive worker
        replaced before it started, or one spawned while the app closes,
        leaves no coroutine that was never awaited.
        """

        async def guarded() -> None:
            try:
                await work()
            except Exception:  # boundary: a HUD action must never end the HUD
                logger.exception("HUD: %s failed", what)
                self.notify(
                    f"{what} failed unexpectedly; see the log",
                    severity="error",
                    markup=False,
                )

        return self.run_worker(
            guarded, group=group or what, exclusive=bool(group), exit_on_error=False
        )

    # --- background work ------------------------------------------------------

    async def _resync(self) -> None:
        # Fold in what is already queued first: inside the daemon, the snapshot
        # below is then exact (nothing runs between the two on the event loop).
        self.ingest(self.feed.poll(MAX_ITEMS_PER_FRAME), self._clock())
        try:
            snapshot = await self.backend.snapshot()
        except ManagerError:
            return  # retried on a later frame (the daemon may be restarting)
        self._take_snapshot(snapshot, self._clock())

    def _fetch_info(self) -> None:
        if self.unreachable is None:
            self._spawn("fetching daemon info", self._info, "info")

    async def _info(self) -> None:
        try:
            info = await self.backend.info()
        except ManagerError:
            return
        self.hud.set_info(info)

    # --- actions --------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`q` quits an attached HUD, and stops the daemon of an inline one."""
        if action == "quit":
            return self.attached
        if action == "stop":
            return not self.attached
        if action == "filter":  # a `/` typed into the filter box is text
            return not isinstance(self.focused, Input)
        return True

    def action_stop(self) -> None:
        """Leave the HUD and stop the daemon (inside `mcp-manager run`)."""
        self.exit("quit")

    async def action_quit(self) -> None:
        """Leave the HUD."""
        self.exit("quit")

    def action_stop_or_quit(self) -> None:
        """Ctrl-C: as `q`."""
        self.exit("quit")

    def action_reload(self) -> None:
        """Run startup.lua again; the result shows in the footer and the log."""
        self.notify("reloading startup.lua …", timeout=2, markup=False)
        self._spawn("reload", self.asks.reload, "reload")

    def action_reconnect(self) -> None:
        """Force a reconnect attempt of the selected connection, now."""
        name = self.table.selected
        if name is None:
            self.notify("no connection selected", severity="warning", markup=False)
            return
        self.reconnect(name)

    def reconnect(self, name: str) -> None:
        """Ask the daemon to try `name` now instead of after its backoff wait."""
        self._spawn(f"reconnect {name}", partial(self.asks.reconnect, name))

    def on_connection_table_selected(self, message: ConnectionTable.Selected) -> None:
        """Enter on a row: fetch and show its details."""
        self._spawn("details", partial(self.asks.details, message.name), "details")

    def _shown(self, line: LogLine) -> bool:
        """Whether the log shows `line` (`v` and `m`)."""
        if line.level == "debug" and not self.verbose:
            return False
        return not line.source or line.source not in self.muted

    def _rewrite_log(self) -> None:
        self.log_view.clear()
        self.log_view.write(
            log_cell(line) for line in self.hud.log if self._shown(line)
        )
        self.draw(self._clock())

    def action_verbose(self) -> None:
        """Show every event in the log (retries included), or only the news."""
        self.verbose = not self.verbose
        self._rewrite_log()

    def action_mute(self) -> None:
        """Leave the selected connection's stderr and log messages out of the
        log (a chatty server), or show them again."""
        name = self.table.selected
        if name is None:
            self.notify("no connection selected", severity="warning", markup=False)
            return
        if name in self.muted:
            self.muted.discard(name)
            said = f"{name}: its stderr and log messages are shown again"
        else:
            self.muted.add(name)
            said = f"{name}: its stderr and log messages are muted (m again: shown)"
        self.notify(said, markup=False)
        self._rewrite_log()

    def action_filter(self) -> None:
        """Show the filter box and type into it."""
        box = self.filter_box
        box.display = True
        # At once, not after a refresh: keys typed right after `/` go in the box.
        self.screen.set_focus(box)

    def action_clear_filter(self) -> None:
        """Clear and hide the filter."""
        box = self.filter_box
        box.value = ""
        box.display = False
        self._set_filter("")
        self.screen.set_focus(self.table)

    def on_input_changed(self, event: Input.Changed) -> None:
        """Filter as you type."""
        self._set_filter(event.value.strip())

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter keeps the filter and returns to the table."""
        if not event.value.strip():
            event.input.display = False
        self.screen.set_focus(self.table)

    def _set_filter(self, needle: str) -> None:
        if needle != self.filter:
            self.filter = needle
            self.draw(self._clock())  # at once: input-to-screen, not next frame
