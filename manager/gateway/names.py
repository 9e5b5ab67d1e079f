"""Exposed tool and prompt names: `{prefix}__{name}`, valid, unique and stable.

Each connection has a prefix (default: its name; `""` keeps the upstream's own
names). Names that are not valid MCP names (`[A-Za-z0-9._-]`, at most
`MAX_NAME` characters: clients reject longer ones) or that collide are renamed
deterministically, never dropped; each rename is reported (`problems`) and
marked in the item's `_meta` (`mcp-manager/upstream`). Items a connection's
filter hides are left out, and counted.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp.types as types
from pydantic import BaseModel

from ..core.exposure import OPEN, ItemFilter

__all__ = [
    "MAX_NAME",
    "MAX_TOOL_NAME",
    "SEPARATOR",
    "UPSTREAM_META_KEY",
    "NameSource",
    "ToolRoute",
    "ToolTable",
    "build_name_table",
    "build_tool_table",
]

SEPARATOR = "__"
"""Between the prefix and the upstream's name."""

MAX_NAME = 64
"""Longest exposed tool or prompt name, characters (what clients accept)."""

MAX_TOOL_NAME = MAX_NAME
"""Kept for callers that speak of tools."""


UPSTREAM_META_KEY = "mcp-manager/upstream"
"""`_meta` key on a renamed item: `{"server": ..., "tool": ...}` it leads to."""


_VALID_NAME = re.compile(rf"[A-Za-z0-9._-]{{1,{MAX_NAME}}}")
_INVALID_CHAR = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True, slots=True)
class ToolRoute:
    """Where an exposed tool (or prompt) name leads.

    Attributes:
        name: The name downstream clients see.
        server: The connection.
        tool: The item's name on that server.
    """

    name: str
    server: str
    tool: str


@dataclass(frozen=True, slots=True)
class ToolTable:
    """The union of all upstream tools (or prompts), as exposed downstream.

    Attributes:
        routes: Exposed name -> route.
        tools: The exposed definitions, server by server, in listing order.
        problems: One line per item that had to be renamed or was left out.
        hidden: Items each connection's filter hides, by connection.
    """

    routes: Mapping[str, ToolRoute] = field(default_factory=dict)
    tools: tuple[Any, ...] = ()
    problems: tuple[str, ...] = ()
    hidden: Mapping[str, int] = field(default_factory=dict)

    def exposed(self, server: str) -> int:
        """How many of `server`'s items are exposed."""
        return sum(1 for route in self.routes.values() if route.server == server)

    def same_tools(self, other: ToolTable) -> bool:
        """Whether both expose the same definitions (what list_changed is about)."""
        return self.tools == other.tools


@dataclass(frozen=True, slots=True)
class NameSource:
    """One connection's items of one kind, and how it exposes them.

    Attributes:
        server: The connection.
        prefix: Its prefix ("" keeps the upstream's names).
        items: The items; each has `name` and `raw` (its JSON definition), or
            is a mapping with a `name` key.
        filter: Which items are exposed.
    """

    server: str
    prefix: str
    items: Sequence[Any]
    filter: ItemFilter = OPEN


def _digest(server: str, tool: str) -> str:
    return hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:6]


def _with_digest(name: str, server: str, tool: str) -> str:
    suffix = f"_{_digest(server, tool)}"
    return name[: MAX_NAME - len(suffix)] + suffix


def _candidate(
    server: str, prefix: str, tool: str, noun: str
) -> tuple[str, str | None]:
    """The exposed name for (server, tool) and why it differs, if it does."""
    head = f"{prefix}{SEPARATOR}" if prefix else ""
    plain = f"{head}{tool}"
    if _VALID_NAME.fullmatch(plain):
        return plain, None
    cleaned = _INVALID_CHAR.sub("_", tool) or "_"
    name = f"{head}{cleaned}"
    reasons = []
    if cleaned != tool:
        reasons.append(f"its name has characters MCP {noun} names may not contain")
    if len(name) > MAX_NAME:
        name = _with_digest(name, server, tool)
        reasons.append(f"'{plain}' would be longer than {MAX_NAME} characters")
    return name, " and ".join(reasons) or f"its name is not a valid MCP {noun} name"


RENAMES_NAMED = 3
"""Renames a server's one line names; the rest are counted."""


