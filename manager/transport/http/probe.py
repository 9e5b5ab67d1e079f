"""A cheap TCP pre-check before an HTTP/SSE attempt, and endpoint addresses.

Most attempts to a dead upstream end here, at the cost of one non-blocking
connect, instead of building an SDK session.
"""

from __future__ import annotations

import errno
import functools
import ipaddress
import os
import select
import socket
from urllib.parse import urlsplit

import anyio
import anyio.abc

from ...core.errors import (
    ConnectFailed,
    ConnectTimeout,
)
from ..errors import os_reason

__all__ = ["address", "tcp_precheck"]


async def tcp_precheck(url: str, deadline: float) -> None:
    """Fail fast and cheaply when nothing listens (most attempts of a dead server).

    Building an SDK session per attempt costs far more than one TCP connect; with
    hundreds of dead upstreams at the backoff cap this keeps the daemon idle.
    """
    host, port, family = address(url)
    try:
        if family is None:  # a name: anyio resolves it (happy eyeballs)
            with anyio.fail_after(max(0.0, deadline - anyio.current_time())):
                stream = await anyio.connect_tcp(host, port)
            await stream.aclose()
        else:
            await _connect_ip(family, host, port, deadline)
    except TimeoutError:
        raise ConnectTimeout(f"TCP connect to {host}:{port} timed out") from None
    except OSError as exc:
        raise ConnectFailed(f"{os_reason(exc)} ({host}:{port})") from None


@functools.lru_cache(maxsize=4096)
def address(url: str) -> tuple[str, int, socket.AddressFamily | None]:
    """Host, port and (for an IP literal) address family of an endpoint URL."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        version = ipaddress.ip_address(host).version
    except ValueError:
        return host, port, None
    return host, port, socket.AF_INET6 if version == 6 else socket.AF_INET


async def _connect_ip(
    family: socket.AddressFamily, host: str, port: int, deadline: float
) -> None:
    """A bare non-blocking connect to an IP literal: no resolver, no extra task.

    This is the whole cost of most attempts to a dead upstream, so it stays lean:
    anyio's `connect_tcp` spawns a task group per call for happy eyeballs, and a
    refused loopback connect fails synchronously, before any waiting is needed.
    """
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        error = sock.connect_ex((host, port))
        if error == errno.EINPROGRESS:
            # On loopback the handshake (or the refusal) has usually happened
            # inside connect(): look before registering with the event loop.
            _, ready, _ = select.select((), (sock,), (), 0)
            if not ready:
                with anyio.fail_after(max(0.0, deadline - anyio.current_time())):
                    await anyio.wait_writable(sock)
            error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            raise OSError(error, os.strerror(error))
    finally:
        sock.close()
