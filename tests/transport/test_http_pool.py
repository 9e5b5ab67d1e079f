"""`PoolTransport`: HTTP/1.1 under httpx2, against scripted servers on 127.0.0.1.

Each test's server is an asyncio server whose handler writes exactly the bytes
the test needs (a keep-alive answer, a body cut short, a close before the
answer...), and records what it saw; the client is an `httpx2.AsyncClient` on
the transport, as the daemon's upstream client is.
"""

from __future__ import annotations

import asyncio
import datetime
import errno
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import anyio
import anyio.lowlevel
import httpx2
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from manager.transport.errors import describe_error
from manager.transport.http.pool import READ_HIGH_WATER, PoolTransport

pytestmark = pytest.mark.anyio

Reader = asyncio.StreamReader
Writer = asyncio.StreamWriter
Handler = Callable[[Reader, Writer], Awaitable[None]]


def ok(body: bytes = b"{}", *extra: bytes) -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    head += b"".join(line + b"\r\n" for line in extra)
    return head + b"content-length: %d\r\n\r\n%s" % (len(body), body)


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes] | None:
    """One request (head, body) off the connection; None at EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    length = 0
    chunked = False
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
        elif name.lower() == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if not chunked:
        return head, await reader.readexactly(length)
    body = b""
    while True:
        size = int((await reader.readuntil(b"\r\n")).strip(), 16)
        data = await reader.readexactly(size + 2)
        if size == 0:
            return head, body
        body += data[:-2]


class Server:
    """A scripted server: `handler` serves each connection; counts them."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.closed_by_client = asyncio.Event()
        self.port = 0

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.connections += 1
        try:
            await self.handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def serving(
    handler: Handler, context: ssl.SSLContext | None = None
) -> AsyncIterator[Server]:
    server = Server(handler)
    listener = await asyncio.start_server(server._serve, "127.0.0.1", 0, ssl=context)
    server.port = listener.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        listener.close()


def answering(*responses: bytes, then_close: bool = False) -> Handler:
    """Answers requests on a connection in turn with `responses` (the last
    repeats), until the client closes it (or after them, `then_close`)."""

    async def handler(reader: Reader, writer: Writer) -> None:
        turn = 0
        while await read_request(reader) is not None:
            writer.write(responses[min(turn, len(responses) - 1)])
            await writer.drain()
            turn += 1
            if then_close and turn == len(responses):
                return

    return handler


async def echoing(reader: Reader, writer: Writer) -> None:
    """Answers each request with its own body."""
    while (request := await read_request(reader)) is not None:
        writer.write(ok(request[1]))
        await writer.drain()


def client(transport: PoolTransport, **kwargs: object) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=transport, **kwargs)  # type: ignore[arg-type]


def url(server: Server, scheme: str = "http") -> str:
    return f"{scheme}://127.0.0.1:{server.port}/mcp"


# --- keep-alive -------------------------------------------------------------------


async def test_a_connection_serves_request_after_request() -> None:
    async with serving(answering(ok(b'{"n":1}'))) as server:
        pool = PoolTransport()
        async with client(pool) as http:
            for _ in range(5):
                response = await http.post(url(server), content=b'{"x":1}')
                assert response.status_code == 200 and response.json() == {"n": 1}
            assert server.connections == 1
            assert (pool.connections, pool.idle) == (1, 1)


async def test_an_idle_connection_the_server_closed_is_not_used_again() -> None:
    closed = asyncio.Event()

    async def handler(reader: Reader, writer: Writer) -> None:
        await read_request(reader)
        writer.write(ok())
        writer.close()
        await writer.wait_closed()
        closed.set()

    async with serving(handler) as server:
        pool = PoolTransport()
        async with client(pool) as http:
            await http.post(url(server), content=b"{}")
            with anyio.fail_after(10):
                await closed.wait()
                # The pool learns of the close in a protocol callback, with
                # no event to wait on: let the loop run until it has.
                while pool.idle:
                    await anyio.lowlevel.checkpoint()
            closed.clear()
            assert (await http.post(url(server), content=b"{}")).status_code == 200
            assert server.connections == 2


async def test_an_idle_connection_expires_and_is_closed() -> None:
    eof = asyncio.Event()

    async def handler(reader: Reader, writer: Writer) -> None:
        while await read_request(reader) is not None:
            writer.write(ok())
        eof.set()

    async with serving(handler) as server:
        pool = PoolTransport(keepalive_expiry=0.05)
        async with client(pool) as http:
            await http.post(url(server), content=b"{}")
            with anyio.fail_after(10):
                await eof.wait()  # the client closed it, unasked
            assert (pool.connections, pool.idle) == (0, 0)


