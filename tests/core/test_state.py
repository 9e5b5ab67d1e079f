"""Tests for manager.core.state: the pure connection state machine."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from manager.core.backoff import BackoffPolicy, aligned_delay, nominal_delay
from manager.core.events import (
    AttemptFailed,
    Connected,
    Connecting,
    Event,
    Lost,
    Reconnecting,
    Removed,
    ToolsChanged,
)
from manager.core.state import (
    RETRY_AFTER_CAP,
    AttemptBegan,
    AttemptError,
    ConnectionState,
    HandshakeDone,
    Phase,
    ProcessSpawned,
    SessionLost,
    Signal,
    StopRequested,
    ToolsListed,
    transition,
)

POLICY = BackoffPolicy()
STABLE_AFTER = 10.0
NAME = "srv"

FRESH = ConnectionState(name=NAME)
CONNECTING = dataclasses.replace(FRESH, attempt=1, pid=42)
CONNECTED = dataclasses.replace(
    FRESH,
    phase=Phase.CONNECTED,
    attempt=3,
    tools=("a", "b"),
    since=100.0,
    connected_at=100.0,
    pid=42,
)
RECONNECTING = dataclasses.replace(
    FRESH,
    phase=Phase.RECONNECTING,
    attempt=3,
    error="refused",
    error_type="ConnectFailed",
    since=5.0,
    next_retry_at=5.4,
    outage_since=5.0,
)
REMOVED = dataclasses.replace(FRESH, phase=Phase.REMOVED, since=1.0)


def step(
    state: ConnectionState, signal: Signal, stable_after: float = STABLE_AFTER
) -> tuple[ConnectionState, list[Event]]:
    return transition(state, signal, POLICY, stable_after)


def run(
    signals: Iterable[Signal],
    state: ConnectionState = FRESH,
    policy: BackoffPolicy = POLICY,
) -> tuple[ConnectionState, list[Event]]:
    events: list[Event] = []
    for signal in signals:
        state, new = transition(state, signal, policy, STABLE_AFTER)
        events.extend(new)
    return state, events


def assert_close(actual: object, expected: object) -> None:
    """Dataclass equality, with float fields compared approximately."""
    assert type(actual) is type(expected)
    for f in dataclasses.fields(expected):  # type: ignore[arg-type]
        want = getattr(expected, f.name)
        got = getattr(actual, f.name)
        if isinstance(want, float):
            assert got == pytest.approx(want), f.name
        else:
            assert got == want, f.name


def reconnect_delays(events: Iterable[Event]) -> list[float]:
    return [ev.delay for ev in events if isinstance(ev, Reconnecting)]


# ------------------------------------------------------------------ one step


@pytest.mark.parametrize(
    ("state", "signal", "changes", "events"),
    [
        pytest.param(
            FRESH,
            AttemptBegan(now=1.0),
            {"attempt": 1},
            [Connecting(name=NAME, attempt=1)],
            id="first-attempt-begins-connecting",
        ),
        pytest.param(
            RECONNECTING,
            AttemptBegan(now=6.0),
            {"attempt": 4, "next_retry_at": None},
            [Connecting(name=NAME, attempt=4)],
            id="retry-begins-and-clears-next-retry",
        ),
        pytest.param(
            dataclasses.replace(FRESH, attempt=1, exit_code=3),
            ProcessSpawned(now=1.0, pid=777),
            {"pid": 777, "exit_code": None},
            [],
            id="process-spawned-records-pid",
        ),
        pytest.param(
            CONNECTING,
            HandshakeDone(
                now=2.0,
                tools=("zeta", "alpha"),
                server_name="demo",
                server_version="1.2",
                protocol="2025-06-18",
                elapsed=0.25,
            ),
            {
                "phase": Phase.CONNECTED,
                "tools": ("alpha", "zeta"),
                "since": 2.0,
                "connected_at": 2.0,
                "connected_before": True,
                "protocol": "2025-06-18",  # kept for status and the HUD
            },
            [
                Connected(
                    name=NAME,
                    attempt=1,
                    tools=2,
                    server_name="demo",
                    server_version="1.2",
                    protocol="2025-06-18",
                    elapsed=0.25,
                    pid=42,
                )
            ],
            id="handshake-connects-with-sorted-tools",
        ),
        pytest.param(
            dataclasses.replace(RECONNECTING, attempt=4),
            HandshakeDone(now=9.0, tools=()),
            {
                "phase": Phase.CONNECTED,
                "attempt": 4,
                "error": None,
                "error_type": None,
                "since": 9.0,
                "next_retry_at": None,
                "connected_at": 9.0,
                "outage_since": None,
                "connected_before": True,
            },
            [Connected(name=NAME, attempt=4, tools=0)],
            id="handshake-ends-the-outage-but-keeps-attempt",
        ),
        pytest.param(
            CONNECTING,
            AttemptError(
                now=5.0,
                error="refused",
                error_type="ConnectFailed",
                rand=0.0,
                exit_code=1,
            ),
            {
                "phase": Phase.RECONNECTING,
                "error": "refused",
                "error_type": "ConnectFailed",
                "since": 5.0,
                "next_retry_at": 5.1,
                "exit_code": 1,
                "pid": None,
                "outage_since": 5.0,
            },
            [
                AttemptFailed(
                    name=NAME,
                    attempt=1,
                    error="refused",
                    error_type="ConnectFailed",
                    exit_code=1,
                ),
                Reconnecting(name=NAME, attempt=2, delay=0.1),
            ],
            id="first-failure-waits-initial",
        ),
        pytest.param(
            RECONNECTING,
            AttemptError(
                now=9.0, error="timeout", error_type="ConnectTimeout", rand=0.0
            ),
            {
                "error": "timeout",
                "error_type": "ConnectTimeout",
                "next_retry_at": 9.4,
            },
            [
                AttemptFailed(
                    name=NAME, attempt=3, error="timeout", error_type="ConnectTimeout"
                ),
                Reconnecting(name=NAME, attempt=4, delay=0.4),
            ],
            id="later-failure-keeps-since-and-outage-start",
        ),
        pytest.param(
            CONNECTING,
            # at 0.02 no 50 ms grid instant lies in [0.09, 0.1] s: plain jitter
            AttemptError(now=0.02, error="x", error_type="ConnectFailed", rand=0.5),
            {
                "phase": Phase.RECONNECTING,
                "error": "x",
                "error_type": "ConnectFailed",
                "since": 0.02,
                "next_retry_at": 0.115,
                "pid": None,
                "outage_since": 0.02,
            },
            [
                AttemptFailed(
                    name=NAME, attempt=1, error="x", error_type="ConnectFailed"
                ),
                Reconnecting(name=NAME, attempt=2, delay=0.095),
            ],
            id="failure-delay-is-jittered-by-rand",
        ),
        pytest.param(
            CONNECTED,
            SessionLost(now=101.0, reason="stdout EOF", rand=0.0, exit_code=0),
            {
                "phase": Phase.RECONNECTING,
                "error": "stdout EOF",
                "error_type": "Disconnected",
                "since": 101.0,
                "next_retry_at": 101.4,
                "exit_code": 0,
                "pid": None,
                "connected_at": None,
                "outage_since": 101.0,
            },
            [
                Lost(name=NAME, reason="stdout EOF", exit_code=0, uptime=1.0),
                Reconnecting(name=NAME, attempt=4, delay=0.4),
            ],
            id="early-loss-keeps-the-attempt-counter",
        ),
        pytest.param(
            CONNECTED,
            SessionLost(now=110.0, reason="ping timeout", rand=0.0, error_type="Ping"),
            {
                "phase": Phase.RECONNECTING,
                "attempt": 0,
                "error": "ping timeout",
                "error_type": "Ping",
                "since": 110.0,
                "next_retry_at": 110.1,
                "pid": None,
                "connected_at": None,
                "outage_since": 110.0,
            },
            [
                Lost(name=NAME, reason="ping timeout", uptime=10.0),
                Reconnecting(name=NAME, attempt=1, delay=0.1),
            ],
            id="loss-after-stable-after-resets-the-counter",
        ),
        pytest.param(
            dataclasses.replace(CONNECTED, connected_at=0.0, since=0.0),
            SessionLost(now=60.0, reason="EOF", rand=0.0),
            {
                "phase": Phase.RECONNECTING,
                "attempt": 0,
                "error": "EOF",
                "error_type": "Disconnected",
                "since": 60.0,
                "next_retry_at": 60.1,
                "pid": None,
                "connected_at": None,
                "outage_since": 60.0,
            },
            [
                Lost(name=NAME, reason="EOF", uptime=60.0),
                Reconnecting(name=NAME, attempt=1, delay=0.1),
            ],
            id="connected-at-time-zero-still-counts-uptime",
        ),
        pytest.param(
            CONNECTED,
            ToolsListed(now=120.0, tools=("c", "a")),
            {"tools": ("a", "c")},
            [ToolsChanged(name=NAME, added=("c",), removed=("b",), tools=2)],
            id="tools-changed-reports-added-and-removed",
        ),
        pytest.param(
            CONNECTED,
            ToolsListed(now=120.0, tools=("b", "a", "d")),
            {"tools": ("a", "b", "d")},
            [ToolsChanged(name=NAME, added=("d",), tools=3)],
            id="tools-added-only",
        ),
        pytest.param(
            CONNECTED,
            ToolsListed(now=120.0, tools=()),
            {"tools": ()},
            [ToolsChanged(name=NAME, removed=("a", "b"), tools=0)],
            id="tools-all-removed",
        ),
        pytest.param(
            CONNECTED,
            ToolsListed(now=120.0, tools=("a", "b")),
            {},
            [ToolsChanged(name=NAME, tools=2)],
            id="same-tools-are-told-as-the-server-said",
        ),
        pytest.param(
            CONNECTED,
            ToolsListed(now=120.0, tools=("b", "a")),
            {},
            [ToolsChanged(name=NAME, tools=2)],
            id="same-tools-in-another-order-are-told-too",
        ),
        *[
            pytest.param(
                state,
                StopRequested(now=200.0),
                {
                    "phase": Phase.REMOVED,
                    "since": 200.0,
                    "next_retry_at": None,
                    "pid": None,
                },
                [Removed(name=NAME)],
                id=f"stop-from-{label}",
            )
            for label, state in [
                ("fresh", FRESH),
                ("connecting", CONNECTING),
                ("connected", CONNECTED),
                ("reconnecting", RECONNECTING),
            ]
        ],
    ],
)
def test_transition_gives_the_expected_state_and_events(
    state: ConnectionState,
    signal: Signal,
    changes: dict[str, object],
    events: list[Event],
) -> None:
    new_state, new_events = step(state, signal)
    assert_close(new_state, dataclasses.replace(state, **changes))  # type: ignore[arg-type]
    assert [type(ev) for ev in new_events] == [type(ev) for ev in events]
    for actual, expected in zip(new_events, events, strict=True):
        assert_close(actual, expected)


@pytest.mark.parametrize(
    "signal",
    [
        AttemptBegan(now=2.0),
        ProcessSpawned(now=2.0, pid=1),
        HandshakeDone(now=2.0, tools=("x",)),
        AttemptError(now=2.0, error="e", error_type="ConnectFailed", rand=0.0),
        SessionLost(now=2.0, reason="r", rand=0.0),
        ToolsListed(now=2.0, tools=("x",)),
        StopRequested(now=2.0),
    ],
)
def test_a_removed_connection_ignores_every_later_signal(signal: Signal) -> None:
    assert step(REMOVED, signal) == (REMOVED, [])


def test_a_fresh_state_starts_connecting_with_no_attempts() -> None:
    assert FRESH.phase is Phase.CONNECTING
    assert FRESH.attempt == 0
    assert FRESH.next_retry_at is None
    assert FRESH.outage_since is None


# --------------------------------------------------------------- sequences


def fail(now: float, rand: float = 0.0) -> AttemptError:
    return AttemptError(now=now, error="refused", error_type="ConnectFailed", rand=rand)


def test_repeated_failures_climb_the_backoff_to_the_cap_and_stay_there() -> None:
    signals: list[Signal] = []
    for i in range(9):
        signals += [AttemptBegan(now=float(i)), fail(float(i))]
    state, events = run(signals)
    assert reconnect_delays(events) == pytest.approx(
        [0.1, 0.2, 0.4, 0.8, 1.6, 3.0, 3.0, 3.0, 3.0]
    )
    assert [ev.attempt for ev in events if isinstance(ev, Connecting)] == list(
        range(1, 10)
    )
    assert state.attempt == 9


def test_crash_loop_climbs_the_delay_to_the_cap_instead_of_respawning_fast() -> None:
    """A server that dies one second after every handshake is not stable."""
    signals: list[Signal] = []
    now = 0.0
    for _ in range(8):
        signals += [
            AttemptBegan(now=now),
            HandshakeDone(now=now + 0.05, tools=("t",)),
            SessionLost(now=now + 1.0, reason="exited", rand=0.0, exit_code=1),
        ]
        now += 5.0
    state, events = run(signals)
    assert reconnect_delays(events) == pytest.approx(
        [0.1, 0.2, 0.4, 0.8, 1.6, 3.0, 3.0, 3.0]
    )
    assert state.attempt == 8


def test_a_session_that_stayed_up_for_stable_after_starts_the_backoff_over() -> None:
    signals: list[Signal] = []
    for i in range(6):
        signals += [AttemptBegan(now=float(i)), fail(float(i))]
    signals += [
        AttemptBegan(now=10.0),
        HandshakeDone(now=10.0, tools=()),
        SessionLost(now=10.0 + STABLE_AFTER, reason="EOF", rand=0.0),
    ]
    state, events = run(signals)
    assert reconnect_delays(events)[-2:] == pytest.approx([3.0, 0.1])
    assert state.attempt == 0
    state, events = run([AttemptBegan(now=30.0), fail(30.0)], state)
    assert events[0] == Connecting(name=NAME, attempt=1)
    assert reconnect_delays(events) == pytest.approx([0.1])


def test_outage_since_marks_the_first_failure_until_connected_again() -> None:
    state, _ = run([AttemptBegan(now=0.0), fail(0.0)])
    assert state.outage_since == 0.0
    state, _ = run([AttemptBegan(now=1.0), fail(1.5), AttemptBegan(now=3.0)], state)
    assert state.outage_since == 0.0
    assert state.since == 0.0
    state, _ = run([HandshakeDone(now=4.0, tools=())], state)
    assert state.outage_since is None
    state, _ = run([SessionLost(now=7.0, reason="EOF", rand=0.0)], state)
    assert state.outage_since == 7.0
    assert state.since == 7.0


def test_next_retry_at_is_set_while_waiting_and_cleared_when_trying() -> None:
    state, _ = run([AttemptBegan(now=10.0), fail(10.0, rand=0.0)])
    assert state.next_retry_at == pytest.approx(10.1)
    state, _ = run([AttemptBegan(now=10.1)], state)
    assert state.next_retry_at is None
    state, _ = run([fail(11.0)], state)
    assert state.next_retry_at == pytest.approx(11.2)
    state, _ = run([StopRequested(now=11.1)], state)
    assert state.next_retry_at is None


def test_since_changes_only_when_the_phase_changes() -> None:
    state, _ = run([AttemptBegan(now=1.0)], dataclasses.replace(FRESH, since=0.5))
    assert state.since == 0.5
    state, _ = run([fail(2.0)], state)
    assert state.since == 2.0
    state, _ = run([AttemptBegan(now=3.0), fail(4.0)], state)
    assert state.since == 2.0
    state, _ = run([AttemptBegan(now=5.0), HandshakeDone(now=6.0, tools=())], state)
    assert state.since == 6.0
    state, _ = run([ToolsListed(now=7.0, tools=("x",))], state)
    assert state.since == 6.0


def test_stdio_pid_and_exit_code_follow_the_process() -> None:
    state, _ = run([AttemptBegan(now=0.0), ProcessSpawned(now=0.0, pid=10)])
    state, events = run([HandshakeDone(now=0.1, tools=())], state)
    assert state.pid == 10
    assert isinstance(events[0], Connected) and events[0].pid == 10
    state, _ = run(
        [SessionLost(now=0.5, reason="exit", rand=0.0, exit_code=137)], state
    )
    assert (state.pid, state.exit_code) == (None, 137)
    state, _ = run([AttemptBegan(now=1.0), ProcessSpawned(now=1.0, pid=11)], state)
    assert (state.pid, state.exit_code) == (11, None)


def test_the_last_sessions_tools_are_kept_while_reconnecting() -> None:
    state, _ = run([AttemptBegan(now=0.0), HandshakeDone(now=0.0, tools=("a", "b"))])
    state, _ = run([SessionLost(now=1.0, reason="EOF", rand=0.0)], state)
    assert state.tools == ("a", "b")


# ---------------------------------------------------------------- property


@st.composite
def signal_sequences(draw: st.DrawFn) -> list[Signal]:
    tool_names = st.lists(st.sampled_from("abcdef"), unique=True, max_size=4)
    rands = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)
    now = draw(st.floats(min_value=0.0, max_value=1e6))
    signals: list[Signal] = []
    for _ in range(draw(st.integers(min_value=0, max_value=40))):
        now += draw(st.sampled_from([0.0, 0.01, 0.5, 3.0, 9.99, 10.0, 60.0]))
        kind = draw(st.integers(min_value=0, max_value=20))
        signal: Signal
        if kind < 6:
            signal = AttemptBegan(now=now)
        elif kind < 7:
            signal = ProcessSpawned(now=now, pid=draw(st.integers(1, 99999)))
        elif kind < 10:
            signal = HandshakeDone(now=now, tools=tuple(draw(tool_names)))
        elif kind < 15:
            signal = AttemptError(
                now=now, error="e", error_type="ConnectFailed", rand=draw(rands)
            )
        elif kind < 18:
            signal = SessionLost(now=now, reason="lost", rand=draw(rands))
        elif kind < 20:
            signal = ToolsListed(now=now, tools=tuple(draw(tool_names)))
        else:
            signal = StopRequested(now=now)
        signals.append(signal)
    return signals


@settings(max_examples=200, deadline=None)
@given(
    signals=signal_sequences(),
    policy=st.builds(
        BackoffPolicy,
        initial=st.sampled_from([0.01, 0.1, 1.0]),
        cap=st.sampled_from([1.0, 3.0, 30.0]),
        jitter=st.sampled_from([0.0, 0.1, 0.5]),
    ),
)
def test_random_signal_sequences_keep_the_state_machine_invariants(
    signals: list[Signal], policy: BackoffPolicy
) -> None:
    state = FRESH
    for signal in signals:
        before = state
        state, events = transition(state, signal, policy, STABLE_AFTER)
        assert isinstance(state.phase, Phase)
        assert state.attempt >= 0
        assert state.name == NAME
        assert list(state.tools) == sorted(state.tools)
        assert all(ev.name == NAME for ev in events)
        if before.phase is Phase.REMOVED:
            assert (state, events) == (before, [])
            continue
        if isinstance(signal, AttemptBegan):
            assert state.attempt == before.attempt + 1
        elif not isinstance(signal, SessionLost):
            assert state.attempt == before.attempt
        for ev in events:
            if isinstance(ev, Reconnecting):
                tried = max(ev.attempt - 1, 1)
                nominal = nominal_delay(policy, tried)
                assert (1 - policy.jitter) * nominal <= ev.delay <= nominal
                assert nominal <= policy.cap
                assert ev.attempt == state.attempt + 1
                assert state.phase is Phase.RECONNECTING
                assert state.next_retry_at == signal.now + ev.delay
                assert isinstance(signal, AttemptError | SessionLost)
                assert ev.delay == aligned_delay(policy, tried, signal.rand, signal.now)
            if isinstance(ev, ToolsChanged):
                # Nothing added or removed: only a relist the server asked for.
                assert ev.added or ev.removed or isinstance(signal, ToolsListed)
        if state.phase is Phase.CONNECTED:
            assert state.outage_since is None
            assert state.next_retry_at is None
        if state.phase is Phase.RECONNECTING and state.next_retry_at is not None:
            assert state.outage_since is not None


def test_a_reconnect_with_different_tools_reports_tools_changed() -> None:
    state = ConnectionState(name=NAME)
    policy = BackoffPolicy()
    state, _ = transition(state, AttemptBegan(now=0.0), policy, 10.0)
    state, events = transition(
        state, HandshakeDone(now=0.0, tools=("a", "b")), policy, 10.0
    )
    assert [e.kind for e in events] == ["connected"]  # the first session: no change
    state, _ = transition(
        state, SessionLost(now=1.0, reason="x", rand=0.0), policy, 10.0
    )
    state, _ = transition(state, AttemptBegan(now=2.0), policy, 10.0)
    state, events = transition(
        state, HandshakeDone(now=2.0, tools=("b", "c")), policy, 10.0
    )
    assert [e.kind for e in events] == ["connected", "tools_changed"]
    changed = events[1]
    assert isinstance(changed, ToolsChanged)
    assert (changed.added, changed.removed, changed.tools) == (("c",), ("a",), 2)


def test_a_server_that_wants_a_login_waits_for_it_instead_of_a_retry() -> None:
    from manager.core.events import AttemptFailed, Lost, NeedsLogin

    s0 = ConnectionState(name=NAME)
    s1, _ = step(s0, AttemptBegan(now=1.0))
    s2, events = step(
        s1,
        AttemptError(now=2.0, error="no token", error_type="LoginRequired", rand=0.5),
    )
    assert s2.phase is Phase.NEEDS_LOGIN and s2.next_retry_at is None
    assert [type(e) for e in events] == [AttemptFailed, NeedsLogin]
    assert isinstance(events[1], NeedsLogin)
    assert events[1].command == f"mcp-manager login {NAME}"
    # Connected later; a refused refresh ends the session into needs_login too.
    s3, _ = step(s2, AttemptBegan(now=3.0))
    s4, _ = step(s3, HandshakeDone(now=4.0, tools=("t",)))
    s5, events = step(
        s4,
        SessionLost(now=9.0, reason="refused", rand=0.5, error_type="LoginRequired"),
    )
    assert s5.phase is Phase.NEEDS_LOGIN and s5.next_retry_at is None
    assert [type(e) for e in events] == [Lost, NeedsLogin]


def _refused_login(
    state: ConnectionState, now: float
) -> tuple[ConnectionState, list[Event]]:
    """A login's try that ends with the server refusing what the login got."""
    state, _ = step(state, AttemptBegan(now=now))
    return step(
        state,
        AttemptError(
            now=now,
            error=(
                "the server refused the scope it asked for: HTTP 403 insufficient_scope"
            ),
            error_type="AuthorizationRefused",
            rand=0.5,
        ),
    )


