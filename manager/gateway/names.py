"""Exposed tool names: `{server}__{tool}`, valid, unique and stable.

Names that are not valid MCP tool names (`[A-Za-z0-9._-]{1,128}`) or that collide
are renamed deterministically, never dropped; each rename is marked in the
tool's `_meta` (`mcp-manager/upstream`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp.types as types

__all__ = [
    "MAX_TOOL_NAME",
    "SEPARATOR",
    "ToolRoute",
    "ToolTable",
    "UPSTREAM_META_KEY",
    "build_tool_table",
]

SEPARATOR = "__"
"""Between the server and the tool name; connection names cannot contain it."""

MAX_TOOL_NAME = 128
"""Longest valid MCP tool name, characters."""


UPSTREAM_META_KEY = "mcp-manager/upstream"
"""`_meta` key on a renamed tool: `{"server": ..., "tool": ...}` it calls."""


_VALID_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
_INVALID_CHAR = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True, slots=True)
class ToolRoute:
    """Where an exposed tool name leads.

    Attributes:
        name: The name downstream clients see.
        server: The connection.
        tool: The tool's name on that server.
    """

    name: str
    server: str
    tool: str


@dataclass(frozen=True, slots=True)
class ToolTable:
    """The union of all upstream tools, as exposed downstream.

    Attributes:
        routes: Exposed name -> route.
        tools: The exposed tool definitions, server by server, in listing order.
        problems: One line per tool that had to be renamed or was left out.
    """

    routes: Mapping[str, ToolRoute] = field(default_factory=dict)
    tools: tuple[types.Tool, ...] = ()
    problems: tuple[str, ...] = ()

    def same_tools(self, other: ToolTable) -> bool:
        """Whether both expose the same definitions (what list_changed is about)."""
        return self.tools == other.tools


def _digest(server: str, tool: str) -> str:
    return hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:6]


def _with_digest(name: str, server: str, tool: str) -> str:
    suffix = f"_{_digest(server, tool)}"
    return name[: MAX_TOOL_NAME - len(suffix)] + suffix


def _candidate(server: str, tool: str) -> tuple[str, str | None]:
    """The exposed name for (server, tool) and why it differs, if it does."""
    plain = f"{server}{SEPARATOR}{tool}"
    if _VALID_NAME.fullmatch(plain):
        return plain, None
    cleaned = _INVALID_CHAR.sub("_", tool) or "_"
    name = f"{server}{SEPARATOR}{cleaned}"
    reasons = []
    if cleaned != tool:
        reasons.append("its name has characters MCP tool names may not contain")
    if len(name) > MAX_TOOL_NAME:
        name = _with_digest(name, server, tool)
        reasons.append(f"'{plain}' would be longer than {MAX_TOOL_NAME} characters")
    return name, " and ".join(reasons) or "its name is not a valid MCP tool name"


def build_tool_table(sources: Iterable[tuple[str, Sequence[Any]]]) -> ToolTable:
    """Expose every upstream tool under a unique, valid MCP tool name.

    Args:
        sources: (connection name, its tools) pairs; each tool has `name` and
            `raw` (the JSON tool definition), like `transport.ToolInfo`.

    Returns:
        The table. A tool whose plain name `{server}__{tool}` is valid and unique
        keeps it; otherwise it gets a cleaned and/or hashed name (stable for the
        same server and tool), recorded in `problems` and in its `_meta`.
    """
    entries: list[tuple[str, str, Mapping[str, object], str, str | None]] = []
    seen: set[tuple[str, str]] = set()
    problems: list[str] = []
    for server, tools in sorted(sources, key=lambda pair: pair[0]):
        for info in tools:
            key = (server, info.name)
            if key in seen:
                problems.append(
                    f"{server}: tool {info.name!r} is listed twice by the server; "
                    "only the first definition is exposed"
                )
                continue
            seen.add(key)
            name, reason = _candidate(server, info.name)
            entries.append((server, info.name, info.raw, name, reason))
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
            why = f"'{name}' is already taken by {owner[0]}'s tool {owner[1]!r}"
            final[loser] = (_with_digest(name, server, tool), why)
    routes: dict[str, ToolRoute] = {}
    exposed: list[types.Tool] = []
    for index, (server, tool, raw, _, _) in enumerate(entries):
        name, reason = final[index]
        if name in routes:  # a hashed name hit another one: vanishingly rare
            problems.append(
                f"{server}: tool {tool!r} left out: no unique name for it ({name!r})"
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
            problems.append(f"{server}: tool {tool!r} is exposed as {name!r}: {reason}")
        try:
            model = types.Tool.model_validate(definition, by_name=False)
        except ValueError as exc:
            problems.append(
                f"{server}: tool {tool!r} left out: invalid definition "
                f"({str(exc).splitlines()[0]})"
            )
            continue
        routes[name] = ToolRoute(name=name, server=server, tool=tool)
        exposed.append(model)
    return ToolTable(routes=routes, tools=tuple(exposed), problems=tuple(problems))
