"""Which profile a downstream request sees (`core.profile`), and its view.

The profile is chosen where the client connected: the HTTP path (`/mcp/NAME`,
checked by `guard.Guard`) or the attach socket's greeting (`attach`). That
front sets `PROFILE` for the request (HTTP) or the connection (socket) before
the SDK sees a message; every handler below reads it from the context, so a
2026-07-28 client, which has no session, is served the same view on every
request. No profile (`/mcp`) is the whole endpoint.

A profile removed by a reload while clients are still attached to it shows
nothing (and a call through it is an unknown tool), never everything.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

import mcp.types as types

from ..core.profile import Profile
from .catalog import ResourceTable
from .names import ToolTable

__all__ = [
    "PROFILE",
    "current_profile",
    "visible_items",
    "visible_resources",
]

PROFILE: ContextVar[str | None] = ContextVar("mcp_manager_profile", default=None)
"""The profile of the request being served; None is the whole endpoint."""


def current_profile(profiles: Mapping[str, Profile]) -> Profile | None:
    """The profile of the request being served, from the declared ones."""
    name = PROFILE.get()
    if name is None:
        return None
    found = profiles.get(name)
    if found is None:  # removed by a reload: show nothing, never everything
        return Profile(name=name, servers=())
    return found


def visible_items(
    table: ToolTable, profile: Profile | None, kind: str
) -> tuple[Any, ...]:
    """The tools (`kind` `tools`) or prompts (`prompts`) of `table` in view."""
    if profile is None:
        return table.tools
    routes = table.routes
    return tuple(
        item
        for item in table.tools
        if profile.shows(
            kind, routes[item.name].server, item.name, routes[item.name].tool
        )
    )


def visible_resources(
    table: ResourceTable, profile: Profile | None
) -> tuple[tuple[types.Resource, ...], tuple[types.ResourceTemplate, ...]]:
    """The resources and templates of `table` in view."""
    if profile is None:
        return table.resources, table.templates
    resources = tuple(
        r
        for r in table.resources
        if _shows_uri(profile, str(r.uri), table.owners.get(str(r.uri)))
    )
    templates = tuple(
        t
        for t in table.templates
        if _shows_uri(
            profile, t.uri_template, table.template_owners.get(t.uri_template)
        )
    )
    return resources, templates


def _shows_uri(profile: Profile, exposed: str, owner: tuple[str, str] | None) -> bool:
    if owner is None:
        return False
    return profile.shows("resources", owner[0], exposed, owner[1])
