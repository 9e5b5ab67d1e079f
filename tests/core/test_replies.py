"""Tests for manager.core.replies: the control socket's typed replies and their
wire form both ways (as `test_events` does for events)."""

from __future__ import annotations

import dataclasses
import json

import pytest

import manager.core.info as info_module
import manager.core.login as login_module
import manager.core.replies as replies_module
from manager.core.info import (
    AttachedClient,
    DaemonInfo,
    LastReload,
    OtlpStatus,
    StartSlots,
)
from manager.core.login import CallbackReply, LoginResult, LoginStart, LogoutReply
from manager.core.replies import (
    AlreadyApplied,
    ApproveReply,
    CallLogReply,
    CatalogRow,
    ConnectionDetails,
    Pong,
    ReconnectReply,
    ReloadSummary,
    TokenReply,
    UpdateReply,
)
from manager.core.wire import read_counts, read_mapping

Reply = (
    Pong
    | OtlpStatus
    | StartSlots
    | AttachedClient
    | ApproveReply
    | LastReload
    | DaemonInfo
    | AlreadyApplied
    | ReloadSummary
    | ReconnectReply
    | ConnectionDetails
    | LoginResult
    | CallbackReply
    | LogoutReply
    | TokenReply
    | CallLogReply
    | UpdateReply
)

FULL: list[Reply] = [
    Pong(pid=4242),
    OtlpStatus(
        endpoint="http://localhost:4317",
        protocol="grpc",
        ok=False,
        last_error="UNAVAILABLE",
        exports=12,
        failures=3,
    ),
    StartSlots(slots=8, starting=2, waiting=30),
    AttachedClient(profile="coding", client="code", pid=99, since=1_700_000_001.25),
    ApproveReply(server="github", approved=("create_issue", "list_repos")),
    LastReload(ok=True, time=1_700_000_000.5, file="startup.lua"),
    LastReload(ok=False, time=1.5, file="config/web.lua", line=12, message="bad URL"),
    DaemonInfo(
        version="1.2.3",
        pid=4242,
        config="/home/me/startup.lua",
        last_reload=LastReload(ok=True, time=2.0, file="/home/me/startup.lua"),
        watching=True,
        dropped={"hud": 3, "control": 0},
        connections=7,
        otlp=OtlpStatus(endpoint="http://h:4318", protocol="http/protobuf", ok=True),
        starts=StartSlots(slots=4, starting=1, waiting=0),
        listener_errors={"otel": 2},
        guardian=4243,
        profiles=("coding", "review"),
        attached=(AttachedClient(profile="", client="claude", pid=7, since=3.5),),
        endpoint="http://127.0.0.1:8080/mcp",
        endpoint_token="/state/endpoint-token",
    ),
    DaemonInfo(otlp="off"),
    AlreadyApplied(time=3.25, trigger="file watcher"),
    ReloadSummary(
        file="startup.lua",
        added=("new",),
        removed=("old", "older"),
        changed=("fs",),
        unchanged=4,
        connections=6,
    ),
    ReloadSummary(
        file="startup.lua",
        unchanged=2,
        connections=2,
        already_applied=AlreadyApplied(time=9.5, trigger="SIGHUP"),
    ),
    ReconnectReply(server="web", retrying=True),
    ConnectionDetails(
        spec={"name": "fs", "env": {"TOKEN": "***"}, "backoff": {"initial": 1.0}},
        stderr=("starting", "ready"),
        tools=("read", "write"),
        calls=(
            {
                "time": 1.5,
                "client": "claude",
                "tool": "read",
                "outcome": "ok",
                "error": "",
                "duration": 0.01,
            },
        ),
    ),
    LoginResult(server="api", done=True, state="needs_login", error="denied"),
    LoginResult(server="api", done=True, error="no device login", unsupported=True),
    LoginStart(
        server="api",
        state="needs_login",
        url="https://auth.example/authorize?x=1",
        redirect_uri="http://127.0.0.1:33418/callback",
    ),
    LoginStart(
        server="api",
        state="needs_login",
        url="https://auth.example/device",
        user_code="WDJB-MJHT",
        url_complete="https://auth.example/device?user_code=WDJB-MJHT",
    ),
    CallbackReply(server="api", message="Logged in."),
    LogoutReply(server="api", forgot=True),
    UpdateReply(
        server="api",
        package="pkg",
        locked="1.0.0",
        available="1.1.0",
        published="2026-11-20T10:00:00Z",
        newest="1.2.0",
        note="",
        taken=True,
    ),
    TokenReply(
        source="/state/endpoint-token",
        path="/state/endpoint-token",
        rotated=True,
        streams_ended=3,
    ),
    TokenReply(source="$MCP_MANAGER_TOKEN"),
    CallLogReply(path="/state/calls.sqlite3", dropped=2),
]

