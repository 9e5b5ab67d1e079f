"""Serve the demo server over stdio, streamable HTTP (`/mcp`) or legacy SSE (`/sse`)."""

from __future__ import annotations

from typing import Any

import uvicorn
from mcp.server import Server
from mcp.server.sse import SseServerTransport
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

from .compat_starlette import asgi_send
from .tools import DemoServer

__all__ = ["HTTP_SHUTDOWN_GRACE", "LOOPBACK_HOSTS", "run"]

HTTP_SHUTDOWN_GRACE = 1
"""Seconds uvicorn waits for open requests and streams on SIGTERM (an int)."""
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def _security(host: str) -> TransportSecuritySettings | None:
    """DNS-rebinding protection for loopback hosts, as the SDK's HTTP app does."""
    if host not in LOOPBACK_HOSTS:
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


def _sse_app(server: Server[dict[str, Any]], host: str) -> Starlette:
    transport = SseServerTransport("/messages/", security_settings=_security(host))

    async def handle_sse(request: Request) -> Response:
        async with transport.connect_sse(
            request.scope, request.receive, asgi_send(request)
        ) as (read, write):
            await server.run(read, write, server.create_initialization_options())
        # Starlette needs a response object even though the stream already ended.
        return Response()

    return Starlette(
        routes=[
            Route("/sse", handle_sse, methods=["GET"]),
            Mount("/messages/", app=transport.handle_post_message),
        ]
    )


async def _serve_stdio(server: Server[dict[str, Any]]) -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def _serve_http(app: Starlette, host: str, port: int) -> None:
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=HTTP_SHUTDOWN_GRACE,
    )
    await uvicorn.Server(config).serve()


async def run(
    demo: DemoServer,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
) -> None:
    """Serve `demo` until the client goes away (stdio) or a signal stops it (HTTP).

    Args:
        demo: The server to run.
        transport: `"stdio"`, `"http"` (streamable HTTP at `/mcp`) or `"sse"`.
        host: Interface to bind for HTTP transports.
        port: Port to bind for HTTP transports.

    Raises:
        ValueError: Unknown transport.
    """
    if transport == "stdio":
        await _serve_stdio(demo.server)
    elif transport == "http":
        app = demo.server.streamable_http_app(streamable_http_path="/mcp", host=host)
        await _serve_http(app, host, port)
    elif transport == "sse":
        await _serve_http(_sse_app(demo.server, host), host, port)
    else:
        raise ValueError(f"unknown transport {transport!r}")
