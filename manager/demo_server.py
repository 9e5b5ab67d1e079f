"""The bundled demo MCP server: a small, honest upstream to point mcp-manager at.

Run it with `python -m manager.demo_server [--transport stdio|http|sse]
[--host 127.0.0.1] [--port 8000]`. It is built on the SDK's low-level `Server`
and serves stdio (the default), streamable HTTP at `/mcp`, or legacy SSE at
`/sse` (messages are POSTed to `/messages/`).

Tools:

- `echo(text)`: returns `text`.
- `add(a, b)`: returns the sum, as text and as structured content
  `{"sum": ...}` matching the tool's `outputSchema`.
- `sleep(seconds)`: sleeps, then says so. Useful for timeouts and cancellation.
  Reports progress (start and end) when the caller asks for it.
- `fail(message)`: returns a result with `isError: true`.
- `pid()`: the server's process id.
- `add_tool(name)` / `remove_tool(name)`: change the tool list at runtime and
  notify every connected client (`notifications/tools/list_changed`, or the
  `subscriptions/listen` stream for 2026-07-28 clients). An added tool echoes
  its arguments back as JSON.
- `meta()`: the request's `_meta` as JSON, e.g. to see the W3C `traceparent`.
- `crash(code)`: exits the process at once with `code`; no reply is sent.
- `spawn_child(seconds)`: starts a grandchild `sleep` and returns its pid.
- `stderr(text)`: writes `text` as one line to stderr.

`tools/list` is paginated; the page size comes from `DEMO_PAGE_SIZE`
(default 100).

The last section holds the failure modes (`--crash-after-handshake`,
`--hang-on-initialize`, `--garbage`, ...). They ship with the demo because
watching mcp-manager ride out a misbehaving server is half of what the demo is
for; the rest of the module never looks at them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import mcp.types as types
import uvicorn
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.sse import SseServerTransport
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ToolsListChanged,
)
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

__all__ = ["BUILTIN_TOOLS", "SERVER_NAME", "DemoServer", "Faults", "main", "run"]

SERVER_NAME = "mcp-manager-demo"
PAGE_SIZE_ENV = "DEMO_PAGE_SIZE"
"""Environment variable holding the number of tools per `tools/list` page."""
DEFAULT_PAGE_SIZE = 100
NOTIFY_TIMEOUT = 1.0
"""Seconds to wait when pushing `list_changed` to one session before dropping it."""
HTTP_SHUTDOWN_GRACE = 1
"""Seconds uvicorn waits for open requests and streams on SIGTERM (an int)."""
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")

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


def _session_key(ctx: ServerRequestContext) -> str:
    """Name the client connection a request came in on.

    `ctx.session` is a new proxy per request, so sessions are keyed by the
    transport's own id: the `mcp-session-id` header (streamable HTTP), the
    `session_id` query parameter (SSE), or the single stdio peer.
    """
    request = ctx.request
    if not isinstance(request, Request):
        return "stdio"
    return request.headers.get("mcp-session-id") or request.query_params.get(
        "session_id", "unknown"
    )


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


class _DemoMCPServer(Server[dict[str, Any]]):
    """The SDK server, advertising `tools.listChanged` on every transport.

    The streamable HTTP session manager calls `create_initialization_options()`
    without arguments, so the default has to change here rather than at a call
    site.
    """

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


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
        self._sessions: dict[str, ServerSession] = {}
        self._children: list[anyio.abc.Process] = []
        self._bus = InMemorySubscriptionBus()
        self.server: Server[dict[str, Any]] = _DemoMCPServer(
            SERVER_NAME,
            version="1.0",
            instructions="Demo server bundled with mcp-manager.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=ListenHandler(self._bus),
        )
        self.server.middleware.append(self._track_session)
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

    async def _track_session(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Remember handshake-era sessions so `list_changed` can reach them."""
        if (
            ctx.method != "initialize"
            and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
        ):
            self._sessions[_session_key(ctx)] = ctx.session
        return await call_next(ctx)

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
        for key, session in list(self._sessions.items()):
            try:
                with anyio.fail_after(NOTIFY_TIMEOUT):
                    await session.send_tool_list_changed()
            except Exception:  # boundary: a gone client must not fail the caller
                self._sessions.pop(key, None)

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


