"""`mcp-manager pins check`: do the servers still list what was approved?

For CI and for the careful: without a running daemon, connect to each
declared connection once (on-demand ones too), list its tools, prompts and
resource templates, and compare them with the pins in the state directory
(`engine.pins`), writing nothing. Each connection ends as one `PinVerdict`:

- `pinned`: everything it lists is as approved;
- `changed`: an item changed, is new, or reads as instructions to the model
  (the diffs, as `tools --changed` shows them);
- `unpinned`: it was never pinned (run the daemon, or `approve`, first);
- `unreachable`: it could not be listed within its `connect_timeout`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from ..core.events import AttemptFailed, Connected, NeedsLogin, ToolChanged
from ..core.spec import ConnectionSpec
from ..engine.bus import EventBus
from ..engine.manager import Manager

__all__ = ["PinVerdict", "check_pins"]

MARGIN = 5.0
"""Seconds beyond the longest `connect_timeout` before giving up on a server."""


@dataclass(frozen=True, slots=True)
class PinVerdict:
    """What one connection lists against its pins.

    Attributes:
        name: The connection.
        verdict: `pinned`, `changed`, `unpinned` or `unreachable`.
        changes: What differs (with `changed`).
        error: Why it could not be listed (with `unreachable`).
        items: How many items it lists (tools, prompts, templates).
    """

    name: str
    verdict: str
    changes: tuple[ToolChanged, ...] = field(default=())
    error: str = ""
    items: int = 0


async def check_pins(specs: Sequence[ConnectionSpec]) -> list[PinVerdict]:
    """Connect to each of `specs` once and compare its listing with its pins.

    Connections with `pin = "off"` or `enabled = false` are skipped.
    """
    wanted = [
        dataclasses.replace(spec, start="always")
        for spec in specs
        if spec.pin != "off" and spec.enabled
    ]
    if not wanted:
        return []
    bus = EventBus()
    outcome: dict[str, str] = {}
    names = {spec.name for spec in wanted}
    done = anyio.Event()
    limit = max(spec.connect_timeout for spec in wanted) + MARGIN

    def listen(event: object) -> None:
        name = getattr(event, "name", "")
        if name not in names or name in outcome:
            return
        if isinstance(event, Connected):
            outcome[name] = ""
        elif isinstance(event, AttemptFailed | NeedsLogin):
            outcome[name] = str(getattr(event, "error", "") or "needs a login")
        if len(outcome) == len(names):
            done.set()

    remove = bus.add_listener(listen)
    try:
        async with Manager(bus, pins_read_only=True) as manager:
            manager.reconcile(wanted)
            with anyio.move_on_after(limit):
                await done.wait()
            verdicts = [_verdict(manager, spec, outcome) for spec in wanted]
            manager.reconcile([])
    finally:
        remove()
    return verdicts


def _verdict(
    manager: Manager, spec: ConnectionSpec, outcome: dict[str, str]
) -> PinVerdict:
    name = spec.name
    if name not in outcome or outcome[name]:
        error = outcome.get(name) or f"not listed within {spec.connect_timeout:g} s"
        return PinVerdict(name, "unreachable", error=error)
    conn = manager.connection(name)
    items = 0
    if conn is not None:
        items = len(conn.tools) + len(conn.catalog.prompts)
        items += len(conn.catalog.templates)
    if not manager.pins.pinned(name):
        return PinVerdict(name, "unpinned", items=items)
    changes = tuple(manager.pins.pending(name))
    if changes:
        return PinVerdict(name, "changed", changes=changes, items=items)
    return PinVerdict(name, "pinned", items=items)
