"""The lean relay for `tools/call` to a streamable HTTP server: one POST, read here.

Through the SDK's streamable HTTP client, a call crosses the session's write
stream, the transport's writer loop, a task spawned per POST, an SSE parser
that validates every event into pydantic types, the read stream and the
session's dispatcher, and back; that costs more CPU than everything else the
daemon does for the call. `HttpRelay` POSTs the request itself, on the
connection's own `httpx2` client (its headers, authorization and pooled
keep-alive connections, the session id the SDK's transport negotiated), and
reads the answer off the response:

* `application/json`: the answer; or, as the TypeScript SDK's 2026-07-28
  entry sends it, what the request brought (progress, log messages) and then
  the answer, one JSON message per line, each taken as a stream's event is;
* `text/event-stream`: events are read in order; the call's progress goes to
  its callback, the server's log messages to `on_log` (as `StdioRelay` does);
  anything else the server says on that stream (a request of its own:
  sampling, elicitation, roots; another notification) is handed to the SDK
  session as the SDK's transport would hand it (`inject`), and the session
  answers it as before. A stream that ends without the answer but with event
  ids is resumed with `Last-Event-ID`, as the SDK's client does (at most
  `RESUME_ATTEMPTS` times).

What the SDK's client does for a request is kept: the request id is the
progress token; the timeout covers the whole exchange; a timed out or
cancelled request gets a courtesy `notifications/cancelled`; an HTTP failure
becomes the `MCPError` the SDK's transport would make of it (a JSON-RPC error
in the body first, 404 as a terminated session, 202 and redirects refused);
the SDK's CLIENT span with the W3C trace context in `params._meta` comes from
`SendSpan`. A request the connection's OAuth flow stops (a login wanted, a
refused token) ends the transport with that error (`fail`), as it ends the
SDK's, for the supervisor to read.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, cast

import anyio
import httpx2
import mcp.types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
)

from ...core.errors import LoginRequired, RefusedUnrun
from ..base import ProgressCallback
from ..compat_mcp import stream_within_origin
from ..errors import SessionTerminated
from ..relay import CANCEL_WRITE_TIMEOUT, NO_SEND_SPAN, SendSpan, dumps, request_bytes
from .status import HttpStatus

__all__ = ["RESUME_ATTEMPTS", "HttpRelay", "JsonLines", "SseEvents"]

logger = logging.getLogger(__name__)

RESUME_ATTEMPTS = 2
"""Times a call's event stream that ended early is resumed (the SDK's limit)."""

RESUME_DELAY = 1.0
"""Seconds before resuming when the server named no `retry` (the SDK's)."""

_ID_PREFIX = "mcp-manager:h"
"""Our request ids (strings, so they never meet the SDK's integer ids)."""

_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
}


class SseEvents:
    """Server-sent events, parsed from the bytes of a response (`endpoint`:
    the data of a legacy SSE stream's first `endpoint` event, once seen)."""

    def __init__(self) -> None:
        self._buffer = b""
        self._cr = b""  # a chunk's last "\r", whose "\n" may start the next
        self.last_id: str | None = None
        self.retry: float | None = None
        self.endpoint: str | None = None

    def feed(self, chunk: bytes) -> list[str]:
        """The data of each complete `message` event in `chunk` (and before)."""
        chunk, self._cr = self._cr + chunk, b""
        if chunk.endswith(b"\r"):
            chunk, self._cr = chunk[:-1], b"\r"
        self._buffer += chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        out: list[str] = []
        while True:
            end = self._buffer.find(b"\n\n")
            if end < 0:
                return out
            block, self._buffer = self._buffer[:end], self._buffer[end + 2 :]
            kind, data = "message", []
            for line in block.decode("utf-8", "replace").split("\n"):
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "data":
                    data.append(value)
                elif field == "event":
                    kind = value
                elif field == "id":
                    self.last_id = value
                elif field == "retry" and value.isdigit():
                    self.retry = int(value) / 1000
            if kind == "message" and data:
                out.append("\n".join(data))
            elif kind == "endpoint" and self.endpoint is None:
                self.endpoint = "\n".join(data)