async def test_connection_close_is_honoured() -> None:
    async with serving(answering(ok(b"{}", b"connection: close"))) as server:
        pool = PoolTransport()
        async with client(pool) as http:
            await http.post(url(server), content=b"{}")
            await http.post(url(server), content=b"{}")
            assert server.connections == 2
            assert pool.connections == 0


async def test_a_response_closed_before_its_end_closes_its_connection() -> None:
    sse = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
        b"6\r\ndata: \r\n"
    )
    async with serving(answering(sse)) as server:
        pool = PoolTransport()
        async with client(pool) as http:
            async with http.stream("POST", url(server), content=b"{}") as response:
                async for chunk in response.aiter_raw():
                    assert chunk == b"data: "
                    break
            assert (pool.connections, pool.idle) == (0, 0)


# --- bodies -----------------------------------------------------------------------


async def test_a_chunked_body_streams_as_it_arrives() -> None:
    go_on = asyncio.Event()

    async def handler(reader: Reader, writer: Writer) -> None:
        while await read_request(reader) is not None:
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n"
            )
            await go_on.wait()
            go_on.clear()
            writer.write(b"6\r\nsecond\r\n0\r\n\r\n")

    async with serving(handler) as server:
        pool = PoolTransport()
        async with client(pool) as http:
            for _ in range(2):
                async with http.stream("POST", url(server), content=b"{}") as response:
                    chunks = response.aiter_raw()
                    assert await chunks.__anext__() == b"first"  # before the rest
                    go_on.set()
                    assert [c async for c in chunks] == [b"second"]
            assert server.connections == 1


async def test_a_body_without_length_ends_with_the_connection() -> None:
    reply = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{}"
    async with serving(answering(reply, then_close=True)) as server:
        pool = PoolTransport()
        async with client(pool) as http:
            response = await http.post(url(server), content=b"{}")
            assert response.content == b"{}"
            assert pool.connections == 0


async def test_an_interim_response_is_skipped() -> None:
    reply = b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b'{"a":1}')
    async with serving(answering(reply)) as server:
        async with client(PoolTransport()) as http:
            response = await http.post(url(server), content=b"{}")
            assert response.status_code == 200 and response.json() == {"a": 1}


