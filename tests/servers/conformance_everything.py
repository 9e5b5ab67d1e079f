"""A dual-era MCP server with every fixture the official conformance suite calls.

What it is for: the server side of `@modelcontextprotocol/conformance` (0.2.0,
`conformance server --url ...`) names the tools, prompts and resources it
calls (`test_simple_text`, `test_prompt_with_arguments`, `test://static-text`,
...). This module offers all of them, for both requirement sets
(`--requirements 2025-11-25` and `--requirements 2026-07-28`), so the suite can
run straight at it and, through `bench/conformance_server.py`, through
mcp-manager's aggregated endpoint with this server as the upstream.

It is built on the SDK's low-level `mcp.server.Server`, which answers both
eras by itself: the 2025-11-25 `initialize` handshake (sessions, server to
client requests) and the stateless 2026-07-28 per-request envelope
(`server/discover`, `subscriptions/listen`, caching hints, `input_required`
results). Era by era:

- Handshake era: sampling, elicitation and roots go to the client mid-call
  (`test_sampling`, `test_elicitation`, `test_elicitation_sep1034_defaults`,
  `test_elicitation_sep1330_enums`, and the `test_input_required_result_*`
  tools too); `logging/setLevel` filters `test_tool_with_logging`'s messages
  per session; `resources/subscribe` / `unsubscribe` track URIs per session.
- 2026-07-28: the same tools answer with an `input_required` result (SEP-2322)
  and complete when retried with `inputResponses`; `requestState` is sealed by
  the SDK's `RequestStateBoundary`, so tampered state is refused (-32602);
  `test_missing_capability` raises -32021 unless the client declared sampling;
  `test_trigger_tool_change` / `test_trigger_prompt_change` add or remove
  `test_added_tool` / `test_added_prompt` and publish the change on the
  `subscriptions/listen` bus (and, in the handshake era, to the caller).
- Tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`, the suite's
  `tasks-*` scenarios): `greet` (sync), `slow_compute`, `failing_job`,
  `protocol_error_job`, `confirm_delete`, `multi_input` and
  `test_tool_with_task` run as tasks for clients that declare the extension;
  `tasks/get`, `tasks/update` and `tasks/cancel` serve them.

Run it over streamable HTTP (`127.0.0.1`, path `/mcp`, DNS-rebinding
protection on, an in-memory event store so `test_reconnection` can close its
stream and be resumed; uvicorn on h11, whose parser strips the whitespace
around header values that httptools keeps):

    python tests/servers/conformance_everything.py --port 8931

or over stdio (`--stdio`). With `--json-lines`, its 2026-07-28 streams go as
JSON lines in an `application/json` body, as the TypeScript SDK sends them
(`JsonLines`). Over HTTP it prints one line, `ready <url>`, to
stdout once it listens; everything else goes to stderr. Over stdio stdout
carries only the protocol.
"""

from __future__ import annotations

import argparse
import json
import logging
import socket
import sys
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.subscriptions import PromptsListChanged, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter

__all__ = ["SERVER_NAME", "ConformanceServer", "main"]

SERVER_NAME = "mcp-conformance-everything"

Ctx = ServerRequestContext[Any, Any]
"""The per-request context the low-level server hands every handler."""

PNG_BASE64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx"
    "0gAAAABJRU5ErkJggg=="
)
"""A 1x1 PNG."""
WAV_BASE64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
"""A tiny valid WAV file."""
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
LOG_LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {
        "properties": {"contactMethod": {"const": "phone"}},
        "required": ["contactMethod"],
    },
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
"""`json_schema_2020_12_tool`'s input schema, exactly as the suite wants it kept."""
CACHE_HINTS: dict[CacheableMethod, CacheHint] = {
    "tools/list": CacheHint(ttl_ms=0, scope="public"),
    "prompts/list": CacheHint(ttl_ms=0, scope="public"),
    "resources/list": CacheHint(ttl_ms=0, scope="public"),
    "resources/templates/list": CacheHint(ttl_ms=0, scope="public"),
    "resources/read": CacheHint(ttl_ms=1000, scope="public"),
}
"""Explicit SEP-2549 hints (the SDK would default to 0 ms, private)."""
_INPUT_RESPONSE: TypeAdapter[types.InputResponse] = TypeAdapter(types.InputResponse)


def _text(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=is_error
    )


def _object_schema(
    properties: Mapping[str, Any] | None = None, required: Sequence[str] = ()
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": dict(properties or {})}
    if required:
        schema["required"] = list(required)
    return schema


def _elicit(message: str, schema: dict[str, Any]) -> types.ElicitRequest:
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
    )


def _sample(prompt: str, max_tokens: int = 100) -> types.CreateMessageRequest:
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(
            messages=[
                types.SamplingMessage(
                    role="user", content=types.TextContent(type="text", text=prompt)
                )
            ],
            max_tokens=max_tokens,
        )
    )


