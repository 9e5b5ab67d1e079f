"""What the HUD looks like, as plain data: columns, cells, log, header, footer.

Both renderers draw from here: `render` (rich, the one-shot `status` table) and
the textual widgets. A cell is `(text, style)` where `style` is a rich style
string ("bold red", "" for the default), so this module imports neither rich nor
textual and its output is easy to assert on.

Columns adapt to the width: the essentials (name, state, attempt, retry
countdown, tools, time in state, last error) always show; transport and exit
code join from `WIDE` columns on, the pid from `WIDER`. The error column takes
whatever is left.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ..core.info import OTLP_OFF, AttachedClient, OtlpStatus
from ..core.text import first_line
from .state import HudState, LogLine, Row

__all__ = [
    "COLUMNS",
    "GAP",
    "LEVEL_STYLE",
    "STATE_LOOK",
    "WIDE",
    "WIDER",
    "Cell",
    "Column",
    "age",
    "cells",
    "clock",
    "countdown",
    "config_cell",
    "counts_text",
    "footer_lines",
    "header_cells",
    "layout",
    "log_cell",
    "state_cell",
]

Cell = tuple[str, str]
"""A cell's text and its rich style string."""

GAP = 2
"""Spaces between two columns."""

WIDE = 100
"""From this many columns on, the table also shows transport and exit code."""

WIDER = 120
"""From this many columns on, the table also shows the pid."""

MIN_ERROR_WIDTH = 12
"""The error column never gets narrower than this."""

NAME_WIDTH = (4, 28)
"""The name column fits the longest name within these bounds (longer: cut with
…); on a terminal wider than four times the upper bound, within a quarter of it."""

TOOLS_WIDTH = (5, 14)
"""The tools column fits its longest cell (`12 ⚠2 1 held`) within these bounds."""

STATE_LOOK: dict[str, tuple[str, str]] = {
    "connected": ("●", "green"),
    "connecting": ("◌", "yellow"),
    "reconnecting": ("↻", "bold red"),
    "needs_login": ("⚿", "bold magenta"),
    "refused": ("⊘", "bold red"),
    "disabled": ("○", "dim"),
    "idle": ("◇", "cyan"),
}
"""Glyph and style of each state; colour is never the only signal."""

