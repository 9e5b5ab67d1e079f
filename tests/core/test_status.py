"""Tests for manager.core.status: one typed status, and its wire form both ways."""

from __future__ import annotations

import json

import pytest

from manager.core.status import ConnectionStatus

FULL = ConnectionStatus(
    name="fs",
    transport="stdio",
    endpoint="python -m server",
    state="reconnecting",
    attempt=4,
    tools=12,
    error="server killed by SIGKILL",
    next_retry_in=0.8,
    since=1_700_000_000.5,
    pid=None,
    exit_code=-9,
    enabled=True,
    stderr=("boom",),
)


def test_the_wire_form_reads_back_to_the_same_status() -> None:
    wire = json.loads(json.dumps(FULL.to_dict()))
    assert ConnectionStatus.from_dict(wire) == FULL


def test_the_wire_form_has_the_documented_mcp_status_keys() -> None:
    keys = set(FULL.to_dict())
    documented = {"state", "attempt", "tools", "error", "next_retry_in", "since"}
    assert documented | {"pid", "exit_code", "name"} <= keys


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ({"name": "x"}, ConnectionStatus("x")),
        (
            {"name": "x", "attempt": "3", "pid": True, "tools": 2.5, "stderr": "no"},
            ConnectionStatus("x"),
        ),
        (
            {"name": "x", "enabled": False, "since": 7},
            ConnectionStatus("x", enabled=False, since=7.0),
        ),
        ({"name": "x", "unknown": 1, "error": None}, ConnectionStatus("x")),
    ],
)
def test_reading_a_wire_form_drops_wrong_types_and_unknown_keys(
    wire: dict[str, object], expected: ConnectionStatus
) -> None:
    assert ConnectionStatus.from_dict(wire) == expected