def test_three_refused_logins_in_a_row_stop_the_asking() -> None:
    from manager.core.events import NeedsLogin, Refused

    state = dataclasses.replace(FRESH, phase=Phase.NEEDS_LOGIN)
    for n in (1, 2):
        state, events = _refused_login(state, float(n))
        assert state.phase is Phase.NEEDS_LOGIN and state.refusals == n
        assert isinstance(events[-1], NeedsLogin)
        assert f"({n} of 3 logins in a row refused)" in events[-1].reason
    state, events = _refused_login(state, 3.0)
    assert state.phase is Phase.REFUSED and state.next_retry_at is None
    assert state.error == (
        "the server refused the scope it asked for after 3 logins: "
        "HTTP 403 insufficient_scope"
    )
    assert [e.kind for e in events] == ["connect_failed", "refused"]
    assert isinstance(events[-1], Refused) and events[-1].reason == state.error


def test_a_plain_login_requirement_does_not_count_and_a_retry_allowed_resets() -> None:
    from manager.core.state import RefusalsCleared

    state = dataclasses.replace(FRESH, phase=Phase.NEEDS_LOGIN, refusals=2)
    state, _ = step(state, AttemptBegan(now=1.0))
    state, _ = step(
        state,
        AttemptError(now=1.0, error="no token", error_type="LoginRequired", rand=0.5),
    )
    assert (state.phase, state.refusals) == (Phase.NEEDS_LOGIN, 2)
    state, events = step(state, RefusalsCleared(now=2.0))
    assert state.refusals == 0 and events == []
    state, _ = _refused_login(state, 3.0)
    assert (state.phase, state.refusals) == (Phase.NEEDS_LOGIN, 1)