async def test_a_large_body_goes_out_whole_and_a_large_answer_comes_back() -> None:
    big = bytes(range(256)) * (4 * READ_HIGH_WATER // 256)
    async with serving(echoing) as server:
        async with client(PoolTransport()) as http:
            response = await http.post(url(server), content=big)
            assert response.content == big


async def test_a_streamed_request_body_is_sent_chunked() -> None:
    async def parts() -> AsyncIterator[bytes]:
        yield b'{"a":'
        yield b""
        yield b"1}"

    async with serving(echoing) as server:
        async with client(PoolTransport()) as http:
            response = await http.post(url(server), content=parts())
            assert response.content == b'{"a":1}'


async def test_head_goes_to_the_fallback_transport() -> None:
    reply = b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n"
    async with serving(answering(reply)) as server:
        async with client(PoolTransport()) as http:
            response = await http.head(url(server))
            assert response.status_code == 200 and response.content == b""


# --- failures ---------------------------------------------------------------------


async def test_a_close_before_the_answer_is_named() -> None:
    async def handler(reader: Reader, writer: Writer) -> None:
        await read_request(reader)

    async with serving(handler) as server:
        pool = PoolTransport()
        async with client(pool) as http:
            with pytest.raises(httpx2.RemoteProtocolError) as caught:
                await http.post(url(server), content=b"{}")
            assert describe_error(caught.value) == (
                "the server closed the connection without answering"
            )
            assert pool.connections == 0


async def test_a_body_cut_short_is_named() -> None:
    reply = b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n{}"
    async with serving(answering(reply, then_close=True)) as server:
        pool = PoolTransport()
        async with client(pool) as http:
            with pytest.raises(httpx2.RemoteProtocolError) as caught:
                await http.post(url(server), content=b"{}")
            assert str(caught.value) == (
                "peer closed connection without sending complete message body: "
                "received 2 bytes, expected 10"
            )
            assert describe_error(caught.value).startswith(
                "the server closed the connection in the middle of a response"
            )
            assert pool.connections == 0


async def test_a_broken_chunked_stream_is_named() -> None:
    reply = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n"
    async with serving(answering(reply, then_close=True)) as server:
        async with client(PoolTransport()) as http:
            with pytest.raises(httpx2.RemoteProtocolError, match="incomplete chunked"):
                await http.post(url(server), content=b"{}")


async def test_a_malformed_answer_is_a_protocol_error() -> None:
    async with serving(answering(b"NOT HTTP AT ALL\r\n\r\n")) as server:
        pool = PoolTransport()
        async with client(pool) as http:
            with pytest.raises(httpx2.RemoteProtocolError, match="malformed HTTP"):
                await http.post(url(server), content=b"{}")
            assert pool.connections == 0


async def test_a_reset_is_a_read_error_with_its_reason() -> None:
    async def handler(reader: Reader, writer: Writer) -> None:
        await read_request(reader)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(
            __import__("socket").SOL_SOCKET,
            __import__("socket").SO_LINGER,
            b"\x01\x00\x00\x00\x00\x00\x00\x00",
        )
        writer.transport.abort()  # RST

    async with serving(handler) as server:
        async with client(PoolTransport()) as http:
            with pytest.raises(httpx2.ReadError) as caught:
                await http.post(url(server), content=b"{}")
            assert "reset by peer" in describe_error(caught.value).lower()


async def test_a_refused_connect_is_a_connect_error_with_its_errno() -> None:
    async with serving(answering(ok())) as server:
        port = server.port
    async with client(PoolTransport()) as http:
        with pytest.raises(httpx2.ConnectError) as caught:
            await http.post(f"http://127.0.0.1:{port}/mcp", content=b"{}")
    assert isinstance(caught.value.__cause__, OSError)
    assert caught.value.__cause__.errno == errno.ECONNREFUSED
    assert describe_error(caught.value) == "cannot connect: connection refused"


async def test_a_silent_server_is_a_read_timeout() -> None:
    async def handler(reader: Reader, writer: Writer) -> None:
        await read_request(reader)
        await reader.read()  # says nothing until the client goes

    async with serving(handler) as server:
        pool = PoolTransport()
        async with client(pool, timeout=httpx2.Timeout(5, read=0.05)) as http:
            with pytest.raises(httpx2.ReadTimeout):
                await http.post(url(server), content=b"{}")
            assert pool.connections == 0


async def test_a_cancelled_request_drops_its_connection() -> None:
    asked = asyncio.Event()

    async def handler(reader: Reader, writer: Writer) -> None:
        await read_request(reader)
        asked.set()
        await reader.read()

    async with serving(handler) as server:
        pool = PoolTransport()
        async with client(pool) as http, anyio.create_task_group() as tg:

            async def call() -> None:
                await http.post(url(server), content=b"{}")

            tg.start_soon(call)
            await asked.wait()
            tg.cancel_scope.cancel()
        assert (pool.connections, pool.idle) == (0, 0)


async def test_the_pool_is_bounded_and_a_waiter_times_out() -> None:
    asked = asyncio.Event()
    release = asyncio.Event()

    async def handler(reader: Reader, writer: Writer) -> None:
        while await read_request(reader) is not None:
            asked.set()
            await release.wait()
            writer.write(ok())

    async with serving(handler) as server:
        pool = PoolTransport(max_connections=1)
        async with client(pool, timeout=httpx2.Timeout(5, pool=0.05)) as http:
            async with anyio.create_task_group() as tg:
                tg.start_soon(partial(http.post, url(server), content=b"{}"))
                await asked.wait()
                with pytest.raises(httpx2.PoolTimeout):
                    await http.post(url(server), content=b"{}")
                release.set()
            # A waiter gets the connection once it is free.
            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(partial(http.post, url(server), content=b"{}"))
            assert server.connections == 1


# --- https ------------------------------------------------------------------------


def _certificate(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(__import__("ipaddress").ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


async def test_https_with_the_servers_certificate_trusted(tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path)
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    async with serving(answering(ok(b'{"tls":true}')), server_side) as server:
        trusted = PoolTransport(ssl_context=ssl.create_default_context(cafile=cert))
        async with client(trusted) as http:
            for _ in range(2):
                response = await http.post(url(server, "https"), content=b"{}")
                assert response.json() == {"tls": True}
            assert server.connections == 1
        async with client(PoolTransport()) as http:  # the system's roots
            with pytest.raises(httpx2.ConnectError) as caught:
                await http.post(url(server, "https"), content=b"{}")
            assert "CERTIFICATE_VERIFY_FAILED" in str(caught.value)


async def test_closing_the_client_closes_a_stream_still_open() -> None:
    eof = asyncio.Event()

    async def handler(reader: Reader, writer: Writer) -> None:
        await read_request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n6\r\ndata: \r\n"
        )
        await reader.read()  # until the client closes the connection
        eof.set()

    async with serving(handler) as server:
        pool = PoolTransport()
        http = client(pool)
        response = await http.send(
            http.build_request("POST", url(server), content=b"{}"), stream=True
        )
        chunks = response.aiter_raw()
        assert await chunks.__anext__() == b"data: "
        await http.aclose()  # the response is still open
        with anyio.fail_after(10):
            await eof.wait()
        with pytest.raises(httpx2.RemoteProtocolError):
            await chunks.__anext__()
        assert pool.connections == 0