def _security(host: str) -> TransportSecuritySettings | None:
    """DNS-rebinding protection for loopback hosts, as the SDK's HTTP app does."""
    if host not in LOOPBACK_HOSTS:
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


def _sse_app(server: Server[dict[str, Any]], host: str) -> Starlette:
    transport = SseServerTransport("/messages/", security_settings=_security(host))

    async def handle_sse(request: Request) -> Response:
        async with transport.connect_sse(
            request.scope, request.receive, request._send
        ) as (read, write):
            await server.run(read, write, server.create_initialization_options())
        # Starlette needs a response object even though the stream already ended.
        return Response()

    return Starlette(
        routes=[
            Route("/sse", handle_sse, methods=["GET"]),
            Mount("/messages/", app=transport.handle_post_message),
        ]
    )


async def _serve_stdio(server: Server[dict[str, Any]]) -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def _serve_http(app: Starlette, host: str, port: int) -> None:
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=HTTP_SHUTDOWN_GRACE,
    )
    await uvicorn.Server(config).serve()


async def run(
    demo: DemoServer,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
) -> None:
    """Serve `demo` until the client goes away (stdio) or a signal stops it (HTTP).

    Args:
        demo: The server to run.
        transport: `"stdio"`, `"http"` (streamable HTTP at `/mcp`) or `"sse"`.
        host: Interface to bind for HTTP transports.
        port: Port to bind for HTTP transports.

    Raises:
        ValueError: Unknown transport.
    """
    if transport == "stdio":
        await _serve_stdio(demo.server)
    elif transport == "http":
        app = demo.server.streamable_http_app(streamable_http_path="/mcp", host=host)
        await _serve_http(app, host, port)
    elif transport == "sse":
        await _serve_http(_sse_app(demo.server, host), host, port)
    else:
        raise ValueError(f"unknown transport {transport!r}")


# -- failure modes --------------------------------------------------------------

CRASH_AFTER_HANDSHAKE_CODE = 3
CRASH_AFTER_HANDSHAKE_DELAY = 0.05
"""Seconds between the first `tools/list` reply and the exit, so the reply gets out."""
STDERR_SPAM_INTERVAL = 0.01
"""Seconds between two `--stderr-spam` lines."""
GARBAGE_LINE = "this is not JSON-RPC\n"


@dataclass(frozen=True)
class Faults:
    """Ways the demo server can be told to misbehave (all off by default).

    Attributes:
        crash_after_handshake: Exit with code 3 shortly after the first
            `tools/list` reply, i.e. once a client is fully connected.
        hang_on_initialize: Never answer `initialize`. On stdio the server is
            wedged: it does not notice stdin closing, only signals end it.
        garbage: stdio only. Write non-JSON lines to stdout, one at start and
            one per line read, never a real reply; exit on stdin EOF.
        exit_immediately: Exit at once with this code, before serving.
        ignore_sigterm: stdio only. Ignore SIGTERM and stdin EOF; only SIGKILL
            ends the process.
        slow_start: Seconds to sleep before serving.
        stderr_spam: Write a line to stderr every 10 ms while serving.
        exit_after: Exit with code 1 this many seconds after starting, like a
            server that crashes now and then (the bundled startup.lua uses it
            to show a reconnect).
    """

    crash_after_handshake: bool = False
    hang_on_initialize: bool = False
    garbage: bool = False
    exit_immediately: int | None = None
    ignore_sigterm: bool = False
    slow_start: float = 0.0
    stderr_spam: bool = False
    exit_after: float | None = None


