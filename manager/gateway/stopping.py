"""The HTTP endpoint's requests in flight, answered when the daemon stops.

Without this, uvicorn's graceful shutdown waits for open requests, then
cancels them: a client in the middle of a call got a closed connection (and
the log a traceback), and could not tell whether the call ran. Here every
request in flight when the daemon stops (after `STOP_GRACE` for those about
to end by themselves, a call waiting for approval that the stop ended among
them) is cancelled and answered in words (`core.once.stopped_error`: the
server may have run it, it was not sent again), on the response it already
had:

* nothing sent yet: a JSON answer (200) with one error per request of the body;
* an event stream begun: one more event per request, then the end of the stream;
* an event stream with no request (a GET): its end.

A `subscriptions/listen` stream is not a request that may have run: it ends
as a 2026-07-28 server ends one it closes, with its result (stamped with the
subscription id), so the client sees a graceful close, not an error.

Requests that come in while the daemon stops get 503 and the same words.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable
from typing import Any

import anyio
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

from ..core.once import STOPPED_CODE, stopped_error

__all__ = ["REQUEST_SCOPE", "STOP_GRACE", "AnswerAtStop"]

STOP_GRACE = 0.5
"""Seconds the requests in flight get to end by themselves when the daemon
stops, before they are cut and answered "may have run"."""

LISTEN_METHOD = "subscriptions/listen"

REQUEST_SCOPE = "mcp_manager.cancel"
"""The ASGI scope's key for the request's own cancel scope: the app may
cancel it (a client that leaves) instead of opening one more; only what the
daemon's stop cancels is answered here."""


class AnswerAtStop:
    """ASGI middleware: what is in flight when `stop()` is called is
    cancelled and answered (see the module docstring).

    Args:
        app: The endpoint's ASGI app (the `Guard`).
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self._scopes: set[anyio.CancelScope] = set()
        self._posts: dict[anyio.CancelScope, _Exchange] = {}
        self._settled: anyio.Event | None = None
        self.stopping = False

    async def stop(self, grace: float = STOP_GRACE) -> int:
        """Refuse new requests; give the POSTs in flight `grace` seconds to
        end by themselves (a call the stop already ended, one that waited
        for approval, answers in its own words: not sent); then cancel every
        request still in flight (each answers as it ends). Returns how many
        were cancelled."""
        self.stopping = True
        with anyio.move_on_after(grace):
            while self._busy():
                self._settled = anyio.Event()
                await self._settled.wait()
        for scope in self._scopes:
            scope.cancel()
        return len(self._scopes)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.stopping:
            await _refuse(send)
            return
        exchange = _Exchange(receive, send)
        with anyio.CancelScope() as cancel:
            scope[REQUEST_SCOPE] = cancel
            self._scopes.add(cancel)
            if scope.get("method") == "POST":  # a request (a GET is a stream)
                self._posts[cancel] = exchange
            try:
                await self.app(scope, exchange.receive, exchange.send)
            finally:
                self._scopes.discard(cancel)
                self._posts.pop(cancel, None)
                if self._settled is not None:
                    self._settled.set()  # `stop` looks again
        if self.stopping and cancel.cancel_called and not exchange.done:
            with contextlib.suppress(Exception):  # boundary: the client may be gone
                await exchange.answer_stopped()

    def _busy(self) -> bool:
        """A POST in flight that will end by itself: not a listen stream
        (2026-07-28), which lasts as long as its client wants."""
        return any(
            method != LISTEN_METHOD
            for exchange in self._posts.values()
            for _, method in _requests(b"".join(exchange.body)) or [(None, "")]
        )


class _Exchange:
    """One request as the app sees it: its body kept, its response followed."""

    __slots__ = ("_receive", "_send", "body", "done", "event_stream", "started")

    def __init__(self, receive: Any, send: Any) -> None:
        self._receive = receive
        self._send = send
        self.body: list[bytes] = []
        self.started = self.event_stream = self.done = False

    async def receive(self) -> Any:
        message = await self._receive()
        if message["type"] == "http.request":
            self.body.append(message.get("body", b""))
        return message

    def send(self, message: Any) -> Awaitable[None]:
        """The app's `send`: noted, then the server's own send, awaited by
        the app (no coroutine of ours between: every message of every
        response passes here)."""
        kind = message["type"]
        if kind == "http.response.start":
            self.started = True
            for key, value in message.get("headers", ()):
                if key == b"content-type":
                    self.event_stream = value.startswith(b"text/event-stream")
        elif kind == "http.response.body" and not message.get("more_body", False):
            self.done = True
        sent: Awaitable[None] = self._send(message)
        return sent

    async def answer_stopped(self) -> None:
        answers = [
            _closed(request_id)
            if method == "subscriptions/listen"
            else stopped_error(request_id, method)
            for request_id, method in _requests(b"".join(self.body))
        ]
        if not self.started:
            if not answers:
                await _refuse(self._send)
                return
            await _json(self._send, 200, answers[0] if len(answers) == 1 else answers)
            return
        if self.event_stream:
            for answer in answers:
                event = f"event: message\r\ndata: {json.dumps(answer)}\r\n\r\n"
                await self._send(
                    {
                        "type": "http.response.body",
                        "body": event.encode(),
                        "more_body": True,
                    }
                )
        await self._send({"type": "http.response.body", "body": b""})


def _requests(body: bytes) -> list[tuple[Any, object]]:
    """The (id, method) of each request in a POST body (one message or a batch)."""
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        return []
    messages = parsed if isinstance(parsed, list) else [parsed]
    return [
        (message["id"], message["method"])
        for message in messages
        if isinstance(message, dict) and "method" in message and "id" in message
    ]


def _closed(request_id: Any) -> dict[str, Any]:
    """A listen stream's end, as the server that closes it says it."""
    meta = {SUBSCRIPTION_ID_META_KEY: request_id}
    result = {"_meta": meta, "resultType": "complete"}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


async def _refuse(send: Any) -> None:
    error = {
        "code": STOPPED_CODE,
        "message": "mcp-manager is stopping; nothing was sent to any server",
    }
    await _json(send, 503, {"jsonrpc": "2.0", "id": None, "error": error})


async def _json(send: Any, status: int, payload: object) -> None:
    """A whole JSON answer: its head, then its body."""
    body = json.dumps(payload).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
