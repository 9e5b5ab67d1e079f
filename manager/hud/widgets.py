"""The HUD's two line-API widgets: the connection table and the event log.

Both draw only the lines on screen, straight from their data: a frame with
hundreds of connections costs the rows in view, not the fleet. The table
repaints a row only when one of its cells changed (a countdown ticking is one
row), and its cursor follows the selected connection when the trouble-first
order moves it.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Sequence
from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from .state import LOG_LINES, Row
from .view import GAP, Cell, Column, cells, layout, tools_cell

__all__ = ["ConnectionTable", "EventLog", "column_titles", "fit"]

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


def fit(text: str, width: int, *, right: bool = False) -> str:
    """`text` in exactly `width` cells: control characters shown as `�`,
    cut with `…` when too long, padded on the right (or left if `right`)."""
    text = _CONTROL.sub("�", text.replace("\t", " "))
    size = cell_len(text)
    if size > width:
        return set_cell_size(text, width - 1) + "…" if width > 0 else ""
    pad = " " * (width - size)
    return pad + text if right else text + pad


def column_titles(columns: Sequence[tuple[Column, int]]) -> Text:
    """The titles line over the connection table, fitted like its cells."""
    gap = " " * GAP
    return Text(
        gap.join(fit(c.header, size, right=c.right) for c, size in columns),
        style="bold",
    )


class ConnectionTable(ScrollView, can_focus=True):
    """One line per connection, columns fitted to the width.

    Call `show(rows, now)` once per frame with the rows in display order.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {"connection-table--cursor"}

    DEFAULT_CSS = """
    ConnectionTable {
        height: auto;
        max-height: 65%;
        min-height: 1;
        overflow-x: hidden;
        overflow-y: auto;
        scrollbar-size-vertical: 1;
    }
    ConnectionTable > .connection-table--cursor {
        background: $accent 30%;
    }
    ConnectionTable:focus > .connection-table--cursor {
        background: $accent 60%;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home,g", "first", "First", show=False),
        Binding("end,G", "last", "Last", show=False),
        Binding("enter", "select", "Details"),
    ]

    class Selected(Message):
        """Enter (or a double click) on a connection: show its details."""

        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    class ColumnsChanged(Message):
        """The columns were fitted anew (the header must follow)."""

        def __init__(self, columns: list[tuple[Column, int]]) -> None:
            super().__init__()
            self.columns = columns

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[Row] = []
        self.now = 0.0
        self.cursor = 0
        self.selected: str | None = None
        self.stale = False
        self.columns: list[tuple[Column, int]] = []
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        self._layout_key: tuple[int, int, int] = (-1, -1, -1)
        self._painted: dict[int, tuple[str, tuple[Cell, ...], bool] | None] = {}
        self._styles: tuple[Style, Style] | None = None

    # --- data -----------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        """Connection names in display order."""
        return list(self._names)

    def row_cells(self, row: Row) -> tuple[Cell, ...]:
        """The cells of `row` as shown, in column order."""
        all_cells = cells(row, self.now)
        return tuple(all_cells[column.key] for column, _ in self.columns)

    def cell(self, name: str, key: str) -> str:
        """The text of one cell as last shown (for tests and tools)."""
        row = self.rows[self._index[name]]
        return cells(row, self.now)[key][0]

    def set_stale(self, stale: bool) -> None:
        """Dim every row (the daemon is unreachable: the data may be old)."""
        if stale != self.stale:
            self.stale = stale
            self._painted.clear()
            self.refresh()

    def show(self, rows: Sequence[Row], now: float) -> int:
        """Show `rows` (in display order) at time `now`, repainting what changed.

        Returns:
            How many lines are repainted.
        """
        self.now = now
        names = [row.name for row in rows]
        moved = names != self._names
        self.rows = list(rows)
        if moved:
            self._names = names
            self._index = {name: i for i, name in enumerate(names)}
            self._follow_selection()
        if len(self.rows) != self.virtual_size.height:
            self.virtual_size = Size(self.size.width, len(self.rows))
        if self._fit_columns():
            self._painted.clear()
            self.refresh()
            return self.size.height
        # Repaint only the lines on screen whose text changed: a re-sort moves
        # many rows, a ticking countdown changes one cell of one row.
        top = int(self.scroll_offset.y)
        repainted = 0
        for i in range(top, top + self.size.height):
            if self._painted.get(i, False) != self._line_key(i):
                self.refresh_line(i)
                repainted += 1
        return repainted

    def _line_key(self, index: int) -> tuple[str, tuple[Cell, ...], bool] | None:
        if index >= len(self.rows):
            return None
        row = self.rows[index]
        return row.name, self.row_cells(row), index == self.cursor

    def _follow_selection(self) -> None:
        index = self._index.get(self.selected) if self.selected is not None else None
        if index is None:
            index = min(self.cursor, max(len(self._names) - 1, 0))
        self.cursor = index
        self.selected = self._names[index] if self._names else None
        self._scroll_cursor_into_view()

    def _fit_columns(self) -> bool:
        width = self.scrollable_content_region.width or self.size.width
        longest = max((len(n) for n in self._names), default=0)
        tools = max((len(tools_cell(row)[0]) for row in self.rows), default=0)
        key = (width, longest, tools)
        if key == self._layout_key:
            return False
        self._layout_key = key
        self.columns = layout(width, self._names, tools)
        self.post_message(self.ColumnsChanged(self.columns))
        return True

    def on_resize(self, event: events.Resize) -> None:
        """Refit the columns to the new width."""
        if self._fit_columns():
            self._painted.clear()
            self.refresh()

    # --- drawing --------------------------------------------------------------

    def notify_style_update(self) -> None:
        """CSS changed (theme, focus): forget the resolved styles."""
        super().notify_style_update()
        self._styles = None
        self._painted.clear()

    def _base_styles(self) -> tuple[Style, Style]:
        # Resolving CSS into a rich style is costly: once per style change, not
        # once per line.
        if self._styles is None:
            base = self.rich_style
            cursor = base + self.get_component_rich_style("connection-table--cursor")
            self._styles = (base, cursor)
        return self._styles

    def render_line(self, y: int) -> Strip:
        """One row of the table (y is relative to the top of the view)."""
        index = int(self.scroll_offset.y) + y
        base, cursor = self._base_styles()
        width = self.size.width
        key = self._line_key(index) if self.columns else None
        self._painted[index] = key
        if key is None:
            return Strip.blank(width, base)
        _, row_cells, at_cursor = key
        if at_cursor:
            base = cursor
        dim = Style(dim=True) if self.stale else None
        segments: list[Segment] = []
        gap = " " * GAP
        for (column, size), (text, style) in zip(self.columns, row_cells, strict=True):
            if segments:
                segments.append(Segment(gap, base))
            cell_style = base + Style.parse(style) if style else base
            if dim is not None:
                cell_style = cell_style + dim
            segments.append(Segment(fit(text, size, right=column.right), cell_style))
        return Strip(segments).adjust_cell_length(width, base)

    # --- cursor ---------------------------------------------------------------

    def move_cursor(self, index: int) -> None:
        """Put the cursor on row `index` (clamped) and select that connection."""
        if not self.rows:
            return
        index = max(0, min(index, len(self.rows) - 1))
        old, self.cursor = self.cursor, index
        self.selected = self._names[index]
        self.refresh_line(old)
        self.refresh_line(index)
        self._scroll_cursor_into_view()

    def _scroll_cursor_into_view(self) -> None:
        top = int(self.scroll_offset.y)
        height = self.scrollable_content_region.height or self.size.height
        if height <= 0:
            return
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False)

    def action_cursor(self, delta: int) -> None:
        """Move the cursor by `delta` rows."""
        self.move_cursor(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        """Move the cursor by a screenful."""
        self.move_cursor(self.cursor + direction * max(1, self.size.height - 1))

    def action_first(self) -> None:
        """Cursor to the first row."""
        self.move_cursor(0)

    def action_last(self) -> None:
        """Cursor to the last row."""
        self.move_cursor(len(self.rows) - 1)

    def action_select(self) -> None:
        """Ask for the selected connection's details."""
        if self.selected is not None:
            self.post_message(self.Selected(self.selected))

    def on_click(self, event: events.Click) -> None:
        """Click selects a row; a double click opens its details."""
        self.move_cursor(int(self.scroll_offset.y) + event.y)
        if event.chain >= 2:
            self.action_select()


