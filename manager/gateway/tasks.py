"""Tasks (`io.modelcontextprotocol/tasks`, SEP-2663) through the endpoint.

A 2026-07-28 server may answer a `tools/call` with a task instead of the
result, for a client that declares the extension (the daemon passes each
client's declaration on). The task's id is namespaced by the connection that
owns it (`{server}/{taskId}`, names never hold a `/`), so `tasks/get`,
`tasks/update` and `tasks/cancel` go to the owner, with the server's own id;
what the server answers is passed on as it sent it, its `taskId` namespaced
again. The SDK (2.3) has no model of these methods: requests and results cross
as the JSON they are.

A client that did not declare the extension gets `-32021` for the tasks
methods, as from a server; an id that names no connection gets `-32602`. In
the HTTP front's 2026-07-28 form, `Mcp-Name` must carry the `taskId` (the
SDK checks it only for the core methods).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import mcp.types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict

from ..core.errors import CallError
from ..engine.manager import Manager
from ..transport.base import TASKS_EXTENSION, ProgressCallback, Upstream
from .errors import client_error
from .requests import upstream_meta
from .rounds import client_era

__all__ = [
    "TASK_METHODS",
    "TaskParams",
    "Tasks",
    "exposed_task",
    "offers_tasks",
]

TASK_METHODS = ("tasks/get", "tasks/update", "tasks/cancel")

SEPARATOR = "/"
"""Between the owner's name and the server's task id (names never hold it)."""


class TaskParams(types.RequestParams):
    """Params of the tasks methods: a `taskId`, and whatever else was sent
    (`inputResponses` of `tasks/update`), kept."""

    model_config = ConfigDict(extra="allow")
    task_id: str


class _TaskRequest(types.Request[TaskParams, str]):
    """A tasks method to a server, its `Mcp-Name` the server's task id."""

    method: str
    params: TaskParams
    name_param: ClassVar[str | None] = "taskId"


class _AsSent(types.Result):
    """A result, every field as the server sent it."""

    model_config = ConfigDict(extra="allow")


def exposed_task(server: str, result: dict[str, Any]) -> dict[str, Any]:
    """`result` with its `taskId` (if any) named as the endpoint shows it."""
    task_id = result.get("taskId")
    if not isinstance(task_id, str):
        return result
    return {**result, "taskId": f"{server}{SEPARATOR}{task_id}"}


def offers_tasks(capabilities: Mapping[str, object]) -> bool:
    """Whether an upstream's capabilities (as it sent them) offer the extension."""
    extensions = capabilities.get("extensions")
    return isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions


def declares_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the calling client declared the tasks extension."""
    caps = ctx.session.client_capabilities
    extensions = getattr(caps, "extensions", None) if caps is not None else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


class Tasks:
    """The endpoint's `tasks/get`, `tasks/update` and `tasks/cancel`.

    Args:
        manager: The connections (a request is held and bounded like a call).
    """

    def __init__(self, manager: Manager) -> None:
        self.manager = manager

    async def get(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> dict[str, Any]:
        return await self._forward(ctx, "tasks/get", params)

    async def update(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> dict[str, Any]:
        return await self._forward(ctx, "tasks/update", params)

    async def cancel(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> dict[str, Any]:
        return await self._forward(ctx, "tasks/cancel", params)

    async def _forward(
        self, ctx: ServerRequestContext[Any, Any], method: str, params: TaskParams
    ) -> dict[str, Any]:
        if not declares_tasks(ctx):
            raise MCPError(
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                "Client did not declare the required capability: extensions "
                f"({TASKS_EXTENSION})",
                {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
            )
        _check_name_header(ctx, params.task_id)
        server, sep, task_id = params.task_id.partition(SEPARATOR)
        if not sep or self.manager.connection(server) is None:
            raise MCPError(INVALID_PARAMS, f"Unknown taskId {params.task_id!r}")
        sent = params.model_dump(by_alias=True, mode="json", exclude_unset=True)
        sent["taskId"] = task_id
        sent["_meta"] = upstream_meta(ctx) or {}
        request = _TaskRequest(
            method=method, params=TaskParams.model_validate(sent, by_name=False)
        )

        era = client_era(ctx)

        async def send(
            upstream: Upstream, limit: float, progress: ProgressCallback | None = None
        ) -> Any:
            # Where the task was made: the client's call met a server of both
            # eras in the client's era, so a stdio one's process beside.
            upstream = await upstream.for_era(era, limit)
            return await upstream.send(request, _AsSent, limit)

        try:
            result = await self.manager.request(server, method, task_id, send)
        except CallError as exc:
            raise client_error(exc) from None
        raw = result.model_dump(by_alias=True, mode="json", exclude_unset=True)
        return exposed_task(server, raw)


def _check_name_header(ctx: ServerRequestContext[Any, Any], task_id: str) -> None:
    """A 2026-07-28 request over HTTP names its task in `Mcp-Name` too."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return
    headers = getattr(ctx.request, "headers", None)
    if headers is None:
        return  # not HTTP (stdio): no headers to agree
    name = decode_header_value(headers.get(MCP_NAME_HEADER))
    if name is None or name.strip(" \t") != task_id:
        raise MCPError(HEADER_MISMATCH, "Mcp-Name header does not match params.taskId")