def _is_modern(ctx: Ctx) -> bool:
    """Whether this request speaks the stateless 2026-07-28 era."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _session_key(ctx: Ctx) -> str:
    """Who is asking, for per-session state: the HTTP session id, or `stdio`."""
    headers = getattr(ctx.request, "headers", None)
    if headers is not None:
        session_id = headers.get("mcp-session-id")
        if session_id:
            return str(session_id)
    return "stdio"


def _response_matches(request: types.InputRequest, response: object) -> bool:
    if isinstance(request, types.ElicitRequest):
        return isinstance(response, types.ElicitResult)
    if isinstance(request, types.CreateMessageRequest):
        return isinstance(
            response, types.CreateMessageResult | types.CreateMessageResultWithTools
        )
    return isinstance(response, types.ListRootsResult)


def _missing_capabilities(
    ctx: Ctx, requests: Sequence[types.InputRequest]
) -> types.ClientCapabilities | None:
    """The client capabilities `requests` need but the client did not declare."""
    declared = ctx.session.client_capabilities or types.ClientCapabilities()
    missing: dict[str, Any] = {}
    for request in requests:
        if isinstance(request, types.ElicitRequest) and declared.elicitation is None:
            missing["elicitation"] = types.ElicitationCapability()
        elif (
            isinstance(request, types.CreateMessageRequest)
            and declared.sampling is None
        ):
            missing["sampling"] = types.SamplingCapability()
        elif isinstance(request, types.ListRootsRequest) and declared.roots is None:
            missing["roots"] = types.RootsCapability()
    return types.ClientCapabilities(**missing) if missing else None


def _missing_capability_error(required: types.ClientCapabilities) -> MCPError:
    data = types.MissingRequiredClientCapabilityErrorData(
        required_capabilities=required
    )
    names = ", ".join(required.model_dump(exclude_none=True))
    return MCPError(
        code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=f"Client did not declare the required capability: {names}",
        data=data.model_dump(by_alias=True, mode="json", exclude_none=True),
    )


async def _ask_client(ctx: Ctx, request: types.InputRequest) -> types.InputResponse:
    """Send one server-to-client request on the calling request's own stream."""
    metadata = ServerMessageMetadata(related_request_id=ctx.request_id)
    if isinstance(request, types.ElicitRequest):
        return await ctx.session.send_request(
            request, types.ElicitResult, metadata=metadata
        )
    if isinstance(request, types.CreateMessageRequest):
        return await ctx.session.send_request(
            request, types.CreateMessageResult, metadata=metadata
        )
    return await ctx.session.send_request(
        request, types.ListRootsResult, metadata=metadata
    )


async def gather_input(
    ctx: Ctx,
    params: types.InputResponseRequestParams,
    requests: Mapping[str, types.InputRequest],
    *,
    state: str | None = None,
) -> dict[str, types.InputResponse] | types.InputRequiredResult:
    """Get the client's answers to `requests`, whichever era the request speaks.

    Handshake era: each request goes to the client now, on the call's stream,
    and the answers come back. 2026-07-28: the answers are the retry's
    `inputResponses`; whatever is missing (or of the wrong kind) is asked for
    with an `input_required` result carrying `state` as its `requestState`.

    Raises:
        MCPError: -32021 when the client did not declare a capability a
            request needs.
    """
    required = _missing_capabilities(ctx, list(requests.values()))
    if required is not None:
        raise _missing_capability_error(required)
    if not _is_modern(ctx):
        return {
            key: await _ask_client(ctx, request) for key, request in requests.items()
        }
    answers = params.input_responses or {}
    missing = {
        key: request
        for key, request in requests.items()
        if not _response_matches(request, answers.get(key))
    }
    if missing:
        return types.InputRequiredResult(input_requests=missing, request_state=state)
    return {key: answers[key] for key in requests}


def _elicited(response: types.InputResponse) -> tuple[str, dict[str, Any]]:
    if isinstance(response, types.ElicitResult):
        return response.action, dict(response.content or {})
    return "cancel", {}


def _sampled_text(response: types.InputResponse) -> str:
    if isinstance(response, types.CreateMessageResult) and isinstance(
        response.content, types.TextContent
    ):
        return response.content.text
    return "no text"


def _roots(response: types.InputResponse) -> list[str]:
    if isinstance(response, types.ListRootsResult):
        return [str(root.uri) for root in response.roots]
    return []


class InMemoryEventStore(EventStore):
    """Keeps every SSE event so a client can resume with `Last-Event-ID` (SEP-1699)."""

    def __init__(self) -> None:
        self._events: list[tuple[str, str, types.JSONRPCMessage | None]] = []

    async def store_event(
        self, stream_id: str, message: types.JSONRPCMessage | None
    ) -> str:
        event_id = str(len(self._events) + 1)
        self._events.append((stream_id, event_id, message))
        return event_id

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        stream = next((s for s, e, _ in self._events if e == last_event_id), None)
        if stream is None:
            return None
        for stream_id, event_id, message in self._events[int(last_event_id) :]:
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


class TaskParams(types.RequestParams):
    """`tasks/get` and `tasks/cancel` params."""

    task_id: str


class TaskUpdateParams(TaskParams):
    """`tasks/update` params: answers to the task's pending `inputRequests`."""

    input_responses: dict[str, Any] | None = None


ToolResult = types.CallToolResult | types.InputRequiredResult | dict[str, Any]
ToolHandler = Callable[[Ctx, types.CallToolRequestParams], Awaitable[ToolResult]]
TaskSupport = Literal["optional", "required"]


