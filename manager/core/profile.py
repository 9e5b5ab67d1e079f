"""Profiles: named views of the endpoint (`mcp_profile` in startup.lua).

A profile is a view, not a copy: the same connections, a subset of what the
endpoint exposes. It is served at `/mcp/NAME` and by `mcp-manager attach
--profile NAME`; `/mcp` (and `attach` without a profile) shows everything.
It is keyed on where the client connected (the URL, the socket's greeting),
never on a session: a 2026-07-28 client has none.

    mcp_profile("coding", {
      servers = {"github", "fs"},             -- default: every connection
      tools = {deny = {"*delete*"}},          -- globs, as mcp_add's filters
      prompts = {allow = {"review*"}},
      resources = {deny = {"secret://*"}},
      discovery = "search",                   -- or "list" (the default)
    })

Filters match a tool or prompt by its exposed name (`github__delete_repo`) or
its upstream's own (`delete_repo`), a resource by its exposed or upstream URI:
`allow` lets an item through when either name matches; `deny` hides it when
either does. They apply after the connection's own `mcp_add` filters.

`discovery = "search"`: instead of every tool the client sees three,
`search_tools`, `describe_tool` and `call_tool` (`gateway.discovery`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal

from .errors import ConfigError
from .exposure import OPEN, ItemFilter, parse_exposure_option
from .spec import parse_max_output, unknown_option

__all__ = [
    "DISCOVERY_MODES",
    "PROFILE_NAME_PATTERN",
    "PROFILE_OPTIONS",
    "Discovery",
    "Profile",
    "parse_profile",
    "unknown_servers",
]

Discovery = Literal["list", "search"]

DISCOVERY_MODES: tuple[Discovery, ...] = ("list", "search")
"""How a profile shows its tools: all of them, or three that search them."""

PROFILE_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
"""Profile names are URL path segments (`/mcp/NAME`) and CLI words."""

PROFILE_OPTIONS = frozenset(
    {"servers", "tools", "prompts", "resources", "discovery", "max_output"}
)
"""The options `mcp_profile` takes."""


@dataclass(frozen=True, slots=True)
class Profile:
    """One declared view of the endpoint.

    Attributes:
        name: `/mcp/NAME`, `attach --profile NAME`.
        servers: The connections it shows, or None for every connection.
        tools: Which tools it shows (exposed or upstream names).
        prompts: Which prompts it shows.
        resources: Which resources and templates it shows (URIs).
        discovery: `list` (every tool) or `search` (three tools that search).
        max_output: Most tokens of one tool result its clients get
            (`core.output`); None: the connection's own limit, if any.
        where: `FILE:LINE` of the declaration, for error messages.
    """

    name: str
    servers: tuple[str, ...] | None = None
    tools: ItemFilter = OPEN
    prompts: ItemFilter = OPEN
    resources: ItemFilter = OPEN
    discovery: Discovery = "list"
    max_output: int | None = None
    where: str = ""

    def shows_server(self, server: str) -> bool:
        """Whether the profile shows anything of connection `server`."""
        return self.servers is None or server in self.servers

    def shows(self, kind: str, server: str, exposed: str, own: str) -> bool:
        """Whether an item of `kind` (`tools`, `prompts`, `resources`) of
        `server`, exposed as `exposed` (the upstream calls it `own`), is in
        the view."""
        if not self.shows_server(server):
            return False
        item_filter: ItemFilter = getattr(self, kind)
        if item_filter.is_open:
            return True
        return _either(item_filter, exposed, own)


def _either(item_filter: ItemFilter, exposed: str, own: str) -> bool:
    names = (exposed, own)
    if item_filter.allow is not None and not any(
        fnmatchcase(n, g) for g in item_filter.allow for n in names
    ):
        return False
    return not any(fnmatchcase(n, g) for g in item_filter.deny for n in names)


def parse_profile(name: object, opts: object, where: str = "") -> Profile:
    """Validate `mcp_profile(name, opts)`.

    Raises:
        ConfigError: Naming the profile, the bad option and the fix.
    """
    if not isinstance(name, str):
        raise ConfigError(f"mcp_profile: profile name must be a string, got {name!r}")
    label = f"mcp_profile({name!r})"
    if not PROFILE_NAME_PATTERN.fullmatch(name):
        raise ConfigError(
            f"{label}: invalid profile name: use 1-64 letters, digits, '_', '.' or "
            "'-', starting with a letter or digit (it becomes the URL /mcp/NAME)"
        )
    if opts is None:
        opts = {}
    if not isinstance(opts, Mapping):
        raise ConfigError(
            f"{label}: options must be a table like "
            f'{{servers = {{"github"}}, tools = {{deny = {{"*delete*"}}}}}}'
        )
    unknown = sorted(str(key) for key in opts if key not in PROFILE_OPTIONS)
    if unknown:
        raise unknown_option(label, unknown[0], PROFILE_OPTIONS, "allowed")
    servers = _servers(label, opts.get("servers"))
    filters: dict[str, ItemFilter] = {}
    for key in ("tools", "prompts", "resources"):
        if key in opts:
            value = parse_exposure_option(label, key, opts[key])
            assert isinstance(value, ItemFilter)
            filters[key] = value
    discovery = opts.get("discovery", "list")
    if discovery not in DISCOVERY_MODES:
        raise ConfigError(
            f"{label}: discovery must be one of "
            f"{', '.join(repr(m) for m in DISCOVERY_MODES)}, got {discovery!r} "
            '("search" shows three tools that search the others)'
        )
    limit = opts.get("max_output")
    return Profile(
        name=name,
        servers=servers,
        discovery=discovery,
        max_output=None if limit is None else parse_max_output(label, limit),
        where=where,
        **filters,
    )


def _servers(label: str, value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        items: list[object] = [value]
    elif isinstance(value, Mapping) and all(isinstance(k, int) for k in value):
        items = [value[k] for k in sorted(value)]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise ConfigError(
            f'{label}: servers must be a list of connection names, like {{"github"}}'
        )
    if not items:
        raise ConfigError(
            f"{label}: servers is empty; name at least one connection, or leave "
            "servers out to show every connection"
        )
    for item in items:
        if not isinstance(item, str) or not item:
            raise ConfigError(
                f"{label}: servers must hold connection names, got {item!r}"
            )
    return tuple(dict.fromkeys(items))  # type: ignore[arg-type]


def unknown_servers(profile: Profile, declared: Mapping[str, object]) -> str | None:
    """The error for a profile naming a connection `declared` lacks, or None."""
    missing = [s for s in profile.servers or () if s not in declared]
    if not missing:
        return None
    known = ", ".join(sorted(declared)) or "none"
    return (
        f"mcp_profile({profile.name!r}): no connection named "
        f"{', '.join(repr(m) for m in missing)} (declared: {known}); declare it "
        "with mcp_add, or fix the name"
    )
