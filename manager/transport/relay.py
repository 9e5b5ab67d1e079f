"""Each transport's one sender: a client's request out as JSON, its answer back
as the JSON the server sent.

`McpSession` sends every request a client makes (`tools/call`, `prompts/get`,
`resources/read`, completion, tasks, ...) in either era by one `Relay`, the
transport's: `StdioRelay` for a process, `http.relay.HttpRelay` for streamable
HTTP, `DispatcherRelay` (the SDK session's dispatcher) for legacy SSE and the
SDK's in-memory streams. The SDK session keeps the session's own business:
the handshake, lists, pings, `subscriptions/listen`, and the server's requests
and notifications.

`StdioRelay`: a request through the SDK's session crosses several memory
streams and tasks per message (the dispatcher's write stream, the read stream
and its loop, a waiter stream) and is validated into pydantic types on the
way. The relay
writes the request as one JSON line straight onto the server's stdin and picks
the matching answer (and the call's progress notifications) off its stdout
before the SDK parses the line, with a small map of its own request ids. Every
other message, including requests the server sends mid-call (sampling,
elicitation, roots), still goes to the SDK session, which also keeps the
handshake, pings and lists.

What the SDK's dispatcher does for a request is kept: the request id is the
progress token; the timeout starts once the request is written; a timed out
or cancelled request gets a courtesy `notifications/cancelled`; the server's
JSON-RPC error and the end of the connection come back as the SDK's `MCPError`
(so `McpSession` maps them the same way); and the SDK's own CLIENT span with
the W3C trace context in `params._meta` comes from `SendSpan` (telemetry's
when tracing is on, a no-op otherwise).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

import anyio
import anyio.lowlevel
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic_core import PydanticSerializationError, to_json

from .base import LINK_META_KEY, ProgressCallback
from .waits import settled, wake

__all__ = [
    "CANCEL_WRITE_TIMEOUT",
    "NO_SEND_SPAN",
    "SendSpan",
    "DispatcherRelay",
    "StdioRelay",
    "dumps",
    "plain_tool_result",
    "request_bytes",
]

logger = logging.getLogger(__name__)

CANCEL_WRITE_TIMEOUT = 5.0
"""Seconds the courtesy `notifications/cancelled` may take to write (as the SDK)."""

_ID_PREFIX = "mcp-manager:"
"""Our request ids (strings, so they never meet the SDK's integer ids)."""

_MARK = _ID_PREFIX.encode()
_LOG_MARK = b'"notifications/message"'


class SendSpan(Protocol):
    """Opens the SDK's CLIENT span for one request sent by the relay.

    On entry it puts the W3C trace context into `meta` (the request's
    `params._meta`); the value it yields records a JSON-RPC error answer
    (code, message) on the span.
    """

    def __call__(
        self, method: str, target: str | None, request_id: str, meta: dict[str, Any]
    ) -> AbstractContextManager[Callable[[int, str], None]]: ...


@contextlib.contextmanager
def _no_span(
    method: str, target: str | None, request_id: str, meta: dict[str, Any]
) -> Iterator[Callable[[int, str], None]]:
    yield lambda code, message: None


NO_SEND_SPAN: SendSpan = _no_span
"""No span and no trace context (tracing off: nothing would record)."""


class _Waiter:
    __slots__ = ("done", "error", "progress", "result")

    def __init__(self, progress: ProgressCallback | None) -> None:
        self.done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.progress = progress
        self.result: dict[str, Any] | None = None
        self.error: MCPError | None = None


class StdioRelay:
    """Requests written as JSON lines, answers taken off stdout by id.

    Args:
        write: Writes one line to the server's stdin (whole; raises
            `anyio.BrokenResourceError` once the server is gone).
        spawn: Starts a task in the transport's task group (progress).
        send_span: The SDK's span around each request.
        on_log: Takes the server's log messages (level, logger, data) while
            requests of ours are pending, in the order they came with the
            answers (through the SDK they would be handled in a task of their
            own, after the answer they preceded).
    """

    def __init__(
        self,
        write: Callable[[bytes], Awaitable[None]],
        spawn: Callable[..., object],
        send_span: SendSpan = NO_SEND_SPAN,
        *,
        on_log: Callable[[str, str | None, object], None] | None = None,
    ) -> None:
        self._write = write
        self._spawn = spawn
        self._send_span = send_span
        self._on_log = on_log
        self._pending: dict[str, _Waiter] = {}
        self._ids = itertools.count(1)
        self._closed = False

    async def request(
        self,
        method: str,
        params: dict[str, Any],
        limit: float,
        progress: ProgressCallback | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        cancel: bool = True,
    ) -> dict[str, Any]:
        """Send `method` with `params` and return the result as the server sent it.

        `headers` (HTTP's, for `HttpRelay`) mean nothing on a pipe, where a
        request given up is always cancelled (`cancel`: in either era).

        Raises:
            MCPError: The server's JSON-RPC error; `REQUEST_TIMEOUT` after
                `limit` seconds; `CONNECTION_CLOSED` once the server is gone.
            ValueError: `params` cannot be written as JSON at all.
        """
        if self._closed:
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        meta = dict(params.get("_meta") or {})
        meta.pop(LINK_META_KEY, None)  # ours: a pipe links nothing (`unlinked`)
        body = dumps({k: v for k, v in params.items() if k != "_meta"})
        request_id = f"{_ID_PREFIX}{next(self._ids)}"
        waiter = _Waiter(progress)
        if progress is not None:
            meta["progressToken"] = request_id
        name = params.get("name")
        written = False
        self._pending[request_id] = waiter
        try:
            with self._send_span(
                method, name if isinstance(name, str) else None, request_id, meta
            ) as failed:
                line = request_bytes(method, request_id, body, meta) + b"\n"
                await anyio.lowlevel.checkpoint_if_cancelled()
                written = True
                try:
                    await self._write(line)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    raise MCPError(
                        code=CONNECTION_CLOSED, message="Connection closed"
                    ) from None
                if await settled(waiter.done, limit):
                    raise TimeoutError
                if waiter.error is not None and waiter.error.code != CONNECTION_CLOSED:
                    failed(waiter.error.code, waiter.error.message)
        except TimeoutError:
            with anyio.move_on_after(CANCEL_WRITE_TIMEOUT):
                await self._cancel(request_id, f"timed out after {limit}s")
            raise MCPError(
                code=REQUEST_TIMEOUT, message=f"Request {method!r} timed out"
            ) from None
        except anyio.get_cancelled_exc_class():
            if written:
                with anyio.move_on_after(CANCEL_WRITE_TIMEOUT, shield=True):
                    await self._cancel(request_id, "caller cancelled")
            raise
        finally:
            self._pending.pop(request_id, None)
        if waiter.error is not None:
            raise waiter.error
        assert waiter.result is not None
        return waiter.result

    async def _cancel(self, request_id: str, reason: str) -> None:
        line = _encode(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id, "reason": reason},
            }
        )
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self._write(line)

    def take(self, line: bytes) -> bool:
        """Take `line` off stdout if it answers (or reports progress on) one of
        our requests; False leaves it to the SDK session."""
        if not self._pending:
            return False
        if _MARK not in line:
            return _LOG_MARK in line and self._log(line)
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):  # nested past the parser's depth
            return False
        if not isinstance(message, dict):
            return False
        method = message.get("method")
        if method is None:
            return self._answer(message)
        if method == "notifications/progress":
            return self._progress(message.get("params"))
        return False

    def _answer(self, message: dict[str, Any]) -> bool:
        request_id = message.get("id")
        waiter = self._pending.get(request_id) if isinstance(request_id, str) else None
        if waiter is None:
            return False
        result, error = message.get("result"), message.get("error")
        if isinstance(result, dict) and error is None:
            waiter.result = result
        elif (
            result is None
            and isinstance(error, dict)
            and isinstance(error.get("code"), int)
            and isinstance(error.get("message"), str)
        ):
            waiter.error = MCPError(
                code=error["code"], message=error["message"], data=error.get("data")
            )
        else:  # not a valid answer: the SDK reports it as garbage, as before
            return False
        wake(waiter.done)
        return True

    def _log(self, line: bytes) -> bool:
        if self._on_log is None:
            return False
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):  # nested past the parser's depth
            return False
        params = message.get("params") if isinstance(message, dict) else None
        if (
            message.get("method") != "notifications/message"
            or "id" in message
            or not isinstance(params, dict)
            or not isinstance(params.get("level"), str)
            or "data" not in params
        ):
            return False  # the SDK's to judge
        name = params.get("logger")
        self._on_log(
            params["level"], name if isinstance(name, str) else None, params["data"]
        )
        return True

    def _progress(self, params: object) -> bool:
        if not isinstance(params, dict):
            return False
        token, value = params.get("progressToken"), params.get("progress")
        waiter = self._pending.get(token) if isinstance(token, str) else None
        if waiter is None or waiter.progress is None:
            return False
        if not isinstance(value, int | float) or isinstance(value, bool):
            return True  # ours, malformed: dropped as the SDK drops it
        total, text = params.get("total"), params.get("message")
        self._spawn(
            _report,
            waiter.progress,
            float(value),
            float(total) if isinstance(total, int | float) else None,
            text if isinstance(text, str) else None,
        )
        return True

    def close(self) -> None:
        """The server is gone: every waiting request ends with `CONNECTION_CLOSED`."""
        self._closed = True
        for waiter in self._pending.values():
            if not waiter.done.done():
                waiter.error = MCPError(
                    code=CONNECTION_CLOSED, message="Connection closed"
                )
                wake(waiter.done)


