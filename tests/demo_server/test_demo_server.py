"""The bundled demo server, driven by the official SDK client over each transport.

A real server process costs about 0.5 s (most of it `import mcp`), so the
process tests are few and full: every tool over stdio, HTTP and SSE, and two
SSE sessions for resource subscriptions. The prompts, resources, completions,
logging and requests to the client are tested against the same `DemoServer`
in this process, over the SDK's memory streams with a real `ClientSession`.
The failure-mode tests that need an exit status talk newline-delimited
JSON-RPC to the process directly.
"""

from __future__ import annotations

import base64
import json
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Literal, TypeVar, cast

import anyio
import anyio.abc
import mcp.types as types
import psutil
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client import ClientRequestContext
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
)
from mcp.shared.exceptions import MCPError
from mcp.shared.memory import create_client_server_memory_streams
from mcp_types import INVALID_PARAMS
from pydantic import FileUrl
from servers import (
    HttpServerFactory,
    LineClient,
    children_of,
    open_line_client,
    stdio_command,
)

from manager.demo_server import SERVER_NAME, DemoServer
from manager.demo_server.catalog import (
    ITEM_TEMPLATE,
    LOGO_URI,
    PNG_1X1,
    README_TEXT,
    README_URI,
    RESOURCE_NOT_FOUND,
)

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
    "add_prompt",
    "remove_prompt",
    "add_resource",
    "remove_resource",
    "touch_resource",
    "log",
    "ask_user",
    "sample",
    "roots",
    "error",
    "result",
    "arguments",
}
PROMPTS = ["greet", "with_resource", "with_image"]
RESOURCES = [README_URI, LOGO_URI]
ROOTS = ["file:///work/one", "file:///work/two"]

Transport = Literal["stdio", "http", "sse"]

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]

_T = TypeVar("_T")


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


class _Inbox:
    """A `message_handler` and `logging_callback` that keep what arrived, to wait on."""

    def __init__(self) -> None:
        self.messages: list[object] = []
        self._arrived = anyio.Event()

    async def __call__(self, message: object) -> None:
        self.messages.append(message)
        self._arrived.set()
        self._arrived = anyio.Event()

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        await self(params)

    def of_type(self, kind: type[_T]) -> list[_T]:
        return [message for message in self.messages if isinstance(message, kind)]

    async def wait_for(self, kind: type[_T], count: int = 1) -> list[_T]:
        """Wait until `count` messages of `kind` arrived in all; return them."""
        while len(found := self.of_type(kind)) < count:
            await self._arrived.wait()
        return found


async def _elicit(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    """The user: declines `decline?`, answers anything else."""
    if params.message == "decline?":
        return types.ElicitResult(action="decline")
    answer = f"yes to {params.message}"
    return types.ElicitResult(action="accept", content={"answer": answer})


async def _sample(
    context: ClientRequestContext, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    """The model: repeats the prompt."""
    content = params.messages[0].content
    assert isinstance(content, types.TextContent)
    reply = types.TextContent(type="text", text=f"model: {content.text}")
    return types.CreateMessageResult(role="assistant", content=reply, model="test")


async def _roots(context: ClientRequestContext) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri=FileUrl(uri)) for uri in ROOTS])


