"""Tests for manager.core.events: frozen, typed events and their wire form."""

from __future__ import annotations

import dataclasses
import json

import pytest

import manager.core.events as events_module
from manager.core.events import (
    EVENT_TYPES,
    Added,
    ApprovalAsked,
    ApprovalDecided,
    AttemptFailed,
    AuthStep,
    CallFailed,
    CallFinished,
    CallStarted,
    CatalogChanged,
    ConfigLoaded,
    ConfigRejected,
    Connected,
    Connecting,
    Event,
    HookFailed,
    Idle,
    Lagged,
    LaunchLock,
    Lost,
    NeedsLogin,
    Reconnecting,
    Refused,
    Removed,
    ResourceUpdated,
    ServerLog,
    ServerStderr,
    SettingsChanged,
    ToolChanged,
    ToolsApproved,
    ToolsChanged,
    Unrecognized,
    Updated,
    event_from_dict,
    event_to_dict,
)

EXAMPLES: list[Event] = [
    Added(name="a", transport="stdio", endpoint="srv --port 1"),
    Updated(name="a", changed=("url", "hold"), endpoint="http://h/"),
    Connecting(name="a", attempt=1),
    Connected(name="a", attempt=2, tools=3, server_name="s", pid=9),
    AttemptFailed(name="a", attempt=1, error="refused", error_type="ConnectFailed"),
    Lost(name="a", reason="EOF", exit_code=1, uptime=2.5),
    Reconnecting(name="a", attempt=2, delay=0.1),
    Idle(name="a", reason="no request for 300 s; starts at the next one", uptime=310.5),
    ToolChanged(
        name="a",
        item="echo",
        change="changed",
        diff='--- pinned\n+++ listed now\n- "description": "x"\n+ "description": "y"',
        suspicious="description: text addressed to the model ('<IMPORTANT>')",
        held=True,
    ),
    ToolsApproved(name="a", items=("echo", "pid")),
    LaunchLock(
        name="a", change="drift", package="pkg@^1", version="1.0.0", available="1.1.0"
    ),
    ApprovalAsked(
        name="a",
        tool="add",
        approval="1f2e3d4c",
        client="claude-code",
        rule="startup.lua:5",
        arguments='{"a": 1}',
        deadline=1.5,
    ),
    ApprovalDecided(
        name="a", tool="add", verdict="allow", by="hud", scope="session", approval="x"
    ),
    NeedsLogin(name="a", reason="no token", command="mcp-manager login a"),
    Refused(name="a", reason="no scope after 3 logins", command="mcp-manager login a"),
    AuthStep(name="a", step="refresh", outcome="ok", status=200, elapsed=0.01),
    ToolsChanged(name="a", added=("x",), removed=("y", "z"), tools=1),
    Removed(name="a"),
    ServerStderr(name="a", line="warning: x", suppressed=2),
    ConfigLoaded(file="startup.lua", added=("a",), unchanged=3),
    ConfigRejected(file="startup.lua", line=4, message="bad"),
    HookFailed(file="startup.lua", line=9, message="boom", hook="connected"),
    CallStarted(name="a", tool="t", call_id=7),
    CallFinished(name="a", tool="t", duration=0.5, is_error=True, call_id=7),
    CallFailed(name="a", tool="t", duration=0.5, error="timeout", call_id=7),
    Lagged(name="hud", dropped=12),
    SettingsChanged(name="a", changed=("exposure",)),
    CatalogChanged(name="a", items="prompts", added=("p",), count=2),
    ResourceUpdated(name="a", uri="file:///x"),
    ServerLog(name="a", level="error", logger="db", data="disk full"),
]

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
