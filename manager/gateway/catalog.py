"""Resources and resource templates through the endpoint: who owns a URI.

URIs are addresses a client follows (`file://`, `ui://`, `https://`), so they
pass through unchanged wherever one upstream owns them. Only a URI (or a
template) that two upstreams both list is rewritten, for every upstream but
the first by connection name, as `mcp-manager://{server}/{quoted original}`
(stable, and read back to the owner and the original URI); an MCP Apps view
keeps a `ui://` form, `ui://mcp-manager.{server}/{rest}` (hosts render only
`ui://`: `apps.ui_rewritten`).

A read, subscription or completion routes to the owner: a listed URI, then a
template that matches it (upstreams in name order, templates in listing
order), then a URI that appeared in that upstream's results before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

import mcp.types as types

from ..core.exposure import OPEN, ItemFilter
from .apps import ui_rewritten, ui_routed

__all__ = [
    "REWRITE_SCHEME",
    "CatalogSource",
    "ResourceTable",
    "build_resource_table",
    "is_rewrite",
    "template_pattern",
]

REWRITE_SCHEME = "mcp-manager://"
"""Prefix of a URI rewritten because two upstreams claim the original."""

_EXPRESSION = re.compile(r"\{([+#./;?&]?)([^}]*)\}")


@dataclass(frozen=True, slots=True)
class CatalogSource:
    """One connection's resources and templates, and its resource filter."""

    server: str
    resources: Sequence[Mapping[str, object]]
    templates: Sequence[Mapping[str, object]]
    filter: ItemFilter = OPEN


def template_pattern(template: str) -> re.Pattern[str]:
    """A regex matching the URIs an RFC 6570 template expands to.

    Simple expressions (`{id}`) match one path segment; reserved ones
    (`{+path}`, `{#frag}`) and the rest match anything.
    """
    out, last = [], 0
    for m in _EXPRESSION.finditer(template):
        out.append(re.escape(template[last : m.start()]))
        out.append("[^/?#]*" if m.group(1) == "" else ".*")
        last = m.end()
    out.append(re.escape(template[last:]))
    return re.compile("".join(out))


@dataclass(frozen=True, slots=True)
class ResourceTable:
    """What the endpoint lists and where each URI goes.

    Attributes:
        resources: Exposed resources (URIs rewritten only on a clash).
        templates: Exposed resource templates.
        owners: Exposed URI -> (server, the upstream's URI).
        template_owners: Exposed template -> (server, the upstream's template).
        matchers: (compiled template, server), in routing order.
        hidden: Resources and templates each connection's filter hides.
        problems: One line per rewritten or left-out item.
        problem_keys: What each of `problems` is about, to say it once: a
            clash is keyed on the server, its URI and the exposed URI, not on
            which other server lists it first (that changes as servers come
            and go, the clash does not).
    """

    resources: tuple[types.Resource, ...] = ()
    templates: tuple[types.ResourceTemplate, ...] = ()
    owners: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    template_owners: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    matchers: tuple[tuple[re.Pattern[str], str], ...] = ()
    hidden: Mapping[str, int] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    problem_keys: tuple[str, ...] = ()

    def route(
        self, uri: str, seen: Mapping[str, str] | None = None
    ) -> tuple[str, str] | None:
        """(server, upstream URI) for an exposed URI, or None if nobody owns it."""
        owner = self.owners.get(uri)
        if owner is not None:
            return owner
        view = ui_routed(uri)
        if view is not None:
            return view
        if uri.startswith(REWRITE_SCHEME):
            server, _, quoted = uri[len(REWRITE_SCHEME) :].partition("/")
            return server, unquote(quoted)
        for pattern, server in self.matchers:
            if pattern.fullmatch(uri):
                return server, uri
        if seen is not None and uri in seen:
            return seen[uri], uri
        return None

    def exposed_uri(self, server: str, uri: str) -> str:
        """The URI clients know for `server`'s `uri` (for `resources/updated`)."""
        owner = self.owners.get(uri)
        if owner is None or owner == (server, uri):
            return uri
        return rewritten(server, uri)


