"""What each connection offers, with the names the endpoint exposes
(`mcp-manager tools|prompts|resources`, and the exposed/hidden counts of
`status`): built with the endpoint's own naming rules, so what it prints is
what a client of the endpoint sees.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import mcp.types as types

from ..engine.connection import Connection
from .catalog import CatalogSource, build_resource_table
from .names import NameSource, build_name_table

__all__ = ["catalog_rows"]


def _named(
    conns: Iterable[Connection], kind: str, server: str | None
) -> list[dict[str, object]]:
    conns = list(conns)
    model = types.Tool if kind == "tools" else types.Prompt

    def items(c: Connection) -> Sequence[Any]:
        return c.tools if kind == "tools" else c.catalog.prompts

    # Named as the endpoint names them: without what pinning holds back.
    sources = [
        NameSource(
            c.name,
            c.spec.prefix,
            c.shown(kind, items(c)),
            c.spec.exposure.tools if kind == "tools" else c.spec.exposure.prompts,
        )
        for c in conns
    ]
    table = build_name_table(sources, model, kind[:-1])
    exposed = {(r.server, r.tool): name for name, r in table.routes.items()}
    rows: list[dict[str, object]] = []
    for c, source in zip(conns, sources, strict=True):
        if server is not None and source.server != server:
            continue
        held = c.held.get(kind, frozenset())
        for item in items(c):
            name = item.name if kind == "tools" else str(item.get("name", ""))
            description = (
                item.description if kind == "tools" else item.get("description", "")
            )
            row: dict[str, object] = {
                "server": source.server,
                "name": name,
                "exposed": exposed.get((source.server, name)),
                "hidden": not source.filter.allows(name),
                "held": name in held,
                "description": description or "",
            }
            if kind == "tools":
                row["inputSchema"] = item.raw.get("inputSchema", {})
            rows.append(row)
    return rows


def catalog_rows(
    conns: Iterable[Connection], kind: str, server: str | None = None
) -> list[dict[str, object]]:
    """One row per tool, prompt or resource (and template) of each connection:
    `server`, `name` (or `uri`), `exposed` (None when hidden or left out),
    `hidden` and `description`; for resources also `template`."""
    if kind != "resources":
        return _named(conns, kind, server)
    conns = list(conns)
    table = build_resource_table(
        CatalogSource(
            c.name,
            c.catalog.resources,
            c.shown("templates", c.catalog.templates),
            c.spec.exposure.resources,
        )
        for c in conns
    )
    exposed = {owner: uri for uri, owner in table.owners.items()}
    exposed.update({owner: t for t, owner in table.template_owners.items()})
    rows: list[dict[str, object]] = []
    for c in conns:
        if server is not None and c.name != server:
            continue
        held = c.held.get("templates", frozenset())
        for is_template, listed in (
            (False, c.catalog.resources),
            (True, c.catalog.templates),
        ):
            for item in listed:
                uri = str(item.get("uriTemplate" if is_template else "uri", ""))
                rows.append(
                    {
                        "server": c.name,
                        "uri": uri,
                        "exposed": exposed.get((c.name, uri)),
                        "hidden": not c.spec.exposure.resources.allows(uri),
                        "held": is_template and uri in held,
                        "template": is_template,
                        "description": str(item.get("description", "") or ""),
                    }
                )
    return rows
