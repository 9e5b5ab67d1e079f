"""Tests for manager.core.describe: one sentence per event, for every surface."""

from __future__ import annotations

import pytest
from support.events import EXAMPLES

from manager.core.describe import describe, duration
from manager.core.events import (
    ApprovalDecided,
    AttemptFailed,
    Event,
    Lost,
    Reconnecting,
    Unrecognized,
)
from manager.core.text import first_line, list_names, size_text

SENTENCES = [
    "a: added (stdio srv --port 1)",
    "a: url, hold changed; restarting",
    "a: connecting (attempt 1)",
    "a: connected in 0.00 s (attempt 2, 3 tools, server s, pid 9)",
    "a: connect failed (attempt 1): refused",
    "a: disconnected after 2.50 s, exit code 1: EOF",
    "a: retry 2 in 0.10 s",
    "a: idle after 5m10s up: no request for 300 s; starts at the next one",
    "a: tool 'echo' changed since it was approved (held back); suspicious: "
    "description: text addressed to the model ('<IMPORTANT>'); review: mcp-manager "
    "tools --changed; approve: mcp-manager approve a echo",
    "a: approved echo, pid",
    "a: pkg@^1 1.1.0 is out; still starting the locked 1.0.0: see and take it "
    "with mcp-manager update a",
    "a: call of 'add' by claude-code waits for your approval (startup.lua:5); "
    "allow: mcp-manager allow 1f2e3d4c; deny: mcp-manager deny 1f2e3d4c",
    "a: call of 'add' allowed (session) by hud",
    "a: needs login (no token); run: mcp-manager login a",
    "a: refused (no scope after 3 logins); not asked again by itself: to try "
    "again run: mcp-manager login a (or mcp-manager reconnect a)",
    "a: oauth refresh ok HTTP 200 in 0.01 s",
    "a: tools added x; removed y, z (now 1)",
    "a: removed",
    "a: stderr: warning: x (2 lines suppressed)",
    "config loaded from startup.lua: 1 added (a), 0 removed, 0 changed, 3 unchanged",
    "startup.lua:4: bad (config not applied; nothing changed)",
    "Lua callback for connected failed: startup.lua:9: boom",
    "a: call t started",
    "a: call t returned a tool error in 0.500 s",
    "a: call t failed after 0.50 s: timeout",
    "subscriber 'hud' fell behind and lost 12 events",
    "a: exposure changed (applied without a reconnect)",
    "a: prompts added p (now 2)",
    "a: resource updated: file:///x",
    "a: log error db: disk full",
]


@pytest.mark.parametrize(
    ("event", "sentence"),
    list(zip(EXAMPLES, SENTENCES, strict=True)),
    ids=[ev.kind for ev in EXAMPLES],
)
def test_each_event_has_its_sentence(event: Event, sentence: str) -> None:
    assert describe(event) == sentence


def test_a_failure_says_when_the_next_try_is() -> None:
    retry = Reconnecting(name="web", attempt=3, delay=0.4)
    failed = AttemptFailed(name="web", attempt=2, error="refused\ntrace", exit_code=1)
    assert describe(failed, retry) == (
        "web: connect failed (attempt 2, exit code 1): refused; retrying in 0.40 s"
    )
    lost = Lost(name="web", reason="")
    assert describe(lost, retry) == (
        "web: disconnected at once: the session ended; retrying in 0.40 s"
    )


def test_unrecognized_events_show_their_fields() -> None:
    event = Unrecognized(name="", wire_kind="brand_new", fields=(("x", "1\n2"),))
    assert describe(event) == "-: brand_new x=1"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.25, "0.25 s"), (42.9, "42 s"), (185, "3m05s"), (7620, "2h07m")],
)
def test_duration_is_short(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_helpers() -> None:
    assert first_line("\n  first \nsecond") == "first"
    assert first_line(None) == ""
    assert list_names(("a", "b", "c"), limit=2) == "a, b, +1 more"


@pytest.mark.parametrize(
    ("by", "said"),
    [
        ("deadline", "a: call of 'add' not approved in time"),
        ("removal", "a: call of 'add' not run: the server was removed"),
        ("withdrawn", "a: call of 'add' withdrawn: its client went away"),
        ("stop", "a: call of 'add' not run: mcp-manager stopped"),
        ("cli", "a: call of 'add' denied by cli"),
    ],
)
def test_a_call_that_ends_unapproved_says_why_in_words(by: str, said: str) -> None:
    event = ApprovalDecided(name="a", tool="add", verdict="deny", by=by)
    assert describe(event) == said


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (0, "0 B"),
        (999, "999 B"),
        (4900, "4.9 kB"),
        (999_999, "1.0 MB"),
        (5 * 10**6, "5.0 MB"),
    ],
)
def test_sizes_read_as_people_say_them(count: int, text: str) -> None:
    """`mcp-manager log` said a 5 MB result as `5000000 B` (an audit)."""
    assert size_text(count) == text
