"""Input rounds (`transport.rounds`): how many a request may take, and what
each round sends."""

from __future__ import annotations

from typing import Any, cast

import pytest

from manager.core.errors import UpstreamError
from manager.transport.rounds import MAX_INPUT_ROUNDS, InputRounds

pytestmark = pytest.mark.anyio

ASKING: dict[str, Any] = {"resultType": "input_required", "requestState": "s1"}


async def test_a_server_that_never_stops_asking_is_sent_the_request_16_times() -> None:
    """The first answer counts as the first round: a server that answers
    `input_required` every time gets the request `MAX_INPUT_ROUNDS` times in
    all, each retry with its state, then the caller hears of the loop."""
    sent: list[dict[str, Any]] = []

    async def send(params: dict[str, Any]) -> dict[str, Any]:
        sent.append(params)
        return ASKING

    rounds = InputRounds(cast(Any, None), None, "tools/call loop", None)
    with pytest.raises(UpstreamError, match="asked for input more than 16 times"):
        await rounds.run({"name": "loop"}, ASKING, send)
    assert 1 + len(sent) == MAX_INPUT_ROUNDS == 16
    retry = {"name": "loop", "requestState": "s1", "inputResponses": {}}
    assert all(p == retry for p in sent)


async def test_a_result_after_some_rounds_is_the_answer() -> None:
    answers: list[dict[str, Any]] = [ASKING, {"content": [], "isError": False}]

    async def send(params: dict[str, Any]) -> dict[str, Any]:
        return answers.pop(0)

    rounds = InputRounds(cast(Any, None), None, "tools/call x", None)
    assert await rounds.run({"name": "x"}, ASKING, send) == {
        "content": [],
        "isError": False,
    }
    assert answers == []
    plain = {"content": [{"type": "text", "text": "hi"}]}
    assert await rounds.run({"name": "x"}, plain, send) is plain