def rewrites_line(keys: Sequence[str], lines: Sequence[str]) -> str:
    """One log line for the rewrites of one server found in one rebuild
    (`is_rewrite` keys, with their own lines): the line itself when there is
    one, else how many and which, so that two instances of one server say it
    once, not once per URI."""
    if len(keys) == 1:
        return lines[0]
    server = keys[0].split("\0")[1]
    names = [
        ("template " if key.startswith("template\0") else "") + key.split("\0")[2]
        for key in keys
    ]
    shown = ", ".join(repr(name) for name in names[:RESOURCE_NAMES_SHOWN])
    more = len(names) - RESOURCE_NAMES_SHOWN
    if more > 0:
        shown += f" and {more} more"
    return (
        f"{server}: {len(names)} resource URIs that another server lists too "
        f"are exposed under '{REWRITE_SCHEME}{server}/': {shown}"
    )


RESOURCE_NAMES_SHOWN = 5
"""URIs named in a `rewrites_line` (the rest are counted)."""


def is_rewrite(problem_key: str) -> bool:
    """Whether a problem (`ResourceTable.problem_keys`) is a URI two servers
    share, rewritten for one of them: handled, and worth an INFO line (two
    instances of one server do it), not a warning."""
    return problem_key.startswith(("resource\0", "template\0"))


def rewritten(server: str, uri: str, *, template: bool = False) -> str:
    """`uri` of `server`, rewritten because another upstream claims it.

    A template keeps its `{...}` expressions, so what a client expands from it
    still reads back (`route`) to the owner and the upstream's URI. A `ui://`
    view stays `ui://` (`apps.ui_rewritten`).
    """
    if uri.startswith("ui://"):
        return ui_rewritten(server, uri)
    return f"{REWRITE_SCHEME}{server}/{quote(uri, safe='{}' if template else '')}"


def _validated(
    model: Any, raw: Mapping[str, object], problems: list[str], what: str
) -> Any:
    try:
        return model.model_validate(dict(raw), by_name=False)
    except ValueError as exc:
        problems.append(
            f"{what} left out: invalid definition ({str(exc).splitlines()[0]})"
        )
        return None


def build_resource_table(sources: Iterable[CatalogSource]) -> ResourceTable:
    """Merge every upstream's resources and templates (see the module text)."""
    resources: list[types.Resource] = []
    templates: list[types.ResourceTemplate] = []
    owners: dict[str, tuple[str, str]] = {}
    template_owners: dict[str, tuple[str, str]] = {}
    matchers: list[tuple[re.Pattern[str], str]] = []
    hidden: dict[str, int] = {}
    problems: list[str] = []
    keys: dict[int, str] = {}  # index in problems -> clash key
    for source in sorted(sources, key=lambda src: src.server):
        server = source.server
        for raw in source.resources:
            uri = str(raw.get("uri", ""))
            if not source.filter.allows(uri):
                hidden[server] = hidden.get(server, 0) + 1
                continue
            exposed = uri
            if uri in owners:
                if owners[uri][0] == server:
                    continue  # listed twice by the same server
                exposed = rewritten(server, uri)
                keys[len(problems)] = f"resource\0{server}\0{uri}\0{exposed}"
                problems.append(
                    f"{server}: resource {uri!r} is exposed as {exposed!r}: "
                    f"{owners[uri][0]} lists the same URI"
                )
            model = _validated(
                types.Resource, {**raw, "uri": exposed}, problems, f"{server}: {uri!r}"
            )
            if model is not None:
                owners[exposed] = (server, uri)
                resources.append(model)
        for raw in source.templates:
            template = str(raw.get("uriTemplate", ""))
            if not source.filter.allows(template):
                hidden[server] = hidden.get(server, 0) + 1
                continue
            exposed = template
            if template in template_owners:
                exposed = rewritten(server, template, template=True)
                keys[len(problems)] = f"template\0{server}\0{template}\0{exposed}"
                problems.append(
                    f"{server}: resource template {template!r} is exposed as "
                    f"{exposed!r}: {template_owners[template][0]} lists the same one"
                )
            model = _validated(
                types.ResourceTemplate,
                {**raw, "uriTemplate": exposed},
                problems,
                f"{server}: template {template!r}",
            )
            if model is not None:
                template_owners[exposed] = (server, template)
                templates.append(model)
                matchers.append((template_pattern(template), server))
    return ResourceTable(
        resources=tuple(resources),
        templates=tuple(templates),
        owners=owners,
        template_owners=template_owners,
        matchers=tuple(matchers),
        hidden=hidden,
        problems=tuple(problems),
        problem_keys=tuple(keys.get(i, text) for i, text in enumerate(problems)),
    )
