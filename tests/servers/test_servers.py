"""The test helpers themselves: raw legacy and raw HTTP servers, blackhole,
server processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import anyio
import httpx2
import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from . import (
    Blackhole,
    HttpServerFactory,
    HttpServerProcess,
    children_of,
    open_line_client,
    raw_command,
    raw_http,
)
from .raw_legacy import PROTOCOL_VERSION, SERVER_NAME

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]


def _raw_params(*flags: str) -> StdioServerParameters:
    command, args = raw_command(*flags)
    return StdioServerParameters(command=command, args=args)


async def test_raw_legacy_server_answers_the_sdk_client() -> None:
    async with (
        stdio_client(_raw_params()) as (read, write),
        ClientSession(read, write) as session,
    ):
        with anyio.fail_after(5):
            init = await session.initialize()
            assert init.protocol_version == PROTOCOL_VERSION
            assert init.server_info.name == SERVER_NAME
            tools = await session.list_tools()
            assert [tool.name for tool in tools.tools] == ["echo", "pid", "crash"]
            await session.send_ping()
            echoed = await session.call_tool("echo", {"text": "hi"})
            assert echoed.content == [types.TextContent(type="text", text="hi")]


async def test_raw_legacy_fail_tool_answers_a_tool_error() -> None:
    async with (
        stdio_client(_raw_params("--sleep-tool", "--fail-tool")) as (read, write),
        ClientSession(read, write) as session,
    ):
        with anyio.fail_after(5):
            await session.initialize()
            tools = await session.list_tools()
            names = [tool.name for tool in tools.tools]
            assert names == ["echo", "pid", "crash", "sleep", "fail"]
            failed = await session.call_tool("fail", {"message": "nope"})
            assert failed.is_error
            assert failed.content == [types.TextContent(type="text", text="nope")]
            echoed = await session.call_tool("echo", {"text": "still here"})
            assert not echoed.is_error


async def test_raw_legacy_crash_after_handshake_exits_with_code_3() -> None:
    async with open_line_client(*raw_command("--crash-after-handshake")) as client:
        with anyio.fail_after(5):
            await client.handshake()
            assert await client.process.wait() == 3


async def test_raw_legacy_exit_immediately_exits_with_the_code() -> None:
    command, args = raw_command("--exit-immediately", "4")
    with anyio.fail_after(5):
        result = await anyio.run_process([command, *args], check=False)
    assert result.returncode == 4


@pytest.mark.parametrize("flag", ["--hang-on-initialize", "--garbage"])
async def test_raw_legacy_silent_modes_never_complete_the_handshake(flag: str) -> None:
    async with (
        stdio_client(_raw_params(flag)) as (read, write),
        ClientSession(read, write) as session,
    ):
        with pytest.raises(TimeoutError), anyio.fail_after(0.5):
            await session.initialize()


async def test_raw_legacy_ignore_sigterm_needs_sigkill() -> None:
    async with open_line_client(*raw_command("--ignore-sigterm")) as client:
        with anyio.fail_after(5):
            await client.handshake()
        await client.stdin.aclose()
        client.process.send_signal(signal.SIGTERM)
        with anyio.move_on_after(0.3):
            await client.process.wait()
        assert client.process.returncode is None


async def test_blackhole_accepts_but_never_answers(blackhole: Blackhole) -> None:
    async with (
        streamable_http_client(blackhole.url()) as (read, write),
        ClientSession(read, write) as session,
    ):
        with pytest.raises(TimeoutError), anyio.fail_after(0.5):
            await session.initialize()
    assert blackhole.accepted >= 1


def test_blackhole_close_is_idempotent() -> None:
    hole = Blackhole()
    hole.close()
    hole.close()


async def test_http_server_comes_back_on_the_same_url_after_a_kill(
    make_http_server: HttpServerFactory,
) -> None:
    # HttpServerProcess is the point; raw_http starts in a tenth of the demo
    # server's CPU (which test_demo_server starts the same way).
    server = make_http_server("http", raw=True)
    url, first_pid = server.url, server.pid
    assert await server.akill() == -signal.SIGKILL
    assert not server.running
    await server.astart()
    assert (server.url, server.running) == (url, True)
    assert server.pid != first_pid
    async with (
        streamable_http_client(server.url) as (read, write),
        ClientSession(read, write) as session,
    ):
        with anyio.fail_after(5):
            await session.initialize()
    assert await server.astop() is not None
    assert children_of(first_pid) == []


@pytest.mark.parametrize(
    "says",
    [
        "",  # Python's own OSError: "Address already in use"
        # the reference server's words (seen in CI: it exits 1 saying them)
        "print(f'Failed to start: Port {port} is already in use.'); sys.exit(1)",
    ],
)
def test_a_port_taken_before_the_server_binds_is_not_mistaken_for_it(
    says: str,
) -> None:
    # free_port() closes its socket before the server binds: another process
    # listening there first must not pass for the server (the test would talk
    # to it); the server moves to another free port instead.
    listener = (  # binds the port it is given, as a server does, then waits
        "import socket, sys, time\n"
        "port = int(sys.argv[sys.argv.index('--port') + 1])\n"
        "s = socket.socket()\n"
        + (
            f"try:\n    s.bind(('127.0.0.1', port))\nexcept OSError:\n    {says}\n"
            if says
            else "s.bind(('127.0.0.1', port))\n"
        )
        + "s.listen()\n"
        "time.sleep(60)\n"
    )
    squatter = HttpServerProcess("http", program=[sys.executable, "-S", "-c", listener])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", squatter.port))
        taken.listen()
        try:
            squatter.start()
            assert squatter.port != taken.getsockname()[1]
            assert squatter.running
            assert "already in use" in squatter.log_text().lower()
        finally:
            squatter.close()  # and the log folder it made


async def test_raw_http_server_answers_the_sdk_client(
    make_http_server: HttpServerFactory,
) -> None:
    server = make_http_server("http", "--sleep-tool", "--fail-tool", raw=True)
    async with (
        streamable_http_client(server.url) as (read, write),
        ClientSession(read, write) as session,
    ):
        with anyio.fail_after(5):
            init = await session.initialize()
            assert init.protocol_version == raw_http.PROTOCOL_VERSION
            assert init.server_info.name == raw_http.SERVER_NAME
            tools = await session.list_tools()
            names = [tool.name for tool in tools.tools]
            assert names == ["echo", "pid", "crash", "sleep", "fail"]
            await session.send_ping()
            echoed = await session.call_tool("echo", {"text": "hi"})
            assert echoed.content == [types.TextContent(type="text", text="hi")]
            pid = await session.call_tool("pid", {})
            assert pid.content == [types.TextContent(type="text", text=str(server.pid))]
            slept = await session.call_tool("sleep", {"seconds": 0.01})
            assert slept.content == [types.TextContent(type="text", text="slept 0.01")]
            failed = await session.call_tool("fail", {"message": "nope"})
            assert failed.is_error
            assert failed.content == [types.TextContent(type="text", text="nope")]
    assert "Traceback" not in server.log_text()


async def _post(
    client: httpx2.AsyncClient, url: str, message: Mapping[str, object], sid: str = ""
) -> httpx2.Response:
    headers = {"accept": "application/json, text/event-stream"}
    if sid:
        headers["mcp-session-id"] = sid
    return await client.post(url, json={"jsonrpc": "2.0", **message}, headers=headers)


async def test_raw_http_server_speaks_the_handshake_era_over_http(
    make_http_server: HttpServerFactory,
) -> None:
    server = make_http_server("http", raw=True)
    url = server.url
    async with httpx2.AsyncClient(timeout=5) as client:
        discover = await _post(client, url, {"id": 1, "method": "server/discover"})
        assert discover.status_code == 200
        assert discover.json()["error"]["code"] == -32601
        init = await _post(client, url, {"id": 2, "method": "initialize"})
        assert init.headers["content-type"] == "application/json"
        sid = init.headers["mcp-session-id"]
        note = {"method": "notifications/initialized"}
        assert (await _post(client, url, note, sid)).status_code == 202
        missing = await _post(client, url, {"id": 3, "method": "ping"})
        assert missing.status_code == 400
        unknown = await _post(client, url, {"id": 4, "method": "ping"}, "nope")
        assert unknown.status_code == 404
        assert unknown.json()["error"]["message"] == "Session not found"
        other = await _post(client, url, {"id": 5, "method": "prompts/list"}, sid)
        assert other.json()["error"]["code"] == -32601
        headers = {"mcp-session-id": sid, "accept": "text/event-stream"}
        async with client.stream("GET", url, headers=headers) as stream:
            assert stream.headers["content-type"] == "text/event-stream"
            second = await client.get(url, headers=headers)
            assert second.status_code == 409  # one event stream per session
            assert (await client.delete(url, headers=headers)).status_code == 200
            with anyio.fail_after(5):  # the session's end ends its stream
                assert [chunk async for chunk in stream.aiter_bytes()] == []
        gone = await _post(client, url, {"id": 6, "method": "ping"}, sid)
        assert gone.status_code == 404


async def test_a_killed_and_restarted_raw_http_server_forgets_the_session(
    make_http_server: HttpServerFactory,
) -> None:
    server = make_http_server("http", raw=True)
    first_pid = server.pid
    async with (
        streamable_http_client(server.url) as (read, write),
        ClientSession(read, write) as session,
    ):
        with anyio.fail_after(5):
            await session.initialize()
            await session.send_ping()
        assert await server.akill() == -signal.SIGKILL
        await server.astart()
        assert server.pid != first_pid
        with anyio.fail_after(5), pytest.raises(MCPError, match="Session not found"):
            await session.send_ping()


async def test_raw_http_server_stops_on_sigterm_as_uvicorn_does(
    make_http_server: HttpServerFactory,
) -> None:
    """The event stream ends and idle connections close at once; a request in
    flight keeps its connection for the grace; then the process ends -15."""
    server = make_http_server("http", "--sleep-tool", "--fail-tool", raw=True)
    async with (
        httpx2.AsyncClient(timeout=5) as client,
        await anyio.connect_tcp("127.0.0.1", server.port) as idle,
    ):
        init = await _post(client, server.url, {"id": 1, "method": "initialize"})
        sid = init.headers["mcp-session-id"]
        call = {"name": "sleep", "arguments": {"seconds": 30}}
        slow = {"id": 2, "method": "tools/call", "params": call}
        dropped: list[float] = []

        async def in_flight() -> None:
            with pytest.raises(httpx2.RemoteProtocolError):
                await _post(client, server.url, slow, sid)
            dropped.append(anyio.current_time())

        async with (
            client.stream("GET", server.url, headers={"mcp-session-id": sid}) as stream,
            anyio.create_task_group() as tg,
        ):
            assert stream.status_code == 200
            tg.start_soon(in_flight)
            with anyio.fail_after(10):  # the call is in flight: the log says so
                while raw_http.SLEEP_STARTED not in server.log_text():  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            started = anyio.current_time()
            os.kill(server.pid, signal.SIGTERM)
            with anyio.fail_after(5):
                assert [chunk async for chunk in stream.aiter_bytes()] == []
                with pytest.raises(anyio.EndOfStream):
                    await idle.receive()
                assert anyio.current_time() - started < raw_http.SHUTDOWN_GRACE
                assert await server.await_exit(5) == -signal.SIGTERM
        assert dropped[0] - started >= raw_http.SHUTDOWN_GRACE * 0.9


async def test_raw_http_server_without_an_event_stream_answers_get_with_405(
    make_http_server: HttpServerFactory,
) -> None:
    server = make_http_server("http", "--no-event-stream", raw=True)
    async with httpx2.AsyncClient(timeout=5) as client:
        init = await _post(client, server.url, {"id": 1, "method": "initialize"})
        headers = {"mcp-session-id": init.headers["mcp-session-id"]}
        assert (await client.get(server.url, headers=headers)).status_code == 405


async def test_raw_http_crash_after_handshake_exits_with_code_3(
    make_http_server: HttpServerFactory,
) -> None:
    server = make_http_server("http", "--crash-after-handshake", raw=True)
    async with (
        streamable_http_client(server.url) as (read, write),
        ClientSession(read, write) as session,
    ):
        with anyio.fail_after(5):
            await session.initialize()
            await session.list_tools()
            assert await server.await_exit(5) == 3


async def test_raw_http_hang_on_initialize_never_completes_the_handshake(
    make_http_server: HttpServerFactory,
) -> None:
    server = make_http_server("http", "--hang-on-initialize", raw=True)
    async with (
        streamable_http_client(server.url) as (read, write),
        ClientSession(read, write) as session,
    ):
        with pytest.raises(TimeoutError), anyio.fail_after(0.5):
            await session.initialize()


async def test_raw_http_exit_immediately_exits_before_listening(
    make_http_server: HttpServerFactory,
) -> None:
    server = make_http_server("http", "--exit-immediately", "4", raw=True, start=False)
    with pytest.raises(RuntimeError, match="server exited with 4"):
        await server.astart()


async def test_raw_http_relist_notifies_on_the_event_stream(
    make_http_server: HttpServerFactory, tmp_path: Path
) -> None:
    tools_file = tmp_path / "tools.json"
    tools_file.write_text(
        json.dumps([{"name": "a", "inputSchema": {"type": "object"}}])
    )
    server = make_http_server("http", "--tools-file", str(tools_file), raw=True)
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with (
        streamable_http_client(server.url) as (read, write),
        ClientSession(read, write, message_handler=on_message) as session,
    ):
        with anyio.fail_after(5):
            await session.initialize()
            tools = await session.list_tools()
            assert [tool.name for tool in tools.tools] == ["a", "relist"]
            # The client opens its event stream after the handshake, in its own
            # time; a notification sent before that is dropped, so ask again.
            while not changed.is_set():
                told = await session.call_tool("relist", {})
                assert told.content == [types.TextContent(type="text", text="told")]
                with anyio.move_on_after(0.1):
                    await changed.wait()


async def test_raw_http_garbage_answers_are_not_json_rpc(
    make_http_server: HttpServerFactory,
) -> None:
    server = make_http_server("http", "--garbage", raw=True)
    async with (
        streamable_http_client(server.url) as (read, write),
        ClientSession(read, write) as session,
    ):
        with anyio.fail_after(5), pytest.raises(MCPError, match="Failed to parse"):
            await session.initialize()


async def test_raw_http_ignore_sigterm_needs_sigkill(
    make_http_server: HttpServerFactory,
) -> None:
    server = make_http_server("http", "--ignore-sigterm", raw=True)
    os.kill(server.pid, signal.SIGTERM)
    with pytest.raises(subprocess.TimeoutExpired):
        await server.await_exit(0.3)
    async with httpx2.AsyncClient(timeout=5) as client:
        init = await _post(client, server.url, {"id": 1, "method": "initialize"})
        assert init.status_code == 200  # still serving
    assert await server.akill() == -signal.SIGKILL
