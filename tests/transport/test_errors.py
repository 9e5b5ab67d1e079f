"""The error mapping, row by row: foreign → ours (`transport/errors.py`), ours →
the client's (`gateway/errors.py`). The rows through a real endpoint are in
`test_eras.py` (an upstream's custom error, both fronts) and
`test_gateway.py` / `test_gateway_features.py` (a server down, a timeout)."""

from __future__ import annotations

import errno

import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST, REQUEST_TIMEOUT

from manager.core.errors import (
    CallError,
    CallTimeout,
    ConnectFailed,
    ConnectTimeout,
    Disconnected,
    ServerUnavailable,
    UnknownServer,
    UpstreamError,
)
from manager.gateway.errors import client_error
from manager.transport.errors import (
    describe_error,
    map_failure,
    request_error,
    status_failure,
)
from manager.transport.http.status import HttpStatus, retry_after

REQUEST = httpx2.Request("POST", "http://127.0.0.1:9/mcp")


def _refused() -> httpx2.ConnectError:
    try:
        raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    except ConnectionRefusedError as cause:
        try:
            raise httpx2.ConnectError("All connection attempts failed") from cause
        except httpx2.ConnectError as exc:
            return exc


DESCRIBED = [
    (ConnectionRefusedError(), "connection refused"),
    (_refused(), "cannot connect: connection refused"),
    (
        httpx2.HTTPStatusError(
            "x", request=REQUEST, response=httpx2.Response(502, request=REQUEST)
        ),
        "HTTP 502 Bad Gateway from http://127.0.0.1:9/mcp",
    ),
    (httpx2.ReadTimeout("t", request=REQUEST), "HTTP timeout (ReadTimeout)"),
    (
        httpx2.RemoteProtocolError("Server disconnected without sending a response."),
        "the server closed the connection without answering",
    ),
    (
        httpx2.RemoteProtocolError(
            "peer closed connection without sending complete message body"
        ),
        "the server closed the connection in the middle of a response "
        "(peer closed connection without sending complete message body)",
    ),
    (
        httpx2.ReadError("reset"),
        "the connection broke while reading the server's answer (reset)",
    ),
    (httpx2.WriteError(""), "the connection broke while sending to the server"),
    (MCPError(-32603, "boom"), "boom (MCP error -32603)"),
    (
        MCPError(-32000, "SSE stream ended without a response"),
        "the server closed the connection before answering "
        "(SSE stream ended without a response)",
    ),
    (TimeoutError(), "timed out"),
    (ExceptionGroup("g", [ValueError("inner"), OSError("disk")]), "OSError: disk"),
    (ConnectFailed("already ours"), "already ours"),
]


@pytest.mark.parametrize(
    ("exc", "text"), DESCRIBED, ids=[type(e).__name__ for e, _ in DESCRIBED]
)
@pytest.mark.anyio
async def test_each_foreign_error_is_one_plain_sentence(
    exc: BaseException, text: str
) -> None:
    assert describe_error(exc) == text


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("30", 30.0),
        (" 7 ", 7.0),
        ("Sun, 29 Nov 2026 10:00:40 GMT", 40.0),  # an HTTP-date, 40 s ahead
        ("Sun, 29 Nov 2026 09:00:00 GMT", 0.0),  # a date passed: at once
        (None, None),
        ("-3", None),
        ("soon", None),
        ("1.5", None),  # RFC 9110: delay-seconds are whole
    ],
)
def test_retry_after_is_read_as_seconds_or_a_date(
    value: str | None, seconds: float | None
) -> None:
    now = 1_795_946_400.0  # Sun, 29 Nov 2026 10:00:00 GMT
    assert retry_after(value, now=now) == seconds


@pytest.mark.anyio
async def test_an_sse_stream_refused_429_says_so_and_carries_its_retry_after() -> None:
    """The legacy SSE client raises the GET's status: said with its phrase,
    and the wait it asked for goes to the next try."""
    response = httpx2.Response(429, headers={"retry-after": "30"}, request=REQUEST)
    exc = httpx2.HTTPStatusError("x", request=REQUEST, response=response)
    failure = map_failure(exc, "")
    assert str(failure) == (
        "HTTP 429 Too Many Requests; it asks to wait 30 s (Retry-After) "
        "from http://127.0.0.1:9/mcp"
    )
    assert failure.retry_after == 30.0


def test_only_the_sdk_s_stand_in_for_a_status_is_said_with_that_status() -> None:
    """A handshake that failed on "Server returned an error response" was a
    status the SDK dropped: said with it. Another failure is left alone, a
    status seen earlier (a probe answered 400) notwithstanding."""
    statuses = [HttpStatus(400), HttpStatus(503, 5.0)]
    stand_in = MCPError(-32603, "Server returned an error response")
    try:
        raise ConnectFailed("handshake failed: ...") from stand_in
    except ConnectFailed as exc:
        said = status_failure(exc, statuses)
    assert said is not None and said.retry_after == 5.0
    assert str(said) == (
        "the server answered HTTP 503 Service Unavailable; "
        "it asks to wait 5 s (Retry-After)"
    )
    assert status_failure(ConnectTimeout("no complete handshake"), statuses) is None
    assert status_failure(stand_in, []) is None


