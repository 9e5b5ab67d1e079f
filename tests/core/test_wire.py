"""Tests for manager.core.wire: the one codec of events and replies, read off
a dataclass's declaration (the replies and events tests pin each record's
wire form; these pin the codec's own rules)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from manager.core.wire import Wire, read_fields, write_fields


@dataclass(frozen=True, slots=True)
class Inner(Wire):
    n: int = 0


@dataclass(frozen=True, slots=True)
class Outer(Wire):
    label: str = "?"
    inner: Inner = field(default_factory=lambda: Inner(n=7))
    maybe: Inner | None = None
    rows: tuple[Inner, ...] = ()
    either: Inner | str = "off"
    counts: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Unreadable(Wire):
    when: complex = 0j


def test_nested_records_tuples_and_unions_round_trip() -> None:
    outer = Outer(
        label="x",
        inner=Inner(n=1),
        maybe=Inner(n=2),
        rows=(Inner(n=3), Inner()),
        either=Inner(n=4),
        counts={"a": 1},
    )
    wire = outer.to_dict()
    assert wire == {
        "label": "x",
        "inner": {"n": 1},
        "maybe": {"n": 2},
        "rows": [{"n": 3}, {"n": 0}],
        "either": {"n": 4},
        "counts": {"a": 1},
    }
    assert Outer.from_dict(wire) == outer
    assert Outer.from_dict({**wire, "either": "paused"}).either == "paused"


def test_what_cannot_be_read_takes_the_default_or_its_factory() -> None:
    wire = {
        "label": 3,
        "inner": "x",
        "maybe": [1],
        "rows": [{"n": True}, "not a row", {"n": 2.0}],
        "either": 1.5,
        "counts": {"a": "1", "b": 2},
    }
    assert Outer.from_dict(wire) == Outer(rows=(Inner(), Inner(n=2)), counts={"b": 2})
    assert Outer.from_dict({}) == Outer()


def test_fields_can_be_left_out_both_ways() -> None:
    skip = frozenset({"inner", "rows", "either", "counts"})
    assert write_fields(Outer(), skip) == {"label": "?", "maybe": None}
    assert read_fields(Outer, {"label": "y"}, skip) == {"label": "y", "maybe": None}


def test_an_annotation_the_codec_cannot_read_is_named() -> None:
    with pytest.raises(TypeError, match=r"Unreadable: no wire reader for 'complex'"):
        Unreadable.from_dict({})
