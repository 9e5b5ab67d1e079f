"""`mcp-manager attach`: editors' stdio servers that are the running daemon.

The real daemon in a child process, SDK clients of both eras spawning
`python -m manager attach` as their server, as an editor would.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import psutil
import pytest
from fakes import accepting
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from servers import children_of, raw_command, stdio_command
from servers.daemon import DaemonProcess
from servers.process import sharing_children

from manager.cli.attach import HOLDING

pytestmark = pytest.mark.anyio


def _mcp_add(name: str, command: str, args: list[str]) -> str:
    return (
        f"mcp_add({json.dumps(name)}, {{command = {json.dumps(command)}, "
        f"args = {{{', '.join(json.dumps(a) for a in args)}}}}})\n"
    )


@pytest.fixture(scope="module")
def shared_daemon(
    no_leaked_children_after_module: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[DaemonProcess, Path]]:
    """One daemon for the tests that do not stop it: demo servers `a` and
    `b`, `old` (handshake era only), and the profile `one` (server `a`
    without its `fail` tool)."""
    command, args = stdio_command()
    script = tmp_path_factory.mktemp("attach") / "startup.lua"
    script.write_text(
        _mcp_add("a", command, args)
        + _mcp_add("b", command, args)
        + _mcp_add("old", *stdio_command("--legacy-only"))
        + 'mcp_profile("one", {servers = {"a"}, tools = {deny = {"*fail*"}}})\n'
    )
    directory = Path(tempfile.mkdtemp(prefix="mm-attach-", dir="/tmp"))
    os.chmod(directory, 0o700)
    control = directory / "control.sock"
    state = {"XDG_STATE_HOME": str(tmp_path_factory.mktemp("state"))}
    with DaemonProcess(script, control_socket=control, env=state) as daemon:
        daemon.wait_event("connected", "a")
        daemon.wait_event("connected", "b")
        daemon.wait_event("connected", "old")
        with sharing_children():  # not a leak of whichever test runs next
            yield daemon, control
    for leftover in directory.iterdir():
        leftover.unlink()
    directory.rmdir()


def attach(control: Path, *flags: str) -> StdioServerParameters:
    """What an editor would spawn: `mcp-manager attach`."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "manager", "attach", "--socket", str(control), *flags],
    )


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


@pytest.mark.usefixtures("no_leaked_children")
async def test_five_clients_share_one_process_per_server_through_a_restart(
    tmp_path: Path, control_socket: Path
) -> None:
    command, args = raw_command()
    script = tmp_path / "startup.lua"
    script.write_text("".join(_mcp_add(f"s{i}", command, args) for i in range(10)))
    modes: list[Any] = ["auto", "legacy", "auto", "legacy", "auto"]
    with DaemonProcess(script, control_socket=control_socket) as daemon:
        for i in range(10):
            daemon.wait_event("connected", f"s{i}")
        async with AsyncExitStack() as stack:
            # Each attach's stderr in a file of its own: it says when it holds.
            said = [tmp_path / f"attach{k}.err" for k in range(len(modes))]
            clients = [
                await stack.enter_async_context(
                    Client(
                        stdio_client(
                            attach(control_socket, "--hold", "60"),
                            errlog=stack.enter_context(path.open("w")),
                        ),
                        mode=mode,
                    )
                )
                for path, mode in zip(said, modes, strict=True)
            ]
            for k, client in enumerate(clients):
                tools = {t.name for t in (await client.list_tools()).tools}
                assert {f"s{i}__echo" for i in range(10)} <= tools
                echoed = await client.call_tool(f"s{k}__echo", {"text": f"c{k}"})
                assert not echoed.is_error and f"c{k}" in _text(echoed)
            servers = [
                p
                for p in children_of(daemon.process.pid)
                if "raw_legacy" in " ".join(p.cmdline())
            ]
            assert len(servers) == 10  # not 50: one process per upstream

            # The daemon stops under the clients; calls made meanwhile are held
            # by attach and answered by the next daemon on the same socket.
            daemon.signal(signal.SIGTERM)
            assert daemon.wait(within=20) == 0
            answers: dict[int, types.CallToolResult] = {}

            async def call(k: int, client: Client) -> None:
                answers[k] = await client.call_tool("s9__echo", {"text": f"held{k}"})

            with anyio.fail_after(90):
                async with anyio.create_task_group() as tg:
                    for k, client in enumerate(clients):
                        tg.start_soon(call, k, client)
                    # Every call waits in its attach (which says so) before
                    # the next daemon is there.
                    while not all(HOLDING in path.read_text() for path in said):  # noqa: ASYNC110
                        await anyio.sleep(0.01)
                    stack.enter_context(
                        DaemonProcess(script, control_socket=control_socket)
                    )
            assert len(answers) == len(clients)
            for k, result in answers.items():
                assert not result.is_error and f"held{k}" in _text(result)


