"""Input rounds: what a handshake-era upstream asks a 2026-07-28 client mid-call.

A handshake-era server asks its client things while serving a call by sending
it requests (`elicitation/create`, `sampling/createMessage`). A 2026-07-28 client
takes no requests: the server answers the call with an `input_required` result
(`inputRequests`, `requestState`), and the client calls again with its
`inputResponses` and the `requestState` (SEP-2322, "MRTR"). Between the two the
daemon translates:

1. The client's `tools/call` starts the upstream call in a task of its own
   (`HeldCall`), which outlives that one HTTP request.
2. When the upstream asks, the question is parked under a key and the client's
   request is answered `input_required`, with an opaque `requestState` that
   names the held call. The upstream call waits meanwhile.
3. The client's retry carries the answers: each goes to the upstream as the
   answer to its request, and the retry waits for the next question or the
   result.

Bounded: the upstream call by the connection's `call_timeout` (as any call), a
question by the same (the upstream gets an error if the client never comes
back), and a held call nobody retries is dropped `HELD_GRACE` seconds after it
ended. An unknown or expired `requestState` is an invalid-params error.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import mcp.types as types
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ..transport.base import HANDSHAKE, MODERN

__all__ = [
    "ASKABLE",
    "HELD_GRACE",
    "HeldCall",
    "HeldCalls",
    "Round",
    "can_be_asked",
    "client_era",
    "may_need_rounds",
]

HELD_GRACE = 60.0
"""Seconds a held call that ended (or waits on its client) stays collectable
beyond its own deadline."""


@dataclass(slots=True)
class _Question:
    method: str
    params: Any
    result_type: Any
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: Any = None


@dataclass(frozen=True, slots=True)
class Round:
    """What one request of the client gets: the call's outcome (`result`, or
    `error` raised) or the questions still open (`asks`, key -> request)."""

    result: Any = None
    error: BaseException | None = None
    asks: Mapping[str, dict[str, Any]] | None = None


class HeldCall:
    """One upstream call of a 2026-07-28 client, held across its input rounds.

    Args:
        deadline: Seconds an open question may wait for the client's answer.
    """

    def __init__(self, deadline: float) -> None:
        self._deadline = deadline
        self._open: dict[str, _Question] = {}
        self._changed = anyio.Event()
        self._done = False
        self._result: Any = None
        self._error: BaseException | None = None
        self.ended_at: float | None = None
        self.scope = anyio.CancelScope()
        self.abandoned = False
        """Cancelled because the request waiting for it went away."""
        self.asked = 0
        """Questions parked here so far (`ask`)."""
        self.given: dict[str, Any] = {}
        """Answers the client sent before being asked (a stateless client
        may send `inputResponses` with its first request): a question under
        one of these keys is answered at once."""

    async def ask(
        self, method: str, params: Any, result_type: Any, key: str | None = None
    ) -> Any:
        """The upstream asks the client (its `elicitation/create` or
        `sampling/createMessage`): parked until the client's next request
        answers it, under the upstream's own `key` where it has one (a
        2026-07-28 server's input request). Returns the answer, or the error
        for the upstream."""
        if not key or key in self._open:
            key = secrets.token_hex(6)
        question = _Question(method, params, result_type)
        self._open[key] = question
        self.asked += 1
        if key in self.given:
            self.answer({key: self.given.pop(key)})
        else:
            self._wake()
        try:
            with anyio.move_on_after(self._deadline):
                await question.answered.wait()
        finally:  # cancelled too: no round shows a question nobody awaits
            self._open.pop(key, None)
        if not question.answered.is_set():
            return types.ErrorData(
                code=INVALID_PARAMS,
                message=f"{method}: the client did not answer within "
                f"{self._deadline:g} s",
            )
        return question.answer

    def answer(self, responses: Mapping[str, Any]) -> None:
        """The client's `inputResponses`: each to the question it answers
        (keys it does not know are ignored, as the spec allows)."""
        for key, raw in responses.items():
            question = self._open.get(key)
            if question is None or question.answered.is_set():
                continue
            try:
                question.answer = question.result_type.model_validate(
                    raw, by_name=False
                )
            except ValidationError as exc:
                question.answer = types.ErrorData(
                    code=INVALID_PARAMS,
                    message=f"{question.method}: the client's answer is not a "
                    f"valid result ({exc.error_count()} problems)",
                )
            question.answered.set()

    @property
    def blocked(self) -> bool:
        """The upstream waits for the client's answer to a question of this
        call: while it does, that call asks nothing more (a handshake-era
        tool awaits each request it makes)."""
        return any(not q.answered.is_set() for q in self._open.values())

    def abandon(self) -> None:
        """Nobody waits for the call any more: cancel it, unless it ended."""
        if not self._done:
            self.abandoned = True
            self.scope.cancel()

    def finish(self, result: Any, error: BaseException | None, now: float) -> None:
        """The upstream call ended."""
        self._result, self._error, self._done = result, error, True
        self.ended_at = now
        self._wake()

    async def next_round(self) -> Round:
        """The questions open now, or the outcome (whichever comes first).

        Questions come before the outcome: one parked here may be another
        call's of the same client (a stdio upstream's question names no
        call, `ClientRequests.upstream_request`), and this round is the only
        way it reaches the client."""
        while True:
            asks = {
                key: {"method": q.method, "params": _dumped(q.params)}
                for key, q in self._open.items()
                if not q.answered.is_set()
            }
            if asks:
                return Round(asks=asks)
            if self._done:
                return Round(result=self._result, error=self._error)
            await self._changed.wait()
            self._changed = anyio.Event()

    def _wake(self) -> None:
        self._changed.set()


def _dumped(params: Any) -> Any:
    if hasattr(params, "model_dump"):
        return params.model_dump(by_alias=True, mode="json", exclude_none=True)
    return params


ASKABLE = ("sampling", "elicitation", "roots")
"""The client capabilities under which an upstream's question can reach a
client (`ClientRequests.upstream_request` refuses it otherwise)."""


def may_need_rounds(params: Mapping[str, Any] | None, capabilities: Any) -> bool:
    """Whether a 2026-07-28 request must go through `HeldCalls.call`: it
    continues a held call (`requestState`) or brings answers
    (`inputResponses`), or its client declared a capability an upstream's
    question could use. Otherwise no question can ever reach this client
    (each is refused for want of the capability), no round can come of it,
    and the call runs in the request's own task: no held call, no task."""
    if params and ("requestState" in params or "inputResponses" in params):
        return True
    return can_be_asked(capabilities)