class DispatcherRelay:
    """The sender of a transport with no relay of its own (legacy SSE, the
    SDK's in-memory streams): the SDK session's JSON-RPC dispatcher, which
    keeps ids, the timeout, progress and the courtesy `notifications/cancelled`.

    Args:
        dispatcher: The SDK session's dispatcher.
    """

    def __init__(self, dispatcher: JSONRPCDispatcher[Any]) -> None:
        self._dispatcher = dispatcher

    async def request(
        self,
        method: str,
        params: dict[str, Any],
        limit: float,
        progress: ProgressCallback | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        cancel: bool = True,
    ) -> dict[str, Any]:
        """As `Relay.request`. `headers` go to transports that read them; on
        a stream a request given up is always cancelled (`cancel`: in either
        era), as by `StdioRelay`."""
        opts: CallOptions = {"timeout": limit}
        if headers:
            opts["headers"] = dict(headers)
        if progress is not None:
            opts["on_progress"] = progress
        return await self._dispatcher.send_raw_request(method, params, opts)


def plain_tool_result(raw: Mapping[str, Any]) -> bool:
    """Whether `raw` is plainly a tool result: content blocks (objects with a
    string `type`), and `isError`, `structuredContent` and `_meta` of their
    types if present. Anything else is left to the SDK's model."""
    content = raw.get("content")
    if not isinstance(content, list):
        return False
    for block in content:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            return False
    is_error = raw.get("isError", False)
    structured = raw.get("structuredContent", {})
    extra = raw.get("_meta", {})
    return (
        isinstance(is_error, bool)
        and isinstance(structured, dict)
        and isinstance(extra, dict)
    )


