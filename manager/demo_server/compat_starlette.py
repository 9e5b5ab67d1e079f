"""The one door to starlette's private names.

* `Request._send` (`asgi_send`): the SDK's `SseServerTransport.connect_sse`
  streams on the raw ASGI `send` of the request, which a starlette `Request`
  keeps only there (the SDK's own SSE example reads it the same way).
  Replace with serving `/sse` as a raw ASGI app, which gets `send` as an
  argument, or a public accessor on `Request` (none in starlette 1.x).

`tests/test_compat.py` fails with `WHY` when the installed version lacks it.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import Send

__all__ = ["WHY", "asgi_send"]

WHY = (
    "mcp-manager reaches into starlette's Request._send (see "
    "manager/demo_server/compat_starlette.py): this version no longer has it; "
    "move to the public API named there"
)


def asgi_send(request: Request) -> Send:
    """The ASGI `send` callable `request` was built with."""
    return request._send
