"""What an upstream asks of us: the SDK client callbacks, wired to `Hooks`.

An upstream server may send us requests (`sampling/createMessage`,
`elicitation/create`, `roots/list`) and log messages (`notifications/message`).
We declare sampling and elicitation to every upstream, because a downstream
client of the endpoint may be able to answer them; `Hooks.on_request` decides
(the gateway routes them to the client whose call caused them, or refuses).
Roots are declared only when the connection has some (`roots = {...}`), and
answered here from the connection's current declaration.

A refusal goes back as the SDK's `ErrorData`, never as an exception: an
exception in a callback would surface as an internal error with a traceback in
the upstream's log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import mcp.types as types
from mcp.client.session import ClientRequestContext
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST
from pydantic import ValidationError

from ..core.exposure import root_uri
from .base import LINK_META_KEY, Hooks

__all__ = ["as_result", "asked", "refusal", "server_request_callbacks"]

logger = logging.getLogger(__name__)


def refusal(method: str, exc: BaseException) -> types.ErrorData:
    """What an upstream is answered when we cannot answer its request."""
    if isinstance(exc, NotImplementedError):
        return types.ErrorData(
            code=INVALID_REQUEST,
            message=f"{method} is not available: no client connected through "
            "mcp-manager can answer it",
        )
    logger.exception("answering %s failed", method)
    return types.ErrorData(code=INTERNAL_ERROR, message=f"{method} failed: {exc}")


_RESULTS: dict[str, Any] = {
    "sampling/createMessage": types.CreateMessageResult,
    "elicitation/create": types.ElicitResult,
    "roots/list": types.ListRootsResult,
}


def as_result(method: str, answer: Any) -> Any:
    """An answer given as JSON (`call --answer`) as the SDK's result of
    `method`; anything else as it is."""
    if not isinstance(answer, Mapping) or method not in _RESULTS:
        return answer
    try:
        return _RESULTS[method].model_validate(answer, by_name=False)
    except ValidationError as exc:
        return types.ErrorData(
            code=INVALID_PARAMS,
            message=f"{method}: the answer given is not a valid result "
            f"({exc.error_count()} problems)",
        )


async def asked(
    hooks: Hooks, method: str, params: Any, link: str | None, key: str | None
) -> Any:
    """A server's request answered through `hooks.on_request` (the gateway
    asks the client whose request it serves), as the SDK's result of `method`;
    a failure is the server's error answer, never an exception."""
    try:
        return as_result(method, await hooks.on_request(method, params, link, key))
    except Exception as exc:  # boundary: the upstream gets an error reply
        return refusal(method, exc)


def server_request_callbacks(hooks: Hooks) -> dict[str, Any]:
    """Keyword arguments for `ClientSession(...)` that route to `hooks`."""

    async def ask(method: str, context: ClientRequestContext, params: Any) -> Any:
        # A 2026-07-28 server's input request names its call in our context;
        # a handshake-era one arrived on that call's stream (HTTP) or not.
        named = (context.meta or {}).get(LINK_META_KEY)
        link = named if isinstance(named, str) else hooks.links.pop(context.request_id)
        key = str(context.request_id) if context.request_id is not None else None
        return await asked(hooks, method, params, link, key)

    async def sampling(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> Any:
        return await ask("sampling/createMessage", context, params)

    async def elicitation(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> Any:
        return await ask("elicitation/create", context, params)

    roots = hooks.roots

    async def list_roots(context: ClientRequestContext) -> Any:
        declared = roots() if roots is not None else ()
        return types.ListRootsResult(
            roots=[types.Root(uri=root_uri(root)) for root in declared]  # type: ignore[arg-type]
        )

    async def logging_callback(params: types.LoggingMessageNotificationParams) -> None:
        hooks.on_log(str(params.level), params.logger, params.data)

    callbacks: dict[str, Any] = {
        "sampling_callback": sampling,
        "elicitation_callback": elicitation,
        "logging_callback": logging_callback,
    }
    if roots is not None:
        callbacks["list_roots_callback"] = list_roots
    return callbacks