@asynccontextmanager
async def _demo_session(
    transport: Transport,
    make_http_server: HttpServerFactory,
    tmp_path: Path,
    watcher: _MessageWatcher,
    inbox: _Inbox,
) -> AsyncIterator[tuple[ClientSession, Callable[[], str]]]:
    """Start the demo (page size 2) and yield a session and a stderr reader.

    The session answers elicitation, sampling and roots, and logs into `inbox`.
    """
    env = {"DEMO_PAGE_SIZE": "2"}
    session_with = partial(
        ClientSession,
        message_handler=watcher,
        elicitation_callback=_elicit,
        sampling_callback=_sample,
        list_roots_callback=_roots,
        logging_callback=inbox.log,
    )
    if transport == "stdio":
        command, args = stdio_command()
        params = StdioServerParameters(command=command, args=args, env=env)
        errlog_path = tmp_path / "stderr.log"
        with errlog_path.open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                session_with(read, write) as session,
            ):
                yield session, errlog_path.read_text
        return
    server = make_http_server(transport, env=env)
    client = (
        streamable_http_client(server.url)
        if transport == "http"
        else sse_client(server.url)
    )
    async with client as (read, write), session_with(read, write) as session:
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
    watcher, inbox = _MessageWatcher(), _Inbox()
    async with _demo_session(transport, make_http_server, tmp_path, watcher, inbox) as (
        session,
        stderr_text,
    ):
        with anyio.fail_after(10):
            init = await session.initialize()
        assert init.server_info.name == SERVER_NAME
        caps = init.capabilities
        assert caps.tools is not None
        assert caps.tools.list_changed is True
        assert caps.prompts is not None and caps.prompts.list_changed is True
        assert caps.resources is not None
        assert caps.resources.subscribe is True
        assert caps.resources.list_changed is True
        assert caps.completions is not None
        assert caps.logging is not None

        with anyio.fail_after(5):
            names, pages = await _list_all_tools(session)
            assert set(names) == BUILTIN_TOOLS
            assert pages == 12  # 23 tools, 2 per page

            # Requests to the client ride the tool call's own channel (over
            # streamable HTTP: the call's response stream).
            asked = await session.call_tool("ask_user", {"message": "ok?"})
            assert _text_of(asked) == 'accept: {"answer": "yes to ok?"}'
            sampled = await session.call_tool("sample", {"prompt": "hi"})
            assert _text_of(sampled) == "model: hi"
            assert json.loads(_text_of(await session.call_tool("roots"))) == ROOTS
            logged = await session.call_tool("log", {"level": "error", "text": "oh"})
            assert _text_of(logged) == "sent error"
            (log,) = await inbox.wait_for(types.LoggingMessageNotificationParams)
            assert (log.level, log.logger, log.data) == ("error", SERVER_NAME, "oh")

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


# -- prompts, resources, completion, logging, requests to the client -----------


@asynccontextmanager
async def _memory_session(
    demo: DemoServer | None = None,
    inbox: _Inbox | None = None,
    *,
    capable: bool = True,
) -> AsyncIterator[ClientSession]:
    """A real client session with `demo` in this process, over memory streams.

    `capable=False` declares no elicitation, sampling or roots capability.
    """
    server = (demo or DemoServer()).server
    inbox = inbox or _Inbox()
    async with (
        create_client_server_memory_streams() as (client_streams, server_streams),
        anyio.create_task_group() as tg,
    ):
        options = server.create_initialization_options()
        tg.start_soon(server.run, *server_streams, options)
        async with ClientSession(
            *client_streams,
            message_handler=inbox,
            logging_callback=inbox.log,
            elicitation_callback=_elicit if capable else None,
            sampling_callback=_sample if capable else None,
            list_roots_callback=_roots if capable else None,
        ) as session:
            with anyio.fail_after(5):
                await session.initialize()
            yield session
        tg.cancel_scope.cancel()


_Page = tuple[list[str], str | None]


async def _all_pages(
    fetch: Callable[[types.PaginatedRequestParams | None], Awaitable[_Page]],
) -> tuple[list[str], int]:
    """Every name, following cursors, and the number of pages."""
    names: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page, cursor = await fetch(params)
        names += page
        pages += 1
        if cursor is None:
            return names, pages


def _pagers(
    session: ClientSession,
) -> tuple[
    Callable[[types.PaginatedRequestParams | None], Awaitable[_Page]],
    Callable[[types.PaginatedRequestParams | None], Awaitable[_Page]],
    Callable[[types.PaginatedRequestParams | None], Awaitable[_Page]],
]:
    """Page fetchers for prompts (names), resources (URIs) and templates."""

    async def prompts(params: types.PaginatedRequestParams | None) -> _Page:
        page = await session.list_prompts(params=params)
        return [prompt.name for prompt in page.prompts], page.next_cursor

    async def resources(params: types.PaginatedRequestParams | None) -> _Page:
        page = await session.list_resources(params=params)
        return [resource.uri for resource in page.resources], page.next_cursor

    async def templates(params: types.PaginatedRequestParams | None) -> _Page:
        page = await session.list_resource_templates(params=params)
        names = [template.uri_template for template in page.resource_templates]
        return names, page.next_cursor

    return prompts, resources, templates


