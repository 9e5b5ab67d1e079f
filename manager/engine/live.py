"""Telling a running connection that a live setting changed.

What the endpoint shows of a connection (`prefix`, the tool/prompt/resource
filters) and the roots it answers are read at each use, so a reload that changes
only those keeps the session (`core.spec.applies_live` decides): the manager
takes the new spec (`settings_changed` event) and, for roots, tells the server
`notifications/roots/list_changed` (`tell_roots_changed`).
"""

from __future__ import annotations

import logging

import anyio

from ..core.errors import TransportError
from ..transport.base import Upstream

__all__ = ["ROOTS_NOTIFY_TIMEOUT", "tell_roots_changed"]

logger = logging.getLogger(__name__)

ROOTS_NOTIFY_TIMEOUT = 2.0
"""Seconds `notifications/roots/list_changed` may take to send."""


async def tell_roots_changed(name: str, upstream: Upstream) -> None:
    """Send `notifications/roots/list_changed`, bounded; a failure is the
    session's own watch's business (logged at DEBUG here)."""
    try:
        with anyio.fail_after(ROOTS_NOTIFY_TIMEOUT):
            await upstream.notify_roots_changed()
    except (TransportError, TimeoutError) as exc:
        logger.debug("%s: roots/list_changed not sent: %s", name, exc)
