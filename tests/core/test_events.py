"""Tests for manager.core.events: frozen, typed events and their wire form."""

from __future__ import annotations

import dataclasses
import json

import pytest
from support.events import EXAMPLES

import manager.core.events as events_module
from manager.core.events import (
    EVENT_TYPES,
    Added,
    AttemptFailed,
    CallFailed,
    CallFinished,
    CallStarted,
    ConfigLoaded,
    ConfigRejected,
    Connected,
    Connecting,
    Event,
    Lagged,
    Lost,
    Reconnecting,
    Removed,
    ServerStderr,
    ToolsChanged,
    Unrecognized,
    Updated,
    event_from_dict,
    event_to_dict,
)

DECLARED = sorted(
    (
        obj
        for obj in vars(events_module).values()
        if isinstance(obj, type)
        and issubclass(obj, Event)
        and obj not in (Event, Unrecognized)  # made only by the decoder
    ),
    key=lambda cls: cls.__name__,
)


def test_every_event_class_is_registered_under_its_kind() -> None:
    assert sorted(EVENT_TYPES.values(), key=lambda c: c.__name__) == DECLARED
    assert all(EVENT_TYPES[cls.kind] is cls for cls in DECLARED)


def test_every_kind_is_unique() -> None:
    kinds = [cls.kind for cls in DECLARED]
    assert len(kinds) == len(set(kinds))
    assert "event" not in kinds


@pytest.mark.parametrize(
    ("cls", "kind"),
    [
        (Added, "added"),
        (Updated, "updated"),
        (Connecting, "connecting"),
        (Connected, "connected"),
        (AttemptFailed, "connect_failed"),
        (Lost, "disconnected"),
        (Reconnecting, "reconnecting"),
        (ToolsChanged, "tools_changed"),
        (Removed, "removed"),
        (ConfigLoaded, "config_loaded"),
        (ConfigRejected, "config_error"),
        (CallStarted, "call_started"),
        (CallFinished, "call_finished"),
        (CallFailed, "call_failed"),
        (Lagged, "lagged"),
        (ServerStderr, "stderr"),
    ],
)
def test_kinds_use_the_wire_names_of_the_design(cls: type[Event], kind: str) -> None:
    assert cls.kind == kind


def test_examples_cover_every_event_type() -> None:
    assert {type(ev) for ev in EXAMPLES} == set(DECLARED)


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda ev: ev.kind)
def test_events_are_frozen(event: Event) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.name = "other"  # type: ignore[misc]
    with pytest.raises((AttributeError, TypeError)):
        event.extra = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda ev: ev.kind)
def test_event_to_dict_starts_with_seq_time_kind_name_then_the_fields(
    event: Event,
) -> None:
    stamped = dataclasses.replace(event, seq=5, time=12.5)
    out = event_to_dict(stamped)
    own = [f.name for f in dataclasses.fields(event)][3:]
    assert list(out) == ["seq", "time", "kind", "name", *own]
    assert (out["seq"], out["time"], out["kind"]) == (5, 12.5, event.kind)
    assert out["name"] == event.name


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda ev: ev.kind)
def test_event_to_dict_is_json_ready_with_tuples_as_lists(event: Event) -> None:
    out = event_to_dict(event)
    assert json.loads(json.dumps(out)) == out
    assert not any(isinstance(value, tuple) for value in out.values())


def test_event_to_dict_gives_field_values() -> None:
    out = event_to_dict(ToolsChanged(name="a", added=("x",), removed=(), tools=1))
    assert out == {
        "seq": 0,
        "time": 0.0,
        "kind": "tools_changed",
        "name": "a",
        "added": ["x"],
        "removed": [],
        "tools": 1,
    }


def test_event_to_dict_handles_the_base_class() -> None:
    assert event_to_dict(Event(name="x")) == {
        "seq": 0,
        "time": 0.0,
        "kind": "event",
        "name": "x",
    }


def test_events_are_keyword_only_and_compare_by_value() -> None:
    with pytest.raises(TypeError):
        Connecting("a", 0, 0.0, 1)  # type: ignore[call-arg]
    assert Connecting(name="a", attempt=1) == Connecting(name="a", attempt=1)
    assert Connecting(name="a", attempt=1) != Connecting(name="a", attempt=2)


# ------------------------------------------------------------------ decoding


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda ev: ev.kind)
def test_event_from_dict_inverts_the_wire_form(event: Event) -> None:
    stamped = dataclasses.replace(event, seq=5, time=12.5)
    wire = json.loads(json.dumps(event_to_dict(stamped)))
    assert event_from_dict(wire) == stamped


def test_event_from_dict_forgives_a_daemon_of_another_version() -> None:
    older = {"kind": "connected", "name": "fs", "attempt": 2, "pid": 7.0}
    assert event_from_dict(older) == Connected(name="fs", attempt=2, tools=0, pid=7)
    wrong = {"kind": "connect_failed", "name": "fs", "attempt": "2", "error": None}
    assert event_from_dict(wrong) == AttemptFailed(name="fs", attempt=0, error="")
    newer = {"kind": "reconnecting", "attempt": 3, "delay": 1, "jitter": 0.1}
    assert event_from_dict(newer) == Reconnecting(attempt=3, delay=1.0)


def test_an_unknown_kind_keeps_its_fields_as_text() -> None:
    wire = {"seq": 9, "time": 2.0, "kind": "brand_new", "name": "fs", "x": 1, "y": ""}
    assert event_from_dict(wire) == Unrecognized(
        name="fs", seq=9, time=2.0, wire_kind="brand_new", fields=(("x", "1"),)
    )