def client_era(ctx: Any) -> str:
    """The era a server that speaks both should meet this request's client in
    (`Upstream.for_era`), as it would straight: `MODERN` for a 2026-07-28
    client (the server judges its own capabilities and asks it in
    `input_required` rounds); `HANDSHAKE` for a handshake-era client (its
    questions go on the back-channel, and what the server answers, errors
    included, is the handshake era's)."""
    if ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return MODERN
    return HANDSHAKE


def can_be_asked(capabilities: Any) -> bool:
    """Whether a client with these capabilities (`ClientCapabilities`, or None)
    can be asked anything mid-call: it declared one of `ASKABLE`."""
    if capabilities is None:
        return False
    for name in ASKABLE:  # a loop, not any(...): every call asks this twice
        if getattr(capabilities, name, None) is not None:
            return True
    return False


class HeldCalls:
    """The held calls of 2026-07-28 clients, by `requestState`; runs them in a
    task group of its own (`run`)."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[HeldCall, float]] = {}
        self._tg: anyio.abc.TaskGroup | None = None

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Host the held calls until cancelled."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            try:
                await anyio.sleep_forever()
            finally:
                self._tg = None
                tg.cancel_scope.cancel()

    async def call(
        self,
        params: Mapping[str, Any] | None,
        limit: float,
        start: Callable[[HeldCall], Awaitable[Any]],
    ) -> Any:
        """One request of a 2026-07-28 client's call: a new call (`start` runs
        it, held) or, with a `requestState`, the next round of a held one.

        Returns:
            The call's result, or an `input_required` result (a dict).

        Raises:
            MCPError: `requestState` names no held call (unknown, or expired),
                or `inputResponses` is not an object.
            Exception: What the call raised.
        """
        now = anyio.current_time()
        self._sweep(now)
        if params and "inputResponses" in params:
            if not isinstance(params["inputResponses"], Mapping):
                # A protocol error (SEP-2322): answered as one, not run.
                raise MCPError(INVALID_PARAMS, "inputResponses must be an object")
        state = params.get("requestState") if params else None
        if state is not None:
            entry = self._held.pop(str(state), None)
            if entry is None:
                raise MCPError(
                    INVALID_PARAMS,
                    "requestState names no call waiting for input here "
                    "(unknown, or it expired); call the tool again",
                )
            held = entry[0]
            responses = params.get("inputResponses") if params else None
            if isinstance(responses, Mapping):
                held.answer(responses)
        else:
            held = HeldCall(limit)
            responses = params.get("inputResponses") if params else None
            if isinstance(responses, Mapping):
                held.given = dict(responses)
            self._spawn(held, start, limit)
        try:
            outcome = await held.next_round()
        except BaseException:
            # The request was cancelled: its client closed the response stream,
            # which cancels the call (2026-07-28), upstream included.
            held.abandon()
            raise
        if outcome.asks is None:
            if outcome.error is not None:
                raise outcome.error
            return outcome.result
        token = secrets.token_urlsafe(16)
        self._held[token] = (held, now + limit + HELD_GRACE)
        return {
            "resultType": "input_required",
            "inputRequests": dict(outcome.asks),
            "requestState": token,
        }

    def _spawn(
        self, held: HeldCall, start: Callable[[HeldCall], Awaitable[Any]], limit: float
    ) -> None:
        if self._tg is None:
            raise MCPError(INVALID_PARAMS, "the endpoint is shutting down")

        async def run() -> None:
            result: Any = None
            error: BaseException | None = None
            with held.scope:
                try:
                    result = await start(held)
                except Exception as exc:  # handed to the round that collects it
                    error = exc
            if held.scope.cancelled_caught:
                error = MCPError(
                    INVALID_PARAMS,
                    "the client went away"
                    if held.abandoned
                    else "the call waited too long for input",
                )
            held.finish(result, error, anyio.current_time())

        self._tg.start_soon(run)

    def _sweep(self, now: float) -> None:
        for token, (held, expires) in list(self._held.items()):
            if now >= expires:
                del self._held[token]
                held.scope.cancel()

    def __len__(self) -> int:
        return len(self._held)
