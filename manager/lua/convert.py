"""Lua values to plain Python values, and back to text for messages.

Tables are converted depth- and size-limited (`MAX_DEPTH`, `MAX_ENTRIES`), so a
self-referencing or huge table cannot hurt the daemon; paths in messages name
where in the table a bad value sat ("endpoint.env.X").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lupa.lua54 import lua_type

from ..core.errors import ConfigError
from ..core.spec import value_text

__all__ = [
    "MAX_DEPTH",
    "MAX_ENTRIES",
    "deny_attribute",
    "as_text",
    "format_bytes",
    "lua_to_py",
    "plain",
    "strip_lua_text",
]

MAX_DEPTH = 32
"""Deepest table nesting converted to Python (also what stops self-referencing
tables: lupa wraps a table anew on each access, so identity checks do not work)."""

MAX_ENTRIES = 10_000
"""Most table entries converted for one call, counted over all nesting levels."""


_TRACEBACK = "\nstack traceback:"


_MIB = 1024 * 1024
_PATH_DEPTH = 4  # nesting levels spelled out in "endpoint.env.X" paths


def deny_attribute(obj: object, attr_name: object, is_setting: bool) -> object:
    raise AttributeError(f"access to attribute {attr_name!r} denied")


def strip_lua_text(text: str) -> str:
    """The user-facing part of a Lua error: no loader prefix, no traceback."""
    text = text.removeprefix("error loading code: ")
    return text.split(_TRACEBACK, 1)[0].rstrip()


def lua_to_py(value: Any, where: str, budget: list[int], depth: int = 0) -> object:
    """Convert a Lua value to str/int/float/bool/None/list/dict.

    A table whose keys are exactly 1..n becomes a list; any other table a dict
    with string keys (`{}` becomes an empty dict).

    Raises:
        ConfigError: Functions, coroutines, userdata, bad keys, nesting deeper
            than MAX_DEPTH or more than MAX_ENTRIES entries in all.
    """
    if value is None or isinstance(value, bool | int | float | str):
        return value
    kind = lua_type(value)
    if kind != "table":
        raise ConfigError(
            f"{where} is {as_text(value)}; only strings, numbers, booleans and "
            "tables can be declared"
        )
    if depth >= MAX_DEPTH:
        raise ConfigError(
            f"{where}: tables nested deeper than {MAX_DEPTH} levels "
            "(does a table contain itself?)"
        )
    items: list[tuple[object, object]] = []
    try:
        for key, item in value.items():
            budget[0] -= 1
            if budget[0] < 0:
                raise ConfigError(
                    f"{where}: too many table entries (more than {MAX_ENTRIES})"
                )
            items.append((key, item))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: a string is not valid UTF-8 text") from exc
    if items and all(type(k) is int for k, _ in items):
        keys = sorted(k for k, _ in items if isinstance(k, int))
        if keys == list(range(1, len(keys) + 1)):
            items.sort(key=lambda kv: kv[0] if isinstance(kv[0], int) else 0)
            return [
                lua_to_py(item, _child(where, f"[{key}]", depth), budget, depth + 1)
                for key, item in items
            ]
    out: dict[str, object] = {}
    for key, item in items:
        if isinstance(key, bool) or not isinstance(key, str | int | float):
            raise ConfigError(
                f"{where}: table keys must be strings or numbers, got {as_text(key)}"
            )
        text = key if isinstance(key, str) else str(key)
        out[text] = lua_to_py(item, _child(where, f".{text}", depth), budget, depth + 1)
    return out


def _child(where: str, step: str, depth: int) -> str:
    """The path of a nested value for messages, kept short for deep nesting."""
    return f"{where}{step}" if depth < _PATH_DEPTH else where


def plain(value: object, depth: int = 0) -> object:
    """A copy of host data made only of str/int/float/bool/None/list/dict."""
    if value is None:
        return None
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str.__str__(value)
    if depth < MAX_DEPTH and isinstance(value, Mapping):
        return {str(k): plain(v, depth + 1) for k, v in value.items()}
    if depth < MAX_DEPTH and isinstance(value, list | tuple):
        return [plain(v, depth + 1) for v in value]
    return str(value)


def as_text(value: object) -> str:
    """How a Lua value reads in a message (Lua's own types included)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value_text(value)
    kind = lua_type(value)
    if kind == "table":
        return "a table"
    if kind is not None:
        return f"a {kind}"
    return "an unsupported value"


def format_bytes(size: int) -> str:
    if size % _MIB == 0:
        return f"{size // _MIB} MiB"
    if size % 1024 == 0:
        return f"{size // 1024} KiB"
    return f"{size} bytes"
