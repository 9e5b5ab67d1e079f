"""The HTTP endpoint's hot path: a plain request answered in the request's own task.

Through the SDK's streamable HTTP transport, a `tools/call` of an initialized
session crosses the transport's memory streams, the session's read loop, a
task spawned per request and an SSE response with tasks of its own, before
and after the handler runs. `Exchange` serves such a request itself: the POST
body is read in the ASGI task, the request goes through the same SDK request
pipeline (`ServerRunner`: the server middleware, with its spans, our relay and
session tracking, the handlers, the result's serialization), and the answer
goes back on the same task:

* as one `application/json` response when nothing was said about the request
  before its result (the common case);
* as `text/event-stream` from the first notification the request brings
  (progress, an upstream's log message), which is sent at once, the result
  following as the last event. The decision is made when the first byte has to
  go out, as the SDK's own 2026-07-28 entry does; a client must accept both.
  In the handshake era too, where the SDK's transport (and a server straight)
  answers with a stream every time: the Python SDK's client closes its
  connection after reading an answer off a stream, so a stream per answer
  costs it a new TCP connection per call (measured: 1 ms more daemon CPU per
  call, `bench/profile_calls.py --era 2025-11-25`). So a handshake-era answer
  is a stream from the start only for a client that asks for one first: its
  `Accept` ranks `text/event-stream` above `application/json` (a higher `q`,
  or the same and listed first, as content negotiation breaks ties). The SDK
  clients list JSON first and keep the cheap answer.

What is served here (`_LEAN_METHODS`), and when:

* **2026-07-28** (no session): every POST of those methods. It passes the
  SDK's own classification ladder (`classify_inbound_request`, the duplicated
  routing headers, and for `tools/call` the `Mcp-Param-*` headers checked
  against the exposed tool's schema, `validate_mcp_param_headers`) or is
  refused here as the SDK's entry refuses it: its JSON-RPC error with the
  HTTP status the revision maps it to. Closing the response stream cancels
  the request, as the revision says.
* **handshake era** (2025-11-25 and before): requests on a session the SDK
  opened and still holds (`compat_mcp_server.http_session_alive`).
  What a request asks its client mid-call (sampling, elicitation, roots) goes
  on the request's own response stream, as a straight server sends it, with
  an id of ours; the POST that carries the client's answer is taken here
  (`_answered`) and the question's waiter woken. `notifications/cancelled`
  for a request served here cancels it. The SDK's idle timer of the session
  is kept from expiring while it is used here.

Everything else (initialize, GET streams, DELETE, subscriptions, log levels,
answers to the SDK's own requests, malformed bodies) goes to the SDK as
before, with the body as it was read.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server import Server
from mcp.server.connection import Connection
from mcp.server.runner import modern_error_data, serve_one
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import HEADER_MISMATCH, INTERNAL_ERROR, REQUEST_TIMEOUT, ErrorData
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.requests import Request

from .compat_mcp_server import http_session_alive
from .resumable import RETRY_MS, ResumableEvents, for_session
from .sessions import Downstream, Sessions
from .stopping import REQUEST_SCOPE

__all__ = ["LEAN_BODY_LIMIT", "Exchange"]

logger = logging.getLogger("manager.gateway")

LEAN_BODY_LIMIT = 4 * 1024 * 1024
"""Bytes of a body read here; a longer one goes to the SDK (up to
`options.MAX_REQUEST_BODY`; beyond, 413)."""

_LEAN_METHODS = frozenset(
    {
        "tools/call",
        "tools/list",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "completion/complete",
        "ping",
    }
)
"""Plain request/response methods: nothing of the session is kept by them
(`resources/subscribe` and `logging/setLevel` keep the session to write to
later, so the SDK serves those)."""

_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]

_QUESTION_PREFIX = "mcp-manager-ask:"
"""The ids of questions asked here (strings: the SDK's own are integers)."""

_question_ids = itertools.count(1)

CANCEL_WRITE_TIMEOUT = 5.0
"""Seconds the courtesy `notifications/cancelled` may take (as the SDK)."""

_ACCEPTED = [(b"content-length", b"0")]

_compact = json.JSONEncoder(separators=(",", ":")).encode
"""`json.dumps` with these separators, without a new encoder per answer."""

Asgi = Callable[[Any, Any, Any], Awaitable[None]]


@dataclass(slots=True)
class _Answer:
    """The response of one request: JSON unless a notification came first.

    With `events` (a handshake-era session of 2025-11-25 or later), a stream
    is resumable (SEP-1699): it opens with a priming event (an id and the
    `retry` field), every event is kept under an id, and a client whose
    stream broke gets the rest with a `GET` and `Last-Event-ID`
    (`Exchange._resume`), the answer included.
    """

    send: Any
    headers: list[tuple[bytes, bytes]]
    events: ResumableEvents | None = None
    session: str | None = None
    """The session whose stream it is (with `events`)."""
    stream_id: str | None = None
    """Opened with the first event: a plain JSON answer keeps nothing."""
    streaming: bool = False
    gone: bool = False
    stream: bool = False
    """The client ranks an event stream first: the answer is one even when
    nothing comes before the result."""

    def _frame(self, message: Mapping[str, Any]) -> bytes:
        data = _compact(message).encode()
        if self.events is None or self.stream_id is None:
            return _sse_frame(data)
        return _sse_frame(data, self.events.keep(self.stream_id, data))

    async def event(self, message: Mapping[str, Any]) -> None:
        priming = b""
        if not self.streaming and self.events is not None and self.session:
            self.stream_id = self.events.open_lean(self.session)
            event_id = self.events.keep(self.stream_id, None)
            priming = f"id: {event_id}\r\nretry: {RETRY_MS}\r\ndata: \r\n\r\n".encode()
        frame = priming + self._frame(message)  # kept even for a client gone
        if self.gone:
            return
        try:
            if not self.streaming:
                self.streaming = True
                await self.send(
                    {
                        "type": "http.response.start",
                        "status": 200,
                        "headers": [*_SSE_HEADERS, *self.headers],
                    }
                )
            await self.send(
                {"type": "http.response.body", "body": frame, "more_body": True}
            )
        except OSError:  # the client went away; what follows is kept if it can resume
            self.gone = True

    async def finish(self, message: Mapping[str, Any] | None, status: int) -> None:
        """Send the answer (None: the request was cancelled, nothing to say)."""
        try:
            await self._finish(message, status)
        finally:
            if self.events is not None and self.stream_id is not None:
                self.events.end_lean(self.stream_id)

    async def _finish(self, message: Mapping[str, Any] | None, status: int) -> None:
        if self.streaming:
            body = self._frame(message) if message is not None else b""
            if not self.gone:
                await self.send({"type": "http.response.body", "body": body})
            return
        if self.gone:
            return
        if self.stream and message is not None:
            await self.event(message)  # opens the stream (primed when kept)
            if not self.gone:
                await self.send({"type": "http.response.body", "body": b""})
            return
        if message is None:  # cancelled before a word was said: an empty stream
            await self.send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [*_SSE_HEADERS, *self.headers],
                }
            )
            await self.send({"type": "http.response.body", "body": b""})
            return
        body = _compact(message).encode()
        await self.send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    *self.headers,
                ],
            }
        )
        await self.send({"type": "http.response.body", "body": body})


