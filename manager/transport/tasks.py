"""The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) on our side
of an upstream session: a 2026-07-28 server may answer `tools/call` with a
task (`resultType: "task"`) instead of the result.

The SDK (2.3) has no model of its own for it: `TaskCreated` takes the server's
`CreateTaskResult` as it was sent (every field kept), claimed for `tools/call`
(`ResultClaim`), so `ClientSession.call_tool` returns it instead of failing.
The session declares the extension, but each request declares what its
calling client does (`compat_mcp.speak_for_the_caller`): a server creates a
task only for a client that can follow it (`tasks/get`, routed by the gateway).
"""

from __future__ import annotations

from typing import Any, Literal

import mcp.types as types
from mcp.client.extension import ClaimContext, ResultClaim
from pydantic import ConfigDict

from .base import TASKS_EXTENSION, UI_EXTENSION

__all__ = ["OWN_EXTENSIONS", "ROUTED_EXTENSIONS", "TaskCreated", "task_claims"]

ROUTED_EXTENSIONS = frozenset({TASKS_EXTENSION, UI_EXTENSION})
"""Extensions a calling client's declaration of reaches the server: those the
gateway routes (the rest would make a server answer what nobody carries)."""

OWN_EXTENSIONS = frozenset({UI_EXTENSION})
"""Extensions our own requests (lists, probes) declare: MCP Apps, so that a
server lists its views and app tools to the daemon, which carries them to the
clients that host views (tasks are not: nobody would follow one)."""


class TaskCreated(types.Result):
    """A server's `CreateTaskResult`, every field as it was sent."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str


async def _not_followed(result: TaskCreated, context: ClaimContext) -> Any:
    """The SDK's `Client` would follow the task here; we pass it on instead."""
    raise NotImplementedError("tasks are passed on to the client, not followed")


def task_claims() -> dict[str, list[ResultClaim[Any]]]:
    """`ClientSession(result_claims=...)` for the tasks extension."""
    claim = ResultClaim(result_type="task", model=TaskCreated, resolve=_not_followed)
    return {TASKS_EXTENSION: [claim]}
