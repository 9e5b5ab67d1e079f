"""The demo server's tools and its low-level MCP server (see the package doc)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import anyio.abc
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ..gateway.peers import ListChangedServer, Peers

__all__ = [
    "BUILTIN_TOOLS",
    "DEFAULT_PAGE_SIZE",
    "DemoServer",
    "PAGE_SIZE_ENV",
    "SERVER_NAME",
]


SERVER_NAME = "mcp-manager-demo"
PAGE_SIZE_ENV = "DEMO_PAGE_SIZE"
"""Environment variable holding the number of tools per `tools/list` page."""
DEFAULT_PAGE_SIZE = 100

_Handler = Callable[
    [ServerRequestContext, dict[str, Any]], Awaitable[types.CallToolResult]
]


class _BadArguments(Exception):
    """A tool was called with missing or mistyped arguments."""


def _text(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=is_error
    )


def _tool(
    name: str,
    description: str,
    properties: Mapping[str, str] | None = None,
    output_schema: dict[str, Any] | None = None,
) -> types.Tool:
    """Build a tool whose arguments are all required and typed by JSON type name."""
    props = dict(properties or {})
    return types.Tool(
        name=name,
        description=description,
        input_schema={
            "type": "object",
            "properties": {key: {"type": kind} for key, kind in props.items()},
            "required": list(props),
        },
        output_schema=output_schema,
    )


def _arg_str(args: Mapping[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise _BadArguments(f"argument {key!r} must be a string")
    return value


def _arg_number(args: Mapping[str, Any], key: str) -> float | int:
    value = args.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _BadArguments(f"argument {key!r} must be a number")
    return value


def _arg_int(args: Mapping[str, Any], key: str) -> int:
    value = args.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _BadArguments(f"argument {key!r} must be an integer")
    return value


BUILTIN_TOOLS = (
    _tool("echo", "Return the text.", {"text": "string"}),
    _tool(
        "add",
        "Add two numbers.",
        {"a": "number", "b": "number"},
        output_schema={
            "type": "object",
            "properties": {"sum": {"type": "number"}},
            "required": ["sum"],
        },
    ),
    _tool("sleep", "Sleep, then reply.", {"seconds": "number"}),
    _tool("fail", "Return an error result.", {"message": "string"}),
    _tool("pid", "Return the server's process id."),
    _tool("add_tool", "Add a tool at runtime and notify clients.", {"name": "string"}),
    _tool("remove_tool", "Remove a tool and notify clients.", {"name": "string"}),
    _tool("meta", "Return the request's _meta as JSON."),
    _tool(
        "crash", "Exit at once with the code, without replying.", {"code": "integer"}
    ),
    _tool(
        "spawn_child",
        "Start a grandchild sleep; return its pid.",
        {"seconds": "number"},
    ),
    _tool("stderr", "Write the text as a line to stderr.", {"text": "string"}),
)
"""The tools every demo server starts with, in `tools/list` order."""


class DemoServer:
    """The demo's tools and the MCP server that serves them.

    Args:
        page_size: Tools per `tools/list` page; at least 1.

    Raises:
        ValueError: `page_size` is smaller than 1.
    """

    def __init__(self, page_size: int = DEFAULT_PAGE_SIZE) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1, got {page_size}")
        self.page_size = page_size
        self._tools: dict[str, tuple[types.Tool, _Handler]] = {}
        self._peers = Peers()
        self._children: list[anyio.abc.Process] = []
        self._bus = InMemorySubscriptionBus()
        self.server: Server[dict[str, Any]] = ListChangedServer(
            SERVER_NAME,
            version="1.0",
            instructions="Demo server bundled with mcp-manager.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=ListenHandler(self._bus),
        )
        self.server.middleware.append(self._peers.track)
        handlers: dict[str, _Handler] = {
            "echo": self._echo,
            "add": self._add,
            "sleep": self._sleep,
            "fail": self._fail,
            "pid": self._pid,
            "add_tool": self._add_tool,
            "remove_tool": self._remove_tool,
            "meta": self._meta,
            "crash": self._crash,
            "spawn_child": self._spawn_child,
            "stderr": self._stderr,
        }
        for tool in BUILTIN_TOOLS:
            self._tools[tool.name] = (tool, handlers[tool.name])

    @classmethod
    def from_env(cls) -> DemoServer:
        """Build a server with the page size from `DEMO_PAGE_SIZE`.

        Raises:
            ValueError: The variable is set but not a positive integer.
        """
        return cls(int(os.environ.get(PAGE_SIZE_ENV, DEFAULT_PAGE_SIZE)))

    # -- protocol handlers ---------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        cursor = params.cursor if params is not None else None
        try:
            start = int(cursor) if cursor else 0
        except ValueError:
            raise MCPError(INVALID_PARAMS, f"invalid cursor {cursor!r}") from None
        tools = [tool for tool, _ in self._tools.values()]
        end = start + self.page_size
        return types.ListToolsResult(
            tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None
        )

    async def _call_tool(
        self, ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        entry = self._tools.get(params.name)
        if entry is None:
            return _text(f"unknown tool {params.name!r}", is_error=True)
        try:
            return await entry[1](ctx, params.arguments or {})
        except _BadArguments as exc:
            return _text(f"{params.name}: {exc}", is_error=True)

    async def _notify_tools_changed(self) -> None:
        """Tell every client the tool list changed; forget sessions that fail."""
        await self._bus.publish(ToolsListChanged())
        await self._peers.notify_tools_changed()

    # -- tools -----------------------------------------------------------------

    async def _echo(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        return _text(_arg_str(args, "text"))

    async def _add(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        total = _arg_number(args, "a") + _arg_number(args, "b")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=str(total))],
            structured_content={"sum": total},
        )

    async def _sleep(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        seconds = _arg_number(args, "seconds")
        await ctx.session.report_progress(0, seconds, "sleeping")  # if asked for
        await anyio.sleep(seconds)
        await ctx.session.report_progress(seconds, seconds, "awake")
        return _text(f"slept {seconds}")

    async def _fail(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        return _text(_arg_str(args, "message"), is_error=True)

    async def _pid(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        return _text(str(os.getpid()))

    async def _add_tool(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        name = _arg_str(args, "name")
        if name in self._tools:
            return _text(f"tool {name!r} already exists", is_error=True)
        tool = types.Tool(
            name=name,
            description="Added at runtime; returns its arguments as JSON.",
            input_schema={"type": "object"},
        )
        self._tools[name] = (tool, self._run_added_tool)
        await self._notify_tools_changed()
        return _text(f"added {name}")

    async def _run_added_tool(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        return _text(json.dumps(args, sort_keys=True))

    async def _remove_tool(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        name = _arg_str(args, "name")
        if self._tools.pop(name, None) is None:
            return _text(f"no tool {name!r}", is_error=True)
        await self._notify_tools_changed()
        return _text(f"removed {name}")

    async def _meta(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        return _text(json.dumps(dict(ctx.meta or {}), sort_keys=True, default=str))

    async def _crash(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        code = _arg_int(args, "code")
        sys.stderr.write(f"{SERVER_NAME}: crash({code}) requested, exiting\n")
        sys.stderr.flush()
        os._exit(code)

    async def _spawn_child(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        seconds = _arg_number(args, "seconds")
        # No inherited pipes: a grandchild holding our stdout would keep the
        # client from seeing EOF when this server dies. It stays in our process
        # group, so a group kill takes it along; the reference keeps it reaped.
        child = await anyio.open_process(
            ["sleep", str(seconds)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._children.append(child)
        return _text(str(child.pid))

    async def _stderr(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        sys.stderr.write(_arg_str(args, "text") + "\n")
        sys.stderr.flush()
        return _text("written")


# -- transports -----------------------------------------------------------------