ROWS = [
    CatalogRow(
        "tools",
        server="fs",
        name="read",
        exposed="fs__read",
        description="Read a file.",
        input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
    ),
    CatalogRow("prompts", server="fs", name="greet", hidden=True),
    CatalogRow(
        "resources",
        server="fs",
        name="file:///{path}",
        exposed="file:///{path}",
        template=True,
        description="Any file.",
    ),
]


def test_every_reply_type_has_an_example() -> None:
    types = {
        obj
        for module in (replies_module, info_module, login_module)
        for name in module.__all__
        if isinstance(obj := getattr(module, name), type)
    }
    assert types == {type(reply) for reply in FULL} | {CatalogRow}


@pytest.mark.parametrize("reply", FULL, ids=lambda r: type(r).__name__)
def test_the_wire_form_reads_back_to_the_same_reply(reply: Reply) -> None:
    wire = json.loads(json.dumps(reply.to_dict()))
    assert type(reply).from_dict(wire) == reply


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.kind)
def test_a_catalog_row_reads_back_as_a_row_of_its_kind(row: CatalogRow) -> None:
    wire = json.loads(json.dumps(row.to_dict()))
    assert CatalogRow.from_dict(wire, row.kind) == row


@pytest.mark.parametrize("reply", FULL, ids=lambda r: type(r).__name__)
def test_replies_are_frozen(reply: Reply) -> None:
    field = dataclasses.fields(reply)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(reply, field, None)


@pytest.mark.parametrize(
    "cls", sorted({type(r) for r in FULL}, key=str), ids=lambda c: c.__name__
)
def test_an_empty_object_reads_as_the_defaults(cls: type[Reply]) -> None:
    assert cls.from_dict({}) == cls()


@pytest.mark.parametrize("reply", FULL, ids=lambda r: type(r).__name__)
def test_unknown_fields_are_ignored(reply: Reply) -> None:
    wire = {**reply.to_dict(), "from_the_future": {"x": 1}, "kind": "surprise"}
    assert type(reply).from_dict(wire) == reply


# Every field of the wrong type: each takes its default.
WRONG: dict[type, dict[str, object]] = {
    Pong: {"pid": "4242"},
    OtlpStatus: {
        "endpoint": 4317,
        "protocol": None,
        "ok": "yes",
        "last_error": ["x"],
        "exports": "12",
        "failures": True,
    },
    StartSlots: {"slots": "8", "starting": 1.5, "waiting": None},
    LastReload: {"ok": 1, "time": "now", "file": 7, "line": "12", "message": {}},
    DaemonInfo: {
        "version": 1,
        "pid": 4.5,
        "config": ["startup.lua"],
        "last_reload": "ok",
        "watching": "yes",
        "dropped": [3],
        "connections": "7",
        "otlp": 17,
        "starts": [1, 2, 3],
        "listener_errors": "none",
        "guardian": False,
    },
    AlreadyApplied: {"time": "earlier", "trigger": 3},
    ReloadSummary: {
        "file": None,
        "added": "new",
        "removed": {"old": 1},
        "changed": 3,
        "unchanged": "4",
        "connections": [],
        "already_applied": True,
    },
    ReconnectReply: {"server": 1, "retrying": "true"},
    ConnectionDetails: {"spec": ["name"], "stderr": "one line", "tools": 2},
    LoginResult: {
        "server": 1,
        "done": 1,
        "connected": "yes",
        "state": 4,
        "error": 5,
        "unsupported": "yes",
    },
    LoginStart: {
        "url": 1,
        "redirect_uri": [],
        "done": "no",
        "user_code": 7,
        "url_complete": {},
    },
    CallbackReply: {"server": [], "message": 3},
    LogoutReply: {"server": None, "forgot": 1},
    TokenReply: {"source": 1, "path": [], "rotated": "yes", "streams_ended": "2"},
    CallLogReply: {"path": 1, "dropped": "2"},
    UpdateReply: {"server": 1, "locked": [], "available": None, "taken": "yes"},
}