async def _report(
    progress: ProgressCallback, value: float, total: float | None, text: str | None
) -> None:
    try:
        await progress(value, total, text)
    except Exception:  # boundary: a failing callback must not end the transport
        logger.exception("progress callback raised")


_dumps = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode


def dumps(value: object) -> str:
    """Compact JSON. What `json` cannot carry (NaN, infinities, a model) is
    written as the SDK would write it (pydantic's encoder: NaN as null);
    `ValueError` for what neither can."""
    try:
        return _dumps(value)
    except (TypeError, ValueError):
        try:
            return to_json(value, inf_nan_mode="null").decode()
        except PydanticSerializationError as exc:
            raise ValueError(str(exc)) from exc


def request_bytes(
    method: str, request_id: str, body: str, meta: Mapping[str, Any]
) -> bytes:
    """A JSON-RPC request: `body` (its params without `_meta`, encoded and
    checked by `dumps` before anything was sent) with `meta` spliced in."""
    if meta:
        comma = "," if body != "{}" else ""
        body = f'{body[:-1]}{comma}"_meta":{dumps(meta)}}}'
    return (
        f'{{"jsonrpc":"2.0","id":"{request_id}","method":{dumps(method)},'
        f'"params":{body}}}'
    ).encode()


def _encode(message: dict[str, Any]) -> bytes:
    return dumps(message).encode() + b"\n"
