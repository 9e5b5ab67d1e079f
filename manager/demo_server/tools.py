"""The demo server's tools and its low-level MCP server (see the package doc).

The prompts, resources and completions live in `catalog`, the tools that turn
to the calling client (elicitation, sampling, roots, logging) in
`client_requests`; this module wires them all into one SDK server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
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

from ..mcpserver.peers import ListChangedServer, Peers
from .catalog import Catalog
from .client_requests import LogLevels, ask_user, list_roots, sample
from .toolkit import (
    SERVER_NAME,
    BadArguments,
    ToolHandler,
    arg_int,
    arg_number,
    arg_str,
    make_tool,
    page,
    text_result,
)

__all__ = [
    "BUILTIN_TOOLS",
    "DEFAULT_PAGE_SIZE",
    "DemoServer",
    "PAGE_SIZE_ENV",
]


PAGE_SIZE_ENV = "DEMO_PAGE_SIZE"
"""Environment variable holding the number of entries per page of every list."""
DEFAULT_PAGE_SIZE = 100


BUILTIN_TOOLS = (
    make_tool("echo", "Return the text.", {"text": "string"}),
    make_tool(
        "add",
        "Add two numbers.",
        {"a": "number", "b": "number"},
        output_schema={
            "type": "object",
            "properties": {"sum": {"type": "number"}},
            "required": ["sum"],
        },
    ),
    make_tool("sleep", "Sleep, then reply.", {"seconds": "number"}),
    make_tool("fail", "Return an error result.", {"message": "string"}),
    make_tool("pid", "Return the server's process id."),
    make_tool(
        "add_tool", "Add a tool at runtime and notify clients.", {"name": "string"}
    ),
    make_tool("remove_tool", "Remove a tool and notify clients.", {"name": "string"}),
    make_tool("meta", "Return the request's _meta as JSON."),
    make_tool(
        "crash", "Exit at once with the code, without replying.", {"code": "integer"}
    ),
    make_tool(
        "spawn_child",
        "Start a grandchild sleep; return its pid.",
        {"seconds": "number"},
    ),
    make_tool("stderr", "Write the text as a line to stderr.", {"text": "string"}),
    make_tool(
        "add_prompt", "Add a prompt at runtime and notify clients.", {"name": "string"}
    ),
    make_tool(
        "remove_prompt", "Remove a prompt and notify clients.", {"name": "string"}
    ),
    make_tool(
        "add_resource",
        "Add a text resource at runtime and notify clients.",
        {"uri": "string", "text": "string"},
    ),
    make_tool(
        "remove_resource", "Remove a resource and notify clients.", {"uri": "string"}
    ),
    make_tool(
        "touch_resource",
        "Send resources/updated to the sessions subscribed to the URI; "
        "return how many were notified.",
        {"uri": "string"},
    ),
    make_tool(
        "log",
        "Send a log message to the caller at the level (debug, info, notice, "
        "warning, error, critical, alert, emergency).",
        {"level": "string", "text": "string"},
    ),
    make_tool(
        "ask_user",
        "Ask the caller's user for an answer (elicitation).",
        {"message": "string"},
    ),
    make_tool(
        "sample", "Ask the caller's model to reply to the prompt.", {"prompt": "string"}
    ),
    make_tool("roots", "Return the caller's root URIs as a JSON list."),
    make_tool(
        "error",
        "Answer with a JSON-RPC error (not a tool result) of the code and "
        "message, with the JSON text `data` as its data.",
        {"code": "integer", "message": "string", "data": "string"},
    ),
    make_tool(
        "result",
        "Return the `result` object as this call's result, as given (a tool "
        "result: content, and structuredContent, isError, _meta if wanted).",
        {"result": "object"},
    ),
    make_tool(
        "arguments",
        "Return the call's arguments as JSON, as they arrived (null when the "
        "call carried none).",
    ),
)
"""The tools every demo server starts with, in `tools/list` order."""


class DemoServer:
    """The demo's tools, prompts and resources, and the MCP server serving them.

    Args:
        page_size: Entries per page of every list (tools, prompts, resources,
            resource templates); at least 1.

    Raises:
        ValueError: `page_size` is smaller than 1.
    """

    def __init__(self, page_size: int = DEFAULT_PAGE_SIZE) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1, got {page_size}")
        self.page_size = page_size
        self._tools: dict[str, tuple[types.Tool, ToolHandler]] = {}
        self._peers = Peers()
        self._children: list[anyio.abc.Process] = []
        self._bus = InMemorySubscriptionBus()
        self._listens = ListenHandler(self._bus)
        self.catalog = Catalog(page_size, self._peers, self._bus)
        self._log_levels = LogLevels()
        catalog = self.catalog
        self.server: Server[dict[str, Any]] = ListChangedServer(
            SERVER_NAME,
            version="1.0",
            instructions="Demo server bundled with mcp-manager.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_prompts=catalog.list_prompts,
            on_get_prompt=catalog.get_prompt,
            on_list_resources=catalog.list_resources,
            on_list_resource_templates=catalog.list_resource_templates,
            on_read_resource=catalog.read_resource,
            on_subscribe_resource=catalog.subscribe,
            on_unsubscribe_resource=catalog.unsubscribe,
            on_completion=catalog.complete,
            on_subscriptions_listen=self._listens,
        )
        # Not `on_set_logging_level=`: that keyword warns (logging is deprecated
        # in 2026-07-28), while handshake-era clients still use it.
        self.server.add_request_handler(
            "logging/setLevel", types.SetLevelRequestParams, self._log_levels.set_level
        )
        self.server.middleware.append(self._peers.track)
        handlers: dict[str, ToolHandler] = {
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
            "add_prompt": catalog.add_prompt,
            "remove_prompt": catalog.remove_prompt,
            "add_resource": catalog.add_resource,
            "remove_resource": catalog.remove_resource,
            "touch_resource": catalog.touch_resource,
            "log": self._log_levels.log,
            "ask_user": ask_user,
            "sample": sample,
            "roots": list_roots,
            "error": self._error,
            "result": self._result,
            "arguments": self._run_added_tool,  # see `_call_tool`
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

    def close_listens(self) -> None:
        """End every open `subscriptions/listen` stream as a server that
        closes them does: with its result (a graceful end)."""
        self._listens.close()

    # -- protocol handlers ---------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        cursor = params.cursor if params is not None else None
        tools = [tool for tool, _ in self._tools.values()]
        items, next_cursor = page(tools, cursor, self.page_size)
        return types.ListToolsResult(tools=items, next_cursor=next_cursor)

    async def _call_tool(
        self, ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name == "arguments" and params.name in self._tools:
            # Told apart from `{}` here: every handler below gets a dict.
            return text_result(json.dumps(params.arguments, sort_keys=True))
        entry = self._tools.get(params.name)
        if entry is None:
            return text_result(f"unknown tool {params.name!r}", is_error=True)
        try:
            return await entry[1](ctx, params.arguments or {})
        except BadArguments as exc:
            return text_result(f"{params.name}: {exc}", is_error=True)

    async def _notify_tools_changed(self) -> None:
        """Tell every client the tool list changed; forget sessions that fail."""
        await self._bus.publish(ToolsListChanged())
        await self._peers.notify_tools_changed()

    # -- tools -----------------------------------------------------------------

    async def _echo(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        return text_result(arg_str(args, "text"))

    async def _add(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        total = arg_number(args, "a") + arg_number(args, "b")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=str(total))],
            structured_content={"sum": total},
        )

    async def _sleep(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        seconds = arg_number(args, "seconds")
        await ctx.session.report_progress(0, seconds, "sleeping")  # if asked for
        await anyio.sleep(seconds)
        await ctx.session.report_progress(seconds, seconds, "awake")
        return text_result(f"slept {seconds}")

    async def _fail(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        return text_result(arg_str(args, "message"), is_error=True)

    async def _pid(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        return text_result(str(os.getpid()))

    async def _add_tool(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        name = arg_str(args, "name")
        if name in self._tools:
            return text_result(f"tool {name!r} already exists", is_error=True)
        tool = types.Tool(
            name=name,
            description="Added at runtime; returns its arguments as JSON.",
            input_schema={"type": "object"},
        )
        self._tools[name] = (tool, self._run_added_tool)
        await self._notify_tools_changed()
        return text_result(f"added {name}")

    async def _run_added_tool(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        return text_result(json.dumps(args, sort_keys=True))

    async def _remove_tool(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        name = arg_str(args, "name")
        if self._tools.pop(name, None) is None:
            return text_result(f"no tool {name!r}", is_error=True)
        await self._notify_tools_changed()
        return text_result(f"removed {name}")

    async def _result(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        try:
            return types.CallToolResult.model_validate(
                args.get("result"), by_name=False
            )
        except ValueError as exc:
            raise BadArguments(
                f"argument 'result' is not a tool result: {exc}"
            ) from exc

    async def _error(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        raise MCPError(
            arg_int(args, "code"),
            arg_str(args, "message"),
            json.loads(arg_str(args, "data")),
        )

    async def _meta(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        return text_result(
            json.dumps(dict(ctx.meta or {}), sort_keys=True, default=str)
        )

    async def _crash(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        code = arg_int(args, "code")
        sys.stderr.write(f"{SERVER_NAME}: crash({code}) requested, exiting\n")
        sys.stderr.flush()
        os._exit(code)

    async def _spawn_child(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        seconds = arg_number(args, "seconds")
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
        return text_result(str(child.pid))

    async def _stderr(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        sys.stderr.write(arg_str(args, "text") + "\n")
        sys.stderr.flush()
        return text_result("written")


# -- transports -----------------------------------------------------------------
