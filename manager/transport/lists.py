"""A server's lists: read page by page, and remembered for on-demand servers.

`read_tools` and `read_list` read every page of `tools/list` and of the
prompts, resources and templates lists through an SDK session, with the
freshness hint the pages carry (`ttlMs`/`cacheScope`, 2026-07-28).

`ListMemory`: what an on-demand server listed, remembered between its sessions.

An on-demand connection (`start = "on_demand"`) has no session while it is
idle, yet its tools, prompts and resources must stay listed (a client picks a
tool before anything starts it). Each time such a connection connects, what
it listed is written to `lists/NAME.json` in the state directory (0600 in a
0700 folder); when it is declared again (a daemon restart), that is what it
shows until its first session. A listing of another endpoint (the command
line or URL changed) is not used.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mcp.types as types
from mcp import ClientSession

from ..core.errors import ConnectFailed
from ..core.spec import ConnectionSpec
from .base import CATALOG_KINDS, Catalog, ListHint, ToolInfo
from .eras import endpoint_key
from .state_files import write_private_json

__all__ = [
    "LIST_METHODS",
    "MAX_TOOL_PAGES",
    "ListMemory",
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


logger = logging.getLogger("manager.transport")


class ListMemory:
    """The last listings of on-demand connections, one file each.

    Args:
        directory: Where the files go (created on the first write).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, name: str) -> Path:
        return self.directory / f"{name}.json"

    def recall(self, spec: ConnectionSpec) -> tuple[tuple[ToolInfo, ...], Catalog]:
        """`spec`'s last listing; nothing if none was kept for its endpoint."""
        data: object = None
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(self._path(spec.name).read_text())
        if not isinstance(data, dict) or data.get("endpoint") != endpoint_key(spec):
            return (), Catalog()
        tools = tuple(
            ToolInfo(
                name=str(raw["name"]),
                description=str(raw.get("description") or ""),
                raw=raw,
            )
            for raw in _items(data.get("tools"))
            if isinstance(raw.get("name"), str)
        )
        return tools, Catalog(
            prompts=tuple(_items(data.get("prompts"))),
            resources=tuple(_items(data.get("resources"))),
            templates=tuple(_items(data.get("templates"))),
        )

    def keep(
        self, spec: ConnectionSpec, tools: tuple[ToolInfo, ...], catalog: Catalog
    ) -> None:
        """Write `spec`'s listing (at once; a failure is logged, not raised)."""
        data = {
            "endpoint": endpoint_key(spec),
            "tools": [dict(tool.raw) for tool in tools],
            **{
                kind: [dict(i) for i in getattr(catalog, kind)]
                for kind in CATALOG_KINDS
            },
        }
        path = self._path(spec.name)
        try:
            write_private_json(path, data)
        except (OSError, TypeError, ValueError) as exc:  # boundary: costs a listing
            logger.warning(
                "%s: cannot remember its lists in %s: %s", spec.name, path, exc
            )


def _items(value: object) -> list[Mapping[str, object]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict)]
