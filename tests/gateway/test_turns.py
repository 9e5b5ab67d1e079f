"""`Turns`: clients that can be asked take turns on an upstream whose
questions name no request (`gateway.requests`). In memory, no servers."""

from __future__ import annotations

import anyio
import pytest

from manager.gateway.requests import Turns

pytestmark = pytest.mark.anyio


async def test_a_client_holds_the_turn_for_all_its_requests_the_rest_queue() -> None:
    turns = Turns()
    order: list[str] = []
    await turns.take("a")
    await turns.take("a")  # the same client: joins at once

    async def wait(key: str) -> None:
        await turns.take(key)
        order.append(key)

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait, "b")
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(wait, "c")
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(wait, "b")  # b's second request goes with its first
        await anyio.wait_all_tasks_blocked()
        assert turns.waiting == 3 and order == []
        turns.give_back()
        await anyio.wait_all_tasks_blocked()
        assert order == []  # a still has a request in flight
        turns.give_back()
        await anyio.wait_all_tasks_blocked()
        assert order == ["b", "b"] and turns.waiting == 1
        turns.give_back()
        turns.give_back()
    assert order == ["b", "b", "c"]
    turns.give_back()
    assert turns.idle


async def test_a_waiter_cancelled_before_or_after_its_turn_leaves_no_trace() -> None:
    turns = Turns()
    await turns.take("a")
    with anyio.move_on_after(0.01):
        await turns.take("b")  # cancelled while queued
    assert turns.waiting == 0
    async with anyio.create_task_group() as tg:
        granted = anyio.Event()

        async def cancelled_as_granted() -> None:
            with anyio.CancelScope() as scope:
                tg.start_soon(hand_over, scope)
                await turns.take("c")
                granted.set()

        async def hand_over(scope: anyio.CancelScope) -> None:
            await anyio.wait_all_tasks_blocked()
            turns.give_back()  # c's turn ...
            scope.cancel()  # ... and c is cancelled as it gets it

        tg.start_soon(cancelled_as_granted)
    if granted.is_set():  # the turn came before the cancellation: c used it
        turns.give_back()
    assert turns.idle  # nothing held, nobody queued
    await turns.take("d")  # and the next client gets it at once