@dataclass(slots=True)
class _DispatchContext:
    """The SDK's `DispatchContext` for one request served here: notifications
    about it go on its own response, and so do the questions it asks a
    handshake-era client that can be asked (`questions`: that session's
    waiters, by question id); a 2026-07-28 request asks in input rounds
    instead, and has none."""

    transport: TransportContext
    request_id: Any
    message_metadata: ServerMessageMetadata
    answer: _Answer
    progress_token: Any = None
    questions: dict[str, Callable[[dict[str, Any]], None]] | None = None
    closed: bool = False
    """The request was answered: nothing more goes on its stream."""
    _cancel_requested: anyio.Event | None = None

    @property
    def can_send_request(self) -> bool:
        """A question may go out now (its client can be asked, its request is
        still open)."""
        return self.questions is not None and not self.closed

    @property
    def cancel_requested(self) -> anyio.Event:
        """Made when asked for: no handler here reads it, every call would
        pay for one."""
        if self._cancel_requested is None:
            self._cancel_requested = anyio.Event()
        return self._cancel_requested

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Any = None
    ) -> dict[str, Any]:
        """Ask the client on this request's stream and wait for its answer, as
        the SDK's dispatcher does: `opts["timeout"]` counts from the write, a
        question abandoned (timed out, or its request cancelled) is followed by
        a courtesy `notifications/cancelled`, the client's error comes back as
        `MCPError`."""
        questions = self.questions
        if questions is None or self.closed:
            raise NoBackChannelError(method)
        question = f"{_QUESTION_PREFIX}{next(_question_ids)}"
        answered = anyio.Event()
        outcome: dict[str, Any] = {}

        def settle(message: dict[str, Any]) -> None:
            outcome.update(message)
            answered.set()

        message: dict[str, Any] = {"jsonrpc": "2.0", "id": question, "method": method}
        if params is not None:
            message["params"] = dict(params)
        timeout = (opts or {}).get("timeout")
        questions[question] = settle
        try:
            await self.answer.event(message)
            with anyio.fail_after(timeout):
                await answered.wait()
        except TimeoutError:
            with anyio.move_on_after(CANCEL_WRITE_TIMEOUT):
                await self._withdraw(question, f"timed out after {timeout}s")
            raise MCPError(
                code=REQUEST_TIMEOUT, message=f"Request {method!r} timed out"
            ) from None
        except anyio.get_cancelled_exc_class():
            with anyio.move_on_after(CANCEL_WRITE_TIMEOUT, shield=True):
                await self._withdraw(question, "caller cancelled")
            raise
        finally:
            questions.pop(question, None)
        error = outcome.get("error")
        if error is not None:
            if not isinstance(error, dict):
                error = {}
            code, text = error.get("code"), error.get("message")
            raise MCPError(
                code=code if isinstance(code, int) else INTERNAL_ERROR,
                message=text if isinstance(text, str) else "",
                data=error.get("data"),
            )
        result = outcome.get("result")
        return result if isinstance(result, dict) else {}

    async def _withdraw(self, question: str, reason: str) -> None:
        await self.notify(
            "notifications/cancelled", {"requestId": question, "reason": reason}
        )

    def end(self) -> None:
        """The request is answered: nothing more goes on its stream. What it
        asked stays asked: the client has the question and may still answer
        it (an upstream whose questions name no request may have asked on the
        stream of another request of the same client); each waiter ends with
        its answer, its deadline or its asker's cancellation, as the SDK's."""
        self.closed = True

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, opts: Any = None
    ) -> None:
        """On the request's stream while it is open; dropped after (as the
        SDK's dispatch context drops it)."""
        if self.closed:
            return
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        await self.answer.event(message)

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        if self.progress_token is None:
            return
        params: dict[str, Any] = {
            "progressToken": self.progress_token,
            "progress": progress,
        }
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)


