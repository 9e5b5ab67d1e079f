"""The details screen: everything about one connection, on Enter.

Its status as the HUD knows it, its spec as the daemon reports it (secrets
already masked by `manager.core.spec.spec_summary`), its tools and its last stderr
lines.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..core.replies import ConnectionDetails
from ..core.status import MODERN_ERA, protocol_era
from .state import Row
from .view import age, state_cell

__all__ = ["DetailsScreen", "details_text"]


REDRAW_EVERY = 1.0
"""Seconds between two drawings of an open details screen."""


class DetailsScreen(ModalScreen[None]):
    """Everything about one connection: status, spec (secrets masked), tools,
    last stderr lines. `body` is drawn again every `REDRAW_EVERY` seconds:
    its first line follows the row (state, for how long, attempt), which the
    HUD keeps current while the screen is open."""

    DEFAULT_CSS = """
    DetailsScreen { align: center middle; }
    DetailsScreen > Vertical {
        width: 90%;
        height: 85%;
        border: round $accent;
        background: $surface;
        padding: 0 1;
    }
    DetailsScreen VerticalScroll { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,enter", "dismiss", "Close"),
        Binding("c", "reconnect", "Reconnect"),
    ]

    def __init__(
        self,
        name: str,
        body: Callable[[], Text],
        on_reconnect: Callable[[str], None],
    ) -> None:
        super().__init__()
        self.connection = name
        self._body = body
        self.body = body()
        self._on_reconnect = on_reconnect

    def compose(self) -> ComposeResult:
        """A title and the scrollable body."""
        with Vertical():
            yield Static(Text(f"{self.connection}: details", style="bold"))
            with VerticalScroll():
                yield Static(self.body, id="details-body")
            yield Static(Text("Esc close · c reconnect now", style="dim"))

    def on_mount(self) -> None:
        """Keep the body current while the screen is open."""
        self.set_interval(REDRAW_EVERY, self.redraw, name="details")

    def redraw(self) -> None:
        """Draw the body again from the row as it is now."""
        self.body = self._body()
        self.query_one("#details-body", Static).update(self.body)

    async def action_dismiss(self, result: None = None) -> None:
        """Close the details."""
        self.dismiss(result)

    def action_reconnect(self) -> None:
        """Force a reconnect attempt of this connection."""
        self._on_reconnect(self.connection)


def details_text(row: Row | None, details: ConnectionDetails, now: float) -> Text:
    """The body of the details screen."""
    text = Text()
    if row is not None:
        glyph, style = state_cell(row.state)
        text.append(glyph, style=style)
        text.append(f" for {age(now - row.since)}")
        if row.attempt:
            text.append(f" · attempt {row.attempt}")
        if row.pid is not None:
            text.append(f" · pid {row.pid}")
        if row.exit_code is not None:
            text.append(f" · last exit code {row.exit_code}", style="red")
        if row.server:
            text.append(f" · server {row.server}")
        if row.protocol:
            era = protocol_era(row.protocol)
            shown = "stateless era" if era == MODERN_ERA else "handshake era"
            text.append(f" · MCP {row.protocol} ({shown})")
        if details.beside:
            text.append(f" · beside it: {details.beside}, for that era's clients")
        if row.confinement:
            style = "bold red" if row.confinement.startswith("UNCONFINED") else ""
            text.append(f" · sandbox {row.confinement}", style=style)
        if row.launch:
            style = "yellow" if row.drift or row.launch.startswith("not") else ""
            text.append(f" · launch {row.launch}", style=style)
            if row.drift:
                text.append(f" (mcp-manager update {row.name})", style=style)
        text.append("\n")
        if row.error:
            text.append("last error: ", style="bold")
            text.append(row.error + "\n", style="red")
    spec = details.spec
    text.append("\nspec (secrets masked)\n", style="bold")
    width = max((len(key) for key in spec), default=0)
    for key, value in spec.items():
        shown = value if isinstance(value, str) else json.dumps(value)
        text.append(f"  {key.ljust(width)}  {shown}\n")
    tools = details.tools
    text.append(f"\ntools ({len(tools)})\n", style="bold")
    text.append(("  " + ", ".join(tools) if tools else "  none listed") + "\n")
    if row is not None and row.changed:
        text.append(
            f"\nchanged since approved ({len(row.changed)})\n", style="bold yellow"
        )
        for item, held in sorted(row.changed.items()):
            text.append(f"  ⚠ {item}", style="yellow")
            text.append(" (held back)\n" if held else " (still listed)\n", style="dim")
        text.append(
            f"  review: mcp-manager tools --changed {row.name}; approve: "
            f"mcp-manager approve {row.name}\n",
            style="dim",
        )
    if details.calls:
        text.append(f"\nlast calls ({len(details.calls)})\n", style="bold")
        for call in details.calls:
            started = _number(call.get("time"))
            when = time.strftime("%H:%M:%S", time.localtime(started))
            outcome = f"{call.get('outcome', '')} {call.get('error', '')}".strip()
            ms = _number(call.get("duration")) * 1000
            style = "" if call.get("outcome") == "ok" else "red"
            said = call.get("verdict")
            policy = f"  [{said}]" if isinstance(said, str) and said else ""
            text.append(
                f"  {when}  {call.get('tool')}  {outcome}{policy}  {ms:.0f} ms  "
                f"{call.get('client')}\n",
                style=style,
            )
    lines = details.stderr
    text.append(f"\nlast stderr lines ({len(lines)})\n", style="bold")
    for line in lines or ["(none)"]:
        text.append(f"  {line}\n", style="cyan" if lines else "dim")
    return text


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0
