"""Tools that turn to the calling client: elicitation, sampling, roots, logging.

Each request or log message goes out through the tool call's own context
(`ctx.session` with `related_request_id`), so it reaches the client that made
the call, and over streamable HTTP it travels on that call's response stream
rather than the session's standalone GET stream. A client that did not declare
a capability gets an `isError` result saying so, never a protocol error: the
demo is there to show how a client copes, not to crash on it.

The SDK's own helpers for sampling, roots and logging warn that these features
are deprecated in 2026-07-28; the typed `send_request`/`send_notification`
used here send the same messages without the warning, which matters to
handshake-era clients that still use them.
"""

from __future__ import annotations

import json
import os
from typing import Any, Final, get_args

import mcp.types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import LOG_LEVEL_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ..mcpserver.peers import session_key
from .toolkit import SERVER_NAME, BadArguments, arg_str, text_result

__all__ = [
    "ELICITATION_SCHEMA",
    "LOG_LEVELS",
    "SAMPLE_MAX_TOKENS",
    "LogLevels",
    "ask_user",
    "list_roots",
    "sample",
]

LOG_LEVELS: Final[tuple[types.LoggingLevel, ...]] = get_args(types.LoggingLevel)
"""Every log level, least severe first (the SDK's literal is in that order)."""
_LEVEL_BY_NAME: Final[dict[str, types.LoggingLevel]] = {lv: lv for lv in LOG_LEVELS}

ELICITATION_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "description": "Your answer."}},
    "required": ["answer"],
}
"""What `ask_user` asks for: one string, `answer`."""
SAMPLE_MAX_TOKENS = 200


class LogLevels:
    """The `logging/setLevel` threshold of each handshake-era session.

    A session that never set a level gets every message. 2026-07-28 sessions
    have no `setLevel`: each request names its own threshold in `_meta`, and
    a request that names none gets no messages (as the SDK's own log helpers
    behave).
    """

    def __init__(self) -> None:
        self._levels: dict[str, types.LoggingLevel] = {}

    async def set_level(
        self, ctx: ServerRequestContext, params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        """Handle `logging/setLevel` for the session the request came on."""
        self._levels[session_key(ctx)] = params.level
        return types.EmptyResult()

    def threshold(self, ctx: ServerRequestContext) -> types.LoggingLevel | None:
        """The least severe level this request may log at; None: log nothing."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            requested = (ctx.meta or {}).get(LOG_LEVEL_META_KEY)
            return _LEVEL_BY_NAME.get(requested) if isinstance(requested, str) else None
        return self._levels.get(session_key(ctx), LOG_LEVELS[0])

    async def log(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        """Tool: send `notifications/message` at `level` to the calling client.

        The result says whether the message was sent or fell below the
        session's level, so a test can tell filtering from loss.
        """
        level = _LEVEL_BY_NAME.get(arg_str(args, "level"))
        if level is None:
            raise BadArguments(
                f"argument 'level' must be one of {', '.join(LOG_LEVELS)}"
            )
        text = arg_str(args, "text")
        threshold = self.threshold(ctx)
        if threshold is None:
            return text_result("not sent: this request asked for no log messages")
        if LOG_LEVELS.index(level) < LOG_LEVELS.index(threshold):
            return text_result(f"not sent: {level} is below {threshold}")
        message = types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams(
                level=level, logger=SERVER_NAME, data=text
            )
        )
        await ctx.session.send_notification(message, related_request_id=ctx.request_id)
        return text_result(f"sent {level}")


def _lacks(ctx: ServerRequestContext, capability: types.ClientCapabilities) -> bool:
    return not ctx.session.check_client_capability(capability)


def _missing(tool: str, capability: str) -> types.CallToolResult:
    return text_result(
        f"{tool}: the client did not declare the {capability} capability",
        is_error=True,
    )


def _failed(tool: str, exc: MCPError | ValidationError) -> types.CallToolResult:
    """The result of a request the client refused, or that could not be sent.

    2026-07-28 sessions have no channel for server-initiated requests at all
    (the SDK raises `NoBackChannelError`); say so rather than blame the client.
    """
    if isinstance(exc, NoBackChannelError):
        text = f"{tool}: cannot send requests to this client ({exc.error.message})"
    elif isinstance(exc, MCPError):
        text = f"{tool}: the client answered with an error: {exc.error.message}"
    else:
        text = f"{tool}: the client answered with an invalid result"
    return text_result(text, is_error=True)


async def _ask(
    ctx: ServerRequestContext, key: str, request: Any, result_type: Any
) -> Any:
    """Ask the calling client `request` and return its answer (a
    `result_type`). A handshake-era client is sent the request on the call's
    own channel; a 2026-07-28 one asks in rounds: its first call gets an
    `input_required` result (returned, for the tool to return) with `request`
    under `key`, and the retry carries the answer."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return await ctx.session.send_request(
            request, result_type, metadata=_related(ctx)
        )
    responses = (ctx.params or {}).get("inputResponses")
    answer = responses.get(key) if isinstance(responses, dict) else None
    if answer is None:
        return types.InputRequiredResult(
            input_requests={key: request}, request_state=key
        )
    return result_type.model_validate(answer, by_name=False)