class Exchange:
    """Serves what it can of a POST to the endpoint; the rest goes to the SDK.

    Args:
        server: The endpoint's SDK server (its middleware and handlers).
        sessions: The downstream sessions (`Sessions.track` must be among
            the server's middleware).
        session_manager: Returns the SDK's session manager once the
            streamable HTTP app exists.
        events: Where resumable streams keep their events (the SDK's
            transport keeps its own there too).
        idle_timeout: The SDK sessions' idle timeout (kept from expiring
            while a session is used here).
        header_schemas: The input schemas of the exposed tools whose
            arguments are bound to `Mcp-Param-*` headers (SEP-2243), by
            name: a 2026-07-28 call's headers are checked against them.
    """

    def __init__(
        self,
        server: Server[Any],
        sessions: Sessions,
        session_manager: Callable[[], Any],
        idle_timeout: float | None,
        header_schemas: Callable[[], Mapping[Any, Any]] = dict,
        events: ResumableEvents | None = None,
    ) -> None:
        self._server = server
        self._events = events
        self._header_schemas = header_schemas
        self._sessions = sessions
        self._manager = session_manager
        self._idle_timeout = idle_timeout
        self._lifespan: dict[str, Any] = {}
        self.served = 0
        """Requests answered here (for tests and benches)."""
        self.rejected = 0
        """2026-07-28 requests refused here by the revision's ladder."""

    async def __call__(self, scope: Any, receive: Any, send: Any, sdk: Asgi) -> None:
        """Serve a POST here when it qualifies, else pass it (as read) to `sdk`;
        a GET that resumes one of our streams is served here too."""
        if scope["method"] == "GET":
            if not await self._resume(scope, receive, send):
                await self._to_sdk(sdk, scope, receive, send)
            return
        version = session = None
        accept = b""
        json_accept = sse_accept = json_body = False
        for key, value in scope["headers"]:
            if key == b"mcp-protocol-version":
                version = value
            elif key == b"mcp-session-id":
                session = value
            elif key == b"accept":
                accept = value.lower()
                json_accept = b"application/json" in accept or b"*/*" in accept
                sse_accept = b"text/event-stream" in accept or b"*/*" in accept
            elif key == b"content-type":
                json_body = value.lower().startswith(b"application/json")
        if not (json_accept and sse_accept and json_body and version is not None):
            await self._to_sdk(sdk, scope, receive, send)
            return
        body, more = await _read_body(receive)
        if more:
            await self._to_sdk(sdk, scope, _replay(body, receive, more=True), send)
            return
        try:
            message = json.loads(body)
        except (ValueError, RecursionError):
            message = None
        handled = False
        if isinstance(message, dict) and message.get("jsonrpc") == "2.0":
            era = version.decode("latin-1")
            if era in HANDSHAKE_PROTOCOL_VERSIONS:
                if session is not None:
                    handled = await self._handshake(
                        scope, receive, send, message, session.decode("latin-1"), accept
                    )
            else:
                handled = await self._modern(scope, receive, send, message)
        if not handled:
            await self._to_sdk(sdk, scope, _replay(body, receive), send)

    async def _to_sdk(self, sdk: Asgi, scope: Any, receive: Any, send: Any) -> None:
        """Pass a request to the SDK, saying which session it is for (the
        event store keeps each session's streams apart: `resumable`)."""
        if self._events is None:
            await sdk(scope, receive, send)
            return
        key = None
        for name, value in scope["headers"]:
            if name == b"mcp-session-id":
                key = value.decode("latin-1")
        box = for_session(key)
        if key is not None:
            await sdk(scope, receive, send)
            return

        async def named(message: Any) -> None:
            # A new session: its id is in the answer to `initialize`.
            if message["type"] == "http.response.start" and box.key is None:
                for name, value in message.get("headers", ()):
                    if name.lower() == b"mcp-session-id":
                        box.key = value.decode("latin-1")
            await send(message)

        await sdk(scope, receive, named)

    # --- handshake era ------------------------------------------------------------

    async def _handshake(
        self,
        scope: Any,
        receive: Any,
        send: Any,
        message: dict[str, Any],
        key: str,
        accept: bytes,
    ) -> bool:
        known = self._sessions.get(key)
        if known is None or not known.ready:
            return False
        if not http_session_alive(self._manager(), key, self._idle_timeout):
            self._sessions.forget(key)
            return False  # the SDK answers 404 for it
        if "method" not in message:
            return await self._answered(send, known, message)
        method = message.get("method")
        if method == "notifications/cancelled" and "id" not in message:
            return self._cancel(known, message.get("params"))
        request_id = message.get("id")
        if (
            method not in _LEAN_METHODS
            or not isinstance(request_id, str | int)
            or isinstance(request_id, bool)
            or not isinstance(message.get("params", {}), dict)
        ):
            return False
        answer = _Answer(
            send,
            [(b"mcp-session-id", key.encode("latin-1"))],
            stream=_stream_preferred(accept),
        )
        if self._events is not None and known.protocol_version >= "2025-11-25":
            answer.events = self._events
            answer.session = key
        asks = known.questions if known.askable else None
        dctx = _dispatch_context(scope, message, answer, asks)
        runner = known.pipeline(self._server, self._lifespan)
        self.served += 1
        # The request's own cancel scope (`stopping.REQUEST_SCOPE`), one fewer
        # on every call's path: the client's `notifications/cancelled` takes it
        # out of `in_flight` and cancels it (`_cancel`); the daemon's stop
        # cancels it where it is, and `AnswerAtStop` answers.
        request_scope: anyio.CancelScope = scope[REQUEST_SCOPE]
        known.in_flight[request_id] = request_scope
        # A client that hangs up before its answer can be resumed (no event
        # stream kept for it) will never read it: the request is cancelled, as
        # 2026-07-28 says of a closed stream, so a call waiting for the user's
        # approval is not left for an `allow` that runs it for nobody.
        watcher = watch_beside(_withdraw_on_disconnect(receive, answer, request_scope))
        withdrawn = False
        try:
            try:
                result = await runner.on_request(dctx, method, message.get("params"))
                reply = {"jsonrpc": "2.0", "id": request_id, "result": result}
            except Exception as exc:  # the dispatcher's boundary, as the SDK's
                error = handler_exception_to_error_data(exc)
                if error is None:
                    logger.exception("gateway: handler for %r raised", method)
                    error = ErrorData(code=0, message=str(exc))
                reply = _error(request_id, error)
            finally:
                dctx.end()
                watcher.cancel()
                withdrawn = known.in_flight.pop(request_id, None) is None
                http_session_alive(self._manager(), key, self._idle_timeout)
        except anyio.get_cancelled_exc_class():
            if not withdrawn:
                raise
            # The client cancelled it: never answered (JSON-RPC); what its
            # response began ends, with nothing more said (bounded: the
            # request's scope no longer stops this write).
            with anyio.move_on_after(CANCEL_WRITE_TIMEOUT, shield=True):
                await answer.finish(None, 200)
            return True
        await answer.finish(reply, 200)
        return True

    async def _answered(
        self, send: Any, known: Downstream, message: dict[str, Any]
    ) -> bool:
        """A client's answer to a question of a request served here: its
        waiter is woken and the POST accepted (202, as the SDK does); the
        answer to anything else (the SDK's own questions) goes to the SDK."""
        question = message.get("id")
        settle = known.questions.get(question) if isinstance(question, str) else None
        if settle is None or not ("result" in message or "error" in message):
            return False
        settle(message)
        await send({"type": "http.response.start", "status": 202, "headers": _ACCEPTED})
        await send({"type": "http.response.body", "body": b""})
        return True

    async def _resume(self, scope: Any, receive: Any, send: Any) -> bool:
        """A GET with `Last-Event-ID` for a stream of ours: the rest of it."""
        if self._events is None:
            return False
        last = session = None
        for key, value in scope["headers"]:
            if key == b"last-event-id":
                last = value.decode("latin-1")
            elif key == b"mcp-session-id":
                session = value.decode("latin-1")
        if last is None or session is None:
            return False
        stream_id = self._events.lean_stream(last, session)
        if stream_id is None:
            return False  # the SDK's own stream, or nothing it can resume
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    *_SSE_HEADERS,
                    (b"mcp-session-id", session.encode("latin-1")),
                ],
            }
        )
        events = self._events
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cancel_on_disconnect, receive, tg.cancel_scope)
            try:
                async for event_id, data in events.follow(stream_id, last):
                    frame = _sse_frame(data, event_id)
                    await send(
                        {"type": "http.response.body", "body": frame, "more_body": True}
                    )
                await send({"type": "http.response.body", "body": b""})
            except OSError:
                pass  # the client went away again; it may resume once more
            tg.cancel_scope.cancel()
        return True

    def _cancel(self, known: Downstream, params: Any) -> bool:
        """`notifications/cancelled` of a request served here: cancel it."""
        if not isinstance(params, dict):
            return False
        scope = known.in_flight.pop(params.get("requestId"), None)
        if scope is None:
            return False
        scope.cancel()
        return False  # still passed on: the SDK acknowledges it (202)

    # --- 2026-07-28 ---------------------------------------------------------------

    async def _modern(
        self, scope: Any, receive: Any, send: Any, message: dict[str, Any]
    ) -> bool:
        method = message.get("method")
        request_id = message.get("id")
        if (
            method not in _LEAN_METHODS
            or not isinstance(request_id, str | int)
            or isinstance(request_id, bool)
        ):
            return False
        answer = _Answer(send, [])
        verdict = self._ladder(message, scope)
        if not isinstance(verdict, InboundModernRoute):
            await self._reject(answer, request_id, verdict)
            return True
        connection = Connection.from_envelope(
            verdict.protocol_version,
            verdict.client_info,
            verdict.client_capabilities,
        )
        dctx = _dispatch_context(scope, message, answer)
        self.served += 1
        # 2026-07-28: closing the response stream cancels the request. Its
        # cancel scope is the request's own (`stopping.REQUEST_SCOPE`), one
        # fewer on every call's path: cancelled, nothing is answered.
        watcher = watch_beside(_cancel_on_disconnect(receive, scope[REQUEST_SCOPE]))
        reply: dict[str, Any]
        try:
            result = await serve_one(
                self._server,
                dctx,
                method,
                message.get("params"),
                connection=connection,
                lifespan_state=self._lifespan,
            )
            reply = {"jsonrpc": "2.0", "id": request_id, "result": result}
        except Exception as exc:  # the SDK's modern boundary
            reply = _error(request_id, modern_error_data(exc))
        finally:
            dctx.end()
            watcher.cancel()
        status = 200
        if "error" in reply and not answer.streaming:
            status = ERROR_CODE_HTTP_STATUS.get(reply["error"]["code"], 200)
        await answer.finish(reply, status)
        return True

    def _ladder(
        self, message: dict[str, Any], scope: Any
    ) -> InboundModernRoute | InboundLadderRejection:
        """The SDK's 2026-07-28 ladder, rung by rung as its entry climbs it:
        duplicated routing headers, the envelope (`classify_inbound_request`),
        and for `tools/call` the `Mcp-Param-*` headers against the exposed
        tool's schema (SEP-2243, `validate_mcp_param_headers`)."""
        raw = [  # the routing headers are all `mcp-` ones (ASGI names are lower case)
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in scope["headers"]
            if k[:4] == b"mcp-"
        ]
        duplicated = find_duplicated_routing_header(raw)
        if duplicated is not None:
            return InboundLadderRejection(
                code=HEADER_MISMATCH,
                message=f"{duplicated} header appears more than once",
            )
        verdict = classify_inbound_request(message, headers=dict(raw))
        params = message.get("params")
        if (
            not isinstance(verdict, InboundModernRoute)
            or message.get("method") != "tools/call"
            or not isinstance(params, dict)
        ):
            return verdict
        schema = self._header_schemas().get(params.get("name"))
        arguments = params.get("arguments")
        if schema is None or not isinstance(arguments, Mapping | None):
            return verdict
        headers = Headers(scope=scope)
        return validate_mcp_param_headers(schema, arguments or {}, headers) or verdict

    async def _reject(
        self, answer: _Answer, request_id: Any, rejection: InboundLadderRejection
    ) -> None:
        """A request the ladder refuses: its JSON-RPC error with the HTTP
        status the revision maps it to, as the SDK's entry answers it."""
        self.rejected += 1
        error = ErrorData(
            code=rejection.code, message=rejection.message, data=rejection.data
        )
        status = ERROR_CODE_HTTP_STATUS.get(rejection.code, 200)
        await answer.finish(_error(request_id, error), status)


