"""Serve the demo server over stdio, streamable HTTP (`/mcp`) or legacy SSE (`/sse`)."""

from __future__ import annotations

from typing import Any

import anyio
import mcp.types as types
import uvicorn
from mcp.server import Server
from mcp.server.sse import SseServerTransport
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.message import SessionMessage
from mcp_types import METHOD_NOT_FOUND, PROTOCOL_VERSION_META_KEY
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


async def _serve_stdio(
    server: Server[dict[str, Any]], legacy_only: bool = False
) -> None:
    async with stdio_server() as (read, write):
        if not legacy_only:
            await server.run(read, write, server.create_initialization_options())
            return
        inner, inner_read = anyio.create_memory_object_stream[Any](0)
        async with anyio.create_task_group() as tg, inner, inner_read:

            async def sift() -> None:
                # Before the SDK sees it: its stdio session would take the
                # era of the first message and refuse `initialize` after it.
                async with inner:
                    async for item in read:
                        message = getattr(item, "message", None)
                        if isinstance(message, types.JSONRPCRequest) and _modern(
                            message
                        ):
                            error = types.ErrorData(
                                code=METHOD_NOT_FOUND,
                                message=f"Method not found: {message.method}",
                            )
                            await write.send(
                                SessionMessage(
                                    types.JSONRPCError(
                                        jsonrpc="2.0", id=message.id, error=error
                                    )
                                )
                            )
                            continue
                        await inner.send(item)

            tg.start_soon(sift)
            await server.run(inner_read, write, server.create_initialization_options())
            tg.cancel_scope.cancel()


def _modern(request: types.JSONRPCRequest) -> bool:
    """A request of the 2026-07-28 era: `server/discover`, or one whose
    `_meta` names a protocol version (the handshake era never does)."""
    meta = (request.params or {}).get("_meta")
    return request.method == "server/discover" or (
        isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta
    )


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
    legacy_only: bool = False,
) -> None:
    """Serve `demo` until the client goes away (stdio) or a signal stops it (HTTP).

    Args:
        demo: The server to run.
        transport: `"stdio"`, `"http"` (streamable HTTP at `/mcp`) or `"sse"`.
        host: Interface to bind for HTTP transports.
        port: Port to bind for HTTP transports.
        legacy_only: Over stdio, answer 2026-07-28 requests -32601 before
            the SDK sees them (HTTP: `faults._FaultMiddleware` does it).

    Raises:
        ValueError: Unknown transport.
    """
    if transport == "stdio":
        await _serve_stdio(demo.server, legacy_only)
    elif transport == "http":
        app = demo.server.streamable_http_app(streamable_http_path="/mcp", host=host)
        await _serve_http(app, host, port)
    elif transport == "sse":
        await _serve_http(_sse_app(demo.server, host), host, port)
    else:
        raise ValueError(f"unknown transport {transport!r}")