async def _subscribe(session: ClientSession, uri: str) -> None:
    # The typed request: `ClientSession.subscribe_resource` warns (2026 drops it).
    params = types.SubscribeRequestParams(uri=uri)
    await session.send_request(types.SubscribeRequest(params=params), types.EmptyResult)


async def _unsubscribe(session: ClientSession, uri: str) -> None:
    params = types.UnsubscribeRequestParams(uri=uri)
    request = types.UnsubscribeRequest(params=params)
    await session.send_request(request, types.EmptyResult)


async def _set_level(session: ClientSession, level: types.LoggingLevel) -> None:
    # The typed request: `ClientSession.set_logging_level` warns (2026 drops it).
    params = types.SetLevelRequestParams(level=level)
    await session.send_request(types.SetLevelRequest(params=params), types.EmptyResult)


async def test_prompts_resources_and_templates_page_like_tools() -> None:
    async with _memory_session(DemoServer(page_size=1)) as session:
        prompts, resources, templates = _pagers(session)
        with anyio.fail_after(5):
            assert await _all_pages(prompts) == (PROMPTS, 3)
            assert await _all_pages(resources) == (RESOURCES, 2)
            assert await _all_pages(templates) == ([ITEM_TEMPLATE], 1)
            with pytest.raises(MCPError) as bad_cursor:
                await session.list_prompts(
                    params=types.PaginatedRequestParams(cursor="x")
                )
            assert bad_cursor.value.error.code == INVALID_PARAMS


async def test_prompts_render_text_embedded_resources_and_images() -> None:
    async with _memory_session() as session:
        with anyio.fail_after(5):
            greet = await session.get_prompt("greet", {"name": "bob"})
            (message,) = greet.messages
            assert message.role == "user"
            assert message.content == types.TextContent(type="text", text="Hello, bob!")
            styled = await session.get_prompt("greet", {"name": "al", "style": "dry"})
            assert styled.description == "Greets al in a dry style"

            embedded = (await session.get_prompt("with_resource")).messages[0].content
            assert isinstance(embedded, types.EmbeddedResource)
            assert embedded.resource == types.TextResourceContents(
                uri=README_URI, mime_type="text/plain", text=README_TEXT
            )

            image = (await session.get_prompt("with_image")).messages[0].content
            assert isinstance(image, types.ImageContent)
            assert image.mime_type == "image/png"
            assert base64.b64decode(image.data).startswith(b"\x89PNG\r\n\x1a\n")

            with pytest.raises(MCPError) as missing:
                await session.get_prompt("greet", {"style": "dry"})
            assert missing.value.error.code == INVALID_PARAMS
            assert missing.value.error.message == (
                "prompt 'greet' needs the argument 'name'"
            )
            with pytest.raises(MCPError) as unknown:
                await session.get_prompt("nope")
            assert unknown.value.error.code == INVALID_PARAMS
            assert unknown.value.error.message == "unknown prompt 'nope'"


async def test_resources_read_by_uri_and_template_else_not_found() -> None:
    async with _memory_session() as session:
        with anyio.fail_after(5):
            (readme,) = (await session.read_resource(README_URI)).contents
            assert isinstance(readme, types.TextResourceContents)
            assert (readme.text, readme.mime_type) == (README_TEXT, "text/plain")

            (logo,) = (await session.read_resource(LOGO_URI)).contents
            assert isinstance(logo, types.BlobResourceContents)
            assert (logo.blob, logo.mime_type) == (PNG_1X1, "image/png")

            (item,) = (await session.read_resource("demo://items/42")).contents
            assert isinstance(item, types.TextResourceContents)
            assert (item.uri, item.text) == ("demo://items/42", "item 42")

            with pytest.raises(MCPError) as unknown:
                await session.read_resource("demo://nothing")
            assert unknown.value.error.code == RESOURCE_NOT_FOUND == -32002
            assert unknown.value.error.message == "resource not found: demo://nothing"