def watch_beside(watcher: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    """Run `watcher` beside one request, outside any task group; the caller
    cancels the returned task when the request ends (and `watcher` must end
    quietly when cancelled).

    The package's one bare task (`tests/test_layering.py` holds it to this):
    everywhere else tasks live in anyio task groups. Here a group, a spawn and
    its cancellation per request cost 115 to 150 µs of CPU against 15 to 26 µs
    for a bare task (`bench/bench_tasks.py`, two runs on the 2-core VM,
    2026-11-28): 2 to 3 % of the daemon's 4.2 to 4.6 ms of CPU per 2026-07-28
    call (`bench/profile_calls.py`).
    """
    return asyncio.get_running_loop().create_task(watcher)


def _dispatch_context(
    scope: Any,
    message: dict[str, Any],
    answer: _Answer,
    questions: dict[str, Callable[[dict[str, Any]], None]] | None = None,
) -> _DispatchContext:
    """The request's context; with `questions` (its session's waiters) it may
    ask its client things on its own stream."""
    request = Request(scope)
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return _DispatchContext(
        transport=TransportContext(
            kind="streamable-http",
            can_send_request=questions is not None,
            headers=request.headers,
        ),
        request_id=message["id"],
        message_metadata=ServerMessageMetadata(request_context=request),
        answer=answer,
        progress_token=token if isinstance(token, str | int) else None,
        questions=questions,
    )


def _stream_preferred(accept: bytes) -> bool:
    """Whether an `Accept` header (lower-cased) ranks `text/event-stream` above
    `application/json`: a higher `q`, or the same `q` and listed first (the
    tie-break of content negotiation, e.g. Werkzeug's `best_match`).
    """
    if accept.startswith(b"application/json") and b"q=" not in accept:
        return False  # what the SDK clients send: not parsed on every call
    ranks: dict[bytes, tuple[float, int]] = {}
    for position, part in enumerate(accept.split(b",")):
        media, _, params = part.partition(b";")
        media = media.strip()
        if media not in _ANSWER_FORMS or media in ranks:
            continue
        quality = 1.0
        for param in params.split(b";"):
            name, _, value = param.partition(b"=")
            if name.strip() == b"q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        ranks[media] = (-quality, position)
    stream = ranks.get(b"text/event-stream")
    json_rank = ranks.get(b"application/json")
    return (
        stream is not None
        and stream[0] < 0
        and (json_rank is None or stream < json_rank)
    )


_ANSWER_FORMS = (b"text/event-stream", b"application/json")


def _sse_frame(data: bytes, event_id: str | None = None) -> bytes:
    """One `message` event of an SSE stream (with its id when it is kept)."""
    if event_id is None:
        return b"event: message\r\ndata: %s\r\n\r\n" % data
    return b"id: %s\r\nevent: message\r\ndata: %s\r\n\r\n" % (event_id.encode(), data)


def _error(request_id: Any, error: ErrorData) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": error.model_dump(by_alias=True, mode="json", exclude_none=True),
    }


async def _cancel_on_disconnect(receive: Any, scope: anyio.CancelScope) -> None:
    try:
        while (await receive())["type"] != "http.disconnect":
            pass
    except Exception:  # the server's own failure: the request is not the client's
        return
    scope.cancel()


async def _withdraw_on_disconnect(
    receive: Any, answer: _Answer, scope: anyio.CancelScope
) -> None:
    """Cancel `scope` when the client hangs up before `answer` has an event
    stream it could resume (`Last-Event-ID`)."""
    try:
        while (await receive())["type"] != "http.disconnect":
            pass
    except Exception:  # the server's own failure: the request is not the client's
        return
    if answer.stream_id is None:
        scope.cancel()


async def _read_body(receive: Any) -> tuple[bytes, bool]:
    """The request body, up to `LEAN_BODY_LIMIT`; True when more is left unread."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), False
        if size > LEAN_BODY_LIMIT:
            return b"".join(chunks), True


def _replay(body: bytes, receive: Any, *, more: bool = False) -> Any:
    """`receive` for the SDK: the body read so far first, then the rest."""
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return replay
