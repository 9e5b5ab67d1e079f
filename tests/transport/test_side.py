"""`EraSide`: the session of the other era beside a connection's own, opened
on first need, opened again once the server ended it, not asked again for a
while once the server refused it; `ListSources`: each list from the session
that last said it changed. In memory: the opener is a stand-in for the
transport's own session (its `closed` and `wait_lost` are what the side
reads)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import pytest

from manager.core.errors import ConnectFailed, ConnectTimeout
from manager.transport.base import HANDSHAKE, MODERN, Hooks, ServerInfo
from manager.transport.side import REFUSED_FOR, EraSide, ListSources

pytestmark = pytest.mark.anyio


OFFERED: dict[str, object] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


class _Session:
    def __init__(self, number: int) -> None:
        self.number = number
        self.info = ServerInfo("s", "1", MODERN, capabilities=OFFERED)
        self.closed = False
        self.exited = anyio.Event()
        self.lost = anyio.Event()
        self.followed = anyio.Event()
        self.followed.set()

    async def wait_lost(self) -> None:
        await self.lost.wait()


class _Opener:
    """Opens a new stand-in session each time; each is `exited` once closed."""

    def __init__(self) -> None:
        self.opened: list[_Session] = []

    @asynccontextmanager
    async def __call__(self) -> AsyncIterator[Any]:
        session = _Session(len(self.opened) + 1)
        self.opened.append(session)
        try:
            yield session
        finally:
            session.exited.set()


async def test_opened_once_kept_and_opened_again_after_the_server_ended_it() -> None:
    opener = _Opener()
    opened = opener.opened
    async with anyio.create_task_group() as tg:
        side = EraSide("s", HANDSHAKE, cast(Any, opener), tg, limit=5.0)
        with anyio.fail_after(10):
            first: Any = await side.session(5.0)
            assert first is opened[0] and await side.session(5.0) is first
            opened[0].closed = True  # the server ended it
            second: Any = await side.session(5.0)
        assert second is opened[1] and opened[0].exited.is_set()
        tg.cancel_scope.cancel()
    assert opened[1].exited.is_set()  # closed with the connection


async def test_a_server_that_refuses_the_handshake_is_not_asked_again_at_once() -> None:
    tries: list[int] = []

    @asynccontextmanager
    async def opener() -> AsyncIterator[Any]:
        tries.append(1)
        raise ConnectFailed("handshake refused: method not found")
        yield  # pragma: no cover - never reached

    async with anyio.create_task_group() as tg:
        side = EraSide("s", HANDSHAKE, cast(Any, opener), tg, limit=5.0)
        with anyio.fail_after(10):
            assert await side.session(5.0) is None
            assert await side.session(5.0) is None
        tg.cancel_scope.cancel()
    assert tries == [1]


async def test_a_session_the_server_lost_is_closed_and_the_next_request_opens_one() -> (
    None
):
    opener = _Opener()
    async with anyio.create_task_group() as tg:
        side = EraSide("s", MODERN, cast(Any, opener), tg, limit=5.0)
        with anyio.fail_after(10):
            first: Any = await side.session(5.0)
            first.lost.set()  # its watch saw the end: closed at once
            await first.exited.wait()
            assert side.current is None
            second: Any = await side.session(5.0)
        assert second is opener.opened[1]
        tg.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("failure", "told"),
    [(ConnectFailed("method not found"), [None]), (ConnectTimeout("slow"), [])],
)
async def test_a_refusal_is_told_and_running_out_of_time_is_not(
    failure: Exception, told: list[None]
) -> None:
    outcomes: list[Mapping[str, object] | None] = []

    @asynccontextmanager
    async def opener() -> AsyncIterator[Any]:
        raise failure
        yield  # pragma: no cover - never reached

    async with anyio.create_task_group() as tg:
        side = EraSide(
            "s",
            MODERN,
            cast(Any, opener),
            tg,
            limit=5.0,
            capabilities=OFFERED,  # remembered from an earlier daemon
            on_outcome=outcomes.append,
        )
        with anyio.fail_after(10):
            assert await side.session(5.0) is None
        # A refusal holds while the connection lives; a slow start, a while.
        assert side.refused
        assert side._refused_until == (
            math.inf
            if told
            else pytest.approx(anyio.current_time() + REFUSED_FOR, abs=1.0)
        )
        # A refusal forgets what was remembered; a slow start does not.
        assert side.capabilities == (None if told else OFFERED)
        tg.cancel_scope.cancel()
    assert outcomes == told


async def test_a_request_waits_no_longer_than_first_wait_for_an_unknown_server() -> (
    None
):
    """A server never met in the other era may not answer it at all: the
    request goes the old way after `first_wait`, the opening goes on."""
    gate = anyio.Event()
    outcomes: list[Mapping[str, object] | None] = []

    @asynccontextmanager
    async def opener() -> AsyncIterator[Any]:
        await gate.wait()
        yield _Session(1)

    async with anyio.create_task_group() as tg:
        side = EraSide(
            "s",
            MODERN,
            cast(Any, opener),
            tg,
            limit=30.0,
            first_wait=0.05,
            on_outcome=outcomes.append,
        )
        with anyio.fail_after(10):
            assert await side.session(30.0) is None  # not open yet: the old way
            gate.set()
            opened: Any = await side.session(30.0)
        # What it offers in that era is told, and known from now on.
        assert opened.number == 1 and outcomes == [OFFERED]
        assert side.capabilities == OFFERED
        tg.cancel_scope.cancel()


def test_each_list_comes_from_the_session_that_last_said_it_changed() -> None:
    told: list[str] = []
    hooks = Hooks(
        on_list_changed=told.append, on_tools_changed=lambda: told.append("tools")
    )
    sources = ListSources()
    side = EraSide("s", MODERN, cast(Any, None), cast(Any, None), limit=1.0)
    here, beside = sources.here(hooks), side.hooks(hooks, sources)
    beside.on_list_changed("prompts")
    beside.on_tools_changed()
    assert sources.beside == {"prompts", "tools"}
    here.on_list_changed("prompts")
    assert sources.beside == {"tools"}
    beside.on_spawn(4242)  # the process beside is not the connection's
    assert side.pid == 4242
    assert told == ["prompts", "tools", "prompts"]  # every change is told
