"""Settings that apply to a running connection without a reconnect.

What the endpoint shows of a connection (`prefix`, the tool/prompt/resource
filters) and the roots it answers are read at each use, so a reload that changes
only those keeps the session: the manager takes the new spec (`settings_changed`
event) and, for roots, tells the server `notifications/roots/list_changed`.
"""

from __future__ import annotations

import logging

import anyio

from ..core.errors import TransportError
from ..core.spec import ConnectionSpec, changed_fields
from ..transport.base import Upstream

__all__ = ["LIVE_FIELDS", "ROOTS_NOTIFY_TIMEOUT", "applies_live", "tell_roots_changed"]

logger = logging.getLogger(__name__)

LIVE_FIELDS = frozenset({"exposure", "roots"})
"""Spec fields that apply without a reconnect."""

ROOTS_NOTIFY_TIMEOUT = 2.0
"""Seconds `notifications/roots/list_changed` may take to send."""


def applies_live(old: ConnectionSpec, new: ConnectionSpec) -> bool:
    """Whether `new` differs from `old` only in what needs no reconnect.

    Roots apply live only while there are some before and after: whether we
    offer `roots` at all is declared in the handshake.
    """
    changed = set(changed_fields(old, new))
    return changed <= LIVE_FIELDS and bool(old.roots) == bool(new.roots)


async def tell_roots_changed(name: str, upstream: Upstream) -> None:
    """Send `notifications/roots/list_changed`, bounded; a failure is the
    session's own watch's business (logged at DEBUG here)."""
    try:
        with anyio.fail_after(ROOTS_NOTIFY_TIMEOUT):
            await upstream.notify_roots_changed()
    except (TransportError, TimeoutError) as exc:
        logger.debug("%s: roots/list_changed not sent: %s", name, exc)
