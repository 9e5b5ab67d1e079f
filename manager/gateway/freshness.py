"""How long a 2026-07-28 client may keep the endpoint's lists.

Each list the endpoint answers is the union of its servers' lists, so it stays
fresh as long as the least fresh of them: its `ttlMs` is the smallest non-zero
one a server gave for that list, and its `cacheScope` is `private` if any
server's is (a list one user may not share stays unshared). Where no server
gave a hint (all of them handshake-era), the endpoint gives none of its own
beyond the SDK's default (`ttlMs` 0, `private`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from mcp.server import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..engine.connection import Connection
from ..transport.base import ListHint

__all__ = ["list_hint"]


def list_hint(
    ctx: ServerRequestContext[Any, Any], kind: str, conns: Iterable[Connection]
) -> dict[str, Any]:
    """Keyword arguments for a list result of `kind` (`ttl_ms`, `cache_scope`)
    for this client: none for a handshake-era one (that era has no such field)
    or when no connected server gave a hint."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return {}
    merged: ListHint | None = None
    for conn in conns:
        if conn.upstream is None:
            continue
        hint = conn.catalog.hints.get(kind)
        if hint is not None:
            merged = hint if merged is None else merged.merged(hint)
    if merged is None:
        return {}
    scope: Literal["public", "private"] = "private" if merged.private else "public"
    return {"ttl_ms": merged.ttl_ms, "cache_scope": scope}