@pytest.mark.usefixtures("no_leaked_children")
def test_attach_without_a_daemon_says_so_in_one_line_and_exits_2(
    control_socket: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "manager", "attach", "--socket", str(control_socket)],
        input=b"",
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == 2 and done.stdout == b""
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and "no daemon is running" in lines[0]
    assert "--start" in lines[0]


@pytest.mark.usefixtures("no_leaked_children")
def test_a_request_held_past_hold_gets_an_error_naming_the_socket(
    tmp_path: Path, control_socket: Path
) -> None:
    command, args = raw_command()
    script = tmp_path / "startup.lua"
    script.write_text(_mcp_add("s", command, args))
    with DaemonProcess(script, control_socket=control_socket) as daemon:
        daemon.wait_event("connected", "s")
        proc = subprocess.Popen(
            [sys.executable, "-m", "manager", "attach"]
            + ["--socket", str(control_socket), "--hold", "0.3"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert proc.stdin is not None and proc.stdout is not None
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        proc.stdin.write(json.dumps(ping).encode() + b"\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        daemon.signal(signal.SIGTERM)
        assert daemon.wait(within=20) == 0
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    proc.stdin.write(json.dumps(call).encode() + b"\n")
    proc.stdin.close()
    answer = json.loads(proc.stdout.readline())
    proc.stdout.close()
    assert proc.wait(timeout=30) == 0
    assert answer["id"] == 2 and answer["error"]["code"] == -32603
    assert (
        str(control_socket.with_name("control.mcp.sock")) in answer["error"]["message"]
    )


# The tests below share one daemon (`shared_daemon`), marked as shared: a test
# that checks for leftover processes does not count it, whatever the order.


async def test_a_profile_through_attach_and_the_clients_it_serves(
    shared_daemon: tuple[DaemonProcess, Path],
) -> None:
    daemon, control_socket = shared_daemon
    for mode in ("auto", "legacy"):
        params = attach(control_socket, "--profile", "one")
        me = types.Implementation(name=f"editor-{mode}", version="1")
        async with Client(params, mode=mode, client_info=me) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert tools and all(t.startswith("a__") for t in tools)
            assert "a__fail" not in tools
            with pytest.raises(MCPError, match="not in profile 'one'"):
                await client.call_tool("b__echo", {"text": "x"})
            info = daemon.client.request({"cmd": "info"})
            assert isinstance(info, dict)
            attached = info["attached"]
            assert isinstance(attached, list)
            assert [row["profile"] for row in attached] == ["one"]
            # Named as the client says it is, not as its process is called.
            assert [row["client"] for row in attached] == [f"editor-{mode}"]


async def test_a_profile_removed_while_a_client_is_attached_to_it_says_so(
    shared_daemon: tuple[DaemonProcess, Path],
) -> None:
    """A reload drops the profile an attached client uses: it sees nothing
    more, and a call says why (it said "declared at no longer declared")."""
    daemon, control_socket = shared_daemon
    script = anyio.Path(daemon.client.info().config)
    original = await script.read_text()
    await script.write_text(original + 'mcp_profile("two", {servers = {"b"}})\n')
    try:
        await anyio.to_thread.run_sync(daemon.client.reload)
        async with Client(attach(control_socket, "--profile", "two")) as client:
            assert "b__echo" in {t.name for t in (await client.list_tools()).tools}
            await script.write_text(original)
            await anyio.to_thread.run_sync(daemon.client.reload)
            assert (await client.list_tools()).tools == []
            with pytest.raises(MCPError, match="profile 'two' is no longer declared"):
                await client.call_tool("b__echo", {"text": "x"})
    finally:
        await script.write_text(original)
        await anyio.to_thread.run_sync(daemon.client.reload)


async def test_what_an_upstream_asks_goes_to_the_client_that_called(
    shared_daemon: tuple[DaemonProcess, Path],
) -> None:
    _, control_socket = shared_daemon

    def answering(text: str) -> Any:
        async def sampling(
            context: Any, params: types.CreateMessageRequestParams
        ) -> types.CreateMessageResult:
            return types.CreateMessageResult(
                role="assistant",
                content=types.TextContent(type="text", text=text),
                model="test",
            )

        return sampling

    for mode in ("auto", "legacy"):
        async with (
            Client(
                attach(control_socket),
                mode=mode,
                sampling_callback=answering("from A"),
            ) as first,
            Client(
                attach(control_socket),
                mode=mode,
                sampling_callback=answering("from B"),
            ) as second,
        ):
            a = await first.call_tool("a__sample", {"prompt": "hi"})
            b = await second.call_tool("b__sample", {"prompt": "hi"})
            assert "from A" in _text(a) and "from B" in _text(b)


def test_attach_to_an_unknown_profile_names_the_declared_ones(
    shared_daemon: tuple[DaemonProcess, Path],
) -> None:
    _, control_socket = shared_daemon
    done = subprocess.run(
        [sys.executable, "-m", "manager", "attach"]
        + ["--socket", str(control_socket), "--profile", "nope"],
        input=b"",
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == 2 and done.stdout == b""
    message = done.stderr.decode()
    assert "no profile named 'nope'" in message and "one" in message


def test_attach_start_twice_at_once_starts_one_daemon(
    tmp_path: Path, control_socket: Path
) -> None:
    script = tmp_path / "startup.lua"
    script.write_text("-- nothing declared\n")
    start = [sys.executable, "-m", "manager", "attach", "--start"]
    start += ["--config", str(script), "--socket", str(control_socket)]
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode() + b"\n"
    editors = [
        subprocess.Popen(start, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for _ in range(2)
    ]

    def started() -> list[psutil.Process]:
        """The daemons `attach --start` started on this test's socket (they
        outlive the attach that started them: their own session)."""
        return [
            p
            for p in psutil.process_iter(["cmdline"])
            if "run" in (p.info["cmdline"] or [])
            and str(control_socket) in (p.info["cmdline"] or [])
        ]

    try:
        for editor in editors:
            out, _ = editor.communicate(ping, timeout=60)
            assert editor.returncode == 0
            assert json.loads(out.splitlines()[0])["id"] == 1
        from manager.control.client import ControlClient

        daemon_pid = ControlClient(control_socket).info().pid
        assert daemon_pid is not None
        assert [p.pid for p in started()] == [daemon_pid]  # one, not two
    finally:
        for editor in editors:
            if editor.poll() is None:
                editor.kill()
                editor.wait()
        for daemon in started():  # every one, even when the test failed
            with contextlib.suppress(psutil.NoSuchProcess):
                daemon.send_signal(signal.SIGTERM)
                daemon.wait(timeout=20)


async def test_two_attached_clients_asked_at_once_each_get_their_own_question(
    shared_daemon: tuple[DaemonProcess, Path],
) -> None:
    """Each attach connection is a session of its own (not one "stdio" peer
    for all): questions of a stdio upstream never cross between handshake-era
    clients (2026-07-28 requests are told apart one by one anyway)."""
    _, control_socket = shared_daemon
    got: dict[str, list[str]] = {}

    async def client(name: str) -> None:
        params = attach(control_socket)
        async with Client(
            params, mode="legacy", elicitation_callback=accepting(name)
        ) as session:

            async def call() -> None:
                asked = await session.call_tool("a__ask_user", {"message": name})
                got.setdefault(name, []).append(_text(asked))

            async with anyio.create_task_group() as tg:
                for _ in range(10):
                    tg.start_soon(call)

    with anyio.fail_after(60):
        # Turns begin once the server has asked a question: one ask first.
        params = attach(control_socket)
        async with Client(params, elicitation_callback=accepting("x")) as first:
            await first.call_tool("a__ask_user", {"message": "warm-up"})
        async with anyio.create_task_group() as tg:
            tg.start_soon(client, "one")
            tg.start_soon(client, "two")
    assert got == {
        name: [f'accept: {{"answer": "{name}"}}'] * 10 for name in ("one", "two")
    }


async def test_a_2026_clients_own_calls_overlap_at_a_handshake_server_that_asks(
    shared_daemon: tuple[DaemonProcess, Path],
) -> None:
    """A 2026-07-28 request names no session, but an attach connection is one
    client: its calls at a handshake-era stdio server that asks are one
    client's, so they overlap as they would straight (before: each request
    counted as a client of its own; the first question was refused, the
    rest took turns). The four questions are open at once, each answered
    with its own message, whichever call's round carried it."""
    _, control_socket = shared_daemon
    calls = 4
    asked: list[str] = []
    all_asked = anyio.Event()

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        if len(asked) == calls:
            all_asked.set()
        await all_asked.wait()  # every call is in flight and asking
        return types.ElicitResult(action="accept", content={"answer": params.message})

    got: dict[str, str] = {}
    with anyio.fail_after(60):
        async with Client(attach(control_socket), elicitation_callback=answer) as me:
            assert me.protocol_version == "2026-07-28"

            async def call(n: int) -> None:
                asked_for = f"question {n}"
                result = await me.call_tool("old__ask_user", {"message": asked_for})
                got[asked_for] = _text(result)

            async with anyio.create_task_group() as tg:
                for n in range(calls):
                    tg.start_soon(call, n)
    assert got == {
        f"question {n}": f'accept: {{"answer": "question {n}"}}' for n in range(calls)
    }


@contextlib.asynccontextmanager
async def attach_only(control: Path) -> AsyncIterator[tuple[Any, Path, str]]:
    """A gateway serving only the attach socket beside `control`, with the
    key a control socket there would have written: (gateway, socket, key)."""
    from manager.control.keys import write_key
    from manager.engine.bus import EventBus
    from manager.engine.manager import Manager
    from manager.gateway import Gateway

    path = control.with_name("control.mcp.sock")
    key, _ = write_key(control)
    async with Manager(EventBus()) as manager:
        gateway = Gateway(manager, EventBus())
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: gateway.serve(None, attach=(path, key)))
            with anyio.fail_after(10):
                while not path.exists():  # noqa: ASYNC110 - a socket file, no event
                    await anyio.sleep(0.01)
            yield gateway, path, key
            tg.cancel_scope.cancel()


async def test_what_is_kept_for_an_attached_client_goes_when_it_leaves(
    tmp_path: Path, control_socket: Path
) -> None:
    """Each attach connection is a session of its own: once it ends, the
    gateway keeps nothing of it (its list_changed peer, log level,
    subscriptions), however many editor windows come and go."""
    async with attach_only(control_socket) as (gateway, _, _):
        for _ in range(3):
            async with Client(attach(control_socket), mode="legacy") as client:
                await client.list_tools()
                assert gateway.sessions == 1  # this client only
            with anyio.fail_after(10):
                while gateway.sessions:  # noqa: ASYNC110 - forgotten as it ends
                    await anyio.sleep(0.01)


async def test_an_attach_greeting_without_the_key_is_refused(
    control_socket: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The attach socket asks what the control socket asks (`control.keys`):
    a confined server that cannot read the key cannot attach either."""
    caplog.set_level(logging.WARNING, logger="manager.gateway")

    def greet(path: Path, extra: dict[str, str]) -> object:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(str(path))
            greeting = {"attach": 1, "client": "probe", **extra}
            sock.sendall(json.dumps(greeting).encode() + b"\n")
            return json.loads(sock.makefile("rb").readline())

    async with attach_only(control_socket) as (_, path, key):
        for extra in ({}, {"key": "guess"}):
            answer = await anyio.to_thread.run_sync(greet, path, extra)
            assert answer == {
                "error": "refused: the greeting does not carry the daemon's key"
            }
        assert await anyio.to_thread.run_sync(greet, path, {"key": key}) == {"ok": True}
    assert f"attach: refused pid {os.getpid()} (" in caplog.text


def test_client_config_refuses_a_profile_the_daemon_does_not_serve(
    shared_daemon: tuple[DaemonProcess, Path],
) -> None:
    _, control_socket = shared_daemon

    def client_config(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "manager", "client-config", "cursor"]
            + ["--socket", str(control_socket), *args],
            capture_output=True,
            text=True,
            timeout=30,
        )

    wrong = client_config("--profile", "nope")
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert "no profile named 'nope' (profiles: one)" in wrong.stderr
    right = client_config("--profile", "one")
    assert right.returncode == 0
    assert json.loads(right.stdout)["mcpServers"]["mcp-manager"]["args"][-2:] == [
        "--profile",
        "one",
    ]