async def test_completion_of_the_greet_name_and_the_item_id() -> None:
    greet = types.PromptReference(name="greet")
    items = types.ResourceTemplateReference(uri=ITEM_TEMPLATE)
    async with _memory_session() as session:
        with anyio.fail_after(5):

            async def values(
                ref: types.PromptReference | types.ResourceTemplateReference,
                name: str,
                prefix: str,
            ) -> list[str]:
                argument = {"name": name, "value": prefix}
                return (await session.complete(ref, argument)).completion.values

            assert await values(greet, "name", "al") == ["alice", "albert"]
            assert await values(greet, "name", "") == ["alice", "albert", "bob"]
            assert await values(greet, "style", "") == []
            assert await values(items, "id", "1") == ["1", "10", "11"]
            assert await values(items, "id", "3") == []
            with pytest.raises(MCPError) as unknown:
                await values(types.PromptReference(name="nope"), "name", "")
            assert unknown.value.error.code == INVALID_PARAMS


async def test_runtime_prompt_and_resource_changes_notify_clients() -> None:
    inbox = _Inbox()
    async with _memory_session(inbox=inbox) as session:
        prompts, resources, _ = _pagers(session)
        with anyio.fail_after(5):
            await session.call_tool("add_prompt", {"name": "extra"})
            await inbox.wait_for(types.PromptListChangedNotification, 1)
            assert (await _all_pages(prompts))[0] == [*PROMPTS, "extra"]
            extra = (await session.get_prompt("extra")).messages[0].content
            assert extra == types.TextContent(
                type="text", text="Prompt extra, added at runtime."
            )
            dup = await session.call_tool("add_prompt", {"name": "extra"})
            assert dup.is_error is True

            await session.call_tool("remove_prompt", {"name": "extra"})
            await inbox.wait_for(types.PromptListChangedNotification, 2)
            assert (await _all_pages(prompts))[0] == PROMPTS

            added = {"uri": "demo://notes", "text": "some notes"}
            await session.call_tool("add_resource", added)
            await inbox.wait_for(types.ResourceListChangedNotification, 1)
            assert (await _all_pages(resources))[0] == [*RESOURCES, "demo://notes"]
            (notes,) = (await session.read_resource("demo://notes")).contents
            assert isinstance(notes, types.TextResourceContents)
            assert notes.text == "some notes"

            await session.call_tool("remove_resource", {"uri": "demo://notes"})
            await inbox.wait_for(types.ResourceListChangedNotification, 2)
            assert (await _all_pages(resources))[0] == RESOURCES
            gone = await session.call_tool("remove_resource", {"uri": "demo://notes"})
            assert gone.is_error is True


async def test_2026_clients_get_the_changes_on_their_listen_stream() -> None:
    demo = DemoServer()
    async with Client(demo.server, cache=None) as client:
        listen = client.listen(
            prompts_list_changed=True,
            resources_list_changed=True,
            resource_subscriptions=[README_URI],
        )
        with anyio.fail_after(5):
            async with listen as events:
                await client.call_tool("add_prompt", {"name": "extra"})
                await client.call_tool("add_resource", {"uri": "demo://x", "text": ""})
                await client.call_tool("touch_resource", {"uri": LOGO_URI})  # not asked
                await client.call_tool("touch_resource", {"uri": README_URI})
                received = [await anext(events) for _ in range(3)]
    assert received == [
        PromptsListChanged(),
        ResourcesListChanged(),
        ResourceUpdated(README_URI),
    ]