def _renamed_line(server: str, noun: str, renames: list[tuple[str, str, str]]) -> str:
    """One line for a server's renamed items (a long connection name renames
    every tool it prefixes: one line each was a screenful at every start)."""
    if len(renames) == 1:
        tool, name, reason = renames[0]
        return f"{server}: {noun} {tool!r} is exposed as {name!r}: {reason}"
    shown = ", ".join(
        f"{tool!r} as {name!r}" for tool, name, _ in renames[:RENAMES_NAMED]
    )
    more = len(renames) - RENAMES_NAMED
    rest = f" and {more} more" if more > 0 else ""
    return (
        f"{server}: {len(renames)} {noun}s are exposed under other names "
        f"({renames[0][2]}, and the like): {shown}{rest}; `mcp-manager "
        f"{noun}s {server}` lists every exposed name"
    )


def _name_and_raw(item: Any) -> tuple[str, Mapping[str, object]]:
    if isinstance(item, Mapping):
        return str(item.get("name", "")), item
    return str(item.name), item.raw


def build_tool_table(sources: Iterable[tuple[str, Sequence[Any]]]) -> ToolTable:
    """Tools of each (connection, tools) pair, prefixed by the connection's name."""
    return build_name_table(
        (NameSource(server, server, tools) for server, tools in sources),
        types.Tool,
        "tool",
    )


def build_name_table(
    sources: Iterable[NameSource], model: type[BaseModel], noun: str
) -> ToolTable:
    """Expose every upstream item under a unique, valid name.

    Args:
        sources: Each connection's items, prefix and filter.
        model: The SDK type of an exposed definition (`types.Tool`,
            `types.Prompt`); an item it does not validate is left out.
        noun: `tool` or `prompt`, for messages.

    Returns:
        The table. An item whose plain name `{prefix}__{name}` is valid and
        unique keeps it; otherwise it gets a cleaned and/or hashed name (stable
        for the same server and item), recorded in `problems` and its `_meta`.
    """
    entries: list[tuple[str, str, Mapping[str, object], str, str | None]] = []
    seen: set[tuple[str, str]] = set()
    problems: list[str] = []
    hidden: dict[str, int] = {}
    for source in sorted(sources, key=lambda src: src.server):
        server = source.server
        for item in source.items:
            tool, raw = _name_and_raw(item)
            if not source.filter.allows(tool):
                hidden[server] = hidden.get(server, 0) + 1
                continue
            key = (server, tool)
            if key in seen:
                problems.append(
                    f"{server}: {noun} {tool!r} is listed twice by the server; "
                    "only the first definition is exposed"
                )
                continue
            seen.add(key)
            name, reason = _candidate(server, source.prefix, tool, noun)
            entries.append((server, tool, raw, name, reason))
    # Resolve collisions: a plain (unrenamed) name wins, then the first server.
    claims: dict[str, list[int]] = {}
    for index, entry in enumerate(entries):
        claims.setdefault(entry[3], []).append(index)
    final: dict[int, tuple[str, str | None]] = {}
    for name, indexes in claims.items():
        ordered = sorted(indexes, key=lambda i: (entries[i][4] is not None, i))
        final[ordered[0]] = (name, entries[ordered[0]][4])
        for loser in ordered[1:]:
            server, tool = entries[loser][0], entries[loser][1]
            owner = entries[ordered[0]]
            why = f"'{name}' is already taken by {owner[0]}'s {noun} {owner[1]!r}"
            final[loser] = (_with_digest(name, server, tool), why)
    routes: dict[str, ToolRoute] = {}
    exposed: list[Any] = []
    renamed: dict[str, list[tuple[str, str, str]]] = {}  # server -> renames
    for index, (server, tool, raw, _, _) in enumerate(entries):
        name, reason = final[index]
        if name in routes:  # a hashed name hit another one: vanishingly rare
            problems.append(
                f"{server}: {noun} {tool!r} left out: no unique name for it ({name!r})"
            )
            continue
        definition = dict(raw)
        definition["name"] = name
        if reason is not None:
            meta = definition.get("_meta")
            definition["_meta"] = {
                **(meta if isinstance(meta, dict) else {}),
                UPSTREAM_META_KEY: {"server": server, "tool": tool},
            }
            renamed.setdefault(server, []).append((tool, name, reason))
        try:
            definition_model = model.model_validate(definition, by_name=False)
        except ValueError as exc:
            problems.append(
                f"{server}: {noun} {tool!r} left out: invalid definition "
                f"({str(exc).splitlines()[0]})"
            )
            continue
        routes[name] = ToolRoute(name=name, server=server, tool=tool)
        exposed.append(definition_model)
    problems.extend(
        _renamed_line(server, noun, renames) for server, renames in renamed.items()
    )
    return ToolTable(
        routes=routes, tools=tuple(exposed), problems=tuple(problems), hidden=hidden
    )
