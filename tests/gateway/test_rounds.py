"""Input rounds of 2026-07-28 clients (`gateway.rounds`): which requests need
them, and a held call whose request goes away.

The rounds themselves, end to end, are in `test_eras` (through the endpoint)
and `test_exchange` (a client hanging up on a held call and on one that runs
in its request).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import mcp.types as types
import pytest

from manager.gateway.requests import CallNotes, ClientRequests
from manager.gateway.rounds import HeldCall, HeldCalls, may_need_rounds

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("params", "capabilities", "needed"),
    [
        ({"name": "t"}, None, False),
        ({"name": "t"}, types.ClientCapabilities(), False),
        ({"name": "t"}, types.ClientCapabilities(experimental={"x": {}}), False),
        (
            {"name": "t"},
            types.ClientCapabilities(elicitation=types.ElicitationCapability()),
            True,
        ),
        (
            {"name": "t"},
            types.ClientCapabilities(sampling=types.SamplingCapability()),
            True,
        ),
        ({"name": "t"}, types.ClientCapabilities(roots=types.RootsCapability()), True),
        ({"name": "t", "requestState": "abc"}, None, True),
        ({"name": "t", "inputResponses": {}}, types.ClientCapabilities(), True),
        (None, None, False),
    ],
)
def test_a_round_is_needed_only_where_one_can_come(
    params: dict[str, Any] | None, capabilities: Any, needed: bool
) -> None:
    assert may_need_rounds(params, capabilities) is needed


async def test_a_held_call_whose_request_is_cancelled_is_cancelled() -> None:
    started, ended = anyio.Event(), anyio.Event()
    outcome: list[BaseException | None] = []

    async def start(held: HeldCall) -> Any:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            ended.set()

    calls = HeldCalls()
    async with anyio.create_task_group() as tg:
        await tg.start(calls.run)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as request:

                async def ask() -> None:
                    try:
                        await calls.call({"name": "t"}, 30, start)
                    except BaseException as exc:
                        outcome.append(exc)
                        raise

                request.start_soon(ask)
                await started.wait()
                request.cancel_scope.cancel()  # the client went away
            await ended.wait()  # the held call was cancelled, not left running
        tg.cancel_scope.cancel()
    assert outcome and isinstance(outcome[0], anyio.get_cancelled_exc_class())
    assert len(calls) == 0


async def test_abandoning_a_call_that_ended_changes_nothing() -> None:
    held = HeldCall(10)
    held.finish({"content": []}, None, 0.0)
    held.abandon()
    assert not held.abandoned and not held.scope.cancel_called


async def test_a_question_naming_no_call_goes_to_the_call_asked_least() -> None:
    """A handshake-era stdio server's question names no request: of one
    2026-07-28 client's calls, it goes to the one asked least so far, so no
    call collects the others' rounds (the SDK's Client gives up after 10)."""
    requests = ClientRequests(lambda server: 30)
    ctx: Any = SimpleNamespace(
        request=None,  # an attach stream: one client, its calls overlap
        protocol_version="2026-07-28",
        meta=None,
        request_id=1,
        session=SimpleNamespace(
            client_capabilities=types.ClientCapabilities(
                elicitation=types.ElicitationCapability()
            )
        ),
    )
    calls = [HeldCall(30) for _ in range(3)]
    release = anyio.Event()

    async def serve(held: HeldCall) -> None:
        async with requests.serving("s", ctx, CallNotes(ctx, ()), held=held):
            await release.wait()

    elicit = types.ElicitRequestFormParams(message="?", requested_schema={})
    accept = {"action": "accept", "content": {}}
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for held in calls:
                tg.start_soon(serve, held)
            await anyio.wait_all_tasks_blocked()
            for _ in range(3):  # each asked, then answered, in turn
                async with anyio.create_task_group() as asking:
                    asking.start_soon(
                        requests.upstream_request, "s", "elicitation/create", elicit
                    )
                    await anyio.wait_all_tasks_blocked()
                    (asked,) = [held for held in calls if held.blocked]
                    for key in (await asked.next_round()).asks or {}:
                        asked.answer({key: accept})
            release.set()
    assert [held.asked for held in calls] == [1, 1, 1]