UNLINKED_ENV = "DEMO_UNLINKED_QUESTIONS"
"""Set to 1: questions go out as many servers send them, naming no request
(over streamable HTTP: on the session's standalone stream)."""


def _related(ctx: ServerRequestContext) -> ServerMessageMetadata | None:
    """Route a request to the client on the tool call's own channel (none
    under `UNLINKED_ENV`)."""
    if os.environ.get(UNLINKED_ENV) == "1":
        return None
    return ServerMessageMetadata(related_request_id=ctx.request_id)


async def ask_user(
    ctx: ServerRequestContext, args: dict[str, Any]
) -> types.CallToolResult:
    """Tool: elicit an `answer` from the user; returns `action: {content}`."""
    message = arg_str(args, "message")
    wanted = types.ClientCapabilities(elicitation=types.ElicitationCapability())
    if _lacks(ctx, wanted):
        return _missing("ask_user", "elicitation")
    request = types.ElicitRequest(
        params=types.ElicitRequestFormParams(
            message=message, requested_schema=ELICITATION_SCHEMA
        )
    )
    try:
        result = await _ask(ctx, "ask_user", request, types.ElicitResult)
        if isinstance(result, types.InputRequiredResult):
            return result  # type: ignore[return-value]  # the SDK takes it
    except (MCPError, ValidationError) as exc:
        return _failed("ask_user", exc)
    if result.content is None:
        return text_result(result.action)
    return text_result(f"{result.action}: {json.dumps(result.content, sort_keys=True)}")


async def sample(
    ctx: ServerRequestContext, args: dict[str, Any]
) -> types.CallToolResult:
    """Tool: ask the client's model to answer `prompt`; returns the reply's text."""
    prompt = arg_str(args, "prompt")
    if _lacks(ctx, types.ClientCapabilities(sampling=types.SamplingCapability())):
        return _missing("sample", "sampling")
    request = types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(
            messages=[
                types.SamplingMessage(
                    role="user", content=types.TextContent(type="text", text=prompt)
                )
            ],
            max_tokens=SAMPLE_MAX_TOKENS,
        )
    )
    try:
        result = await _ask(ctx, "sample", request, types.CreateMessageResult)
        if isinstance(result, types.InputRequiredResult):
            return result  # type: ignore[return-value]  # the SDK takes it
    except (MCPError, ValidationError) as exc:
        return _failed("sample", exc)
    if not isinstance(result.content, types.TextContent):
        kind = result.content.type
        return text_result(f"sample: the model replied with {kind}", is_error=True)
    return text_result(result.content.text)


async def list_roots(
    ctx: ServerRequestContext, args: dict[str, Any]
) -> types.CallToolResult:
    """Tool: ask the client for its roots; returns their URIs as a JSON list."""
    if _lacks(ctx, types.ClientCapabilities(roots=types.RootsCapability())):
        return _missing("roots", "roots")
    try:
        result = await ctx.session.send_request(
            types.ListRootsRequest(), types.ListRootsResult, metadata=_related(ctx)
        )
    except (MCPError, ValidationError) as exc:
        return _failed("roots", exc)
    return text_result(json.dumps([str(root.uri) for root in result.roots]))
