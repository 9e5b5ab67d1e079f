"""The test helpers themselves: raw legacy server, blackhole, server processes."""

from __future__ import annotations

import signal
import socket
import sys

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from . import (
    Blackhole,
    HttpServerFactory,
    HttpServerProcess,
    children_of,
    open_line_client,
    raw_command,
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
    server = make_http_server("http")
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


def test_a_port_taken_before_the_server_binds_is_not_mistaken_for_it() -> None:
    # free_port() closes its socket before the server binds: another process
    # listening there first must not pass for the server (the test would talk
    # to it); the server moves to another free port instead.
    listener = (  # binds the port it is given, as a server does, then waits
        "import socket, sys, time\n"
        "s = socket.socket()\n"
        "s.bind(('127.0.0.1', int(sys.argv[sys.argv.index('--port') + 1])))\n"
        "s.listen()\n"
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
            assert "address already in use" in squatter.log_text().lower()
        finally:
            squatter.kill()