class EventLog(ScrollView, can_focus=True):
    """The latest events, stderr lines and log records, one line each.

    Follows the newest line unless the operator scrolled up to read.
    """

    DEFAULT_CSS = """
    EventLog {
        height: 1fr;
        min-height: 3;
        overflow-x: hidden;
        overflow-y: auto;
        scrollbar-size-vertical: 1;
    }
    """

    def __init__(self, *, max_lines: int = LOG_LINES, id: str | None = None) -> None:
        super().__init__(id=id)
        self._lines: deque[Cell] = deque(maxlen=max_lines)
        self._base: Style | None = None

    def notify_style_update(self) -> None:
        """CSS changed: forget the resolved style."""
        super().notify_style_update()
        self._base = None

    @property
    def lines(self) -> list[str]:
        """The text of every line held, oldest first."""
        return [text for text, _ in self._lines]

    def on_mount(self) -> None:
        """Follow the newest line (textual's anchor: released by scrolling up,
        taken again by scrolling back to the end)."""
        self.anchor()

    def write(self, lines: Iterable[Cell]) -> None:
        """Append lines (the view follows them while anchored)."""
        self._lines.extend(lines)
        self.virtual_size = Size(self.size.width, len(self._lines))
        self.refresh()

    def clear(self) -> None:
        """Drop every line."""
        self._lines.clear()
        self.virtual_size = Size(self.size.width, 0)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        """One log line, cut to the width."""
        index = int(self.scroll_offset.y) + y
        if self._base is None:
            self._base = self.rich_style
        base = self._base
        width = self.size.width
        if index >= len(self._lines):
            return Strip.blank(width, base)
        text, style = self._lines[index]
        line_style = base + Style.parse(style) if style else base
        return Strip([Segment(fit(text, width), line_style)], width)