class JsonLines:
    """JSON messages one after another on lines of their own (the TypeScript
    SDK's 2026-07-28 `application/json` bodies), parsed from the bytes of a
    response; a message printed over several lines is gathered until it
    parses."""

    def __init__(self) -> None:
        self._buffer = b""
        self._pending: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """The text of each complete message in `chunk` (and before)."""
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        out: list[bytes] = []
        for line in lines:
            if not line.strip():
                continue
            self._pending.append(line.rstrip(b"\r"))
            text = b"\n".join(self._pending)
            try:
                json.loads(text)
            except ValueError:
                continue  # more of it on the next line
            out.append(text)
            self._pending = []
        return out

    def rest(self) -> bytes | None:
        """What is left once the body ended (not a whole message), if any."""
        rest = b"\n".join([*self._pending, self._buffer]).strip()
        self._buffer, self._pending = b"", []
        return rest or None


class HttpRelay:
    """Requests POSTed on the connection's client, answers read off the response.

    Args:
        client: The connection's HTTP client (the SDK's transport uses it too).
        url: The server's MCP endpoint.
        session_id: The HTTP session id the SDK's transport negotiated.
        inject: Hands a message the server sent on a call's stream, other than
            the call's answer, progress and log messages, to the SDK session.
        send_span: The SDK's span around each request.
        on_log: Takes the server's log messages (level, logger, data).
        fail: Ends the connection's transport with an error of its HTTP
            client's auth flow (a login is wanted, the server refused the
            token), as that error ends the SDK's transport.
    """

    def __init__(
        self,
        client: httpx2.AsyncClient,
        url: str,
        session_id: Callable[[], str | None],
        inject: Callable[[SessionMessage], Awaitable[None]],
        send_span: SendSpan = NO_SEND_SPAN,
        *,
        on_log: Callable[[str, str | None, object], None] | None = None,
        fail: Callable[[BaseException], object] = lambda exc: None,
    ) -> None:
        self._fail = fail
        self._client = client
        self._url = httpx2.URL(url)  # parsed once, not on every request
        self._session_id = session_id
        self._inject = inject
        self._send_span = send_span
        self._on_log = on_log
        self._ids = itertools.count(1)
        self._closed = False
        self._ended = anyio.Event()

    def close(self) -> None:
        """The connection is gone: requests fail at once from now on."""
        self._closed = True
        self._ended.set()

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

        A request given up (timed out, or its caller cancelled) is closed, and
        with `cancel` (the handshake era) also cancelled by a courtesy
        `notifications/cancelled`; in 2026-07-28 closing its stream says it.

        Raises:
            MCPError: The server's JSON-RPC error; `REQUEST_TIMEOUT` after
                `limit` seconds; `CONNECTION_CLOSED` once the server is gone;
                what the SDK's transport makes of an HTTP failure.
            ValueError: `params` cannot be written as JSON at all.
        """
        if self._closed:
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        meta = dict(params.get("_meta") or {})
        body = dumps({k: v for k, v in params.items() if k != "_meta"})
        request_id = f"{_ID_PREFIX}{next(self._ids)}"
        if progress is not None:
            meta["progressToken"] = request_id
        sent = dict(_HEADERS)
        if headers:
            sent.update(headers)
        name = params.get("name")
        try:
            with self._send_span(
                method, name if isinstance(name, str) else None, request_id, meta
            ) as failed:
                data = request_bytes(method, request_id, body, meta)
                with anyio.fail_after(limit):
                    try:
                        answer = await self._exchange(data, sent, request_id, progress)
                    except ValueError as exc:  # sent: never "send it another way"
                        raise MCPError(
                            code=PARSE_ERROR,
                            message=f"Failed to parse the server's answer: {exc}",
                        ) from None
                error = answer.get("error")
                if isinstance(error, dict):
                    code, text = error.get("code"), error.get("message")
                    failed(
                        code if isinstance(code, int) else INTERNAL_ERROR,
                        text if isinstance(text, str) else "",
                    )
        except TimeoutError:
            if cancel:
                with anyio.move_on_after(CANCEL_WRITE_TIMEOUT):
                    await self._cancel(request_id, f"timed out after {limit}s", sent)
            raise MCPError(
                code=REQUEST_TIMEOUT, message=f"Request {method!r} timed out"
            ) from None
        except anyio.get_cancelled_exc_class():
            if cancel:
                with anyio.move_on_after(CANCEL_WRITE_TIMEOUT, shield=True):
                    await self._cancel(request_id, "caller cancelled", sent)
            raise
        except MCPError:
            raise
        except httpx2.HTTPError as exc:
            raise MCPError(
                code=CONNECTION_CLOSED, message=f"Connection closed: {exc!r}"
            ) from None
        except Exception as exc:  # the auth flow's: a login wanted, a refusal
            # As through the SDK's transport, the error ends the session (the
            # supervisor reads it off the session's end) and the call with it.
            # The call ends after the session, as a call through the SDK's
            # session does (so the session's end is what is reported).
            self._fail(exc)
            with anyio.move_on_after(CANCEL_WRITE_TIMEOUT):
                await self._ended.wait()
            if isinstance(exc, LoginRequired):
                # Refused for want of authorization (the 401 or 403 to this
                # very request, or a token that could not be renewed before
                # it went out): the server did not run it.
                raise RefusedUnrun(
                    f"the server refused the request ({exc}): it did not run it"
                ) from None
            raise MCPError(
                code=CONNECTION_CLOSED, message=f"Connection closed: {exc}"
            ) from None
        error = answer.get("error")
        if isinstance(error, dict):
            raise _error_of(error)
        result = answer.get("result")
        if not isinstance(result, dict):
            raise MCPError(
                code=INTERNAL_ERROR, message="the server's answer has no result"
            )
        return result

    def _headers(self, sent: dict[str, str]) -> dict[str, str]:
        sid = self._session_id()
        if sid is not None:
            return {**sent, "mcp-session-id": sid}
        return sent

    async def _exchange(
        self,
        data: bytes,
        sent: dict[str, str],
        request_id: str,
        progress: ProgressCallback | None,
    ) -> dict[str, Any]:
        """POST the request; the answer, from JSON or the event stream."""
        events = SseEvents()
        async with stream_within_origin(
            self._client, "POST", self._url, content=data, headers=self._headers(sent)
        ) as response:
            await _refuse(response, self._session_id() is not None)
            kind = response.headers.get("content-type", "").lower()
            if kind.startswith("application/json"):
                body = await response.aread()
                try:
                    whole = json.loads(body)
                except ValueError:
                    # Some servers (the TypeScript SDK's 2026-07-28 entry) send
                    # what the request brought before its answer as JSON lines.
                    whole = await self._lines(body, request_id, progress)
                if not isinstance(whole, dict):
                    raise MCPError(
                        code=INTERNAL_ERROR,
                        message="the server answered with something that is not "
                        "one JSON-RPC message",
                    )
                return whole
            if not kind.startswith("text/event-stream"):
                raise MCPError(
                    code=INVALID_REQUEST, message=f"Unexpected content type: {kind}"
                )
            chunks = response.aiter_bytes()  # held until the response is closed
            answer = await self._read(chunks, events, request_id, progress)
        for _ in range(RESUME_ATTEMPTS):
            if answer is not None or events.last_id is None:
                break
            delay = events.retry if events.retry is not None else RESUME_DELAY
            await anyio.sleep(delay)
            resume = {
                **self._headers(sent),
                "accept": "text/event-stream",
                "last-event-id": events.last_id,
            }
            resume.pop("content-type", None)
            async with stream_within_origin(
                self._client, "GET", self._url, headers=resume
            ) as response:
                if response.status_code != 200:
                    break
                chunks = response.aiter_bytes()
                answer = await self._read(chunks, events, request_id, progress)
        if answer is None:
            raise MCPError(
                code=CONNECTION_CLOSED, message="SSE stream ended without a response"
            )
        return answer

    async def _read(
        self,
        chunks: AsyncIterator[bytes],
        events: SseEvents,
        request_id: str,
        progress: ProgressCallback | None,
    ) -> dict[str, Any] | None:
        """Events until the answer to `request_id` (None: the stream ended).

        Returned from the middle of the body: the caller closes the response
        (which reads the rest, `http.DrainingTransport`) while `chunks`, the
        iteration it stopped, is still referenced. Dropped before that, the
        stopped generators are finalised in a task of their own that closes
        the connection under the drain, or under the next request that took
        it from the pool.
        """
        async for chunk in chunks:
            for data in events.feed(chunk):
                if not data.strip():
                    continue  # a priming event (its id lets a stream resume)
                try:
                    message = json.loads(data)
                except ValueError:
                    logger.warning("ignored an event that is not JSON: %.80r", data)
                    continue
                if await self._take(message, request_id, progress):
                    return cast(dict[str, Any], message)  # the answer: a dict
        return None

    async def _lines(
        self, body: bytes, request_id: str, progress: ProgressCallback | None
    ) -> Any:
        """A JSON body of several messages, one per line: each is taken as an
        event of a stream would be; the answer, if one of them is it (else
        None, which is no answer)."""
        lines = JsonLines()
        for text in lines.feed(body + b"\n"):
            message = json.loads(text)
            if await self._take(message, request_id, progress):
                return message
        rest = lines.rest()
        if rest is not None:  # lines that never made a message
            json.loads(rest)  # raises what the parse error says
        return None

    async def _take(
        self, message: Any, request_id: str, progress: ProgressCallback | None
    ) -> bool:
        """One message the server sent with a request's answer: True if it is
        the answer; else what it says goes where it belongs (the call's
        progress to its callback, a log message to `on_log`, anything else
        to the SDK session)."""
        if not isinstance(message, dict):
            return False
        method = message.get("method")
        if method is None and message.get("id") == request_id:
            return True
        if method == "notifications/progress" and progress is not None:
            params = message.get("params") or {}
            if params.get("progressToken") == request_id:
                await _report(progress, params)
                return False
        if method == "notifications/message" and self._on_log is not None:
            note = message.get("params")
            if isinstance(note, dict) and isinstance(note.get("level"), str):
                logger_name = note.get("logger")
                self._on_log(
                    note["level"],
                    logger_name if isinstance(logger_name, str) else None,
                    note.get("data"),
                )
                return False
        await self._pass_on(message)
        return False

    async def _pass_on(self, message: dict[str, Any]) -> None:
        """Hand a message to the SDK session, as its transport would."""
        try:
            parsed = types.jsonrpc_message_adapter.validate_python(
                message, by_name=False
            )
        except ValueError:
            logger.warning("ignored a malformed message on a call's stream")
            return
        try:
            await self._inject(SessionMessage(parsed))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the session is closing

    async def _cancel(self, request_id: str, reason: str, sent: dict[str, str]) -> None:
        data = dumps(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id, "reason": reason},
            }
        ).encode()
        try:
            async with stream_within_origin(
                self._client,
                "POST",
                self._url,
                content=data,
                headers=self._headers(sent),
            ):
                pass
        except httpx2.HTTPError as exc:
            logger.debug("courtesy cancel not sent: %r", exc)


async def _refuse(response: httpx2.Response, in_session: bool) -> None:
    """Raise what the SDK's transport makes of a response that is no answer."""
    status = response.status_code
    if status == 202:
        raise MCPError(
            code=INVALID_REQUEST, message="server answered a request with 202 Accepted"
        )
    if 300 <= status < 400:
        raise MCPError(
            code=INVALID_REQUEST,
            message=f"the server redirected the request ({status}); not followed",
        )
    if status < 400:
        return
    kind = response.headers.get("content-type", "").lower()
    error: object = None
    if kind.startswith("application/json"):
        try:
            body = json.loads(await response.aread())
        except (ValueError, httpx2.HTTPError):
            body = None
        error = body.get("error") if isinstance(body, dict) else None
    if status == 404 and in_session and _no_session(error):
        raise SessionTerminated(code=INVALID_REQUEST, message="Session terminated")
    if isinstance(error, dict):
        raise _error_of(error)
    if status == 404:
        raise MCPError(code=METHOD_NOT_FOUND, message="Not Found")
    # The SDK's words, with what it drops: the status, and when to try again.
    said = HttpStatus.of(status, response.headers).said()
    raise MCPError(
        code=INTERNAL_ERROR, message=f"Server returned an error response ({said})"
    )


def _no_session(error: object) -> bool:
    """Whether a 404's body (its JSON-RPC error, if any) says only that the
    session is unknown (the SDK's servers: "Session not found"): then the
    request was not processed. A 404 that carries another error (a method
    not found, a server's own) is that error."""
    if not isinstance(error, dict):
        return True
    message = error.get("message")
    return isinstance(message, str) and message.lower() in (
        "session not found",
        "session terminated",
    )


def _error_of(error: dict[str, Any]) -> MCPError:
    """The server's JSON-RPC error, as the SDK raises it."""
    try:
        return MCPError.from_error_data(types.ErrorData.model_validate(error))
    except ValueError:
        return MCPError(
            code=INTERNAL_ERROR, message=f"a malformed error: {error!r:.200}"
        )


async def _report(progress: ProgressCallback, params: Mapping[str, Any]) -> None:
    value, total = params.get("progress"), params.get("total")
    text = params.get("message")
    if not isinstance(value, int | float) or isinstance(value, bool):
        return
    try:
        await progress(
            float(value),
            float(total) if isinstance(total, int | float) else None,
            text if isinstance(text, str) else None,
        )
    except Exception:  # boundary: a failing callback must not end the call
        logger.exception("progress callback raised")
