"""Reading values back from the JSON wire form, forgivingly.

The far side of the control socket may be a daemon of another version, so a
field can be missing or of an unexpected type. Each reader returns the value
when it has the right type and None otherwise; the caller picks the default.
JSON has no int/float distinction a reader can trust, so `read_int` accepts a
whole float (`7.0`) and `read_float` an int; neither accepts a bool.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "read_bool",
    "read_counts",
    "read_float",
    "read_int",
    "read_mapping",
    "read_names",
    "read_str",
]


def read_int(value: object) -> int | None:
    """`value` as an int, if it is one (or a whole float)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def read_float(value: object) -> float | None:
    """`value` as a float, if it is a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def read_str(value: object) -> str | None:
    """`value`, if it is a string."""
    return value if isinstance(value, str) else None


def read_bool(value: object) -> bool | None:
    """`value`, if it is a bool."""
    return value if isinstance(value, bool) else None


def read_names(value: object) -> tuple[str, ...] | None:
    """A list (or tuple) as a tuple of strings."""
    if not isinstance(value, list | tuple):
        return None
    return tuple(str(v) for v in value)


def read_mapping(value: object) -> Mapping[str, object] | None:
    """`value`, if it is a JSON object (a mapping; its keys as strings)."""
    if not isinstance(value, Mapping):
        return None
    return {str(k): v for k, v in value.items()}


def read_counts(value: object) -> dict[str, int] | None:
    """A JSON object of counts (`{"hud": 3}`); entries that are not counts are
    left out."""
    if not isinstance(value, Mapping):
        return None
    counts = {str(k): read_int(v) for k, v in value.items()}
    return {k: v for k, v in counts.items() if v is not None}
