"""Streamable HTTP upstreams behind the environment's proxy (`transport.http.streams`).

`environment_proxy` is checked against the variables alone; then a daemon's
connection goes to a hand-written server through a forwarding proxy (in the
test's loop, on 127.0.0.1) that keeps the request line of everything it
forwards, and straight to it when `NO_PROXY` names the host.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Coroutine
from typing import Any
from urllib.parse import urlsplit

import pytest
from fakes import Recorder
from servers import HttpServerFactory

from manager.core.spec import parse_spec
from manager.engine.bus import EventBus
from manager.engine.manager import Manager
from manager.transport.http.streams import environment_proxy

pytestmark = pytest.mark.anyio

FAST = {"backoff": {"initial": 0.05, "cap": 0.4}}


@pytest.mark.parametrize(
    ("url", "environ", "proxy"),
    [
        (
            "https://mcp.example.com/mcp",
            {"HTTPS_PROXY": "http://p:3128"},
            "http://p:3128",
        ),
        ("https://mcp.example.com/mcp", {"https_proxy": "p:3128"}, "http://p:3128"),
        ("https://mcp.example.com/mcp", {"HTTP_PROXY": "http://p:3128"}, None),
        (
            "http://mcp.example.com/mcp",
            {"HTTP_PROXY": "http://p:3128"},
            "http://p:3128",
        ),
        ("http://mcp.example.com/mcp", {"ALL_PROXY": "http://a:1"}, "http://a:1"),
        (
            "https://mcp.example.com/mcp",
            {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "example.com"},
            None,
        ),
        (
            "https://mcp.example.com/mcp",
            {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "other.org, .example.com"},
            None,
        ),
        (
            "https://mcp.example.com/mcp",
            {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "ample.com"},
            "http://p:3128",
        ),
        ("http://127.0.0.1:8/mcp", {"HTTP_PROXY": "http://p:1", "NO_PROXY": "*"}, None),
        (
            "http://127.0.0.1:8/mcp",
            {"HTTP_PROXY": "http://p:1", "NO_PROXY": "127.0.0.1:9"},
            "http://p:1",
        ),
        (
            "http://127.0.0.1:8/mcp",
            {"HTTP_PROXY": "http://p:1", "NO_PROXY": "127.0.0.1:8"},
            None,
        ),
        ("http://[::1]:8/mcp", {"HTTP_PROXY": "http://p:1", "NO_PROXY": "[::1]"}, None),
        ("http://h/mcp", {}, None),
    ],
)
def test_the_environment_names_the_proxy(
    url: str, environ: dict[str, str], proxy: str | None
) -> None:
    assert environment_proxy(url, environ) == proxy


class ForwardProxy:
    """An HTTP forwarding proxy: requests in absolute form, each passed on in
    origin form over a connection of its own to the server; keeps the
    request lines it saw."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def _client(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        upstream: asyncio.StreamWriter | None = None
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line, _, rest = head.partition(b"\r\n")
                method, target, version = line.decode().split(" ")
                self.lines.append(f"{method} {target}")
                url = urlsplit(target)
                length = 0
                for header in rest.split(b"\r\n"):
                    name, _, value = header.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = await reader.readexactly(length)
                if upstream is None:
                    assert url.hostname is not None and url.port is not None
                    back, upstream = await asyncio.open_connection(
                        url.hostname, url.port
                    )
                    self._spawn(_pipe(back, writer))
                path = url.path + (f"?{url.query}" if url.query else "")
                upstream.write(f"{method} {path} {version}\r\n".encode() + rest + body)
                await upstream.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            if upstream is not None:
                upstream.close()
            writer.close()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[str]:
        server = await asyncio.start_server(
            lambda r, w: self._spawn(self._client(r, w)), "127.0.0.1", 0
        )
        try:
            yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        finally:
            server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await server.wait_closed()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


@pytest.fixture
def no_proxy_variables(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("http", "https", "all", "no"):
        for variable in (f"{name}_proxy", f"{name.upper()}_PROXY"):
            monkeypatch.delenv(variable, raising=False)
    return monkeypatch


async def test_a_streamable_http_server_is_reached_through_the_proxy(
    make_http_server: HttpServerFactory, no_proxy_variables: pytest.MonkeyPatch
) -> None:
    server = make_http_server("http", raw=True)
    proxy = ForwardProxy()
    bus = EventBus()
    rec = Recorder(bus)
    async with proxy.serving() as address, Manager(bus) as mgr:
        no_proxy_variables.setenv("HTTP_PROXY", address)
        mgr.add(parse_spec("web", server.url, FAST))
        await rec.wait_for("connected", "web")
        before = len(proxy.lines)
        assert before > 0, "the session was opened straight, not through the proxy"
        result = await mgr.call("web", "echo", {"text": "via proxy"})
        assert result.is_error is False
        assert f"POST {server.url}" in proxy.lines[before:]

        # NO_PROXY names the host: the next connection goes straight.
        no_proxy_variables.setenv("NO_PROXY", "localhost,127.0.0.1")
        mgr.add(parse_spec("direct", server.url, FAST))
        await rec.wait_for("connected", "direct")
        seen = len(proxy.lines)
        assert (await mgr.call("direct", "echo", {"text": "x"})).is_error is False
        assert len(proxy.lines) == seen


async def test_a_proxy_that_is_down_or_unsupported_is_named_in_the_error(
    no_proxy_variables: pytest.MonkeyPatch,
) -> None:
    """The cheap pre-check connects to the proxy, not to the server (which may
    be out of reach but through it); its failure names the proxy, password
    masked. A SOCKS proxy is refused in words, not with httpx's advice."""
    bus = EventBus()
    rec = Recorder(bus)
    async with Manager(bus) as mgr:
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            port = closed.getsockname()[1]
        no_proxy_variables.setenv("HTTP_PROXY", f"http://me:s3cret@127.0.0.1:{port}")
        mgr.add(parse_spec("web", "http://mcp.example.invalid/mcp", FAST))
        failed = await rec.wait_for("connect_failed", "web")
        error = failed.error  # type: ignore[attr-defined]
        assert f"the proxy http://me:***@127.0.0.1:{port}" in error
        assert "connection refused" in error and "s3cret" not in error
        mgr.remove("web")

        no_proxy_variables.setenv("HTTP_PROXY", "socks5://127.0.0.1:1080")
        mgr.add(parse_spec("socks", "http://mcp.example.invalid/mcp", FAST))
        failed = await rec.wait_for("connect_failed", "socks")
        error = failed.error  # type: ignore[attr-defined]
        assert "is not an http:// or https:// proxy" in error
        assert "NO_PROXY" in error
