"""The JSON wire form of the control socket's records (events, replies),
read off their declarations.

`Wire` gives a frozen dataclass `to_dict` and a forgiving `from_dict` from
its fields alone: a reply or an event is declared once, as a dataclass, and
this module is its one codec (`events` and `replies` both use it). The wire
form is every field by its name, in declaration order; tuples are lists,
nested records are objects.

The far side of the socket may be a daemon of another version, so reading is
forgiving: a field that is missing or of the wrong type takes its default
(else its type's zero), unknown fields are ignored. Each reader returns the
value when it has the right type and None otherwise. JSON has no int/float
distinction a reader can trust, so `read_int` accepts a whole float (`7.0`)
and `read_float` an int; neither accepts a bool, and no string is a number.
Those rules are ours: pydantic and msgspec coerce otherwise (msgspec's lax
mode reads `"4242"` as an int, neither reads `["a", 1]` as names) and would
cost the CLI's start 25 to 80 ms of imports, so the codec reads the
declarations with `dataclasses` and the annotations as text (which keeps
`typing.get_type_hints` off the light client's import path).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__ = [
    "Wire",
    "read_bool",
    "read_counts",
    "read_fields",
    "read_float",
    "read_int",
    "read_mapping",
    "read_names",
    "read_rows",
    "read_str",
    "write_fields",
    "write_value",
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


def read_rows(value: object) -> tuple[Mapping[str, object], ...] | None:
    """A list of JSON objects (entries that are not objects are left out)."""
    if not isinstance(value, list | tuple):
        return None
    return tuple(row for item in value if (row := read_mapping(item)) is not None)


Reader = Callable[[object], object]

_SCALARS: dict[str, tuple[Reader, object]] = {
    "int": (read_int, 0),
    "float": (read_float, 0.0),
    "str": (read_str, ""),
    "bool": (read_bool, False),
    "tuple[str, ...]": (read_names, ()),
    "Mapping[str, object]": (read_mapping, {}),
    "Mapping[str, int]": (read_counts, {}),
    "tuple[Mapping[str, object], ...]": (read_rows, ()),
}
"""Reader and zero by annotation text."""


_Step = tuple[str, Reader, Callable[[], object], bool]
"""How one field is read: its name, its reader, what it takes instead, and
whether it may be None (a tuple: a dataclass would cost the CLI's start)."""


_PLANS: dict[type, tuple[_Step, ...]] = {}


def _nested(owner: type, name: str) -> type[Wire] | None:
    """The record class an annotation names, in `owner`'s module."""
    found = vars(sys.modules[owner.__module__]).get(name)
    return found if isinstance(found, type) and issubclass(found, Wire) else None


def _reader(owner: type, hint: str) -> tuple[Reader, object]:
    """The reader of annotation `hint` (text) of `owner`, and its zero."""
    scalar = _SCALARS.get(hint)
    if scalar is not None:
        return scalar
    if hint.startswith("tuple[") and hint.endswith(", ...]"):
        item = _nested(owner, hint[len("tuple[") : -len(", ...]")])
        if item is not None:
            return _tuple_of(item), ()
    record = _nested(owner, hint)
    if record is not None:
        return _record(record), None
    if " | " in hint:
        readers = [_reader(owner, part)[0] for part in hint.split(" | ")]
        return _first_of(readers), None
    raise TypeError(f"{owner.__name__}: no wire reader for {hint!r}")


def _record(cls: type[Wire]) -> Reader:
    def read(value: object) -> object:
        data = read_mapping(value)
        return cls.from_dict(data) if data is not None else None

    return read


def _tuple_of(cls: type[Wire]) -> Reader:
    def read(value: object) -> object:
        rows = read_rows(value)
        return None if rows is None else tuple(cls.from_dict(row) for row in rows)

    return read


def _first_of(readers: list[Reader]) -> Reader:
    def read(value: object) -> object:
        for reader in readers:
            found = reader(value)
            if found is not None:
                return found
        return None

    return read


def _plan(cls: type) -> tuple[_Step, ...]:
    plan = _PLANS.get(cls)
    if plan is not None:
        return plan
    steps = []
    for f in dataclasses.fields(cls):
        hint = str(f.type)
        optional = hint.endswith(" | None")
        read, zero = _reader(cls, hint.removesuffix(" | None"))
        if f.default is not dataclasses.MISSING:
            default: Callable[[], object] = _constant(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory
        else:
            default = _constant(zero)
        steps.append((f.name, read, default, optional))
    plan = _PLANS[cls] = tuple(steps)
    return plan


def _constant(value: object) -> Callable[[], object]:
    return lambda: value


def read_fields(
    cls: type, data: Mapping[str, object], skip: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The fields of dataclass `cls` (but `skip`) read from `data`: each
    field's value when it has the field's type, else its default (a field
    that may be None is None instead)."""
    out: dict[str, Any] = {}
    for key, read, default, optional in _plan(cls):
        if key in skip:
            continue
        value = read(data.get(key))
        out[key] = default() if value is None and not optional else value
    return out


def write_value(value: object) -> object:
    """`value` JSON-ready: a record as its `to_dict`, tuples as lists."""
    if isinstance(value, Wire):
        return value.to_dict()
    if isinstance(value, list | tuple):
        return [write_value(item) for item in value]
    if isinstance(value, Mapping):
        return {key: write_value(item) for key, item in value.items()}
    return value


def write_fields(
    record: object, skip: frozenset[str] = frozenset()
) -> dict[str, object]:
    """Every field of dataclass `record` (but `skip`) by name, in order."""
    return {
        f.name: write_value(getattr(record, f.name))
        for f in dataclasses.fields(record)  # type: ignore[arg-type]
        if f.name not in skip
    }


_W = TypeVar("_W", bound="Wire")


class Wire:
    """A frozen dataclass with a wire form: `to_dict` and forgiving
    `from_dict`, both read off its fields."""

    __slots__ = ()

    def to_dict(self) -> dict[str, object]:
        """The wire form: every field by its name, in order."""
        return write_fields(self)

    @classmethod
    def from_dict(cls: type[_W], data: Mapping[str, object]) -> _W:
        """Read the wire form back, forgivingly."""
        return cls(**read_fields(cls, data))
