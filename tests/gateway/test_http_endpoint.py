"""The endpoint's HTTP layer (`gateway.http`): what uvicorn writes, and how.

`_Coalescing` is checked on a transport that records its writes; the protocol
(`_HttpProtocol`, uvicorn's own with that transport) is fed a request as the
loop would feed it, and its answer is read off the same recording transport.
The whole endpoint runs on it in every other gateway test.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest
import uvicorn
from uvicorn.server import ServerState

from manager.gateway.http import _Coalescing, _HttpProtocol

pytestmark = pytest.mark.anyio


class Recording:
    """A transport that keeps what is written to it, each write apart."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.aborted = False
        self.eof = False
        self.wrote = anyio.Event()

    def write(self, data: bytes) -> None:
        assert not self.closed, "written after close"
        self.writes.append(bytes(data))
        self.wrote.set()

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = self.closed = True

    def write_eof(self) -> None:
        self.eof = True

    def get_write_buffer_size(self) -> int:
        return 7

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5), "sockname": ("127.0.0.1", 6)}.get(
            name, default
        )

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def next_turn() -> None:
    """Let the loop run what was scheduled with `call_soon` before now."""
    await asyncio.sleep(0)


async def test_writes_of_one_turn_leave_together_in_order() -> None:
    inner = Recording()
    transport = _Coalescing(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
    transport.write(b"")  # nothing: no write of its own
    transport.writelines([b"{", bytearray(b'"a"'), memoryview(b":1}")])
    assert inner.writes == []
    assert transport.get_write_buffer_size() == 7 + 19 + 1 + 3 + 3
    await next_turn()
    assert inner.writes == [b'HTTP/1.1 200 OK\r\n\r\n{"a":1}']
    transport.write(b"next")
    await next_turn()
    assert inner.writes[1:] == [b"next"]
    assert transport.get_write_buffer_size() == 7


async def test_close_sends_what_waits_and_abort_drops_it() -> None:
    inner = Recording()
    transport = _Coalescing(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(b"last words")
    transport.close()
    assert inner.writes == [b"last words"] and inner.closed
    await next_turn()  # the scheduled flush finds nothing left
    assert inner.writes == [b"last words"]

    inner = Recording()
    transport = _Coalescing(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(b"never sent")
    transport.abort()
    await next_turn()
    assert inner.writes == [] and inner.aborted

    inner = Recording()
    transport = _Coalescing(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(b"before eof")
    transport.write_eof()
    assert inner.writes == [b"before eof"] and inner.eof


async def test_a_transport_closed_meanwhile_gets_nothing() -> None:
    inner = Recording()
    transport = _Coalescing(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(b"too late")
    inner.closed = True  # the peer went away before the turn ended
    await next_turn()
    assert inner.writes == []
    # Anything else is the transport's own.
    assert transport.get_extra_info("peername") == ("127.0.0.1", 5)


async def answer(scope: Any, receive: Any, send: Any) -> None:
    """An ASGI app that answers as the hot path does: head, then body."""
    if scope["type"] != "http":
        return
    await receive()
    body = b'{"jsonrpc":"2.0","id":1,"result":{}}'
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def test_uvicorn_answers_in_one_write() -> None:
    """Head and body of a JSON answer reach the socket in one write (uvicorn's
    own protocol writes them in two)."""
    config = uvicorn.Config(answer, http=_HttpProtocol, log_config=None, lifespan="off")
    config.load()
    assert config.http_protocol_class is _HttpProtocol
    protocol = _HttpProtocol(config=config, server_state=ServerState(), app_state={})
    inner = Recording()
    protocol.connection_made(inner)  # type: ignore[arg-type]
    protocol.data_received(
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-length: 2\r\n\r\n{}"
    )
    with anyio.fail_after(10):
        await inner.wrote.wait()
    assert len(inner.writes) == 1
    head, _, body = inner.writes[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert body == b'{"jsonrpc":"2.0","id":1,"result":{}}'
    protocol.shutdown()  # idle between requests: closes the connection
    assert inner.closed
