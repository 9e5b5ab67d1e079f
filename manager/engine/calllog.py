"""A local log of every tool call: who called what, with what shape, and how it went.

After a day of agents, "what did they call, and what failed?" needs an answer
without an OTLP collector. Every call through the endpoint (any front, any
era) and `mcp-manager call` leaves one row in `calls.sqlite3` in the state
directory (SQLite from the standard library, WAL, 0600): time, client (its
`clientInfo` name) and profile, connection, tool, the arguments' *shape*
(keys and JSON types, never values), outcome (`ok`, `tool_error`, `failed`),
the error's kind, duration and the result's size in bytes.

Writing never slows a call: `record` appends to a bounded queue (a record
that finds it full is dropped and counted) and `run` writes in batches in a
worker thread. Bounded on disk: rows older than `KEEP_DAYS`, and the oldest
beyond `MAX_ROWS`, are deleted as it writes. A disk that fails is said once
in the log, not a stall. `read` serves `mcp-manager log`, which opens the file
itself (read-only: no daemon needed), once a running daemon wrote what it had
queued (`flush`, asked over the control socket); `queued` gives `details` the
rows of the last second.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from operator import attrgetter
from pathlib import Path
from typing import Any

import anyio

from ..core.policy import masked, masked_names
from ..core.redact import SecretRegistry, redact
from ..files import default_state_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .policy import Caller

__all__ = [
    "KEEP_DAYS",
    "MAX_ROWS",
    "CallLog",
    "CallRecord",
    "LoggedCall",
    "logged_arguments",
    "read",
    "result_size",
    "shape_of",
]

logger = logging.getLogger("manager.engine")

FILE_NAME = "calls.sqlite3"
KEEP_DAYS = 30
MAX_ROWS = 200_000
QUEUE = 10_000
"""Records waiting to be written; beyond it they are dropped and counted."""
FLUSH_EVERY = 1.0
"""Seconds between batch writes."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    client TEXT NOT NULL,
    profile TEXT NOT NULL,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    shape TEXT NOT NULL,
    outcome TEXT NOT NULL,
    error TEXT NOT NULL,
    duration REAL NOT NULL,
    bytes INTEGER NOT NULL,
    verdict TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS calls_time ON calls (time);
