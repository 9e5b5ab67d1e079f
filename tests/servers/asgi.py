"""An ASGI app served by uvicorn in the test's own event loop, on 127.0.0.1."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import uvicorn

__all__ = ["serving"]


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """Serve `app` on an ephemeral port until exit; yields `http://127.0.0.1:PORT`."""
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say so.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_config=None, log_level="warning", lifespan="off")
    )
    with sock:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            while not server.started:  # noqa: ASYNC110 - uvicorn has no event
                await anyio.sleep(0.01)
            try:
                yield f"http://127.0.0.1:{port}"
            finally:
                server.should_exit = True
