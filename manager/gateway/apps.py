"""MCP Apps (`io.modelcontextprotocol/ui`) carried through the endpoint.

An Apps server names an HTML view, a `ui://` resource, in a tool's
`_meta.ui.resourceUri` (older servers: `_meta["ui/resourceUri"]`); a host
that declares the extension reads that resource, shows it in a sandboxed
frame, and the view calls tools through the host by the server's own names.
A tool whose `_meta.ui.visibility` leaves out `"model"` is for the view, not
the model. What the endpoint does about each (see README, "MCP Apps"):

- the extension is advertised when an upstream offers it, and a client's
  declaration reaches the servers (`transport.tasks.ROUTED_EXTENSIONS`);
- `ui://` URIs pass unchanged; one that two servers list keeps a `ui://`
  form, `ui://mcp-manager.SERVER/REST` (`ui_rewritten`, read back by
  `ui_routed`), and that server's tools name it in their `_meta`
  (`with_resource_uri`), since hosts render only `ui://`;
- app-only tools (`app_only`) are left out of `tools/list` for clients that
  did not declare the extension, and out of search, and stay callable;
- a tool called by a server's own name, which the endpoint does not expose
  under that name, reaches the one Apps server that has it, for a client
  that declared the extension (`own_name_owner`): a view knows only its
  server's names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import mcp.types as types

from ..transport.base import UI_EXTENSION

__all__ = [
    "UI_PREFIX",
    "app_only",
    "declares_apps",
    "offers_apps",
    "own_name_owner",
    "resource_uri",
    "ui_rewritten",
    "ui_routed",
    "with_resource_uri",
]

UI_SCHEME = "ui://"
UI_PREFIX = "ui://mcp-manager."
"""Prefix of a `ui://` URI rewritten because two upstreams list the original."""

_LEGACY_KEY = "ui/resourceUri"
"""Where servers written before `_meta.ui` name the view."""


def ui_rewritten(server: str, uri: str) -> str:
    """`server`'s `ui://` `uri`, exposed in a form still `ui://` because
    another upstream lists it too: `ui://mcp-manager.SERVER/REST`."""
    return f"{UI_PREFIX}{server}/{uri[len(UI_SCHEME) :]}"


def ui_routed(uri: str) -> tuple[str, str] | None:
    """(server, its own URI) of a `ui_rewritten` URI, else None."""
    if not uri.startswith(UI_PREFIX):
        return None
    server, slash, rest = uri[len(UI_PREFIX) :].partition("/")
    if not server or not slash:
        return None
    return server, UI_SCHEME + rest


def _ui(tool: types.Tool) -> Mapping[str, Any]:
    meta = tool.meta or {}
    ui = meta.get("ui")
    return ui if isinstance(ui, Mapping) else {}


def resource_uri(tool: types.Tool) -> str | None:
    """The view a tool names (`_meta.ui.resourceUri`, or the older key)."""
    uri = _ui(tool).get("resourceUri")
    if not isinstance(uri, str):
        uri = (tool.meta or {}).get(_LEGACY_KEY)
    return uri if isinstance(uri, str) else None


def with_resource_uri(tool: types.Tool, uri: str) -> types.Tool:
    """`tool` naming the view at `uri` in each key it named one in."""
    meta = dict(tool.meta or {})
    ui = _ui(tool)
    if isinstance(ui.get("resourceUri"), str):
        meta["ui"] = {**ui, "resourceUri": uri}
    if isinstance(meta.get(_LEGACY_KEY), str):
        meta[_LEGACY_KEY] = uri
    return tool.model_copy(update={"meta": meta})


def app_only(tool: types.Tool) -> bool:
    """Whether the tool is for its server's view only (`visibility` names
    who may call it; without `"model"`, the model may not)."""
    visibility = _ui(tool).get("visibility")
    return (
        isinstance(visibility, list) and bool(visibility) and "model" not in visibility
    )


def declares_apps(capabilities: types.ClientCapabilities | None) -> bool:
    """Whether a client declared the extension (it hosts views)."""
    extensions = getattr(capabilities, "extensions", None) or {}
    return UI_EXTENSION in extensions


def offers_apps(
    capabilities: Mapping[str, Any], tools: Iterable[Mapping[str, Any]] = ()
) -> bool:
    """Whether an upstream offers the extension: its capabilities (as it sent
    them) say so, or one of its tools (raw definitions) names a view (a
    handshake-era `initialize` answer may carry no extensions)."""
    extensions = capabilities.get("extensions")
    if isinstance(extensions, Mapping) and UI_EXTENSION in extensions:
        return True
    for raw in tools:
        meta = raw.get("_meta")
        if isinstance(meta, Mapping) and (
            isinstance(meta.get("ui"), Mapping) or _LEGACY_KEY in meta
        ):
            return True
    return False


def own_name_owner(
    name: str, servers: Iterable[tuple[str, Iterable[str]]]
) -> str | None:
    """The one server, of `(server, own tool names)` of the Apps servers,
    that has a tool named `name`; None when none or several do."""
    owners = [server for server, names in servers if name in set(names)]
    return owners[0] if len(owners) == 1 else None
