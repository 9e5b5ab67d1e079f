"""The bundled demo server, driven by the official SDK client over each transport.

Each test starts a real server process (about 0.5 s, most of it `import mcp`),
so the tool tests are few and full. The failure-mode tests that need an exit
status talk newline-delimited JSON-RPC to the process directly.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Literal, cast

import anyio
import anyio.abc
import mcp.types as types
import psutil
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from servers import (
    HttpServerFactory,
    LineClient,
    children_of,
    open_line_client,
    stdio_command,
)

from manager.demo_server import SERVER_NAME

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
BUILTIN_TOOLS = {
    "echo",
    "add",
    "sleep",
    "fail",
    "pid",
    "add_tool",
    "remove_tool",
    "meta",
    "crash",
    "spawn_child",
    "stderr",
}

Transport = Literal["stdio", "http", "sse"]

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]


class _MessageWatcher:
    """A `message_handler` that counts `list_changed` and keeps transport errors."""

    def __init__(self) -> None:
        self.count = 0
        self.errors: list[Exception] = []
        self._changed = anyio.Event()
        self._errored = anyio.Event()

    async def __call__(self, message: object) -> None:
        if isinstance(message, Exception):
            self.errors.append(message)
            self._errored.set()
        elif isinstance(message, types.ToolListChangedNotification):
            self.count += 1
            self._changed.set()

    async def wait(self) -> None:
        """Wait for the next `list_changed` notification."""
        await self._changed.wait()
        self._changed = anyio.Event()

    async def wait_for_errors(self, count: int) -> None:
        """Wait until the transport has reported `count` errors in all."""
        while len(self.errors) < count:
            await self._errored.wait()
            self._errored = anyio.Event()


@asynccontextmanager
async def _demo_session(
    transport: Transport,
    make_http_server: HttpServerFactory,
    tmp_path: Path,
    watcher: _MessageWatcher,
) -> AsyncIterator[tuple[ClientSession, Callable[[], str]]]:
    """Start the demo (page size 2) and yield a session and a stderr reader."""
    env = {"DEMO_PAGE_SIZE": "2"}
    if transport == "stdio":
        command, args = stdio_command()
        params = StdioServerParameters(command=command, args=args, env=env)
        errlog_path = tmp_path / "stderr.log"
        with errlog_path.open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write, message_handler=watcher) as session,
            ):
                yield session, errlog_path.read_text
        return
    server = make_http_server(transport, env=env)
    client = (
        streamable_http_client(server.url)
        if transport == "http"
        else sse_client(server.url)
    )
    async with (
        client as (read, write),
        ClientSession(read, write, message_handler=watcher) as session,
    ):
        yield session, server.log_text


async def _list_all_tools(session: ClientSession) -> tuple[list[str], int]:
    """Every tool name, following cursors, and the number of pages."""
    names: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        names += [tool.name for tool in page.tools]
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            return names, pages


def _text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.mark.parametrize("transport", ["stdio", "http", "sse"])
async def test_demo_server_serves_every_tool_and_notifies_list_changes(
    transport: Transport, make_http_server: HttpServerFactory, tmp_path: Path
) -> None:
    watcher = _MessageWatcher()
    async with _demo_session(transport, make_http_server, tmp_path, watcher) as (
        session,
        stderr_text,
    ):
        with anyio.fail_after(10):
            init = await session.initialize()
        assert init.server_info.name == SERVER_NAME
        assert init.capabilities.tools is not None
        assert init.capabilities.tools.list_changed is True

        with anyio.fail_after(5):
            names, pages = await _list_all_tools(session)
            assert set(names) == BUILTIN_TOOLS
            assert pages == 6  # 11 tools, 2 per page

            assert _text_of(await session.call_tool("echo", {"text": "hi"})) == "hi"

            added = await session.call_tool("add", {"a": 2, "b": 3.5})
            assert added.structured_content == {"sum": 5.5}
            assert _text_of(added) == "5.5"

            failed = await session.call_tool("fail", {"message": "boom"})
            assert failed.is_error is True
            assert _text_of(failed) == "boom"

            bad_args = await session.call_tool("echo", {})
            assert bad_args.is_error is True

            # An open TypedDict (extra_items=Any) that mypy cannot express yet.
            sent = cast(
                types.RequestParamsMeta, {"traceparent": TRACEPARENT, "demo": "x"}
            )
            meta = await session.call_tool("meta", {}, meta=sent)
            assert json.loads(_text_of(meta)) == sent

            pid = int(_text_of(await session.call_tool("pid")))
            assert pid in {p.pid for p in children_of(os.getpid())}

            slept = await session.call_tool("sleep", {"seconds": 0.01})
            assert _text_of(slept) == "slept 0.01"

            spawned = await session.call_tool("spawn_child", {"seconds": 60})
            grandchild = int(_text_of(spawned))
            assert grandchild in {p.pid for p in children_of(pid)}
            psutil.Process(grandchild).kill()

            await session.call_tool("stderr", {"text": "hello from the demo"})
            assert "hello from the demo" in stderr_text()

            await session.call_tool("add_tool", {"name": "extra"})
            await watcher.wait()
            assert "extra" in (await _list_all_tools(session))[0]
            extra = await session.call_tool("extra", {"x": 1})
            assert _text_of(extra) == '{"x": 1}'

            await session.call_tool("remove_tool", {"name": "extra"})
            await watcher.wait()
            assert set((await _list_all_tools(session))[0]) == BUILTIN_TOOLS
        assert watcher.count == 2


# -- failure modes ------------------------------------------------------------


def _demo_process(*flags: str) -> AbstractAsyncContextManager[LineClient]:
    """The demo server over stdio as a bare process; SIGKILLed on the way out."""
    return open_line_client(*stdio_command(*flags))


async def test_crash_after_handshake_exits_with_code_3_once_tools_are_listed() -> None:
    async with _demo_process("--crash-after-handshake") as client:
        with anyio.fail_after(10):
            await client.handshake()
            assert await client.process.wait() == 3


async def test_crash_after_handshake_over_http_exits_with_code_3(
    make_http_server: HttpServerFactory,
) -> None:
    server = make_http_server("http", "--crash-after-handshake")
    async with (
        streamable_http_client(server.url) as (read, write),
        ClientSession(read, write) as session,
    ):
        with anyio.fail_after(10):
            await session.initialize()
            await session.list_tools()
            assert await server.await_exit(5) == 3


async def test_crash_tool_exits_with_the_requested_code() -> None:
    async with _demo_process() as client:
        with anyio.fail_after(10):
            await client.handshake()
            await client.call_tool("crash", {"code": 5})
            assert await client.process.wait() == 5


async def test_hang_on_initialize_never_answers() -> None:
    command, args = stdio_command("--hang-on-initialize")
    params = StdioServerParameters(command=command, args=args)
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write) as session,
    ):
        with pytest.raises(TimeoutError), anyio.fail_after(1):
            await session.initialize()


async def test_garbage_answers_initialize_with_a_non_json_line() -> None:
    watcher = _MessageWatcher()
    answered = False
    command, args = stdio_command("--garbage")
    params = StdioServerParameters(command=command, args=args)
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, message_handler=watcher) as session,
    ):

        async def initialize() -> None:
            nonlocal answered
            await session.initialize()
            answered = True

        async with anyio.create_task_group() as tg:
            tg.start_soon(initialize)
            # One garbage line at start, one for the initialize request.
            with anyio.fail_after(10):
                await watcher.wait_for_errors(2)
            tg.cancel_scope.cancel()
    assert not answered


async def test_exit_immediately_exits_with_the_given_code() -> None:
    command, args = stdio_command("--exit-immediately", "7")
    with anyio.fail_after(10):
        result = await anyio.run_process([command, *args], check=False)
    assert result.returncode == 7


async def test_ignore_sigterm_survives_sigterm_and_stdin_eof() -> None:
    async with _demo_process("--ignore-sigterm") as client:
        with anyio.fail_after(10):
            await client.handshake()
        await client.stdin.aclose()
        client.process.send_signal(signal.SIGTERM)
        with anyio.move_on_after(0.5):
            await client.process.wait()
        assert client.process.returncode is None
        client.process.kill()
        with anyio.fail_after(5):
            assert await client.process.wait() == -signal.SIGKILL


async def test_stderr_spam_writes_many_lines() -> None:
    async with _demo_process("--stderr-spam") as client:
        with anyio.fail_after(10):
            for _ in range(20):
                line = await client.stderr.receive_until(b"\n", 1 << 16)
                assert b"stderr spam" in line
