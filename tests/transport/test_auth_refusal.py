"""A server that says 401/403 is not an outage: no retry storm.

A real HTTP server (uvicorn on 127.0.0.1, an ephemeral port) refuses every
request with 401 and a Bearer challenge, and counts them. The connection fails
once with an error naming the header that was refused (never its value), then
waits `AUTH_RETRY_DELAY` (5 minutes) instead of its backoff; `reconnect` tries
at once. Synchronised on events: the retry delay is read from the
`reconnecting` event, not waited out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from fakes import Recorder
from servers.asgi import serving
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from manager.core.events import AttemptFailed, Reconnecting
from manager.core.spec import parse_spec
from manager.core.state import AUTH_RETRY_DELAY
from manager.engine.bus import EventBus
from manager.engine.manager import Manager
from manager.transport.connect import McpTransport

pytestmark = pytest.mark.anyio

TOKEN = "wrong-token-5f1e9c"
CHALLENGE = 'Bearer realm="mcp", resource_metadata="http://127.0.0.1/.well-known/x"'


class Refuser:
    """An HTTP server answering 401 (or 403) to everything, counting requests."""

    def __init__(self, status: int = 401) -> None:
        self.status = status
        self.requests: list[str] = []

    async def refuse(self, request: Request) -> Response:
        self.requests.append(f"{request.method} {request.url.path}")
        return Response(
            "no", status_code=self.status, headers={"WWW-Authenticate": CHALLENGE}
        )

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[str]:
        app = Starlette(
            routes=[
                Route("/mcp", self.refuse, methods=["GET", "POST", "DELETE"]),
                Route("/sse", self.refuse, methods=["GET"]),
            ]
        )
        async with serving(app) as base:
            yield base


FAST = {"backoff": {"initial": 0.05, "cap": 0.2}, "connect_timeout": 5, "hold": 0}


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_refused_credentials_are_tried_every_five_minutes_not_hammered(
    transport: str,
) -> None:
    refuser = Refuser()
    bus = EventBus()
    rec = Recorder(bus)
    async with refuser.serving() as base, Manager(bus) as manager:
        path = "/mcp" if transport == "http" else "/sse"
        spec = parse_spec(
            "remote",
            {"url": base + path, "transport": transport},
            {**FAST, "headers": {"Authorization": f"Bearer {TOKEN}"}},
        )
        manager.add(spec)
        failed = await rec.wait_for("connect_failed", "remote")
        retry = await rec.wait_for("reconnecting", "remote")
        assert isinstance(failed, AttemptFailed) and isinstance(retry, Reconnecting)
        assert failed.error_type == "AuthRefused"
        assert "HTTP 401" in failed.error
        assert "refused the credentials in header Authorization" in failed.error
        assert TOKEN not in failed.error
        assert retry.delay >= AUTH_RETRY_DELAY  # not 0.05 s: no storm
        seen = len(refuser.requests)
        assert 1 <= seen <= 3  # one attempt's requests
        (status,) = manager.statuses()
        assert status.next_retry_in is not None
        assert status.next_retry_in > AUTH_RETRY_DELAY - 5
        assert manager.reconnect("remote")  # a user who fixed it: tried at once
        await rec.wait_for("connect_failed", "remote", after=retry.seq)
        assert len(refuser.requests) > seen


async def test_a_server_that_wants_credentials_we_did_not_send_says_so() -> None:
    refuser = Refuser(403)
    bus = EventBus()
    rec = Recorder(bus)
    async with refuser.serving() as base, Manager(bus) as manager:
        manager.add(parse_spec("remote", base + "/mcp", FAST))
        failed = await rec.wait_for("connect_failed", "remote")
        assert isinstance(failed, AttemptFailed)
        assert "HTTP 403: the server wants authorization" in failed.error
        assert "without credentials" in failed.error
        assert "Bearer" in failed.error  # what its challenge asks for


@pytest.mark.slow
async def test_thirty_seconds_of_refusals_cost_one_attempt_each(tmp_path: Path) -> None:
    """The count over 30 s (issue 13): a static header refused over http and
    sse, and an OAuth server waiting for a login, side by side with a server
    that is merely down. Run with `pytest -m slow`."""
    refuser = Refuser()
    bus = EventBus()
    rec = Recorder(bus)
    transport = McpTransport(state_dir=tmp_path)
    async with refuser.serving() as base, Manager(bus, transport) as manager:
        bearer = {**FAST, "headers": {"Authorization": f"Bearer {TOKEN}"}}
        manager.add(parse_spec("http", base + "/mcp", bearer))
        manager.add(
            parse_spec("sse", {"url": base + "/sse", "transport": "sse"}, bearer)
        )
        manager.add(parse_spec("login", base + "/mcp", FAST))
        manager.add(parse_spec("down", "http://127.0.0.1:9/mcp", FAST))
        await rec.wait_for("needs_login", "login")
        await anyio.sleep(30)  # the window being measured, not a synchronisation
        tries = Counter(e.name for e in rec.events if e.kind == "connecting")
    assert tries["http"] == tries["sse"] == tries["login"] == 1, tries
    assert tries["down"] > 20  # the backoff pace, for comparison
    assert len(refuser.requests) <= 6, refuser.requests