def test_a_session_lost_to_a_refusal_counts_too_and_connecting_does_not_reset() -> None:
    state = dataclasses.replace(CONNECTED, refusals=2)
    state, events = step(
        state,
        SessionLost(
            now=200.0,
            reason="the authorization server refused to refresh the token: HTTP 400",
            rand=0.5,
            error_type="AuthorizationRefused",
        ),
    )
    assert state.phase is Phase.REFUSED and state.refusals == 3
    assert state.error is not None and state.error.startswith(
        "the authorization server refused to refresh the token after 3 logins: "
    )
    assert [e.kind for e in events] == ["disconnected", "refused"]


def test_oauth_answers_for_another_server_are_refused_at_once() -> None:
    state, _ = step(FRESH, AttemptBegan(now=1.0))
    state, events = step(
        state,
        AttemptError(
            now=1.0,
            error="the server's protected resource metadata is for another resource",
            error_type="AuthMismatch",
            rand=0.5,
        ),
    )
    assert state.phase is Phase.REFUSED and state.refusals == 0
    assert state.next_retry_at is None
    assert [e.kind for e in events] == ["connect_failed", "refused"]


@pytest.mark.parametrize(
    ("reason", "shown"),
    [
        ("what: detail: more", "what after 3 logins: detail: more"),
        ("no detail", "no detail after 3 logins"),
    ],
)
def test_the_refused_message_names_the_logins(reason: str, shown: str) -> None:
    from manager.core.state import refused_after

    assert refused_after(reason, 3) == shown


