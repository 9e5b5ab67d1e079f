"""`connection_status`: what `status`, the HUD, Lua and the gateway read of
one connection, built from its live record at one moment."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.events import ToolChanged
from ..core.spec import display_endpoint
from ..core.state import Phase
from ..core.status import ConnectionStatus
from .connection import Connection

__all__ = ["connection_status"]


def connection_status(
    conn: Connection,
    now: float,
    auth: tuple[str, float | None] = ("none", None),
    launch: str = "",
    confinement: str = "",
    unapproved: Sequence[ToolChanged] = (),
) -> ConnectionStatus:
    """The status of one connection at wall time `now` (`auth`: its kind and
    the seconds its token has left; `launch`: its launch lock; `confinement`:
    how its server runs, as the transport says; `unapproved`: its definitions
    that differ from their pins, `PinBook.pending`)."""
    state = conn.state
    next_in = None
    if state.next_retry_at is not None:
        next_in = round(max(0.0, state.next_retry_at - now), 3)
    return ConnectionStatus(
        name=conn.name,
        transport=conn.spec.transport,
        endpoint=display_endpoint(conn.spec),
        state=state.phase.value,
        attempt=_attempt(conn, now),
        # The tools it offers: those listed by its session, or (an idle
        # on-demand server after a restart) remembered from its last one.
        tools=len(conn.tools) or len(state.tools),
        error=state.error,
        next_retry_in=next_in,
        since=state.since,
        pid=state.pid,
        exit_code=state.exit_code,
        enabled=conn.spec.enabled,
        stderr=tuple(conn.stderr)[-10:],
        prompts=len(conn.catalog.prompts),
        resources=len(conn.catalog.resources) + len(conn.catalog.templates),
        hidden=_hidden(conn),
        auth=auth[0],
        auth_expires_in=auth[1],
        protocol=state.protocol,
        beside=conn.upstream.beside() if conn.upstream is not None else "",
        confinement=confinement,
        launch=launch,
        changed=tuple(sorted({c.item for c in unapproved})),
        held=tuple(sorted({c.item for c in unapproved if c.held})),
    )


def _attempt(conn: Connection, now: float) -> int:
    """Its tries since it was last stable: none once it has stayed connected
    for `stable_after` (the state resets the count only when the session
    ends; a connection stable for hours is not "attempt 7")."""
    state = conn.state
    if state.phase is Phase.CONNECTED and now - state.since >= conn.spec.stable_after:
        return 0
    return state.attempt


def _hidden(conn: Connection) -> int:
    """Items of `conn` its filters hide from the endpoint, or pinning holds
    back (`pin = "strict"`)."""
    exposure, catalog = conn.spec.exposure, conn.catalog
    held = sum(len(names) for names in conn.held.values())
    if (
        exposure.tools.is_open
        and exposure.prompts.is_open
        and exposure.resources.is_open
    ):
        return held
    hidden = sum(not exposure.tools.allows(t.name) for t in conn.tools)
    hidden += sum(not exposure.prompts.allows(n) for n in catalog.names("prompts"))
    for kind in ("resources", "templates"):
        hidden += sum(not exposure.resources.allows(u) for u in catalog.names(kind))
    return hidden + held
