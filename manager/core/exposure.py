"""What the endpoint shows of a connection: its name prefix, filters and roots.

These settings never touch the upstream session (roots aside, which the
session is told about by `roots/list_changed`), so changing them in
startup.lua applies without a reconnect.

- `prefix`: exposed tools and prompts are `{prefix}__{name}`; `""` keeps the
  upstream's own names; unset, the connection's name.
- `tools`, `prompts`, `resources`: `{allow = {...}, deny = {...}}` of shell
  globs (`fnmatch`, case-sensitive) on the upstream's own tool and prompt
  names and resource URIs. An item is exposed when it matches `allow` (or no
  `allow` is given) and matches no `deny`. A hidden item is neither listed
  nor callable.
- `roots`: paths or `file://` URIs the daemon answers `roots/list` with.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import PurePosixPath
from urllib.parse import quote

from .errors import ConfigError

__all__ = [
    "EXPOSURE_OPTIONS",
    "OPEN",
    "PREFIX_PATTERN",
    "Exposure",
    "ItemFilter",
    "parse_exposure_option",
    "prefix_clashes",
    "root_uri",
]

EXPOSURE_OPTIONS = frozenset({"prefix", "tools", "prompts", "resources", "roots"})
"""Options of `mcp_add` read here."""

PREFIX_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{0,40}$")
"""A prefix is part of exposed names: letters, digits, `_`, `.`, `-`; at most 40."""


@dataclass(frozen=True, slots=True)
class ItemFilter:
    """Which of an upstream's items of one kind are exposed.

    Attributes:
        allow: Globs; None means everything is allowed.
        deny: Globs; a match hides the item even when allowed.
    """

    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()

    def allows(self, name: str) -> bool:
        """Whether `name` (a tool or prompt name, or a resource URI) is exposed."""
        if self.allow is not None and not any(fnmatchcase(name, g) for g in self.allow):
            return False
        return not any(fnmatchcase(name, g) for g in self.deny)

    @property
    def is_open(self) -> bool:
        """Nothing is filtered."""
        return self.allow is None and not self.deny


OPEN = ItemFilter()


@dataclass(frozen=True, slots=True)
class Exposure:
    """How one connection appears through the endpoint.

    Attributes:
        prefix: Name prefix; None means the connection's name.
        tools: Which tools are exposed.
        prompts: Which prompts are exposed.
        resources: Which resources (and resource templates, by URI template)
            are exposed.
    """

    prefix: str | None = None
    tools: ItemFilter = OPEN
    prompts: ItemFilter = OPEN
    resources: ItemFilter = OPEN


def _globs(where: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Mapping) and all(isinstance(k, int) for k in value):
        items = [value[k] for k in sorted(value)]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise ConfigError(f'{where} must be a list of glob strings, like {{"read_*"}}')
    for item in items:
        if not isinstance(item, str) or not item:
            raise ConfigError(f"{where} must hold non-empty strings, got {item!r}")
    return tuple(items)


def _filter(label: str, key: str, value: object) -> ItemFilter:
    where = f"{label}: {key}"
    if not isinstance(value, Mapping):
        raise ConfigError(
            f'{where} must be a table like {{allow = {{"read_*"}}, deny = '
            f'{{"*_admin"}}}}, got {type(value).__name__}'
        )
    unknown = sorted(str(k) for k in value if k not in ("allow", "deny"))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; use allow and deny")
    allow = value.get("allow")
    return ItemFilter(
        allow=None if allow is None else _globs(f"{where}.allow", allow),
        deny=_globs(f"{where}.deny", value["deny"]) if "deny" in value else (),
    )


def _roots(label: str, value: object) -> tuple[str, ...]:
    roots = _globs(f"{label}: roots", value)
    for root in roots:
        if not root.startswith(("/", "file://")):
            raise ConfigError(
                f"{label}: roots must be absolute paths or file:// URIs, got {root!r}"
            )
    return roots


def parse_exposure_option(label: str, key: str, value: object) -> object:
    """Validate one of `EXPOSURE_OPTIONS`; return its parsed value.

    Raises:
        ConfigError: Naming `label` (e.g. `mcp_add('fs')`), the key and the fix.
    """
    if key == "prefix":
        if not isinstance(value, str) or not PREFIX_PATTERN.fullmatch(value):
            raise ConfigError(
                f"{label}: prefix must be a string of at most 40 letters, digits, "
                f"'_', '.' or '-' (\"\" keeps the upstream's names), got {value!r}"
            )
        if "__" in value:
            raise ConfigError(
                f"{label}: prefix {value!r} holds '__', which separates the prefix "
                "from the tool in exposed names (PREFIX__TOOL); use one '_'"
            )
        return value
    if key == "roots":
        return _roots(label, value)
    return _filter(label, key, value)


def root_uri(root: str) -> str:
    """A declared root as the `file://` URI `roots/list` answers with."""
    if root.startswith("file://"):
        return root
    return "file://" + quote(str(PurePosixPath(root)))


def prefix_clashes(prefixes: Mapping[str, str]) -> list[str]:
    """One sentence per prefix that two or more connections share.

    Args:
        prefixes: Connection name -> its effective prefix ("" for a bridge).
    """
    owners: dict[str, list[str]] = {}
    for name, prefix in prefixes.items():
        owners.setdefault(prefix, []).append(name)
    out = []
    for prefix, names in sorted(owners.items()):
        if len(names) < 2:
            continue
        listed = ", ".join(repr(n) for n in sorted(names))
        shown = f"prefix {prefix!r}" if prefix else 'prefix "" (their own names)'
        out.append(
            f"connections {listed} share the {shown}: a tool or prompt name they "
            "both have is renamed for one of them; give each its own prefix"
        )
    return out
