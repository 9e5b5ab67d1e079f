"""`HandshakeSide`: the handshake-era session beside a 2026-07-28 one, opened
on first need, opened again once the server ended it, not asked again for a
while once the server refused it. In memory: the opener is a stand-in for the
transport's own session (its `closed` is what the side reads)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import pytest

from manager.core.errors import ConnectFailed
from manager.transport.side import HandshakeSide

pytestmark = pytest.mark.anyio


class _Session:
    def __init__(self, number: int) -> None:
        self.number = number
        self.closed = False
        self.exited = False


async def test_opened_once_kept_and_opened_again_after_the_server_ended_it() -> None:
    opened: list[_Session] = []

    @asynccontextmanager
    async def opener() -> AsyncIterator[Any]:
        session = _Session(len(opened) + 1)
        opened.append(session)
        try:
            yield session
        finally:
            session.exited = True

    async with anyio.create_task_group() as tg:
        side = HandshakeSide("s", cast(Any, opener), tg, limit=5.0)
        with anyio.fail_after(10):
            first: Any = await side.session(5.0)
            assert first is opened[0] and await side.session(5.0) is first
            opened[0].closed = True  # the server ended it
            second: Any = await side.session(5.0)
        assert second is opened[1] and opened[0].exited
        tg.cancel_scope.cancel()
    assert opened[1].exited  # closed with the connection


async def test_a_server_that_refuses_the_handshake_is_not_asked_again_at_once() -> None:
    tries: list[int] = []

    @asynccontextmanager
    async def opener() -> AsyncIterator[Any]:
        tries.append(1)
        raise ConnectFailed("handshake refused: method not found")
        yield  # pragma: no cover - never reached

    async with anyio.create_task_group() as tg:
        side = HandshakeSide("s", cast(Any, opener), tg, limit=5.0)
        with anyio.fail_after(10):
            assert await side.session(5.0) is None
            assert await side.session(5.0) is None
        tg.cancel_scope.cancel()
    assert tries == [1]
