"""The connection state machine, pure: `transition(state, signal, policy)`.

`connection.py` does the waiting and the I/O and feeds signals in; this module
decides the next `ConnectionState` and the events to publish. No clocks, sleeps or
randomness here: `now` and the random draw for jitter arrive inside the signals.

States (docs/architecture.md §4): `connecting` (first try after add) → `connected` →
`reconnecting` (lost or failed, waiting for or making the next try) → `removed`
(terminal). `idle` is an on-demand connection (`start = "on_demand"`) with no
session: declared, listing its last known tools, started by the next request.
`disabled` is a declared connection with `enabled = false`: it never runs, and only
leaves that state by being re-declared or removed. `needs_login`
is an OAuth connection whose server wants the user (`LoginRequired`): no try
is scheduled (`next_retry_at` is None) until a login, a reload or `reconnect`.
`refused` is an OAuth connection that stopped asking: `LOGIN_LIMIT` logins in a
row ended in the server refusing what they got (`AuthorizationRefused`: the
token, its scope, its refresh), or the server's OAuth metadata or answer was not
for it (`AuthMismatch`); like `needs_login` it waits, but nobody is asked to log
in until the user says so (`login`, `reconnect`, a changed config). `attempt`
counts tries since the connection was last *stable* (connected for
`stable_after`), so a server that dies right after each handshake climbs the
backoff to the cap instead of being respawned every 100 ms.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .backoff import BackoffPolicy, aligned_delay
from .events import (
    AttemptFailed,
    Connected,
    Connecting,
    Event,
    Idle,
    Lost,
    NeedsLogin,
    Reconnecting,
    Refused,
    Removed,
    ToolsChanged,
)
from .text import login_command

__all__ = [
    "AUTH_MISMATCH",
    "AUTH_RETRY_DELAY",
    "RETRY_AFTER_CAP",
    "AUTHORIZATION_REFUSED",
    "AttemptBegan",
    "AttemptError",
    "ConnectionState",
    "HandshakeDone",
    "LOGIN_LIMIT",
    "LOGIN_REQUIRED",
    "Phase",
    "ProcessSpawned",
    "RefusalsCleared",
    "SessionLost",
    "Signal",
    "StopRequested",
    "ToolsListed",
    "WentIdle",
    "refused_after",
    "transition",
]

LOGIN_REQUIRED = "LoginRequired"
"""The `error_type` (`core.errors.LoginRequired`) that sends a connection to
`needs_login` instead of a retry."""

AUTHORIZATION_REFUSED = "AuthorizationRefused"
"""The `error_type` (`core.errors.AuthorizationRefused`) of a login the server
refused: `needs_login`, counted towards `LOGIN_LIMIT`."""

AUTH_MISMATCH = "AuthMismatch"
"""The `error_type` (`core.errors.AuthMismatch`) of OAuth metadata or an
authorization response that is not for this server: `refused` at once."""

LOGIN_LIMIT = 3
"""Logins in a row that may end in the server refusing what they got before
the connection stops asking (`refused`)."""

AUTH_RETRY_DELAY = 300.0
"""Seconds before trying again a server that refused our credentials (401/403):
new credentials come with a reload (which restarts the connection at once) or
`mcp-manager reconnect`; meanwhile one try per 5 minutes, never a storm."""

RETRY_AFTER_CAP = AUTH_RETRY_DELAY
"""The longest a server's `Retry-After` (a 429 or 503 at connect) holds the
next try back: longer than the backoff when it asks, never more than the
pace of a refusal (a reload or `reconnect` still tries at once)."""


class Phase(StrEnum):
    """Where a connection is in its life."""

    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    REMOVED = "removed"
    DISABLED = "disabled"
    NEEDS_LOGIN = "needs_login"
    REFUSED = "refused"
    IDLE = "idle"


@dataclass(frozen=True, slots=True)
class ConnectionState:
    """What is known about one connection; the source of `status`.

    Attributes:
        name: Connection name.
        phase: Current phase.
        attempt: Tries since the connection was last stable (0 before the first).
        tools: Tool names of the current (or last) session, sorted.
        error: Last error, one line, redacted; None once connected.
        error_type: Class name of the last error.
        since: Wall time of the last phase change.
        next_retry_at: Wall time of the next try while waiting, else None.
        pid: Current stdio server process id.
        exit_code: Last exit code of the stdio server, if it exited.
        connected_at: Wall time the current session became connected.
        outage_since: Wall time the current outage began; None while connected.
        connected_before: Some earlier session got connected (so a reconnect
            whose tools differ reports `tools_changed`).
        protocol: The protocol revision of the current (or last) session.
        refusals: Logins in a row whose token, scope or refresh the server
            refused (reset by a refresh it accepts, `login` after `refused`,
            `reconnect`).
    """

    name: str
    phase: Phase = Phase.CONNECTING
    attempt: int = 0
    tools: tuple[str, ...] = ()
    error: str | None = None
    error_type: str | None = None
    since: float = 0.0
    next_retry_at: float | None = None
    pid: int | None = None
    exit_code: int | None = None
    connected_at: float | None = None
    outage_since: float | None = None
    connected_before: bool = False
    protocol: str = ""
    refusals: int = 0


@dataclass(frozen=True, slots=True)
class AttemptBegan:
    """A try is starting now."""

    now: float


@dataclass(frozen=True, slots=True)
class ProcessSpawned:
    """The stdio server process of the current try started."""

    now: float
    pid: int


@dataclass(frozen=True, slots=True)
class HandshakeDone:
    """Initialize and the full tool listing succeeded."""

    now: float
    tools: tuple[str, ...]
    server_name: str = ""
    server_version: str = ""
    protocol: str = ""
    elapsed: float = 0.0


@dataclass(frozen=True, slots=True)
class AttemptError:
    """The current try failed. `rand` in [0, 1) draws the jitter;
    `retry_after`: seconds the server asked us to wait (HTTP `Retry-After`)."""

    now: float
    error: str
    error_type: str
    rand: float
    exit_code: int | None = None
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class SessionLost:
    """An established session died. `rand` in [0, 1) draws the jitter."""

    now: float
    reason: str
    rand: float
    exit_code: int | None = None
    error_type: str = "Disconnected"


@dataclass(frozen=True, slots=True)
class ToolsListed:
    """The tool list was fetched again while connected, because the server
    said it changed (`notifications/tools/list_changed`)."""

    now: float
    tools: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class WentIdle:
    """An on-demand connection is (or was just) stopped until a request."""

    now: float
    reason: str


@dataclass(frozen=True, slots=True)
class RefusalsCleared:
    """Count no earlier refused login: the user asked for another try
    (`login` of a `refused` connection, `reconnect`), or the authorization
    server refreshed a token."""

    now: float


@dataclass(frozen=True, slots=True)
class StopRequested:
    """The connection is being removed."""

    now: float


Signal = (
    AttemptBegan
    | ProcessSpawned
    | HandshakeDone
    | AttemptError
    | SessionLost
    | ToolsListed
    | WentIdle
    | RefusalsCleared
    | StopRequested
)


def transition(
    state: ConnectionState,
    signal: Signal,
    policy: BackoffPolicy,
    stable_after: float,
) -> tuple[ConnectionState, list[Event]]:
    """Apply one signal: its handler (`_HANDLERS`, one per kind of signal).

    Args:
        state: The current state.
        signal: What just happened.
        policy: The connection's backoff policy.
        stable_after: Seconds connected before `attempt` resets.

    Returns:
        The next state and the events to publish, in order. A removed connection
        ignores every further signal.
    """
    if state.phase is Phase.REMOVED:
        return state, []
    handler = _HANDLERS.get(type(signal))
    if handler is None:
        raise TypeError(f"unknown signal {signal!r}")
    return handler(state, signal, _Rules(policy, stable_after))


@dataclass(frozen=True, slots=True)
class _Rules:
    """What a handler may need besides the state and the signal."""

    policy: BackoffPolicy
    stable_after: float


Step = tuple[ConnectionState, list[Event]]
Handler = Callable[[ConnectionState, Any, _Rules], Step]
_HANDLERS: dict[type, Handler] = {}


def _on(kind: type) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        _HANDLERS[kind] = handler
        return handler

    return register


@_on(AttemptBegan)
def _attempt_began(state: ConnectionState, signal: AttemptBegan, rules: _Rules) -> Step:
    attempt = state.attempt + 1
    nxt = _evolve(state, attempt=attempt, next_retry_at=None, pid=None)
    if state.phase is Phase.IDLE:  # started by a request
        nxt = _evolve(nxt, phase=Phase.CONNECTING, since=signal.now)
    return nxt, [Connecting(name=state.name, attempt=attempt)]


@_on(ProcessSpawned)
def _process_spawned(
    state: ConnectionState, signal: ProcessSpawned, rules: _Rules
) -> Step:
    return _evolve(state, pid=signal.pid, exit_code=None), []


@_on(HandshakeDone)
def _handshake_done(
    state: ConnectionState, signal: HandshakeDone, rules: _Rules
) -> Step:
    now, tools = signal.now, tuple(sorted(signal.tools))
    nxt = _evolve(
        state,
        phase=Phase.CONNECTED,
        tools=tools,
        error=None,
        error_type=None,
        since=now,
        next_retry_at=None,
        connected_at=now,
        outage_since=None,
        protocol=signal.protocol,
        connected_before=True,
    )
    events: list[Event] = [
        Connected(
            name=state.name,
            attempt=state.attempt,
            tools=len(tools),
            server_name=signal.server_name,
            server_version=signal.server_version,
            protocol=signal.protocol,
            elapsed=signal.elapsed,
            pid=state.pid,
            stable_after=rules.stable_after,
        )
    ]
    if state.connected_before and set(tools) != set(state.tools):
        events.append(_tools_changed(state.name, state.tools, tools))
    return nxt, events


@_on(AttemptError)
def _attempt_error(state: ConnectionState, signal: AttemptError, rules: _Rules) -> Step:
    now = signal.now
    # A server that wants the user waits for a login, not a retry.
    waits = _waiting(state, signal.error, signal.error_type)
    wait = aligned_delay(rules.policy, max(state.attempt, 1), signal.rand, now)
    if signal.error_type == "AuthRefused":
        wait = max(wait, AUTH_RETRY_DELAY)  # a refusal is not an outage
    if signal.retry_after is not None:  # the server said when: not before
        wait = max(wait, min(signal.retry_after, RETRY_AFTER_CAP))
    phase = Phase.RECONNECTING if waits is None else waits[0].phase
    nxt = _evolve(
        state,
        phase=phase,
        error=signal.error if waits is None else waits[0].error,
        error_type=signal.error_type,
        since=state.since if state.phase is phase else now,
        next_retry_at=None if waits else now + wait,
        exit_code=signal.exit_code,
        pid=None,
        # `is not None`: 0.0 is a valid time (e.g. a test clock's start).
        outage_since=now if state.outage_since is None else state.outage_since,
        refusals=state.refusals if waits is None else waits[0].refusals,
    )
    return nxt, [
        AttemptFailed(
            name=state.name,
            attempt=state.attempt,
            error=signal.error,
            error_type=signal.error_type,
            exit_code=signal.exit_code,
        ),
        Reconnecting(name=state.name, attempt=state.attempt + 1, delay=wait)
        if waits is None
        else waits[1],
    ]


@_on(SessionLost)
def _session_lost(state: ConnectionState, signal: SessionLost, rules: _Rules) -> Step:
    now = signal.now
    waits = _waiting(state, signal.reason, signal.error_type)
    connected_at = state.connected_at
    uptime = 0.0 if connected_at is None else now - connected_at
    attempt = 0 if uptime >= rules.stable_after else state.attempt
    wait = aligned_delay(rules.policy, max(attempt, 1), signal.rand, now)
    nxt = _evolve(
        state,
        phase=Phase.RECONNECTING if waits is None else waits[0].phase,
        attempt=attempt,
        error=signal.reason if waits is None else waits[0].error,
        error_type=signal.error_type,
        since=now,
        next_retry_at=None if waits else now + wait,
        exit_code=signal.exit_code,
        pid=None,
        connected_at=None,
        outage_since=now,
        refusals=state.refusals if waits is None else waits[0].refusals,
    )
    return nxt, [
        Lost(
            name=state.name,
            reason=signal.reason,
            exit_code=signal.exit_code,
            uptime=uptime,
        ),
        Reconnecting(name=state.name, attempt=attempt + 1, delay=wait)
        if waits is None
        else waits[1],
    ]


@_on(RefusalsCleared)
def _refusals_cleared(
    state: ConnectionState, signal: RefusalsCleared, rules: _Rules
) -> Step:
    return (state if not state.refusals else _evolve(state, refusals=0)), []


@_on(ToolsListed)
def _tools_listed(state: ConnectionState, signal: ToolsListed, rules: _Rules) -> Step:
    # Listed because the server said they changed: told even when the names
    # are the same (a description or a schema changed, or a change was
    # undone), as the server told its own clients.
    tools = tuple(sorted(signal.tools))
    changed = _tools_changed(state.name, state.tools, tools)
    return (state if tools == state.tools else _evolve(state, tools=tools)), [changed]


@_on(WentIdle)
def _went_idle(state: ConnectionState, signal: WentIdle, rules: _Rules) -> Step:
    now = signal.now
    uptime = 0.0 if state.connected_at is None else now - state.connected_at
    nxt = _evolve(
        state,
        phase=Phase.IDLE,
        attempt=0,
        error=None,
        error_type=None,
        since=now,
        next_retry_at=None,
        pid=None,
        connected_at=None,
        outage_since=None,
    )
    return nxt, [Idle(name=state.name, reason=signal.reason, uptime=uptime)]


@_on(StopRequested)
def _stop_requested(
    state: ConnectionState, signal: StopRequested, rules: _Rules
) -> Step:
    nxt = _evolve(
        state, phase=Phase.REMOVED, since=signal.now, next_retry_at=None, pid=None
    )
    return nxt, [Removed(name=state.name)]


def refused_after(reason: str, logins: int) -> str:
    """`reason` ("what: detail") as the error of a connection that stopped
    asking after `logins` refused logins ("what after 3 logins: detail")."""
    what, colon, detail = reason.partition(": ")
    return f"{what} after {logins} logins{colon}{detail}"


@dataclass(frozen=True, slots=True)
class _Wait:
    phase: Phase
    error: str
    refusals: int


def _waiting(
    state: ConnectionState, error: str, error_type: str
) -> tuple[_Wait, Event] | None:
    """Where a try or session that ended with `error_type` waits for the user
    (`needs_login` or `refused`, and the event saying so), or None: it is
    retried."""
    name = state.name
    refusals = state.refusals
    if error_type == AUTHORIZATION_REFUSED:
        refusals += 1
        if refusals >= LOGIN_LIMIT:
            error = refused_after(error, refusals)
        else:
            reason = f"{error} ({refusals} of {LOGIN_LIMIT} logins in a row refused)"
            wait = _Wait(Phase.NEEDS_LOGIN, reason, refusals)
            return wait, NeedsLogin(
                name=name, reason=reason, command=login_command(name)
            )
    elif error_type == LOGIN_REQUIRED:
        wait = _Wait(Phase.NEEDS_LOGIN, error, refusals)
        return wait, NeedsLogin(name=name, reason=error, command=login_command(name))
    elif error_type != AUTH_MISMATCH:
        return None
    return _Wait(Phase.REFUSED, error, refusals), Refused(
        name=name, reason=error, command=login_command(name)
    )


def _tools_changed(
    name: str, old: tuple[str, ...], new: tuple[str, ...]
) -> ToolsChanged:
    before, after = set(old), set(new)
    return ToolsChanged(
        name=name,
        added=tuple(sorted(after - before)),
        removed=tuple(sorted(before - after)),
        tools=len(new),
    )


_STATE_FIELDS = tuple(f.name for f in dataclasses.fields(ConnectionState))
_new_state = object.__new__
_set_field = object.__setattr__


def _evolve(state: ConnectionState, **changes: object) -> ConnectionState:
    """`dataclasses.replace` for the state, without its per-call introspection.

    It runs several times per connection attempt; with hundreds of dead
    upstreams retrying, the generic version was a visible share of idle CPU.
    """
    new = _new_state(ConnectionState)
    for name in _STATE_FIELDS:
        _set_field(
            new, name, changes[name] if name in changes else getattr(state, name)
        )
    return new