@pytest.mark.parametrize("cls", list(WRONG), ids=lambda c: c.__name__)
def test_a_field_of_the_wrong_type_takes_its_default(cls: type[Reply]) -> None:
    assert cls.from_dict(WRONG[cls]) == cls()


def test_a_catalog_row_forgives_what_it_cannot_read() -> None:
    wire = {
        "server": 3,
        "uri": "file:///a",
        "name": "not a resource's key",
        "exposed": 7,
        "hidden": "yes",
        "template": 1,
        "description": None,
        "inputSchema": "{}",
        "unknown": True,
    }
    assert CatalogRow.from_dict(wire, "resources") == CatalogRow(
        "resources", name="file:///a"
    )
    assert CatalogRow.from_dict({}, "tools") == CatalogRow("tools")


def test_the_wire_form_is_the_documented_one_key_for_key() -> None:
    """Key order too: `status --json` and `tools --json` print these."""
    assert list(LastReload(ok=True).to_dict()) == ["ok", "time", "file"]
    assert list(LastReload(ok=False).to_dict()) == [
        "ok",
        "time",
        "file",
        "line",
        "message",
    ]
    assert list(ReloadSummary().to_dict()) == [
        "file",
        "added",
        "removed",
        "changed",
        "unchanged",
        "connections",
    ]
    assert (
        "already_applied" in ReloadSummary(already_applied=AlreadyApplied()).to_dict()
    )
    policy = ReloadSummary(settings=("policy",))
    assert policy.to_dict()["settings"] == ["policy"]  # only when there are some
    assert ReloadSummary.from_dict(policy.to_dict()) == policy
    assert list(LoginStart().to_dict()) == [
        "server",
        "done",
        "connected",
        "state",
        "error",
        "unsupported",
        "url",
        "redirect_uri",
        "user_code",
        "url_complete",
    ]
    assert list(LoginResult().to_dict()) == [
        "server",
        "done",
        "connected",
        "state",
        "error",
        "unsupported",
    ]
    tool, prompt, resource = (row.to_dict() for row in ROWS)
    assert list(tool) == [
        "server",
        "name",
        "exposed",
        "hidden",
        "held",
        "description",
        "inputSchema",
    ]
    assert list(prompt) == [
        "server",
        "name",
        "exposed",
        "hidden",
        "held",
        "description",
    ]
    assert list(resource) == [
        "server",
        "uri",
        "exposed",
        "hidden",
        "held",
        "template",
        "description",
    ]


def test_otlp_off_and_other_text_pass_through_as_text() -> None:
    assert DaemonInfo.from_dict({"otlp": "off"}).otlp == "off"
    assert DaemonInfo.from_dict({}).otlp == "off"
    assert DaemonInfo.from_dict({"otlp": "paused"}).otlp == "paused"
    assert DaemonInfo(otlp="off").to_dict()["otlp"] == "off"


def test_counts_keep_the_counts_and_drop_the_rest() -> None:
    info = DaemonInfo.from_dict({"dropped": {"hud": 3, "tui": "x", "cli": 2.0}})
    assert info.dropped == {"hud": 3, "cli": 2}
    assert read_counts({1: 4}) == {"1": 4}
    assert read_mapping({1: "a"}) == {"1": "a"}
    assert read_mapping(["a"]) is None


def test_a_reload_summary_says_itself_as_its_config_loaded_event() -> None:
    from manager.core.describe import describe

    summary = ReloadSummary(
        file="startup.lua", added=("new",), changed=("fs",), unchanged=3
    )
    assert describe(summary.as_event()) == (
        "config loaded from startup.lua: 1 added (new), 0 removed, 1 changed (fs), "
        "3 unchanged"
    )
