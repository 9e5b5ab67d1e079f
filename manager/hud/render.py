"""The one-shot status table (`mcp-manager status`), drawn with rich.

Same rows, order (trouble first), cells and footer as the live HUD, printed once.
Only this module and the textual ones import rich; `cli` imports it lazily, so
`status --json` never loads it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..core.info import DaemonInfo
from ..core.status import ConnectionStatus
from .state import HudState
from .view import cells, footer_lines, layout, tools_cell

__all__ = ["PIPE_WIDTH", "print_status", "render_status"]

PIPE_WIDTH = 400
"""Width used when stdout is not a terminal: one line per row, nothing wrapped."""


def render_status(
    rows: Sequence[ConnectionStatus],
    now: float,
    *,
    info: DaemonInfo | None = None,
    width: int = 120,
    expand: bool = True,
) -> RenderableType:
    """The status table of `rows` (status dicts) at `now`, with the footer.

    Args:
        rows: One status per connection, in any order.
        now: Wall time the snapshot was taken (for countdowns and ages).
        info: The daemon's `info` (config, last reload, OTLP, drops), if known.
        width: Cells available; narrower tables drop the least useful columns.
        expand: Fill `width` (a terminal) rather than take only what is needed.
    """
    hud = HudState()
    hud.seed(rows, now)
    if info is not None:
        hud.set_info(info)
    shown = hud.sorted_rows()
    tools = max((len(tools_cell(row)[0]) for row in shown), default=0)
    columns = layout(width, [r.name for r in shown], tools)
    table = Table(
        box=box.SIMPLE_HEAD,
        expand=expand,
        show_edge=False,
        pad_edge=False,
        header_style="bold",
        padding=(0, 1, 0, 0),  # + the space SIMPLE_HEAD draws between columns
    )
    for column, size in columns:
        last = column.key == "error"
        table.add_column(
            column.header,
            justify="right" if column.right else "left",
            no_wrap=not last,
            overflow="fold" if last else "ellipsis",
            width=None if last else size,
            ratio=1 if last else None,
        )
    for row in shown:
        row_cells = cells(row, now)
        table.add_row(
            *(Text(*row_cells[column.key]) for column, _ in columns),
        )
    config, facts = footer_lines(hud)
    footer = Text()
    for i, (text, style) in enumerate(facts):
        if i:
            footer.append(" │ ", style="dim")
        footer.append(text, style=style)
    return Group(table, Text(*config), footer)


def print_status(
    rows: Sequence[ConnectionStatus],
    now: float,
    *,
    info: DaemonInfo | None = None,
    file: TextIO | None = None,
) -> None:
    """Print the status table: fitted to the terminal, or unwrapped into a pipe
    (plain text, no trailing blanks, one line per connection)."""
    out = file or sys.stdout
    console = Console(file=out, highlight=False)
    if console.is_terminal:
        console.print(render_status(rows, now, info=info, width=console.width))
        return
    console.width = PIPE_WIDTH
    with console.capture() as captured:
        console.print(
            render_status(rows, now, info=info, width=PIPE_WIDTH, expand=False)
        )
    out.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