async def test_log_sends_at_or_above_the_sessions_level() -> None:
    inbox = _Inbox()
    async with _memory_session(inbox=inbox) as session:
        with anyio.fail_after(5):

            async def log(level: str, text: str) -> str:
                args = {"level": level, "text": text}
                return _text_of(await session.call_tool("log", args))

            assert await log("debug", "everything by default") == "sent debug"
            await _set_level(session, "warning")
            assert await log("info", "quiet") == "not sent: info is below warning"
            assert await log("warning", "loud") == "sent warning"
            logged = await inbox.wait_for(types.LoggingMessageNotificationParams, 2)
            assert [(entry.level, entry.data) for entry in logged] == [
                ("debug", "everything by default"),
                ("warning", "loud"),
            ]
            bad = await session.call_tool("log", {"level": "loud", "text": "x"})
            assert bad.is_error is True


async def test_elicitation_sampling_and_roots_round_trip() -> None:
    async with _memory_session() as session:
        with anyio.fail_after(5):
            asked = await session.call_tool("ask_user", {"message": "name?"})
            assert _text_of(asked) == 'accept: {"answer": "yes to name?"}'
            declined = await session.call_tool("ask_user", {"message": "decline?"})
            assert (declined.is_error, _text_of(declined)) == (False, "decline")
            sampled = await session.call_tool("sample", {"prompt": "2+2?"})
            assert _text_of(sampled) == "model: 2+2?"
            roots = await session.call_tool("roots")
            assert json.loads(_text_of(roots)) == ROOTS


async def test_a_missing_client_capability_is_an_error_result() -> None:
    calls = {
        "ask_user": ({"message": "name?"}, "elicitation"),
        "sample": ({"prompt": "2+2?"}, "sampling"),
        "roots": ({}, "roots"),
    }
    async with _memory_session(capable=False) as session:
        with anyio.fail_after(5):
            for tool, (args, capability) in calls.items():
                result = await session.call_tool(tool, args)
                assert result.is_error is True
                assert _text_of(result) == (
                    f"{tool}: the client did not declare the {capability} capability"
                )


async def test_only_subscribed_sessions_get_resource_updates(
    make_http_server: HttpServerFactory,
) -> None:
    # SSE: each session has its own key on the server, and its one stream is
    # open before the first request, so no notification can miss it.
    server = make_http_server("sse")
    first, second = _Inbox(), _Inbox()
    async with (
        sse_client(server.url) as (read_a, write_a),
        ClientSession(read_a, write_a, message_handler=first) as a,
        sse_client(server.url) as (read_b, write_b),
        ClientSession(read_b, write_b, message_handler=second) as b,
    ):
        with anyio.fail_after(10):
            await a.initialize()
            await b.initialize()

        async def touch(uri: str) -> str:
            return _text_of(await a.call_tool("touch_resource", {"uri": uri}))

        with anyio.fail_after(5):
            await _subscribe(b, README_URI)
            assert await touch(README_URI) == "1"
            (update,) = await second.wait_for(types.ResourceUpdatedNotification)
            assert update.params.uri == README_URI

            # Had `a` got the readme update, it would be the first one here.
            await _subscribe(a, LOGO_URI)
            assert await touch(LOGO_URI) == "1"
            (mine,) = await first.wait_for(types.ResourceUpdatedNotification)
            assert mine.params.uri == LOGO_URI

            await _unsubscribe(b, README_URI)
            assert await touch(README_URI) == "0"
        assert len(second.of_type(types.ResourceUpdatedNotification)) == 1


# -- failure modes ------------------------------------------------------------


def _demo_process(*flags: str) -> AbstractAsyncContextManager[LineClient]:
    """The demo server over stdio as a bare process; SIGKILLed on the way out."""
    return open_line_client(*stdio_command(*flags, fork=False))


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
    command, args = stdio_command("--hang-on-initialize", fork=False)
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
    command, args = stdio_command("--garbage", fork=False)
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
    command, args = stdio_command("--exit-immediately", "7", fork=False)
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
        # The server's start is inside this deadline: a hang's guard, generous
        # for a loaded machine (10 s was overrun once at 432 s of suite time).
        with anyio.fail_after(30):
            for _ in range(20):
                line = await client.stderr.receive_until(b"\n", 1 << 16)
                assert b"stderr spam" in line