class _FaultMiddleware:
    """Misbehave at the protocol level: hang on `initialize`, crash after listing."""

    def __init__(self, faults: Faults) -> None:
        self._faults = faults
        self._crash_armed = faults.crash_after_handshake

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method == "initialize" and self._faults.hang_on_initialize:
            await anyio.sleep_forever()
        result = await call_next(ctx)
        if ctx.method == "tools/list" and self._crash_armed:
            self._crash_armed = False
            # A timer thread, not a task: the reply must be written first, and
            # the middleware has no task group to start a task in.
            timer = threading.Timer(
                CRASH_AFTER_HANDSHAKE_DELAY,
                os._exit,
                args=(CRASH_AFTER_HANDSHAKE_CODE,),
            )
            timer.daemon = True
            timer.start()
        return result


async def _spam_stderr() -> None:
    count = 0
    while True:
        count += 1
        sys.stderr.write(f"{SERVER_NAME}: stderr spam line {count}\n")
        sys.stderr.flush()
        await anyio.sleep(STDERR_SPAM_INTERVAL)


async def _exit_after(seconds: float) -> None:
    await anyio.sleep(seconds)
    sys.stderr.write(f"{SERVER_NAME}: --exit-after {seconds:g}: exiting with code 1\n")
    sys.stderr.flush()
    os._exit(1)


def _serve_garbage() -> None:
    sys.stdout.write(GARBAGE_LINE)
    sys.stdout.flush()
    for _line in sys.stdin:
        sys.stdout.write(GARBAGE_LINE)
        sys.stdout.flush()


async def _run_with_faults(
    demo: DemoServer, faults: Faults, transport: str, host: str, port: int
) -> None:
    demo.server.middleware.append(_FaultMiddleware(faults))
    async with anyio.create_task_group() as tg:
        if faults.stderr_spam:
            tg.start_soon(_spam_stderr)
        if faults.exit_after is not None:
            tg.start_soon(_exit_after, faults.exit_after)
        await run(demo, transport, host, port)
        if faults.ignore_sigterm:
            await anyio.sleep_forever()
        tg.cancel_scope.cancel()


# -- command line ---------------------------------------------------------------


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m manager.demo_server",
        description="The demo MCP server bundled with mcp-manager.",
    )
    parser.add_argument(
        "--transport", choices=["stdio", "http", "sse"], default="stdio"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    faults = parser.add_argument_group("failure modes")
    flag = faults.add_argument
    flag(
        "--crash-after-handshake",
        action="store_true",
        help="exit with code 3 just after the first tools/list reply",
    )
    flag("--hang-on-initialize", action="store_true", help="never answer initialize")
    flag(
        "--garbage",
        action="store_true",
        help="stdio only: write non-JSON lines, never a reply",
    )
    flag("--exit-immediately", type=int, metavar="CODE", help="exit at once")
    flag(
        "--ignore-sigterm",
        action="store_true",
        help="stdio only: ignore SIGTERM and stdin EOF",
    )
    flag("--slow-start", type=float, default=0.0, metavar="SECONDS")
    flag("--stderr-spam", action="store_true", help="write 100 stderr lines/s")
    flag(
        "--exit-after",
        type=float,
        metavar="SECONDS",
        help="exit with code 1 after this many seconds (a server that crashes)",
    )
    args = parser.parse_args(argv)
    if args.transport != "stdio" and (args.garbage or args.ignore_sigterm):
        parser.error("--garbage and --ignore-sigterm need --transport stdio")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo server from the command line.

    Args:
        argv: Arguments without the program name; `sys.argv[1:]` by default.

    Returns:
        The process exit code.
    """
    args = _parse_args(argv)
    faults = Faults(
        crash_after_handshake=args.crash_after_handshake,
        hang_on_initialize=args.hang_on_initialize,
        garbage=args.garbage,
        exit_immediately=args.exit_immediately,
        ignore_sigterm=args.ignore_sigterm,
        slow_start=args.slow_start,
        stderr_spam=args.stderr_spam,
        exit_after=args.exit_after,
    )
    if faults.exit_immediately is not None:
        return faults.exit_immediately
    if faults.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(faults.slow_start)
    if faults.garbage:
        _serve_garbage()
        return 0
    demo = DemoServer.from_env()
    anyio.run(_run_with_faults, demo, faults, args.transport, args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