def test_every_signal_has_its_handler_and_an_unknown_one_is_refused() -> None:
    import typing

    from manager.core import state as state_module

    kinds = set(typing.get_args(state_module.Signal))
    assert kinds == set(state_module._HANDLERS)
    with pytest.raises(TypeError, match="unknown signal"):
        state_module.transition(
            state_module.ConnectionState(name="x"),
            object(),  # type: ignore[arg-type]
            BackoffPolicy(),
            60.0,
        )


@pytest.mark.parametrize(
    ("asked", "waits"),
    [(None, 0.1), (0.0, 0.1), (40.0, 40.0), (1e6, RETRY_AFTER_CAP)],
)
def test_a_server_s_retry_after_holds_the_next_try_back_up_to_the_cap(
    asked: float | None, waits: float
) -> None:
    """A 429 or 503 with Retry-After: the next try waits that long (the
    backoff when it asks less), never longer than `RETRY_AFTER_CAP`."""
    state, _ = step(FRESH, AttemptBegan(now=0.0))
    state, events = step(
        state,
        AttemptError(
            now=0.0,
            error="the server answered HTTP 429 Too Many Requests",
            error_type="ConnectFailed",
            rand=0.999,  # no jitter below the nominal 0.1 s
            retry_after=asked,
        ),
    )
    assert state.next_retry_at == pytest.approx(waits, rel=0.1)
    assert events[-1].delay == pytest.approx(waits, rel=0.1)  # type: ignore[attr-defined]
