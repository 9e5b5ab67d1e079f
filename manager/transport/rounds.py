"""Input rounds: a 2026-07-28 server that answers a request `input_required`.

The server asks its questions (sampling, elicitation, roots) in its answer;
`InputRounds` answers them through our callbacks (the gateway asks the client
whose request it is) and sends the request again with the answers and the
server's `requestState`, as the SDK's `Client` does, at most
`MAX_INPUT_ROUNDS` times. The handshake era has no rounds: its questions come
on the session (`requests`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

import anyio
import mcp.types as types
from mcp import ClientSession
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR
from pydantic import TypeAdapter

from ..core.errors import UpstreamError
from .base import LINK_META_KEY, Hooks
from .requests import asked

__all__ = ["INPUT_METHODS", "MAX_INPUT_ROUNDS", "InputRounds"]

INPUT_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
"""Requests a 2026-07-28 server may answer `input_required`."""

MAX_INPUT_ROUNDS = 16
"""Input rounds of one call to a 2026-07-28 server before it counts as a loop."""

_ANSWERS: TypeAdapter[types.InputResponses] = TypeAdapter(types.InputResponses)

Send = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""One round on the wire: the request's params in, the server's result out."""


class InputRounds:
    """One request's rounds with a 2026-07-28 server.

    Args:
        session: The SDK session whose callbacks answer the server's questions.
        hooks: The connection's hooks (`roots/list` without declared roots is
            asked of the client, as elicitation is).
        what: The request, as errors name it.
        meta: The request's `_meta`: the link it carries (`LINK_META_KEY`)
            names the client request the questions serve.
    """

    def __init__(
        self, session: ClientSession, hooks: Hooks | None, what: str, meta: object
    ) -> None:
        self._session = session
        self._hooks = hooks
        self._what = what
        link = meta.get(LINK_META_KEY) if isinstance(meta, Mapping) else None
        self._link = link if isinstance(link, str) else None

    async def run(
        self, params: dict[str, Any], first: dict[str, Any], send: Send
    ) -> dict[str, Any]:
        """`first` is the server's answer to `params`: while it is
        `input_required`, answer its questions and send `params` again with
        the answers and the server's state, until a result comes."""
        raw, sent = first, 1
        while raw.get("resultType") == "input_required":
            if sent == MAX_INPUT_ROUNDS:
                raise UpstreamError(
                    f"{self._what}: the server asked for input more than "
                    f"{MAX_INPUT_ROUNDS} times",
                    code=INTERNAL_ERROR,
                )
            asking = types.InputRequiredResult.model_validate(raw, by_name=False)
            responses = await self._answer(asking.input_requests or {})
            raw = await send(_with_answers(params, responses, asking.request_state))
            sent += 1
        return raw

    async def _answer(
        self, requests: Mapping[str, types.InputRequest]
    ) -> types.InputResponses:
        """Each of a server's input requests, answered through our callbacks,
        all at once (a client is asked them together), under the server's keys."""
        answers: dict[str, types.InputResponse | types.ErrorData] = {}
        link = self._link
        linked = cast(Any, {LINK_META_KEY: link} if link is not None else None)
        hooks = self._hooks

        async def answer(key: str, request: types.InputRequest) -> None:
            if request.method == "roots/list" and hooks and hooks.roots is None:
                # No roots declared for this connection: the caller's own
                # (its capabilities went with the request), asked like
                # elicitation is.
                params = getattr(request, "params", None)
                answers[key] = await asked(hooks, request.method, params, link, key)
                return
            ctx = ClientRequestContext(
                session=self._session, request_id=key, meta=linked
            )
            answers[key] = await self._session.dispatch_input_request(ctx, request)

        async with anyio.create_task_group() as tg:
            for key, request in requests.items():
                tg.start_soon(answer, key, request)
        for reply in answers.values():
            if isinstance(reply, types.ErrorData):
                raise MCPError(reply.code, reply.message, reply.data)
        return {k: v for k, v in answers.items() if not isinstance(v, types.ErrorData)}


def _with_answers(
    params: dict[str, Any],
    responses: types.InputResponses,
    state: str | None,
) -> dict[str, Any]:
    """`params` of a round after the first: with the answers and the
    server's `requestState` (when it gave one)."""
    sent = dict(params)
    if state is not None:
        sent["requestState"] = state
    sent["inputResponses"] = _ANSWERS.dump_python(
        responses, by_alias=True, mode="json", exclude_none=True
    )
    return sent
