"""A server's lists, read page by page.

`read_tools` and `read_list` read every page of `tools/list` and of the
prompts, resources and templates lists through an SDK session, with the
freshness hint the pages carry (`ttlMs`/`cacheScope`, 2026-07-28).
What on-demand servers listed is remembered by the engine (`engine.lists`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import mcp.types as types
from mcp import ClientSession

from ..core.errors import ConnectFailed
from .base import Catalog, ListHint, ToolInfo

__all__ = [
    "LIST_METHODS",
    "MAX_TOOL_PAGES",
    "read_list",
    "read_tools",
    "with_hint",
]

MAX_TOOL_PAGES = 1000
"""Pages of a list followed before giving up on a cursor that never ends."""

_LISTS: dict[str, tuple[str, Any, Any, str]] = {
    "prompts": (
        "prompts/list",
        types.ListPromptsRequest,
        types.ListPromptsResult,
        "prompts",
    ),
    "resources": (
        "resources/list",
        types.ListResourcesRequest,
        types.ListResourcesResult,
        "resources",
    ),
    "templates": (
        "resources/templates/list",
        types.ListResourceTemplatesRequest,
        types.ListResourceTemplatesResult,
        "resource_templates",
    ),
}
"""Catalog kind -> (method, request type, result type, attribute of a page)."""

LIST_METHODS = {kind: row[0] for kind, row in _LISTS.items()}
"""Catalog kind -> the method that lists it."""


async def read_tools(
    session: ClientSession,
) -> tuple[tuple[ToolInfo, ...], ListHint | None]:
    """Every page of `tools/list`, and its freshness hint.

    Raises:
        MCPError: As the session raises it.
        ConnectFailed: The cursor never ends.
    """
    tools: list[ToolInfo] = []
    cursor: str | None = None
    hint: ListHint | None = None
    for _ in range(MAX_TOOL_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        hint = _page_hint(page, hint)
        tools.extend(_tool_info(t) for t in page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tuple(tools), hint
    raise ConnectFailed(
        f"tools/list returned more than {MAX_TOOL_PAGES} pages; "
        "the server's cursor never ends"
    )


async def read_list(
    session: ClientSession, kind: str
) -> tuple[tuple[Mapping[str, object], ...], ListHint | None]:
    """Every page of the `kind` list (`prompts`, `resources`, `templates`),
    as JSON-ready dicts, and its freshness hint.

    Raises:
        MCPError: As the session raises it.
        ConnectFailed: The cursor never ends.
    """
    method, request_type, result_type, attr = _LISTS[kind]
    items: list[Mapping[str, object]] = []
    cursor: str | None = None
    hint: ListHint | None = None
    for _ in range(MAX_TOOL_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.send_request(request_type(params=params), result_type)
        hint = _page_hint(page, hint)
        items.extend(
            item.model_dump(by_alias=True, mode="json", exclude_none=True)
            for item in getattr(page, attr)
        )
        cursor = page.next_cursor
        if not cursor:
            return tuple(items), hint
    raise ConnectFailed(
        f"{method} returned more than {MAX_TOOL_PAGES} pages; "
        "the server's cursor never ends"
    )


def _page_hint(page: Any, before: ListHint | None) -> ListHint | None:
    """The freshness hint of a list so far, with one more page's (a page
    without one, as in the handshake era, leaves it as it was)."""
    given = page.model_fields_set
    if "ttl_ms" not in given and "cache_scope" not in given:
        return before
    hint = ListHint(int(page.ttl_ms or 0), page.cache_scope != "public")
    return hint if before is None else before.merged(hint)


def with_hint(catalog: Catalog, kind: str, hint: ListHint | None) -> Catalog:
    """`catalog` with `kind`'s freshness hint replaced (none: dropped)."""
    hints = {k: v for k, v in catalog.hints.items() if k != kind}
    if hint is not None:
        hints[kind] = hint
    return dataclasses.replace(catalog, hints=hints)


def _tool_info(tool: types.Tool) -> ToolInfo:
    raw = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
    return ToolInfo(name=tool.name, description=tool.description or "", raw=raw)
