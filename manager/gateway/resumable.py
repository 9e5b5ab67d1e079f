"""The endpoint's event store: SSE streams a client can resume (SEP-1699).

The SDK's streamable HTTP transport makes a request's SSE stream resumable
when it has an `EventStore`: it opens each POST stream with a priming event
(an id, empty data, and a `retry` field), stores every event it sends, and
answers a `GET` with `Last-Event-ID` by replaying what came after that id and
then carrying on with the stream's live events. A client whose stream broke
(a proxy cut it, the laptop slept, the server closed it to be polled) gets
the rest of its answer instead of losing the request: as straight at a
server that keeps events, which the conformance suite checks
(`server-sse-polling`).

Events are kept only as long as resuming can need them: at most `MAX_EVENTS`,
at most `MAX_BYTES` of JSON, none older than `KEEP_FOR` seconds; the oldest go
first. A `Last-Event-ID` that is no longer kept replays nothing (the SDK then
ends the replay stream), the same as an id that never existed.

Requests answered by `exchange` (the hot path) never reach the SDK's
transport: `exchange` keeps their events here too, under a stream it opened
(`open_lean`), and serves a `GET` that resumes one (`follow`) itself.

One store serves every session, while the SDK names a stream by its request
id (which clients choose: every session has a request 1). So each stream is
kept under its session too, which the SDK does not pass: `exchange` says
which session a request to the SDK is for (`for_session`, a context
variable), and a session's own tasks, started while its `initialize` was
served, inherit it. A `Last-Event-ID` replays only the asking session's own
events; one kept without a session is never replayed. Event ids are
`SEQ-TOKEN`, the token random, so an id cannot be guessed either.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

import anyio
import mcp.types as types
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore

__all__ = [
    "KEEP_FOR",
    "MAX_BYTES",
    "MAX_EVENTS",
    "RETRY_MS",
    "ResumableEvents",
    "SessionOf",
    "for_session",
]

MAX_EVENTS = 2_000
"""Events kept for replay, across every session."""

MAX_BYTES = 16 * 1024 * 1024
"""Bytes of events (as JSON) kept for replay, across every session."""

KEEP_FOR = 120.0
"""Seconds an event is kept for a client that may reconnect."""

RETRY_MS = 1_000
"""The `retry` field of priming events: how long a client waits to reconnect
(the SDK client's own delay when a server names none)."""


@dataclass(slots=True)
class SessionOf:
    """The session a request to the SDK is for; `key` is filled in when the
    SDK names a new session in its answer to `initialize`."""

    key: str | None = None


_SESSION: ContextVar[SessionOf | None] = ContextVar("mcp_manager_session", default=None)


def for_session(key: str | None) -> SessionOf:
    """Say, for this task and those it starts, which session it serves."""
    box = SessionOf(key)
    _SESSION.set(box)
    return box


def _session_now() -> str | None:
    box = _SESSION.get()
    return box.key if box is not None else None


@dataclass(slots=True, frozen=True)
class _Kept:
    seq: int
    event_id: str
    stream_id: str
    data: bytes | None  # None: a priming event (nothing to replay)
    at: float


@dataclass(slots=True)
class _Lean:
    """A stream `exchange` writes: whose it is, whether it ended."""

    session: str
    opened: float
    ended: bool = False
    changed: anyio.Event = field(default_factory=anyio.Event)


class ResumableEvents(EventStore):
    """A bounded, in-memory `EventStore` for the endpoint's SDK sessions.

    Args:
        clock: Monotonic seconds (injectable for tests).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._seqs = itertools.count(1)
        self._events: deque[_Kept] = deque()
        self._kept: dict[int, _Kept] = {}
        self._lean: dict[str, _Lean] = {}
        self._bytes = 0

    @property
    def kept(self) -> int:
        """Events kept now. (Not `__len__`: the SDK tests the store for truth,
        and an empty store must still be a store.)"""
        return len(self._events)

    @property
    def kept_bytes(self) -> int:
        """Bytes of JSON kept now."""
        return self._bytes

    def keep(self, stream_id: str, data: bytes | None) -> str:
        """Keep one event of `stream_id` (`data` None: a priming event); its id."""
        seq = next(self._seqs)
        kept = _Kept(
            seq, f"{seq}-{secrets.token_hex(6)}", stream_id, data, self._clock()
        )
        self._events.append(kept)
        self._kept[seq] = kept
        self._bytes += len(data or b"")
        self._forget_old()
        lean = self._lean.get(stream_id)
        if lean is not None:
            lean.changed.set()
            lean.changed = anyio.Event()
        return kept.event_id

    def _find(self, event_id: str) -> _Kept | None:
        seq, _, _ = event_id.partition("-")
        kept = self._kept.get(int(seq)) if seq.isdigit() else None
        return kept if kept is not None and kept.event_id == event_id else None

    # --- the SDK's streams --------------------------------------------------------

    async def store_event(
        self, stream_id: str, message: types.JSONRPCMessage | None
    ) -> str:
        data = (
            None
            if message is None
            else message.model_dump_json(by_alias=True, exclude_unset=True).encode()
        )
        session = _session_now()
        # Unknown session: kept (for the bounds' sake) under a name nothing
        # resumes.
        owner = session if session is not None else f"?{secrets.token_hex(4)}"
        return self.keep(f"{owner}/{stream_id}", data)

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        self._forget_old()
        session = _session_now()
        last = self._find(last_event_id)
        if session is None or last is None:
            return None
        owner, _, stream_id = last.stream_id.partition("/")
        if owner != session:
            return None
        for kept in list(self._events):
            if kept.seq <= last.seq or kept.stream_id != last.stream_id:
                continue
            if kept.data is None:
                continue
            message = types.jsonrpc_message_adapter.validate_json(kept.data)
            await send_callback(EventMessage(message, kept.event_id))
        return stream_id

    # --- exchange's streams -------------------------------------------------------

    def open_lean(self, session: str) -> str:
        """A new stream for a request `exchange` answers on `session`."""
        stream_id = f"lean-{secrets.token_hex(8)}"
        self._lean[stream_id] = _Lean(session, self._clock())
        return stream_id

    def end_lean(self, stream_id: str) -> None:
        """The stream's last event was kept (or it never had one)."""
        lean = self._lean.get(stream_id)
        if lean is not None:
            lean.ended = True
            lean.changed.set()

    def lean_stream(self, last_event_id: str, session: str) -> str | None:
        """The `exchange` stream `last_event_id` belongs to, if `session` owns it."""
        kept = self._find(last_event_id)
        if kept is None:
            return None
        lean = self._lean.get(kept.stream_id)
        if lean is None or lean.session != session:
            return None
        return kept.stream_id

    async def follow(
        self, stream_id: str, last_event_id: str
    ) -> AsyncIterator[tuple[str, bytes]]:
        """The events of an `exchange` stream after `last_event_id`, kept and
        to come, until the stream's end (or until they are no longer kept)."""
        last = self._find(last_event_id)
        after = last.seq if last is not None else 0
        while True:
            lean = self._lean.get(stream_id)
            if lean is None:
                return
            changed = lean.changed
            for kept in list(self._events):
                if kept.seq > after and kept.stream_id == stream_id:
                    after = kept.seq
                    if kept.data is not None:
                        yield kept.event_id, kept.data
            if lean.ended:
                return
            await changed.wait()

    def _forget_old(self) -> None:
        events = self._events
        too_old = self._clock() - KEEP_FOR
        while events and (
            len(events) > MAX_EVENTS
            or self._bytes > MAX_BYTES
            or events[0].at < too_old
        ):
            gone = events.popleft()
            self._kept.pop(gone.seq, None)
            self._bytes -= len(gone.data or b"")
        for stream_id, lean in list(self._lean.items()):
            if lean.opened < too_old and lean.ended:
                del self._lean[stream_id]