@dataclass
class Task:
    """One SEP-2663 task: a tool call that runs after its `tools/call` returned."""

    task_id: str
    tool: str
    created_at: str
    status: str = "working"
    updated_at: str = ""
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    answered: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class _Server(Server[dict[str, Any]]):
    """The low-level server, advertising `listChanged` in the handshake era too."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options
            or NotificationOptions(
                prompts_changed=True, resources_changed=True, tools_changed=True
            ),
            experimental_capabilities,
            extensions,
        )


class ConformanceServer:
    """The fixtures and their state; `.server` is the low-level SDK server."""

    TASK_TTL_MS = 300_000
    POLL_INTERVAL_MS = 100

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self.log_levels: dict[str, types.LoggingLevel] = {}
        self.subscriptions: dict[str, set[str]] = {}
        self.added_tool = False
        self.added_prompt = False
        self.tasks: dict[str, Task] = {}
        self.task_group: anyio.abc.TaskGroup | None = None
        self.tools: dict[str, tuple[types.Tool, ToolHandler]] = {}
        self.task_tools: dict[str, TaskSupport] = {}
        self._register_tools()
        self.server = _Server(
            SERVER_NAME,
            version="1.0.0",
            title="MCP conformance everything server",
            instructions="Fixtures for the MCP conformance suite's server scenarios.",
            cache_hints=CACHE_HINTS,
            get_tool_input_schema=self.tool_input_schema,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_prompts=self.list_prompts,
            on_get_prompt=self.get_prompt,
            on_list_resources=self.list_resources,
            on_list_resource_templates=self.list_resource_templates,
            on_read_resource=self.read_resource,
            on_subscribe_resource=self.subscribe,
            on_unsubscribe_resource=self.unsubscribe,
            on_subscriptions_listen=ListenHandler(self.bus),
            on_completion=self.complete,
        )
        # Added by hand: the constructor argument warns (logging is deprecated
        # as of 2026-07-28), yet the 2025-11-25 suite needs it.
        self.server.add_request_handler(
            "logging/setLevel", types.SetLevelRequestParams, self.set_level
        )
        self.server.add_request_handler("tasks/get", TaskParams, self.tasks_get)
        self.server.add_request_handler(
            "tasks/update", TaskUpdateParams, self.tasks_update
        )
        self.server.add_request_handler("tasks/cancel", TaskParams, self.tasks_cancel)
        self.server.extensions[TASKS_EXTENSION] = {}
        # Seals and verifies `requestState` (what `MCPServer` installs itself).
        self.server.middleware.append(
            RequestStateBoundary(
                RequestStateSecurity.ephemeral(), default_audience=SERVER_NAME
            )
        )

    # Tools ------------------------------------------------------------------

    def _tool(
        self,
        name: str,
        description: str,
        handler: ToolHandler,
        properties: Mapping[str, Any] | None = None,
        required: Sequence[str] = (),
        *,
        schema: dict[str, Any] | None = None,
        task: TaskSupport | None = None,
    ) -> None:
        execution = types.ToolExecution(task_support=task) if task else None
        tool = types.Tool(
            name=name,
            description=description,
            input_schema=schema or _object_schema(properties, required),
            execution=execution,
        )
        self.tools[name] = (tool, handler)
        if task is not None:
            self.task_tools[name] = task

    def _register_tools(self) -> None:
        string = {"type": "string"}
        self._tool("test_simple_text", "Returns simple text.", self.simple_text)
        self._tool("test_image_content", "Returns a PNG image.", self.image)
        self._tool("test_audio_content", "Returns a WAV clip.", self.audio)
        self._tool(
            "test_embedded_resource", "Returns an embedded resource.", self.embedded
        )
        self._tool(
            "test_multiple_content_types",
            "Returns text, an image and a resource.",
            self.mixed,
        )
        self._tool(
            "test_tool_with_logging",
            "Sends three info log messages while it runs.",
            self.with_logging,
        )
        self._tool(
            "test_logging_tool",
            "Sends log messages (only to requests that opted in on 2026-07-28).",
            self.with_logging,
        )
        self._tool("test_error_handling", "Always fails.", self.error_handling)
        self._tool(
            "test_tool_with_progress",
            "Reports progress 0, 50, 100 of 100.",
            self.with_progress,
        )
        self._tool(
            "test_sampling",
            "Asks the client's LLM to answer the prompt.",
            self.sampling,
            {"prompt": {"type": "string", "description": "The prompt to send"}},
            ["prompt"],
        )
        self._tool(
            "test_elicitation",
            "Asks the user for a username and an email.",
            self.elicitation,
            {"message": {"type": "string", "description": "The message to show"}},
            ["message"],
        )
        self._tool(
            "test_elicitation_sep1034_defaults",
            "Elicits a form whose fields all have defaults (SEP-1034).",
            self.elicitation_defaults,
        )
        self._tool(
            "test_elicitation_sep1330_enums",
            "Elicits a form with the five enum variants (SEP-1330).",
            self.elicitation_enums,
        )
        self._tool(
            "test_streaming_elicitation",
            "Elicits a name (in-band on 2026-07-28: an input_required result).",
            self.streaming_elicitation,
        )
        self._tool(
            "test_reconnection",
            "Closes its SSE stream mid-call, then finishes (SEP-1699).",
            self.reconnection,
        )
        self._tool(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features.",
            self.echo_arguments,
            schema=JSON_SCHEMA_2020_12,
        )
        self._tool(
            "test_custom_header_echo",
            "Echoes `region`, which HTTP clients mirror as `Mcp-Param-Region`.",
            self.custom_header_echo,
            {"region": {"type": "string", "x-mcp-header": "Region"}},
            ["region"],
        )
        self._tool(
            "test_missing_capability",
            "Needs the sampling capability: -32021 when it was not declared.",
            self.missing_capability,
        )
        self._tool(
            "test_trigger_tool_change",
            "Adds or removes test_added_tool and announces the change.",
            self.trigger_tool_change,
        )
        self._tool(
            "test_trigger_prompt_change",
            "Adds or removes test_added_prompt and announces the change.",
            self.trigger_prompt_change,
        )
        self._tool(
            "test_input_required_result_elicitation",
            "Asks for the caller's name (SEP-2322).",
            self.mrtr_elicitation,
        )
        self._tool(
            "test_input_required_result_sampling",
            "Asks the client's LLM for the capital of France (SEP-2322).",
            self.mrtr_sampling,
        )
        self._tool(
            "test_input_required_result_list_roots",
            "Asks for the client's roots (SEP-2322).",
            self.mrtr_roots,
        )
        self._tool(
            "test_input_required_result_request_state",
            "Asks for a confirmation and checks the echoed requestState.",
            self.mrtr_request_state,
        )
        self._tool(
            "test_input_required_result_multiple_inputs",
            "Asks for a name, a sampled greeting and the roots at once.",
            self.mrtr_multiple,
        )
        self._tool(
            "test_input_required_result_multi_round",
            "Asks for a name, then a colour, in two rounds.",
            self.mrtr_multi_round,
        )
        self._tool(
            "test_input_required_result_tampered_state",
            "Asks for a confirmation; tampered requestState is refused.",
            self.mrtr_request_state,
        )
        self._tool(
            "test_input_required_result_capabilities",
            "Asks only for what the client declared (sampling, elicitation).",
            self.mrtr_capabilities,
        )
        # The tasks extension's fixtures (SEP-2663).
        self._tool(
            "greet", "Says hello (sync only).", self.greet, {"name": string}, ["name"]
        )
        self._tool(
            "slow_compute",
            "Sleeps `seconds`, then answers.",
            self.slow_compute,
            {"seconds": {"type": "number"}, "label": string},
            task="optional",
        )
        self._tool(
            "failing_job",
            "Returns a tool error after about a second.",
            self.failing_job,
            task="required",
        )
        self._tool(
            "protocol_error_job",
            "Crashes: a protocol-level error.",
            self.protocol_error_job,
            task="optional",
        )
        self._tool(
            "confirm_delete",
            "Asks for a confirmation, then deletes nothing.",
            self.confirm_delete,
            {"filename": string},
            task="optional",
        )
        self._tool(
            "multi_input",
            "Asks two questions at once.",
            self.multi_input,
            task="optional",
        )
        self._tool(
            "test_tool_with_task",
            "Asks for a name (input_required), then greets in a task.",
            self.tool_with_task,
            task="required",
        )
        self._tool(
            "test_added_tool",
            "Exists only after test_trigger_tool_change.",
            self.simple_text,
        )

    def tool_input_schema(self, name: str) -> dict[str, Any] | None:
        """For the SDK's `Mcp-Param-*` header validation (SEP-2243)."""
        entry = self.tools.get(name)
        return None if entry is None else entry[0].input_schema

    async def list_tools(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                tool
                for name, (tool, _) in self.tools.items()
                if name != "test_added_tool" or self.added_tool
            ]
        )

    async def call_tool(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        entry = self.tools.get(params.name)
        if entry is None or (params.name == "test_added_tool" and not self.added_tool):
            raise MCPError(
                code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}"
            )
        support = self.task_tools.get(params.name)
        if support is not None:
            task_result = await self.maybe_start_task(ctx, params, support)
            if task_result is not None:
                # A dict is a valid handler result; the SDK types this hook
                # narrower than what it serializes.
                return task_result  # type: ignore[return-value]
        result = await entry[1](ctx, params)
        if isinstance(result, dict):
            return types.CallToolResult.model_validate(result)
        return result

    async def simple_text(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        return _text("This is a simple text response for testing.")

    async def image(self, ctx: Ctx, params: types.CallToolRequestParams) -> ToolResult:
        return types.CallToolResult(
            content=[
                types.ImageContent(type="image", data=PNG_BASE64, mime_type="image/png")
            ]
        )

    async def audio(self, ctx: Ctx, params: types.CallToolRequestParams) -> ToolResult:
        return types.CallToolResult(
            content=[
                types.AudioContent(type="audio", data=WAV_BASE64, mime_type="audio/wav")
            ]
        )

    async def embedded(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        resource = types.TextResourceContents(
            uri="test://embedded-resource",
            mime_type="text/plain",
            text="This is an embedded resource content.",
        )
        return types.CallToolResult(
            content=[types.EmbeddedResource(type="resource", resource=resource)]
        )

    async def mixed(self, ctx: Ctx, params: types.CallToolRequestParams) -> ToolResult:
        resource = types.TextResourceContents(
            uri="test://mixed-content-resource",
            mime_type="application/json",
            text='{"test":"data","value":123}',
        )
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text="Multiple content types test:"),
                types.ImageContent(
                    type="image", data=PNG_BASE64, mime_type="image/png"
                ),
                types.EmbeddedResource(type="resource", resource=resource),
            ]
        )

    async def _log(self, ctx: Ctx, level: types.LoggingLevel, text: str) -> None:
        """A log message for the caller, if its session's level lets it through.

        On 2026-07-28 the SDK itself drops it unless the request opted in with
        `_meta["io.modelcontextprotocol/logLevel"]`.
        """
        if not _is_modern(ctx):
            threshold = self.log_levels.get(_session_key(ctx), "debug")
            if LOG_LEVELS.index(level) < LOG_LEVELS.index(threshold):
                return
        await ctx.session.send_log_message(
            level, text, logger=SERVER_NAME, related_request_id=ctx.request_id
        )

    async def with_logging(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        await self._log(ctx, "info", "Tool execution started")
        await anyio.sleep(0.05)
        await self._log(ctx, "info", "Tool processing data")
        await anyio.sleep(0.05)
        await self._log(ctx, "info", "Tool execution completed")
        return _text("Tool with logging executed successfully")

    async def error_handling(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        return _text(
            "This tool intentionally returns an error for testing", is_error=True
        )

    async def with_progress(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        for step in (0, 50, 100):
            await ctx.session.report_progress(
                step, 100, f"Completed step {step} of 100"
            )
            if step < 100:
                await anyio.sleep(0.05)
        token = (params.meta or {}).get("progress_token")
        return _text(f"Progress completed (token {token})")

    async def sampling(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        prompt = str((params.arguments or {}).get("prompt", ""))
        answers = await gather_input(ctx, params, {"sample": _sample(prompt)})
        if isinstance(answers, types.InputRequiredResult):
            return answers
        return _text(f"LLM response: {_sampled_text(answers['sample'])}")

    async def elicitation(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        message = str((params.arguments or {}).get("message", "Please respond"))
        schema = _object_schema(
            {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            ["username", "email"],
        )
        answers = await gather_input(ctx, params, {"user": _elicit(message, schema)})
        if isinstance(answers, types.InputRequiredResult):
            return answers
        action, content = _elicited(answers["user"])
        return _text(f"User response: action={action}, content={json.dumps(content)}")

    async def elicitation_defaults(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        schema = _object_schema(
            {
                "name": {
                    "type": "string",
                    "description": "User name",
                    "default": "John Doe",
                },
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {
                    "type": "number",
                    "description": "User score",
                    "default": 95.5,
                },
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {
                    "type": "boolean",
                    "description": "Verification status",
                    "default": True,
                },
            }
        )
        request = _elicit("Please review and update the form fields", schema)
        answers = await gather_input(ctx, params, {"defaults": request})
        if isinstance(answers, types.InputRequiredResult):
            return answers
        action, content = _elicited(answers["defaults"])
        return _text(
            f"Elicitation completed: action={action}, content={json.dumps(content)}"
        )

    async def elicitation_enums(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        def titled(prefix: str, word: str) -> list[dict[str, str]]:
            names = ("First", "Second", "Third")
            return [
                {"const": f"{prefix}{i}", "title": f"{name} {word}"}
                for i, name in enumerate(names, 1)
            ]

        options = ["option1", "option2", "option3"]
        schema = _object_schema(
            {
                "untitledSingle": {
                    "type": "string",
                    "description": "Simple enum without titles",
                    "enum": options,
                },
                "titledSingle": {
                    "type": "string",
                    "description": "Enum with titled options",
                    "oneOf": titled("value", "Option"),
                },
                "legacyEnum": {
                    "type": "string",
                    "description": "Legacy enum with enumNames",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Multi-select without titles",
                    "items": {"type": "string", "enum": options},
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Multi-select with titled options",
                    "items": {"anyOf": titled("value", "Choice")},
                },
            }
        )
        request = _elicit("Please select options from the enum fields", schema)
        answers = await gather_input(ctx, params, {"enums": request})
        if isinstance(answers, types.InputRequiredResult):
            return answers
        action, content = _elicited(answers["enums"])
        return _text(
            f"Elicitation completed: action={action}, content={json.dumps(content)}"
        )

    async def streaming_elicitation(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        return await self.mrtr_elicitation(ctx, params)  # the same question

    async def reconnection(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        await self._log(ctx, "info", "Before disconnect")
        if ctx.close_sse_stream is not None:
            await ctx.close_sse_stream()
        await anyio.sleep(0.2)
        await self._log(ctx, "info", "After reconnect")
        return _text("Reconnection test completed")

    async def echo_arguments(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        return _text(json.dumps(params.arguments or {}, sort_keys=True))

    async def custom_header_echo(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        return _text(str((params.arguments or {}).get("region")))

    async def missing_capability(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        required = _missing_capabilities(ctx, [_sample("unused")])
        if required is not None:
            raise _missing_capability_error(required)
        return _text("The client declared sampling.")

    async def trigger_tool_change(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        self.added_tool = not self.added_tool
        await self.bus.publish(ToolsListChanged())
        if not _is_modern(ctx):
            await ctx.session.send_tool_list_changed()
        state = "added" if self.added_tool else "removed"
        return _text(f"test_added_tool {state}")

    async def trigger_prompt_change(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        self.added_prompt = not self.added_prompt
        await self.bus.publish(PromptsListChanged())
        if not _is_modern(ctx):
            await ctx.session.send_prompt_list_changed()
        state = "added" if self.added_prompt else "removed"
        return _text(f"test_added_prompt {state}")

    # Multi-round-trip (SEP-2322) -------------------------------------------------

    async def mrtr_elicitation(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        request = _elicit("What is your name?", _name_schema())
        answers = await gather_input(ctx, params, {"user_name": request})
        if isinstance(answers, types.InputRequiredResult):
            return answers
        _, content = _elicited(answers["user_name"])
        return _text(f"Hello, {content.get('name', 'stranger')}!")

    async def mrtr_sampling(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        request = _sample("What is the capital of France?")
        answers = await gather_input(ctx, params, {"capital_question": request})
        if isinstance(answers, types.InputRequiredResult):
            return answers
        return _text(f"Sampling result: {_sampled_text(answers['capital_question'])}")

    async def mrtr_roots(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        answers = await gather_input(
            ctx, params, {"client_roots": types.ListRootsRequest()}
        )
        if isinstance(answers, types.InputRequiredResult):
            return answers
        roots = _roots(answers["client_roots"])
        return _text(f"Found {len(roots)} root(s): {', '.join(roots)}")

    async def mrtr_request_state(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        schema = _object_schema({"ok": {"type": "boolean"}}, ["ok"])
        state = f"confirm:{params.name}"
        answers = await gather_input(
            ctx, params, {"confirm": _elicit("Please confirm", schema)}, state=state
        )
        if isinstance(answers, types.InputRequiredResult):
            return answers
        if _is_modern(ctx) and params.request_state != state:
            raise MCPError(
                code=types.INVALID_PARAMS, message="requestState missing or wrong"
            )
        _, content = _elicited(answers["confirm"])
        return _text(f"state-ok: confirmed={content.get('ok')}")

    async def mrtr_multiple(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        requests: dict[str, types.InputRequest] = {
            "user_name": _elicit("What is your name?", _name_schema()),
            "greeting": _sample("Generate a greeting", 50),
            "client_roots": types.ListRootsRequest(),
        }
        answers = await gather_input(ctx, params, requests, state="multiple:1")
        if isinstance(answers, types.InputRequiredResult):
            return answers
        _, content = _elicited(answers["user_name"])
        greeting = _sampled_text(answers["greeting"])
        roots = _roots(answers["client_roots"])
        return _text(
            f"name={content.get('name')}, greeting={greeting}, roots={len(roots)}"
        )

    async def mrtr_multi_round(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        color_schema = _object_schema({"color": {"type": "string"}}, ["color"])
        step2 = _elicit("Step 2: What is your favorite color?", color_schema)
        state = params.request_state or ""
        if _is_modern(ctx) and state.startswith("round:2:"):
            # Round 3: the name rides in the state; only step2 is answered now.
            name = state[len("round:2:") :]
        else:
            step1 = _elicit("Step 1: What is your name?", _name_schema())
            answers = await gather_input(ctx, params, {"step1": step1}, state="round:1")
            if isinstance(answers, types.InputRequiredResult):
                return answers
            _, content = _elicited(answers["step1"])
            name = str(content.get("name", "stranger"))
            if _is_modern(ctx):
                return types.InputRequiredResult(
                    input_requests={"step2": step2}, request_state=f"round:2:{name}"
                )
        answers = await gather_input(
            ctx, params, {"step2": step2}, state=f"round:2:{name}"
        )
        if isinstance(answers, types.InputRequiredResult):
            return answers
        _, content = _elicited(answers["step2"])
        return _text(f"{name} likes {content.get('color', 'no colour')}")

    async def mrtr_capabilities(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        wanted: dict[str, types.InputRequest] = {
            "summary": _sample("Summarize the request"),
            "user_name": _elicit("What is your name?", _name_schema()),
        }
        usable = {
            key: request
            for key, request in wanted.items()
            if _missing_capabilities(ctx, [request]) is None
        }
        if not usable:
            raise _missing_capability_error(
                types.ClientCapabilities(
                    sampling=types.SamplingCapability(),
                    elicitation=types.ElicitationCapability(),
                )
            )
        answers = await gather_input(ctx, params, usable)
        if isinstance(answers, types.InputRequiredResult):
            return answers
        return _text(f"Answered: {', '.join(sorted(answers))}")

    # Prompts ------------------------------------------------------------------

    async def list_prompts(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        def argument(name: str, description: str) -> types.PromptArgument:
            return types.PromptArgument(
                name=name, description=description, required=True
            )

        prompts = [
            types.Prompt(
                name="test_simple_prompt", description="A prompt without arguments"
            ),
            types.Prompt(
                name="test_prompt_with_arguments",
                description="A prompt with two required arguments",
                arguments=[
                    argument("arg1", "First test argument"),
                    argument("arg2", "Second test argument"),
                ],
            ),
            types.Prompt(
                name="test_prompt_with_embedded_resource",
                description="A prompt embedding a resource",
                arguments=[argument("resourceUri", "URI of the resource to embed")],
            ),
            types.Prompt(
                name="test_prompt_with_image", description="A prompt with an image"
            ),
            types.Prompt(
                name="test_input_required_result_prompt",
                description="Asks for context first (SEP-2322)",
            ),
        ]
        if self.added_prompt:
            prompts.append(
                types.Prompt(
                    name="test_added_prompt",
                    description="Exists only after test_trigger_prompt_change",
                )
            )
        return types.ListPromptsResult(prompts=prompts)

    async def get_prompt(
        self, ctx: Ctx, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        args = params.arguments or {}

        def user(content: types.ContentBlock) -> types.PromptMessage:
            return types.PromptMessage(role="user", content=content)

        def text(value: str) -> types.TextContent:
            return types.TextContent(type="text", text=value)

        name = params.name
        if name in ("test_simple_prompt", "test_added_prompt") and (
            name != "test_added_prompt" or self.added_prompt
        ):
            messages = [user(text("This is a simple prompt for testing."))]
        elif name == "test_prompt_with_arguments":
            arg1, arg2 = args.get("arg1", ""), args.get("arg2", "")
            messages = [
                user(text(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))
            ]
        elif name == "test_prompt_with_embedded_resource":
            resource = types.TextResourceContents(
                uri=args.get("resourceUri", "test://embedded"),
                mime_type="text/plain",
                text="Embedded resource content for testing.",
            )
            messages = [
                user(types.EmbeddedResource(type="resource", resource=resource)),
                user(text("Please process the embedded resource above.")),
            ]
        elif name == "test_prompt_with_image":
            image = types.ImageContent(
                type="image", data=PNG_BASE64, mime_type="image/png"
            )
            messages = [user(image), user(text("Please analyze the image above."))]
        elif name == "test_input_required_result_prompt":
            schema = _object_schema({"context": {"type": "string"}}, ["context"])
            request = _elicit("What context should the prompt use?", schema)
            answers = await gather_input(ctx, params, {"user_context": request})
            if isinstance(answers, types.InputRequiredResult):
                return answers
            _, content = _elicited(answers["user_context"])
            messages = [user(text(f"Use this context: {content.get('context')}"))]
        else:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {name}")
        return types.GetPromptResult(
            description=f"The {name} prompt", messages=messages
        )

    # Resources ----------------------------------------------------------------

    async def list_resources(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri="test://static-text",
                    name="static-text",
                    description="A static text resource",
                    mime_type="text/plain",
                ),
                types.Resource(
                    uri="test://static-binary",
                    name="static-binary",
                    description="A static binary resource (a PNG)",
                    mime_type="image/png",
                ),
                types.Resource(
                    uri="test://watched-resource",
                    name="watched-resource",
                    description="A resource to subscribe to",
                    mime_type="text/plain",
                ),
            ]
        )

    async def list_resource_templates(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template="test://template/{id}/data",
                    name="template-data",
                    description="Data for an id",
                    mime_type="application/json",
                )
            ]
        )

    async def read_resource(
        self, ctx: Ctx, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        contents: types.TextResourceContents | types.BlobResourceContents
        if uri == "test://static-text":
            contents = types.TextResourceContents(
                uri=uri,
                mime_type="text/plain",
                text="This is the content of the static text resource.",
            )
        elif uri == "test://static-binary":
            contents = types.BlobResourceContents(
                uri=uri, mime_type="image/png", blob=PNG_BASE64
            )
        elif uri == "test://watched-resource":
            contents = types.TextResourceContents(
                uri=uri, mime_type="text/plain", text="Watched resource content"
            )
        elif (
            uri.startswith("test://template/")
            and uri.endswith("/data")
            and (item := uri[len("test://template/") : -len("/data")])
            and "/" not in item
        ):
            data = {"id": item, "templateTest": True, "data": f"Data for ID: {item}"}
            contents = types.TextResourceContents(
                uri=uri,
                mime_type="application/json",
                text=json.dumps(data, separators=(",", ":")),
            )
        else:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"Resource not found: {uri}",
                data={"uri": uri},
            )
        return types.ReadResourceResult(contents=[contents])

    async def subscribe(
        self, ctx: Ctx, params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        self.subscriptions.setdefault(_session_key(ctx), set()).add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: Ctx, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        self.subscriptions.get(_session_key(ctx), set()).discard(str(params.uri))
        return types.EmptyResult()

    async def set_level(
        self, ctx: Ctx, params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        self.log_levels[_session_key(ctx)] = params.level
        return types.EmptyResult()

    async def complete(
        self, ctx: Ctx, params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        choices: dict[str, list[str]] = {
            "arg1": ["paris", "park", "party"],
            "arg2": ["world", "wide", "web"],
            "id": ["1", "2", "3", "123"],
        }
        prefix = params.argument.value
        values = [
            v for v in choices.get(params.argument.name, []) if v.startswith(prefix)
        ]
        return types.CompleteResult(
            completion=types.Completion(
                values=values, total=len(values), has_more=False
            )
        )

    # Tasks (SEP-2663) -----------------------------------------------------------

    async def greet(self, ctx: Ctx, params: types.CallToolRequestParams) -> ToolResult:
        return _text(f"Hello, {(params.arguments or {}).get('name', 'stranger')}!")

    async def slow_compute(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        args = params.arguments or {}
        await anyio.sleep(float(args.get("seconds", 1)))
        return _text(f"Computed {args.get('label', 'result')}")

    async def failing_job(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        await anyio.sleep(1)
        return _text("Tool execution failed", is_error=True)

    async def protocol_error_job(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        await anyio.sleep(0.1)
        raise MCPError(code=types.INTERNAL_ERROR, message="Protocol task failed")

    async def confirm_delete(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        filename = str((params.arguments or {}).get("filename", "file"))
        schema = _object_schema({"confirm": {"type": "boolean"}}, ["confirm"])
        answers = await gather_input(
            ctx, params, {"confirm": _elicit(f"Delete {filename}?", schema)}
        )
        if isinstance(answers, types.InputRequiredResult):
            return answers
        _, content = _elicited(answers["confirm"])
        verb = "Deleted" if content.get("confirm") else "Kept"
        return _text(f"{verb} {filename}")

    async def multi_input(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        answers = await gather_input(
            ctx,
            params,
            {
                "first": _elicit("First question?", _name_schema()),
                "second": _elicit("Second question?", _name_schema()),
            },
        )
        if isinstance(answers, types.InputRequiredResult):
            return answers
        return _text("Inputs accepted")

    async def tool_with_task(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> ToolResult:
        request = _elicit("What is your name?", _name_schema())
        answers = await gather_input(ctx, params, {"user_name": request})
        if isinstance(answers, types.InputRequiredResult):
            return answers
        _, content = _elicited(answers["user_name"])
        return _text(f"Hello, {content.get('name', 'stranger')}! (from a task)")

    def _declares_tasks(self, ctx: Ctx) -> bool:
        capabilities = ctx.session.client_capabilities
        return bool(capabilities and TASKS_EXTENSION in (capabilities.extensions or {}))

    async def maybe_start_task(
        self, ctx: Ctx, params: types.CallToolRequestParams, support: TaskSupport
    ) -> dict[str, Any] | types.InputRequiredResult | None:
        """Run a task-supporting tool as a task, when the client can take one.

        Returns the `CreateTaskResult` (flat: `resultType: "task"` plus the
        task's fields), an `input_required` result (`test_tool_with_task`
        gathers its input before it becomes a task), or None to run the
        tool synchronously.

        Raises:
            MCPError: -32021 for a tool that needs a task when the client did
                not declare the extension.
        """
        if not self._declares_tasks(ctx) or self.task_group is None:
            if support == "required":
                raise _missing_capability_error(
                    types.ClientCapabilities(extensions={TASKS_EXTENSION: {}})
                )
            return None
        if params.name == "test_tool_with_task":
            request = _elicit("What is your name?", _name_schema())
            answers = await gather_input(ctx, params, {"user_name": request})
            if isinstance(answers, types.InputRequiredResult):
                return answers
        task = Task(task_id=uuid.uuid4().hex, tool=params.name, created_at=_now())
        task.updated_at = task.created_at
        # Answers gathered before the task existed (the MRTR phase) carry over.
        task.answers = dict(params.input_responses or {})
        self.tasks[task.task_id] = task
        self.task_group.start_soon(self._run_task, task, ctx, params)
        return {"resultType": "task", **self._task_fields(task)}

    def _task_fields(self, task: Task) -> dict[str, Any]:
        return {
            "taskId": task.task_id,
            "status": task.status,
            "createdAt": task.created_at,
            "lastUpdatedAt": task.updated_at,
            "ttlMs": self.TASK_TTL_MS,
            "pollIntervalMs": self.POLL_INTERVAL_MS,
        }

    def _settle(self, task: Task, status: str) -> None:
        if task.status in ("completed", "failed", "cancelled"):
            return
        task.status = status
        task.updated_at = _now()

    async def _run_task(
        self, task: Task, ctx: Ctx, params: types.CallToolRequestParams
    ) -> None:
        handler = self.tools[task.tool][1]
        with task.scope:
            try:
                while True:
                    retry = params.model_copy(
                        update={"input_responses": task.answers or None}
                    )
                    result = await handler(ctx, retry)
                    if not isinstance(result, types.InputRequiredResult):
                        break
                    requests = result.input_requests or {}
                    task.input_requests = {
                        key: request.model_dump(
                            by_alias=True, mode="json", exclude_none=True
                        )
                        for key, request in requests.items()
                    }
                    task.answered = anyio.Event()
                    self._settle(task, "input_required")
                    await task.answered.wait()
                    task.status = "working"
                    task.updated_at = _now()
            except MCPError as exc:
                task.error = exc.error.model_dump(by_alias=True, exclude_none=True)
                self._settle(task, "failed")
                return
            except Exception as exc:
                task.error = {"code": types.INTERNAL_ERROR, "message": str(exc)}
                self._settle(task, "failed")
                return
        if task.scope.cancelled_caught:
            self._settle(task, "cancelled")
            return
        if isinstance(result, dict):
            task.result = {"resultType": "complete", **result}
        else:
            task.result = result.model_dump(
                by_alias=True, mode="json", exclude_none=True
            )
        self._settle(task, "completed")

    def _known_task(self, ctx: Ctx, params: TaskParams) -> Task:
        if not self._declares_tasks(ctx):
            raise _missing_capability_error(
                types.ClientCapabilities(extensions={TASKS_EXTENSION: {}})
            )
        headers = getattr(ctx.request, "headers", None)
        if _is_modern(ctx) and headers is not None:
            # SEP-2663 extends SEP-2243's `Mcp-Name` to the tasks methods; the
            # SDK checks it only for tools/call, prompts/get, resources/read.
            name = decode_header_value(headers.get(MCP_NAME_HEADER))
            if name is None or name.strip(" \t") != params.task_id:
                raise MCPError(
                    code=types.HEADER_MISMATCH,
                    message="Mcp-Name header does not match params.taskId",
                )
        task = self.tasks.get(params.task_id)
        if task is None:
            raise MCPError(code=types.INVALID_PARAMS, message="Unknown taskId")
        return task

    async def tasks_get(self, ctx: Ctx, params: TaskParams) -> dict[str, Any]:
        task = self._known_task(ctx, params)
        body: dict[str, Any] = {"resultType": "complete", **self._task_fields(task)}
        if task.status == "input_required":
            body["inputRequests"] = task.input_requests
        if task.result is not None:
            body["result"] = task.result
        if task.error is not None:
            body["error"] = task.error
        return body

    async def tasks_update(self, ctx: Ctx, params: TaskUpdateParams) -> dict[str, Any]:
        task = self._known_task(ctx, params)
        responses = params.input_responses or {}
        if task.status == "input_required":
            for key, value in responses.items():
                if key in task.input_requests:
                    task.answers[key] = _INPUT_RESPONSE.validate_python(value)
                    del task.input_requests[key]
            if not task.input_requests:
                task.answered.set()
        return {"resultType": "complete"}

    async def tasks_cancel(self, ctx: Ctx, params: TaskParams) -> dict[str, Any]:
        task = self._known_task(ctx, params)
        if task.status not in ("completed", "failed", "cancelled"):
            task.scope.cancel()
            self._settle(task, "cancelled")
        return {"resultType": "complete"}


def _name_schema() -> dict[str, Any]:
    return _object_schema({"name": {"type": "string"}}, ["name"])


async def _serve_stdio(app: ConformanceServer) -> None:
    async with anyio.create_task_group() as tg:
        app.task_group = tg
        async with stdio_server() as (read, write):
            await app.server.run(
                read, write, app.server.create_initialization_options()
            )
        tg.cancel_scope.cancel()


class JsonLines:
    """ASGI middleware: 2026-07-28 answers as the TypeScript SDK's entry sends
    them. What the SDK sends as an event stream (a call that logs before its
    answer, a `subscriptions/listen` stream) goes as `application/json`, one
    JSON message per line, still streamed (a listen stream stays open)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        modern = scope["type"] == "http" and any(
            key == b"mcp-protocol-version" and value >= b"2026"
            for key, value in scope["headers"]
        )
        if not modern:
            await self.app(scope, receive, send)
            return
        lined = False
        buffer = b""

        async def rewrite(message: Any) -> None:
            nonlocal lined, buffer
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                lined = any(
                    key.lower() == b"content-type"
                    and value.startswith(b"text/event-stream")
                    for key, value in headers
                )
                if lined:
                    headers = [
                        (key, b"application/json")
                        if key.lower() == b"content-type"
                        else (key, value)
                        for key, value in headers
                        if key.lower() != b"content-length"
                    ]
                    message = {**message, "headers": headers}
            elif message["type"] == "http.response.body" and lined:
                buffer += message.get("body", b"")
                *events, buffer = buffer.replace(b"\r\n", b"\n").split(b"\n\n")
                body = b""
                for event in events:
                    data = b"\n".join(
                        line[5:].lstrip()
                        for line in event.split(b"\n")
                        if line.startswith(b"data:")
                    )
                    if data.strip():  # not a priming event
                        body += data + b"\n"
                message = {**message, "body": body}
            await send(message)

        await self.app(scope, receive, rewrite)


def http_app(app: ConformanceServer, json_lines: bool = False) -> Any:
    """The server's streamable HTTP ASGI app (`/mcp`); with `json_lines`, its
    2026-07-28 answers as JSON lines (`JsonLines`)."""
    starlette_app = app.server.streamable_http_app(
        streamable_http_path="/mcp",
        host="127.0.0.1",
        event_store=InMemoryEventStore(),
        retry_interval=100,
    )
    return JsonLines(starlette_app) if json_lines else starlette_app


async def _serve_http(app: ConformanceServer, port: int, json_lines: bool) -> None:
    starlette_app = http_app(app, json_lines)
    # h11, not httptools: llhttp keeps trailing whitespace in header values,
    # and the SDK compares `Mcp-Name` verbatim, so `Mcp-Name:  x  ` (legal,
    # RFC 9110 section 5.5) would be refused with -32020.
    config = uvicorn.Config(
        starlette_app, http="h11", log_level="warning", timeout_graceful_shutdown=1
    )
    # Bound here, before uvicorn starts, so `ready` is true when it is printed
    # (connections queue in the backlog) and `--port 0` can say its port.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    print(f"ready http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    async with anyio.create_task_group() as tg:
        app.task_group = tg
        await uvicorn.Server(config).serve(sockets=[sock])
        tg.cancel_scope.cancel()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", type=int, help="serve streamable HTTP on this port")
    where.add_argument("--stdio", action="store_true", help="serve stdio")
    parser.add_argument(
        "--json-lines",
        action="store_true",
        help="over HTTP, answer 2026-07-28 streams as JSON lines (as the "
        "TypeScript SDK does)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    # Logging, sampling and roots are deprecated as of 2026-07-28, but the
    # 2025-11-25 fixtures use them on purpose.
    warnings.simplefilter("ignore", MCPDeprecationWarning)
    app = ConformanceServer()
    if args.stdio:
        anyio.run(_serve_stdio, app)
    else:
        anyio.run(_serve_http, app, args.port, args.json_lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
