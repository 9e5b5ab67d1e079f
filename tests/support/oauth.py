"""The daemon's manager and logins in the test's process, and a user who
logs in through the browser (`daemon_parts`, `log_in`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
from fakes import Recorder
from servers.oauth import OAuthServer

from manager.core.redact import SecretRegistry
from manager.core.spec import parse_spec
from manager.engine.bus import EventBus
from manager.engine.logins import Logins
from manager.engine.manager import Manager
from manager.transport.connect import McpTransport
from manager.transport.oauth.login import Login

FAST = {"backoff": {"initial": 0.05, "cap": 0.2}, "hold": 0, "connect_timeout": 10}


def spec(name: str, server: OAuthServer, **extra: Any) -> Any:
    return parse_spec(name, f"{server.base}/mcp", {**FAST, **extra})


@dataclass
class Parts:
    manager: Manager
    logins: Logins
    rec: Recorder
    secrets: SecretRegistry


@asynccontextmanager
async def daemon_parts(state: Path) -> AsyncIterator[Parts]:
    """The daemon's manager and logins, in this process, on `state`."""
    bus = EventBus()
    rec = Recorder(bus)
    secrets = SecretRegistry()
    transport = McpTransport(secrets=secrets, state_dir=state)
    async with Manager(bus, transport, secrets=secrets) as manager:
        yield Parts(manager, Logins(manager), rec, secrets)


async def browse(server: OAuthServer, login: Login) -> httpx2.Response:
    """The user's browser: approve at the authorization server, then land on
    the daemon's callback."""
    assert login.url is not None and login.redirect_uri is not None
    callback = await server.approve(login.url)
    assert callback.startswith(login.redirect_uri)
    async with httpx2.AsyncClient() as client:
        return await client.get(callback)


async def log_in(parts: Parts, server: OAuthServer, name: str) -> None:
    login = await parts.logins.begin(name, timeout=20)
    assert login is not None
    await parts.logins.first_answer(login, 10)
    landed = await browse(server, login)
    assert landed.status_code == 200 and "Authorization received" in landed.text
    with anyio.fail_after(10):
        await login.done.wait()
    assert login.error is None
    await parts.rec.wait_for("connected", name)