LEVEL_STYLE: dict[str, str] = {
    "debug": "dim",
    "info": "",
    "ok": "green",
    "warn": "yellow",
    "error": "red",
    "stderr": "cyan",
}
"""Style of a log line by its level."""


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the connection table.

    Attributes:
        key: Stable id (tests and `cells` use it).
        header: Its title.
        width: Cells wide; 0 means "the rest" (only the error column).
        right: Right-aligned (numbers).
    """

    key: str
    header: str
    width: int
    right: bool = False


COLUMNS: tuple[Column, ...] = (
    Column("name", "NAME", -1),
    Column("state", "STATE", 14),
    Column("transport", "TRANSPORT", 9),
    Column("attempt", "ATTEMPT", 7, right=True),
    Column("retry", "RETRY", 6, right=True),
    Column("tools", "TOOLS", 5, right=True),
    Column("for", "FOR", 6, right=True),
    Column("pid", "PID", 7, right=True),
    Column("exit", "EXIT", 4, right=True),
    Column("error", "LAST ERROR", 0),
)
"""Every column, in screen order."""

_OPTIONAL = {"transport": WIDE, "exit": WIDE, "pid": WIDER}


def layout(
    width: int, names: Sequence[str] = (), tools: int = 0
) -> list[tuple[Column, int]]:
    """The columns that fit `width` cells, each with its width.

    Args:
        width: The space available.
        names: The connection names shown (the name column fits the longest,
            up to `NAME_WIDTH` or a quarter of a wide terminal).
        tools: The longest tools cell (`5 ⚠2 1 held`): the column fits it,
            up to `TOOLS_WIDTH`.
    """
    longest = max((len(n) for n in names), default=0)
    name_width = min(max(longest, NAME_WIDTH[0]), max(NAME_WIDTH[1], width // 4))
    sizes = {"tools": min(max(tools, TOOLS_WIDTH[0]), TOOLS_WIDTH[1])}
    chosen = [c for c in COLUMNS if width >= _OPTIONAL.get(c.key, 0)]

    def size(column: Column) -> int:
        return name_width if column.width < 0 else sizes.get(column.key, column.width)

    fixed = sum(size(c) for c in chosen if c.width)
    rest = width - fixed - GAP * (len(chosen) - 1)
    out: list[tuple[Column, int]] = []
    for column in chosen:
        if column.width == 0:
            out.append((column, max(rest, MIN_ERROR_WIDTH)))
        else:
            out.append((column, size(column)))
    return out


# ----------------------------------------------------------------------- cells


def age(seconds: float) -> str:
    """A short duration: `0s`, `59s`, `3m05s`, `2h05m`, `3d04h`."""
    s = int(max(0.0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def clock(at: float) -> str:
    """`HH:MM:SS` local time of a wall-clock instant."""
    return time.strftime("%H:%M:%S", time.localtime(at))


def countdown(row: Row, now: float) -> str:
    """The retry column: `2.3s` while waiting, `trying` while a try is in flight."""
    if row.next_retry_at is not None:
        left = max(0.0, row.next_retry_at - now)
        return f"{left:.1f}s" if left < 10 else age(left)
    if row.trying and row.state in ("connecting", "reconnecting"):
        return "trying"
    return ""


def state_cell(state: str) -> Cell:
    """`● connected` and its style."""
    glyph, style = STATE_LOOK.get(state, ("?", "magenta"))
    return f"{glyph} {state}", style


def _attempt_cell(row: Row, now: float) -> Cell:
    """The tries since it was last stable: none once it has stayed connected
    for its `stable_after` (as `status` says)."""
    if row.state == "connected" and now - row.since >= row.stable_after:
        return "", ""
    return (str(row.attempt) if row.attempt else "", _attempt_style(row))


def _attempt_style(row: Row) -> str:
    if row.state == "reconnecting":
        return "red" if row.attempt >= 5 else "yellow"
    if row.state == "connected" and row.attempt > 1:
        return "yellow"  # connected again, but not yet stable: it has been flapping
    return ""


def transport_cell(row: Row) -> Cell:
    """The transport, with a mark for how a stdio server runs: `⛨` confined
    (Landlock), `!` unconfined although it asked for a sandbox; and `↑` when
    a newer release of its locked launch waits for `mcp-manager update`."""
    newer = " ↑" if row.drift else ""
    if row.confinement.startswith("UNCONFINED"):
        return f"{row.transport} !{newer}", "bold red"
    if newer:
        confined = " ⛨" if row.confinement == "landlock" else ""
        return f"{row.transport}{confined}{newer}", "yellow"
    if row.confinement == "landlock":
        return f"{row.transport} ⛨", "green"
    return row.transport, "dim"


def cells(row: Row, now: float) -> dict[str, Cell]:
    """Every cell of `row` at time `now`, by column key."""
    trouble = row.state in ("reconnecting", "needs_login", "refused")
    retry = countdown(row, now)
    exit_code = "" if row.exit_code is None else str(row.exit_code)
    return {
        "name": (row.name, "bold" if trouble else ""),
        "state": state_cell(row.state),
        "transport": transport_cell(row),
        "attempt": _attempt_cell(row, now),
        "retry": (retry, "yellow" if retry == "trying" else ""),
        "tools": tools_cell(row),
        "for": (age(now - row.since), "red" if trouble else "dim"),
        "pid": ("" if row.pid is None else str(row.pid), "dim"),
        "exit": (exit_code, "red" if exit_code not in ("", "0") else "dim"),
        "error": (row.error, "red" if trouble else "dim"),
    }


def tools_cell(row: Row) -> Cell:
    """The tool count, and `⚠N` when N definitions changed since approved
    (`⚠N held` when some are held back)."""
    count = str(row.tools) if row.tools or row.state == "connected" else ""
    if row.changed:
        held = sum(row.changed.values())
        mark = f"⚠{len(row.changed)}" + (f" {held} held" if held else "")
        return f"{count} {mark}".strip(), "bold yellow"
    return count, "" if row.state == "connected" else "dim"


def log_cell(line: LogLine) -> Cell:
    """A log line with its time, and its style."""
    return f"{clock(line.time)} {line.text}", LEVEL_STYLE.get(line.level, "")


# ------------------------------------------------------------------- footer


def _otlp(value: OtlpStatus | str) -> Cell:
    """The OTLP exporter's status, from the `otlp` entry of the daemon's info."""
    if not isinstance(value, OtlpStatus):
        if not value or value == OTLP_OFF:
            return "otlp: off", "dim"
        bad = any(word in value.lower() for word in ("fail", "error", "unreachable"))
        return f"otlp: {value}", "red" if bad else ""
    where = " ".join(part for part in (value.protocol, value.endpoint) if part)
    where = f" {where}" if where else ""
    error = first_line(value.last_error)
    if value.ok is False:
        count = f" ({value.failures}×)" if value.failures else ""
        because = f": {error}" if error else ""
        return f"otlp:{where} ✖ failing{count}{because}", "red"
    if value.ok is True:
        done = f" {value.exports} exports" if value.exports else ""
        if value.spans_lost:
            return f"otlp:{where} ✔{done}, {value.spans_lost} spans lost", "yellow"
        return f"otlp:{where} ✔{done}", "green"
    return f"otlp:{where} · no export yet", "dim"


def footer_lines(hud: HudState) -> tuple[Cell, list[Cell]]:
    """The footer: the config line, then OTLP status, dropped events and counts.

    A failed reload stays shown, with file:line, until a later one succeeds.
    """
    config = config_cell(hud)
    spans: list[Cell] = []
    spans.append(_otlp(hud.otlp))
    total = hud.dropped_total()
    if total or hud.hud_dropped:
        mine = f" (this HUD {hud.hud_dropped})" if hud.hud_dropped else ""
        spans.append((f"dropped {total}{mine}", "yellow"))
    else:
        spans.append(("dropped 0", "dim"))
    spans.append((counts_text(hud), ""))
    waiting = hud.starts.waiting
    if waiting:
        slots = hud.starts.slots
        spans.append((f"{waiting} waiting to start ({slots} at a time)", "yellow"))
    if hud.endpoint:
        spans.append((f"endpoint {hud.endpoint}", "cyan"))
        if hud.endpoint_token and hud.endpoint_token.startswith("none"):
            spans.append(("no token: any local process may call", "yellow"))
        elif hud.endpoint_token:
            spans.append((f"token {hud.endpoint_token}", "dim"))
    if hud.attached:
        spans.append((attached_text(hud.attached), "cyan"))
    return config, spans


def attached_text(clients: Sequence[AttachedClient], limit: int = 4) -> str:
    """`attached 3: coding ← code, cursor; all ← claude`: who sees which
    profile (`all` is the whole endpoint); at most `limit` names a profile."""
    by_profile: dict[str, list[str]] = {}
    for client in clients:
        by_profile.setdefault(client.profile or "all", []).append(client.client)
    parts = []
    for profile, names in sorted(by_profile.items()):
        shown = ", ".join(names[:limit])
        more = f" +{len(names) - limit}" if len(names) > limit else ""
        parts.append(f"{profile} ← {shown}{more}")
    return f"attached {len(clients)}: " + "; ".join(parts)


def header_cells(
    hud: HudState,
    now: float,
    *,
    needle: str = "",
    shown: int = 0,
    unreachable: bool = False,
    verbose: bool = False,
    subtitle: str = "",
    muted: Collection[str] = (),
) -> list[Cell]:
    """The HUD's header line: ` mcp-manager VERSION · HH:MM:SS · ● 2 ↻ 1`, then
    the filter (`shown` of all rows), an unreachable daemon, verbose mode,
    the connections whose chatter the log leaves out (`m`) and the
    subtitle."""
    version = f" {hud.version}" if hud.version else ""
    cells: list[Cell] = [
        (f" mcp-manager{version}", "bold"),
        (f" · {clock(now)} · ", "dim"),
        (counts_text(hud, compact=True), ""),
    ]
    if hud.attached:  # the footer has it too, but is often cut at the width
        cells.append((f" · {attached_text(hud.attached, limit=2)}", "cyan"))
    if needle:
        cells.append((f" · filter '{needle}': {shown} of {len(hud.rows)}", "yellow"))
    if unreachable:
        cells.append((" · daemon unreachable, retrying", "bold red"))
    if verbose:
        cells.append((" · all events", "cyan"))
    if muted:
        cells.append((f" · muted: {', '.join(sorted(muted))}", "yellow"))
    if subtitle:
        cells.append((f" · {subtitle}", "dim"))
    return cells


def approval_cells(hud: HudState, now: float) -> list[Cell]:
    """The prompt row: the oldest call waiting for the user (`mcp_policy`
    `ask`), its rule and time left, the keys that answer it, and its
    arguments (masked) on a second line; nothing when no call waits."""
    waiting = list(hud.approvals.values())
    if not waiting:
        return []
    asked = waiting[0]
    who = f" by {asked.client}" if asked.client else ""
    cells: list[Cell] = [
        (" approve? ", "bold"),
        (f"{asked.name}.{asked.tool}{who}", "bold"),
        (f"  ({asked.rule}; {max(0, asked.deadline - now):.0f} s left)", ""),
        ("   a", "bold green"),
        (" allow  ", ""),
        ("A", "bold green"),
        (" always  ", ""),
        ("d", "bold red"),
        (" deny", ""),
    ]
    if len(waiting) > 1:
        cells.append((f"   ({len(waiting) - 1} more waiting)", "dim"))
    cells.append((f"\n   {asked.arguments}", "dim"))
    return cells


def counts_text(hud: HudState, *, compact: bool = False) -> str:
    """`3 connections: ● 2 connected  ↻ 1 reconnecting` (compact: `● 2 ↻ 1`)."""
    counts = hud.counts()
    parts = [
        f"{STATE_LOOK[state][0]} {counts[state]}" + ("" if compact else f" {state}")
        for state in (
            "connected",
            "connecting",
            "reconnecting",
            "needs_login",
            "refused",
            "idle",
            "disabled",
        )
        if counts.get(state)
    ]
    if compact:
        return " ".join(parts) or "no connections"
    noun = "connection" if len(hud.rows) == 1 else "connections"
    return f"{len(hud.rows)} {noun}" + (f": {'  '.join(parts)}" if parts else "")


def config_cell(hud: HudState) -> Cell:
    """The config file and the result of its last run.

    A failed run reads `config ✖ FILE:LINE: message — not applied, …` in red.
    """
    last = hud.last_reload
    file = hud.config_file or (last.file if last else "") or "startup.lua"
    if last is not None and not last.ok:
        where = f"{last.file}:{last.line}" if last.line else last.file
        when = f" ({clock(last.time)})" if last.time else ""
        return (
            f"config ✖ {where}: {last.message} — not applied, "
            f"running set unchanged{when}",
            "bold red",
        )
    loaded = f" ✔ loaded {clock(last.time)}" if last is not None and last.time else ""
    auto = " · auto-reload on change" if hud.watching else ""
    return f"config {file}{loaded}{auto}", "green" if last else ""