def test_a_request_timeout_is_a_call_timeout_from_the_moment_it_happens() -> None:
    for exc in (TimeoutError(), MCPError(REQUEST_TIMEOUT, "Request timed out")):
        error = request_error(exc, "tools/call echo", limit=2.5)
        assert isinstance(error, CallTimeout)
        assert str(error) == "tools/call echo: no result within 2.5 s"


def test_an_answer_that_could_not_be_read_is_no_refusal() -> None:
    """A call answered as text/plain: the server ran it, and the sentence
    must not read as if it had refused (a user would try again)."""
    unread = MCPError(INVALID_REQUEST, "Unexpected content type: text/plain")
    error = request_error(unread, "tools/call echo")
    assert isinstance(error, UpstreamError) and error.code == INVALID_REQUEST
    assert str(error) == (
        "tools/call echo: the server's answer could not be read (Unexpected "
        "content type: text/plain); the server may have run it (MCP error -32600)"
    )


@pytest.mark.parametrize("code", [CONNECTION_CLOSED, REQUEST_TIMEOUT])
def test_a_server_s_own_answer_with_the_sdk_s_codes_is_its_answer(code: int) -> None:
    """-32000 and -32001 are the SDK's "connection closed" and "timed out",
    and a server's to answer with too: its answer is passed on whole (it
    read as a lost session, and as a call timeout after 0.1 s)."""
    error = request_error(MCPError(code, "boom", {"x": 1}), "tools/call t")
    assert isinstance(error, UpstreamError)
    assert (error.code, error.reply, error.data) == (code, "boom", {"x": 1})


def test_a_lost_session_is_disconnected_with_the_transport_s_reason() -> None:
    gone = MCPError(CONNECTION_CLOSED, "Connection closed")
    error = request_error(gone, "prompts/get p", lost="process exited with code 3")
    assert isinstance(error, Disconnected)
    assert str(error) == "prompts/get p: process exited with code 3"
    # The SDK's transport's words for a 404 end a request of our own (a list,
    # a ping); a caller's request went by a relay, which says a 404 itself
    # (`SessionTerminated`): these words there are the server's answer.
    forgot = MCPError(-32600, "Session not found")
    assert isinstance(request_error(forgot, "x", answered=False), Disconnected)
    assert isinstance(request_error(forgot, "x"), UpstreamError)


def test_the_server_s_own_error_keeps_its_code_message_and_data() -> None:
    error = request_error(MCPError(-32042, "nope", {"why": [0, {}]}), "tools/call t")
    assert isinstance(error, UpstreamError)
    assert (error.code, error.reply, error.data) == (-32042, "nope", {"why": [0, {}]})
    assert str(error) == "tools/call t rejected by the server: nope (MCP error -32042)"


@pytest.mark.anyio
async def test_our_own_request_refused_is_a_failed_connection() -> None:
    error = request_error(MCPError(-32601, "no ping"), "ping", answered=False)
    assert isinstance(error, ConnectFailed)


def test_anything_else_is_not_ours_to_translate() -> None:
    assert request_error(ValueError("bug"), "tools/call t") is None


@pytest.mark.anyio
async def test_a_failed_try_is_a_transport_error() -> None:
    assert isinstance(map_failure(_refused(), "connect"), ConnectFailed)
    timeout = map_failure(
        MCPError(REQUEST_TIMEOUT, "Request 'initialize' timed out"), "initialize"
    )
    assert isinstance(timeout, ConnectTimeout)
    inner = Disconnected("gone")
    assert map_failure(ExceptionGroup("g", [inner]), "x") is inner


@pytest.mark.parametrize(
    ("ours", "code", "message", "data"),
    [
        (
            UpstreamError("long text", code=-32042, reply="nope", data=[1]),
            -32042,
            "nope",
            [1],
        ),
        (ServerUnavailable("s is down"), INVALID_REQUEST, "s is down", None),
        (
            CallTimeout("s/t: no result within 1 s"),
            INVALID_REQUEST,
            "s/t: no result within 1 s",
            None,
        ),
        (
            UnknownServer("no connection named 'x'"),
            INVALID_REQUEST,
            "no connection named 'x'",
            None,
        ),
        (CallError("odd"), INVALID_REQUEST, "odd", None),
    ],
)
def test_ours_become_the_client_s_in_one_place(
    ours: CallError, code: int, message: str, data: object
) -> None:
    error = client_error(ours)
    assert (error.code, error.message, error.data) == (code, message, data)


def _asyncio_refused() -> httpx2.ConnectError:
    """What anyio's connect raises through httpx: asyncio's own words."""
    try:
        raise OSError(errno.ECONNRESET, "Connect call failed ('127.0.0.1', 9)")
    except OSError as cause:
        try:
            raise httpx2.ConnectError("connect failed") from cause
        except httpx2.ConnectError as exc:
            return exc


@pytest.mark.anyio
async def test_a_failed_connect_says_what_the_errno_says() -> None:
    text = describe_error(_asyncio_refused())
    assert text == "cannot connect: connection reset by peer"