"""


@dataclass(slots=True)  # not frozen: a frozen init sets each field the slow way
class CallRecord:
    """One call, as the log keeps it (not changed once made).

    Attributes:
        time: When it started (wall time).
        client: The client's name (its `clientInfo`), or `cli` for
            `mcp-manager call`.
        profile: The profile it came through ("" for the whole endpoint).
        server: The connection.
        tool: The server's own tool name.
        shape: The arguments' keys and JSON types, as compact JSON.
        outcome: `ok`, `tool_error` (the tool said isError), or `failed`.
        error: The failure's kind (`CallTimeout`, `ServerUnavailable`, ...).
        duration: Seconds it took.
        bytes: About the result's size (`result_size`; 0 if none).
        verdict: What the call policy said when it did not simply allow:
            `denied by rule FILE:LINE`, `allowed by cli (session)`, `not
            approved in time`... ("" when no rule applied or one allowed).
    """

    time: float
    client: str
    profile: str
    server: str
    tool: str
    shape: str
    outcome: str
    error: str
    duration: float
    bytes: int
    verdict: str = ""


def logged_arguments(
    arguments: Mapping[str, object] | None,
    values: bool,
    secrets: SecretRegistry | None = None,
) -> str:
    """What the log keeps of a call's arguments: their shape (`shape_of`),
    or with `values` (`log_arguments = true`) the arguments themselves as
    compact JSON, what looks like a secret masked (`core.policy.masked`)."""
    if not values:
        return shape_of(masked_names(arguments or {}, secrets))
    shown = masked(dict(arguments or {}), secrets)
    return json.dumps(shown, ensure_ascii=False, separators=(",", ":"), default=str)


class LoggedCall:
    """One call while it runs, and the row it leaves however it ends
    (`CallLog.track`): the surface says how it ended (`ended`, `failed`);
    a call that ends otherwise (its client gone, a cancel, the daemon
    stopping) is logged `failed` with its kind (`Cancelled`)."""

    __slots__ = ("data", "error", "outcome")

    def __init__(self) -> None:
        self.outcome = "failed"
        self.error = ""
        self.data: object = None

    def unfinished(self) -> None:
        """It goes on in a later request (a 2026-07-28 client's input
        round), whose row this is: none now."""
        self.outcome = ""

    def ended(self, is_error: bool, data: object) -> None:
        """It returned a result (`isError` or not)."""
        self.outcome = "tool_error" if is_error else "ok"
        self.data = data

    def failed(self, error: BaseException) -> None:
        """It failed with `error` (its class names the kind)."""
        self.outcome, self.error = "failed", type(error).__name__


def result_size(data: object) -> int:
    """About how large a tool result is: the characters of its contents'
    text and data (no JSON dump of it on the call path)."""
    if not isinstance(data, Mapping):
        return 0
    size = 0
    for item in data.get("content") or ():
        if isinstance(item, Mapping):
            for key in ("text", "data"):
                value = item.get(key)
                if isinstance(value, str):
                    size += len(value)
    return size


def shape_of(arguments: Mapping[str, Any] | None) -> str:
    """`{"repo": "string", "limit": "number"}` for the arguments: keys and
    types, never a value."""
    kinds = tuple((key, _kind(value)) for key, value in (arguments or {}).items())
    shape = _shapes.get(kinds)
    if shape is None:
        if len(_shapes) >= SHAPES_KEPT:
            _shapes.clear()
        shape = _shapes[kinds] = _shape_json(dict(kinds))
    return shape


_shape_json = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
_shapes: dict[tuple[tuple[str, str], ...], str] = {}
"""Shapes already written: a tool is called with the same shape again and
again, and this is every call's path (a JSON dump with its own encoder costs
several times the lookup)."""
SHAPES_KEPT = 4096
"""Distinct shapes remembered; past it the table starts again."""


_COLUMNS = tuple(field.name for field in fields(CallRecord))
_row = attrgetter(*_COLUMNS)
"""A record's columns in order, as a tuple (`asdict` copies deeply: about
19 µs a row against 2 here, paid for every call)."""


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


class CallLog:
    """The call log of one daemon.

    Args:
        state_dir: Where `calls.sqlite3` lives.
        keep_days: Rows older than this are deleted.
        max_rows: Most rows kept; the oldest go first.
    """

    def __init__(
        self, state_dir: Path, keep_days: float = KEEP_DAYS, max_rows: int = MAX_ROWS
    ) -> None:
        self.path = state_dir / FILE_NAME
        self._keep = keep_days * 86400
        self._max_rows = max_rows
        self._queue: deque[CallRecord] = deque()
        self._wake = anyio.Event()
        self.dropped = 0
        """Records dropped because the queue was full."""
        self.written = 0
        self._failed = False
        self._db: sqlite3.Connection | None = None
        self._writing = threading.Lock()
        """One batch at a time on the one connection: `run`'s, or one the
        CLI asked for (`mcp-manager log` right after a call)."""

    @contextmanager
    def track(
        self,
        caller: Caller,
        server: str,
        tool: str,
        arguments: Mapping[str, object] | None,
        *,
        values: bool = False,
        secrets: SecretRegistry | None = None,
    ) -> Iterator[LoggedCall]:
        """Log one call however it ends: the row is queued when the block
        is left, by a result, an error or a cancel (`LoggedCall`). `values`:
        the connection's `log_arguments`."""
        call = LoggedCall()
        started, clock = time.time(), time.monotonic()
        try:
            yield call
        except BaseException as exc:
            if not call.error and call.outcome == "failed":
                call.error = (
                    type(exc).__name__ if isinstance(exc, Exception) else "Cancelled"
                )
            raise
        finally:
            if call.outcome:
                self.record(
                    CallRecord(
                        time=started,
                        client=redact(caller.client, secrets),
                        profile=caller.profile,
                        server=server,
                        tool=redact(tool, secrets),  # a client chose the name
                        shape=logged_arguments(arguments, values, secrets),
                        outcome=call.outcome,
                        error=call.error,
                        duration=round(time.monotonic() - clock, 6),
                        bytes=result_size(call.data),
                        verdict=caller.verdict,
                    )
                )

    def record(self, record: CallRecord) -> None:
        """Queue one call's row; never blocks (dropped and counted if full)."""
        if len(self._queue) >= QUEUE:
            self.dropped += 1
            return
        self._queue.append(record)

    async def run(self) -> None:
        """Write queued rows in batches until cancelled; the last batch is
        written on the way out."""
        try:
            while True:
                await anyio.sleep(FLUSH_EVERY)
                if self._queue:
                    await anyio.to_thread.run_sync(self.flush)
        finally:
            with anyio.CancelScope(shield=True):
                if self._queue:
                    await anyio.to_thread.run_sync(self.flush)
                if self._db is not None:
                    self._db.close()
                    self._db = None

    def queued(self, server: str) -> list[dict[str, Any]]:
        """`server`'s calls not written yet, oldest first, as `read` gives
        rows (without their `id`)."""
        return [
            dict(zip(_COLUMNS, _row(record), strict=True))
            for record in list(self._queue)
            if record.server == server
        ]

    def flush(self) -> None:
        """Write what is queued now (a worker thread's job)."""
        with self._writing:
            self._flush()

    def _flush(self) -> None:
        batch = []
        while self._queue:
            batch.append(self._queue.popleft())
        if not batch:
            return
        try:
            db = self._open()
            with db:
                db.executemany(
                    "INSERT INTO calls (time, client, profile, server, tool, shape, "
                    "outcome, error, duration, bytes, verdict) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    [_row(record) for record in batch],
                )
                db.execute(
                    "DELETE FROM calls WHERE time < ?", (time.time() - self._keep,)
                )
                db.execute(
                    "DELETE FROM calls WHERE id <= (SELECT max(id) FROM calls) - ?",
                    (self._max_rows,),
                )
            self.written += len(batch)
            self._failed = False
        except (sqlite3.Error, OSError) as exc:
            self.dropped += len(batch)
            if not self._failed:
                self._failed = True
                logger.warning(
                    "call log %s: cannot write (%s); calls go on, unlogged",
                    self.path,
                    exc,
                )

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
            os.close(fd)
            db = sqlite3.connect(self.path, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            columns = {row[1] for row in db.execute("PRAGMA table_info(calls)")}
            if "verdict" not in columns:  # a log from before the call policy
                db.execute(
                    "ALTER TABLE calls ADD COLUMN verdict TEXT NOT NULL DEFAULT ''"
                )
            self._db = db
        return self._db


def read(
    state_dir: Path | None = None,
    *,
    server: str | None = None,
    tool: str | None = None,
    failed: bool = False,
    since: float | None = None,
    limit: int = 100,
    policy: bool = False,
) -> list[dict[str, Any]]:
    """The latest calls in the log at `state_dir` (by default the daemon's
    state directory), newest last; [] if none.

    Args:
        server: Only this connection's.
        tool: Only this tool's (the server's own name).
        failed: Only calls that failed or whose tool reported an error.
        since: Only calls after this wall time.
        limit: At most this many (the newest).
        policy: Only calls the call policy denied or held for the user.
    """
    path = (state_dir if state_dir is not None else default_state_dir()) / FILE_NAME
    if not path.exists():
        return []
    where: list[str] = ["1=1"]
    values: list[object] = []
    for column, value in (("server", server), ("tool", tool)):
        if value is not None:
            where.append(f"{column} = ?")
            values.append(value)
    if failed:
        where.append("outcome != 'ok'")
    if policy:
        where.append("verdict != ''")
    if since is not None:
        where.append("time >= ?")
        values.append(since)
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        db.row_factory = sqlite3.Row
        columns = {row[1] for row in db.execute("PRAGMA table_info(calls)")}
        if policy and "verdict" not in columns:
            return []  # a log from before the call policy
        rows = db.execute(
            f"SELECT * FROM calls WHERE {' AND '.join(where)} "
            "ORDER BY time DESC, id DESC LIMIT ?",
            (*values, limit),
        ).fetchall()
    finally:
        db.close()
    return [dict(row) for row in reversed(rows)]
