"""The control API over a real Unix socket, with a fake daemon behind it."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import socket
import stat
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from support.control import keyed, keyed_line

from manager.cli import main
from manager.control import client as client_module
from manager.control import paths
from manager.control.client import ControlClient
from manager.control.paths import find_socket, prepare_socket_dir, socket_path
from manager.control.protocol import IDLE_TIMEOUT, MAX_REQUEST_BYTES
from manager.control.server import serve_control
from manager.core.errors import (
    CallError,
    CallTimeout,
    ConfigError,
    ControlError,
    ServerUnavailable,
    UnknownServer,
)
from manager.core.events import (
    ApprovalAsked,
    Connected,
    Connecting,
    Event,
    Removed,
    ToolChanged,
)
from manager.core.info import DaemonInfo
from manager.core.login import CallbackReply, LoginResult, LoginStart, LogoutReply
from manager.core.replies import (
    ApproveReply,
    CallLogReply,
    CatalogRow,
    ConnectionDetails,
    Pong,
    ReconnectReply,
    ReloadSummary,
    TokenReply,
    UpdateReply,
)
from manager.core.status import ConnectionStatus
from manager.engine.bus import EventBus, Subscription


class TrackedSubscription(Subscription):
    """A subscription that tells the test when the server closed it."""

    def __init__(self, bus: EventBus, name: str, maxlen: int) -> None:
        super().__init__(bus, name, maxlen)
        self.closed = anyio.Event()

    def close(self) -> None:
        super().close()
        self.closed.set()


class FakeBackend:
    """A daemon stand-in: canned status, a real bus, scripted calls and reloads."""

    def __init__(self) -> None:
        self.bus = EventBus()
        self.subs: list[TrackedSubscription] = []
        self.logins: list[tuple[str, str, object]] = []
        self.subscribed = anyio.Event()
        self.calls: list[tuple[str, str, dict[str, object], float | None]] = []
        self.reload_error: ConfigError | None = None
        self.go_on = threading.Event()  # lets the "waits" calls answer
        self.withdrawn = anyio.Event()  # a "held" call was cancelled

    def status(self) -> list[ConnectionStatus]:
        return [
            ConnectionStatus("fs", state="connected", attempt=1, tools=3),
            ConnectionStatus("web", state="reconnecting", attempt=4, tools=0),
        ]

    def subscribe(self, name: str, since: int | None = None) -> Subscription:
        sub = self.bus.subscribe(name, 1000, kind=TrackedSubscription, since=since)
        assert isinstance(sub, TrackedSubscription)
        self.subs.append(sub)
        self.subscribed.set()
        return sub

    def info(self) -> DaemonInfo:
        return DaemonInfo(config="startup.lua", dropped={"hud": 3})

    def reconnect(self, server: str) -> ReconnectReply:
        if server != "web":
            raise UnknownServer(f"no connection named {server!r}")
        return ReconnectReply(server=server, retrying=True, state="reconnecting")

    def details(self, server: str) -> ConnectionDetails:
        if server != "fs":
            raise UnknownServer(f"no connection named {server!r}")
        return ConnectionDetails(
            spec={"name": "fs", "env": {"TOKEN": "***"}},
            stderr=("starting", "ready"),
            tools=("read", "write"),
        )

    async def reload(self) -> ReloadSummary:
        if self.reload_error is not None:
            raise self.reload_error
        return ReloadSummary(file="startup.lua", added=("b",), unchanged=1)

    async def call(
        self,
        server: str,
        tool: str,
        args: dict[str, object],
        timeout: float | None,  # noqa: ASYNC109 - mirrors ControlBackend
        answer: dict[str, object] | None = None,
    ) -> dict[str, object]:
        self.calls.append((server, tool, args, timeout))
        if server == "down":
            raise ServerUnavailable("down is reconnecting (attempt 3, next in 1.6 s)")
        if server == "slow":
            raise CallTimeout("no result from slow within 1 s")
        if server == "buggy":
            raise RuntimeError("hunter2 leaked in a bug")
        if server == "held":  # for an approval that never comes
            try:
                await anyio.sleep_forever()
            finally:
                self.withdrawn.set()
        if server == "waits":  # for a person's approval, say
            await anyio.to_thread.run_sync(self.go_on.wait, 10.0)
            server = "fs"
        if server != "fs":
            raise UnknownServer(f"no connection named {server!r}")
        text = json.dumps(args, sort_keys=True)
        return {"content": [{"type": "text", "text": text}], "isError": tool == "fail"}

    async def request(
        self,
        server: str,
        op: str,
        target: str,
        args: dict[str, object],
        timeout: float | None,  # noqa: ASYNC109 - mirrors ControlBackend
    ) -> dict[str, object]:
        if server != "fs":
            raise UnknownServer(f"no connection named {server!r}")
        return {"op": op, "target": target, "args": args, "timeout": timeout}

    def catalog(self, kind: str, server: str | None) -> list[CatalogRow]:
        return [CatalogRow(kind, server=server or "fs", name=f"one of the {kind}")]

    async def login(
        self,
        server: str,
        timeout: float,  # noqa: ASYNC109
        device: bool = False,
    ) -> LoginStart:
        self.logins.append(("login", server, timeout))
        if device:
            self.logins.append(("device", server, timeout))
            return LoginStart(
                server=server,
                state="needs_login",
                url="https://auth.example/device",
                user_code="WDJB-MJHT",
                url_complete="https://auth.example/device?user_code=WDJB-MJHT",
            )
        return LoginStart(
            server=server,
            state="needs_login",
            url="https://auth.example/authorize?x=1",
            redirect_uri="http://127.0.0.1:33418/callback",
        )

    async def login_wait(self, server: str, timeout: float) -> LoginResult:  # noqa: ASYNC109
        self.logins.append(("login_wait", server, timeout))
        return LoginResult(server=server, done=True, connected=True, state="connected")

    def login_callback(self, server: str, url: str) -> CallbackReply:
        self.logins.append(("login_callback", server, url))
        return CallbackReply(server=server, message="Logged in.")

    def logout(self, server: str) -> LogoutReply:
        self.logins.append(("logout", server, None))
        return LogoutReply(server=server, forgot=True)

    async def update(self, server: str, take: bool, version: str) -> UpdateReply:
        if server != "srv":
            raise UnknownServer(f"no connection named {server!r}")
        if take and version != "1.1.0":
            raise ControlError("srv: the registry now offers 1.1.0, not " + version)
        return UpdateReply(
            server=server,
            package="pkg",
            locked="1.1.0" if take else "1.0.0",
            available="" if take else "1.1.0",
            taken=take,
        )

    def pending(self) -> list[ApprovalAsked]:
        return []

    def decide(
        self, approval: str, verdict: str, scope: str, by: str = "cli"
    ) -> ApprovalAsked:
        raise ControlError(f"no call waits for approval {approval!r}")

    def grants(self) -> list[dict[str, str]]:
        return [{"scope": "always", "server": "web", "tool": "fetch", "client": ""}]

    def revoke(self, server: str, tool: str | None) -> list[dict[str, str]]:
        return [g for g in self.grants() if g["server"] == server]

    def result(self, result_id: str) -> dict[str, object]:
        if result_id != "r1":
            raise CallError(f"no result {result_id!r}")
        return {"content": [{"type": "text", "text": "whole"}], "isError": False}

    def token(self, rotate: bool) -> TokenReply:
        where = "/state/endpoint-token"
        return TokenReply(where, where, rotated=rotate, streams_ended=2 * rotate)

    async def call_log(self) -> CallLogReply:
        return CallLogReply(path="/state/calls.sqlite3", dropped=4)

    def changes(self, server: str | None) -> list[ToolChanged]:
        if server not in (None, "web"):
            raise UnknownServer(f"no connection named {server!r}")
        return [ToolChanged(name="web", item="fetch", diff="-a\n+b", held=True)]

    def approve(self, server: str, items: list[str]) -> ApproveReply:
        if server != "web":
            raise UnknownServer(f"no connection named {server!r} (declared: web)")
        return ApproveReply(server=server, approved=tuple(items) or ("fetch",))


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    """A short private directory under /tmp (AF_UNIX paths are limited)."""
    path = Path(tempfile.mkdtemp(prefix="mm-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@contextlib.asynccontextmanager
async def serving(
    backend: FakeBackend, path: Path, idle_timeout: float = IDLE_TIMEOUT
) -> AsyncIterator[None]:
    async with anyio.create_task_group() as tg:
        await tg.start(
            functools.partial(serve_control, idle_timeout=idle_timeout), backend, path
        )
        yield
        tg.cancel_scope.cancel()


class RawClient:
    """A protocol-level client on the event loop, for malformed input."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.reader = BufferedByteReceiveStream(stream)

    async def send(self, data: bytes) -> None:
        await self.stream.send(data)

    async def line(self) -> dict[str, object]:
        with anyio.fail_after(5):
            raw = await self.reader.receive_until(b"\n", 10_000_000)
        obj = json.loads(raw)
        assert isinstance(obj, dict)
        return obj

    async def ask(self, request: object) -> dict[str, object]:
        await self.send(json.dumps(request).encode() + b"\n")
        return await self.line()

    async def at_eof(self) -> bool:
        with anyio.fail_after(5):
            try:
                await self.reader.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return True
        return False


@contextlib.asynccontextmanager
async def raw_client(path: Path, prove: bool = True) -> AsyncIterator[RawClient]:
    """A raw connection; with `prove`, its first request (a ping) carried
    the key, as the daemon's own clients' do, and was answered."""
    async with await anyio.connect_unix(path) as stream:
        client = RawClient(stream)
        if prove:
            assert (await client.ask(keyed(path, {"cmd": "ping"})))["ok"] is True
        yield client


async def wait_closed(sub: TrackedSubscription) -> None:
    with anyio.fail_after(5):
        await sub.closed.wait()


# ----------------------------------------------------------------- socket path


def test_socket_path_prefers_the_explicit_option(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MCP_MANAGER_SOCKET", "/from/env.sock")
    assert socket_path("/explicit.sock") == Path("/explicit.sock")


def test_socket_path_then_the_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MCP_MANAGER_SOCKET", "/from/env.sock")
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    assert socket_path(None) == Path("/from/env.sock")


def test_socket_path_then_the_xdg_runtime_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_MANAGER_SOCKET", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    assert socket_path(None) == Path("/run/user/1000/mcp-manager/control.sock")


def test_socket_path_falls_back_to_a_per_user_tmp_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("MCP_MANAGER_SOCKET", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(paths, "RUNTIME_BASE", tmp_path / "no-run-user")
    expected = Path(f"/tmp/mcp-manager-{os.getuid()}/control.sock")
    assert socket_path(None) == expected


def test_without_xdg_runtime_dir_the_user_s_runtime_directory_is_taken(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What a client that spawns `attach` leaves out (XDG_RUNTIME_DIR) does
    not move the socket: /run/user/UID is where a login shell's daemon is."""
    monkeypatch.delenv("MCP_MANAGER_SOCKET", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(paths, "RUNTIME_BASE", tmp_path)
    runtime = tmp_path / str(os.getuid())
    runtime.mkdir(mode=0o700)
    expected = runtime / "mcp-manager" / "control.sock"
    assert socket_path(None) == expected
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert socket_path(None) == expected  # the same place, asked either way


def test_a_client_finds_a_daemon_at_another_default_place(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A daemon started where XDG_RUNTIME_DIR was unset (and the system has
    no runtime directory for us) is found by a client whose XDG_RUNTIME_DIR
    names one; a choice made by option or by MCP_MANAGER_SOCKET is kept."""
    monkeypatch.delenv("MCP_MANAGER_SOCKET", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(paths, "RUNTIME_BASE", tmp_path / "no-run-user")
    monkeypatch.setattr(paths, "TMP_BASE", tmp_path)  # not a real daemon's
    placed = socket_path(None)
    prepare_socket_dir(placed.parent)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    assert socket_path(None) != placed
    assert find_socket(None) == socket_path(None)  # nothing listens yet
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(placed))
        assert find_socket(None) == placed  # found all the same
        assert find_socket("/explicit.sock") == Path("/explicit.sock")
        monkeypatch.setenv("MCP_MANAGER_SOCKET", "/from/env.sock")
        assert find_socket(None) == Path("/from/env.sock")  # chosen: no search


# ------------------------------------------------------------------ directory


def test_prepare_socket_dir_creates_a_private_directory(sock_dir: Path) -> None:
    target = sock_dir / "a" / "mcp-manager"
    prepare_socket_dir(target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o700


def test_prepare_socket_dir_refuses_a_group_readable_directory(sock_dir: Path) -> None:
    os.chmod(sock_dir, 0o750)
    with pytest.raises(ControlError, match=r"accessible to other users \(mode 0750\)"):
        prepare_socket_dir(sock_dir)


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")
def test_prepare_socket_dir_refuses_a_directory_owned_by_someone_else(
    sock_dir: Path,
) -> None:
    other = sock_dir / "other"
    other.mkdir(mode=0o700)
    os.chown(other, 65534, 65534)
    with pytest.raises(ControlError, match="owned by uid 65534"):
        prepare_socket_dir(other)


def test_client_refuses_to_talk_through_an_open_directory(sock_dir: Path) -> None:
    os.chmod(sock_dir, 0o777)
    with pytest.raises(ControlError, match="accessible to other users"):
        ControlClient(sock_dir / "control.sock").ping()


def test_client_reports_a_missing_daemon_in_one_clear_sentence(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    with pytest.raises(ControlError) as info:
        ControlClient(path).status()
    message = str(info.value)
    assert message.startswith(f"cannot reach the mcp-manager daemon at {path}: ")
    assert "is `mcp-manager run` running?" in message
    assert "\n" not in message


def test_client_reports_a_stale_socket_as_refused(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(path))  # bound, never listening: the file stays behind
    with pytest.raises(ControlError, match="connection refused"):
        ControlClient(path).ping()


# ---------------------------------------------------------------- server life


@pytest.mark.anyio
async def test_server_socket_is_private_and_removed_on_exit(sock_dir: Path) -> None:
    path = sock_dir / "run" / "control.sock"
    async with serving(FakeBackend(), path):
        assert stat.S_ISSOCK(path.lstat().st_mode)
        assert stat.S_IMODE(path.lstat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not path.exists()


@pytest.mark.anyio
async def test_server_replaces_a_stale_socket_file(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(path))
    async with serving(FakeBackend(), path):
        result = await anyio.to_thread.run_sync(ControlClient(path).ping)
    assert result == Pong(pid=os.getpid())


@pytest.mark.anyio
async def test_server_refuses_to_start_over_a_live_daemon(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    async with serving(FakeBackend(), path):
        with pytest.raises(
            ControlError, match="another mcp-manager is already running"
        ):
            await serve_control(FakeBackend(), path)
        # The first daemon is untouched.
        assert await anyio.to_thread.run_sync(ControlClient(path).ping)
    assert not path.exists()


@pytest.mark.anyio
async def test_server_refuses_a_path_that_is_not_a_socket(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    path.write_text("precious")
    with pytest.raises(ControlError, match="exists and is not a socket"):
        await serve_control(FakeBackend(), path)
    assert path.read_text() == "precious"


# ------------------------------------------------------------------- commands


@pytest.mark.anyio
async def test_status_returns_one_typed_status_per_connection(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    backend = FakeBackend()
    async with serving(backend, path):
        result = await anyio.to_thread.run_sync(ControlClient(path).status)
    assert result == backend.status()
    assert [(s.name, s.state, s.attempt) for s in result] == [
        ("fs", "connected", 1),
        ("web", "reconnecting", 4),
    ]


@pytest.mark.anyio
async def test_info_and_reconnect_reach_the_backend(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    client = ControlClient(path)
    async with serving(FakeBackend(), path):
        info = await anyio.to_thread.run_sync(client.info)
        retried = await anyio.to_thread.run_sync(lambda: client.reconnect("web"))
        with pytest.raises(UnknownServer, match="'nope'"):
            await anyio.to_thread.run_sync(lambda: client.reconnect("nope"))
    assert info == DaemonInfo(config="startup.lua", dropped={"hud": 3})
    assert retried == ReconnectReply(server="web", retrying=True, state="reconnecting")


@pytest.mark.anyio
async def test_details_returns_spec_stderr_and_tools(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    client = ControlClient(path)
    async with serving(FakeBackend(), path):
        details = await anyio.to_thread.run_sync(lambda: client.details("fs"))
        with pytest.raises(UnknownServer, match="'nope'"):
            await anyio.to_thread.run_sync(lambda: client.details("nope"))
        async with raw_client(path) as raw:
            bad = await raw.ask({"cmd": "details"})
            extra = await raw.ask({"cmd": "details", "server": "fs", "x": 1})
    assert details == ConnectionDetails(
        spec={"name": "fs", "env": {"TOKEN": "***"}},
        stderr=("starting", "ready"),
        tools=("read", "write"),
    )
    assert bad["error"] == {
        "type": "ControlError",
        "message": 'details: "server" must be a non-empty string',
    }
    assert extra["error"] == {
        "type": "ControlError",
        "message": "details: unknown argument(s) x",
    }


@pytest.mark.anyio
async def test_call_passes_arguments_and_returns_the_result(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    backend = FakeBackend()
    client = ControlClient(path)
    async with serving(backend, path):
        result = await anyio.to_thread.run_sync(
            lambda: client.call("fs", "echo", {"text": "hi"}, 2.5)
        )
    assert result == {
        "content": [{"type": "text", "text": '{"text": "hi"}'}],
        "isError": False,
    }
    assert backend.calls == [("fs", "echo", {"text": "hi"}, 2.5)]


def test_a_call_without_a_timeout_to_a_stopped_daemon_ends_with_a_clear_error(
    sock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon that takes the connection and never answers (stopped with
    Ctrl-Z or SIGSTOP: the kernel still accepts) fails the call once it does
    not answer a ping either; the call waited for nothing, for ever, before."""
    monkeypatch.setattr(client_module, "ALIVE_EVERY", 0.05)
    monkeypatch.setattr(client_module, "ALIVE_TIMEOUT", 0.2)
    path = sock_dir / "control.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stopped:
        stopped.bind(os.fspath(path))
        stopped.listen(8)  # never accepted, never answered
        outcome: list[BaseException] = []

        def call() -> None:
            try:
                ControlClient(path).call("fs", "echo", {"text": "x"}, None)
            except BaseException as exc:
                outcome.append(exc)

        caller = threading.Thread(target=call, daemon=True)
        caller.start()
        caller.join(20)
        assert not caller.is_alive(), "the call still waits on a stopped daemon"
    (error,) = outcome
    assert isinstance(error, ControlError)
    assert "stopped answering" in str(error) and "SIGSTOP" in str(error)


@pytest.mark.anyio
async def test_a_call_without_a_timeout_waits_as_long_as_the_daemon_answers_pings(
    sock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_module, "ALIVE_EVERY", 0.05)
    monkeypatch.setattr(client_module, "ALIVE_TIMEOUT", 2.0)
    pings = [0]
    real_request = ControlClient.request

    def counted(
        self: ControlClient, request: Mapping[str, object], timeout: float | None
    ) -> object:
        if request.get("cmd") == "ping":
            pings[0] += 1
            if pings[0] == 5:  # checked five times: the call may answer now
                backend.go_on.set()
        return real_request(self, request, timeout)

    monkeypatch.setattr(ControlClient, "request", counted)
    path = sock_dir / "control.sock"
    backend = FakeBackend()
    async with serving(backend, path):
        result = await anyio.to_thread.run_sync(
            lambda: ControlClient(path).call("waits", "echo", {"text": "hi"})
        )
    assert result["content"] == [{"type": "text", "text": '{"text": "hi"}'}]
    assert pings[0] >= 5


@pytest.mark.anyio
async def test_call_returns_a_tool_error_result_as_is(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    client = ControlClient(path)
    async with serving(FakeBackend(), path):
        result = await anyio.to_thread.run_sync(lambda: client.call("fs", "fail"))
    assert result["isError"] is True


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("server", "error", "text"),
    [
        ("down", ServerUnavailable, "down is reconnecting"),
        ("slow", CallTimeout, "within 1 s"),
        ("nope", UnknownServer, "no connection named 'nope'"),
    ],
)
async def test_call_errors_arrive_as_the_same_error_class(
    sock_dir: Path, server: str, error: type[CallError], text: str
) -> None:
    path = sock_dir / "control.sock"
    client = ControlClient(path)
    async with serving(FakeBackend(), path):
        with pytest.raises(error, match=text):
            await anyio.to_thread.run_sync(lambda: client.call(server, "echo"))


@pytest.mark.anyio
async def test_a_backend_bug_is_an_internal_error_without_details(
    sock_dir: Path,
) -> None:
    path = sock_dir / "control.sock"
    client = ControlClient(path)
    async with serving(FakeBackend(), path):
        with pytest.raises(ControlError) as info:
            await anyio.to_thread.run_sync(lambda: client.call("buggy", "x"))
        assert await anyio.to_thread.run_sync(client.ping)  # still serving
    assert "internal error (RuntimeError)" in str(info.value)
    assert "hunter2" not in str(info.value)


@pytest.mark.anyio
async def test_reload_returns_the_summary(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    async with serving(FakeBackend(), path):
        result = await anyio.to_thread.run_sync(ControlClient(path).reload)
    assert result == ReloadSummary(file="startup.lua", added=("b",), unchanged=1)


@pytest.mark.anyio
async def test_reload_config_error_keeps_file_and_line(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    backend = FakeBackend()
    backend.reload_error = ConfigError(
        "unknown option 'hold_on'", file="startup.lua", line=7, connection="fs"
    )
    async with serving(backend, path):
        with pytest.raises(ConfigError) as info:
            await anyio.to_thread.run_sync(ControlClient(path).reload)
    err = info.value
    assert (err.file, err.line, err.connection) == ("startup.lua", 7, "fs")
    assert str(err) == "startup.lua:7: unknown option 'hold_on'"


WIRE: list[tuple[dict[str, object], object]] = [
    ({"cmd": "ping"}, {"pid": os.getpid()}),
    (
        {"cmd": "info"},
        {
            "version": "",
            "pid": None,
            "config": "startup.lua",
            "last_reload": None,
            "watching": False,
            "dropped": {"hud": 3},
            "connections": 0,
            "otlp": "off",
            "starts": {"slots": 0, "starting": 0, "waiting": 0},
            "listener_errors": {},
            "guardian": None,
            "profiles": [],
            "attached": [],
            "endpoint": None,
            "endpoint_token": None,
        },
    ),
    (
        {"cmd": "reconnect", "server": "web"},
        {"server": "web", "retrying": True, "state": "reconnecting"},
    ),
    (
        {"cmd": "details", "server": "fs"},
        {
            "spec": {"name": "fs", "env": {"TOKEN": "***"}},
            "stderr": ["starting", "ready"],
            "tools": ["read", "write"],
            "calls": [],
            "beside": "",
        },
    ),
    (
        {"cmd": "reload"},
        {
            "file": "startup.lua",
            "added": ["b"],
            "removed": [],
            "changed": [],
            "unchanged": 1,
            "connections": 0,
        },
    ),
    (
        {"cmd": "catalog", "kind": "prompts", "server": "web"},
        [
            {
                "server": "web",
                "name": "one of the prompts",
                "exposed": None,
                "hidden": False,
                "held": False,
                "description": "",
            }
        ],
    ),
    (
        {"cmd": "login", "server": "api", "timeout": 30},
        {
            "server": "api",
            "done": False,
            "connected": False,
            "state": "needs_login",
            "error": None,
            "unsupported": False,
            "url": "https://auth.example/authorize?x=1",
            "redirect_uri": "http://127.0.0.1:33418/callback",
            "user_code": None,
            "url_complete": None,
        },
    ),
    (
        {"cmd": "login", "server": "api", "timeout": 30, "device": True},
        {
            "server": "api",
            "done": False,
            "connected": False,
            "state": "needs_login",
            "error": None,
            "unsupported": False,
            "url": "https://auth.example/device",
            "redirect_uri": None,
            "user_code": "WDJB-MJHT",
            "url_complete": "https://auth.example/device?user_code=WDJB-MJHT",
        },
    ),
    (
        {"cmd": "login_wait", "server": "api", "timeout": 30},
        {
            "server": "api",
            "done": True,
            "connected": True,
            "state": "connected",
            "error": None,
            "unsupported": False,
        },
    ),
    (
        {"cmd": "login_callback", "server": "api", "url": "http://x/cb?code=1"},
        {"server": "api", "message": "Logged in."},
    ),
    ({"cmd": "logout", "server": "api"}, {"server": "api", "forgot": True}),
    (
        {"cmd": "result", "id": "r1"},
        {"content": [{"type": "text", "text": "whole"}], "isError": False},
    ),
    (
        {"cmd": "token", "rotate": True},
        {
            "source": "/state/endpoint-token",
            "path": "/state/endpoint-token",
            "rotated": True,
            "streams_ended": 2,
        },
    ),
    ({"cmd": "call_log"}, {"path": "/state/calls.sqlite3", "dropped": 4}),
    (
        {"cmd": "grants"},
        [{"scope": "always", "server": "web", "tool": "fetch", "client": ""}],
    ),
    (
        {"cmd": "revoke", "server": "web", "tool": None},
        [{"scope": "always", "server": "web", "tool": "fetch", "client": ""}],
    ),
]
"""Each command's answer on the wire, key for key and in order (a client of
another version reads these)."""


def _ordered(value: object) -> object:
    """`value` with each object as its list of items, so order counts."""
    if isinstance(value, dict):
        return [(k, _ordered(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_ordered(v) for v in value]
    return value


@pytest.mark.anyio
async def test_each_typed_reply_keeps_its_wire_form(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    async with serving(FakeBackend(), path), raw_client(path) as raw:
        for request, expected in WIRE:
            answer = await raw.ask(request)
            assert answer["ok"] is True, answer
            assert _ordered(answer["result"]) == _ordered(expected), request["cmd"]


@pytest.mark.anyio
async def test_grants_and_revoke_at_the_command_line(
    sock_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = sock_dir / "control.sock"
    sock = ["--socket", str(path)]
    async with serving(FakeBackend(), path):
        code = await anyio.to_thread.run_sync(lambda: main(["grants", *sock]))
        assert code == 0
        out = capsys.readouterr().out
        assert "web.fetch  always" in out and "mcp-manager revoke SERVER" in out
        code = await anyio.to_thread.run_sync(lambda: main(["revoke", "web", *sock]))
        assert (code, capsys.readouterr().out) == (
            0,
            "web.fetch: always approval taken back\n",
        )
        code = await anyio.to_thread.run_sync(lambda: main(["revoke", "fs", *sock]))
        assert code == 2
        assert "nothing was allowed for fs's tools" in capsys.readouterr().err


@pytest.mark.anyio
async def test_the_login_commands_come_back_typed(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    backend = FakeBackend()
    client = ControlClient(path)
    async with serving(backend, path):
        started = await anyio.to_thread.run_sync(lambda: client.login("api", 30))
        device = await anyio.to_thread.run_sync(
            lambda: client.login("api", 30, device=True)
        )
        pasted = await anyio.to_thread.run_sync(
            lambda: client.login_callback("api", "http://x/cb?code=1")
        )
        ended = await anyio.to_thread.run_sync(lambda: client.login_wait("api", 30))
        gone = await anyio.to_thread.run_sync(lambda: client.logout("api"))
    assert started == LoginStart(
        server="api",
        state="needs_login",
        url="https://auth.example/authorize?x=1",
        redirect_uri="http://127.0.0.1:33418/callback",
    )
    assert (device.url, device.user_code, device.redirect_uri) == (
        "https://auth.example/device",
        "WDJB-MJHT",
        None,
    )
    assert pasted == CallbackReply(server="api", message="Logged in.")
    assert ended == LoginResult(
        server="api", done=True, connected=True, state="connected"
    )
    assert gone == LogoutReply(server="api", forgot=True)
    assert [(cmd, server) for cmd, server, _ in backend.logins] == [
        ("login", "api"),
        ("login", "api"),
        ("device", "api"),
        ("login_callback", "api"),
        ("login_wait", "api"),
        ("logout", "api"),
    ]


# --------------------------------------------------------------------- events


@pytest.mark.anyio
async def test_events_stream_in_bus_order(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    backend = FakeBackend()
    client = ControlClient(path)
    received: list[Event] = []

    def follow() -> None:
        for event in client.events():
            received.append(event)
            if isinstance(event, Removed):
                break

    async with serving(backend, path), anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, follow)
        with anyio.fail_after(5):
            await backend.subscribed.wait()
        for attempt in range(1, 51):
            backend.bus.publish(Connecting(name="fs", attempt=attempt))
        backend.bus.publish(Connected(name="fs", attempt=50, tools=3))
        backend.bus.publish(Removed(name="fs"))
    assert [e.seq for e in received] == list(range(1, 53))
    assert received[0] == Connecting(
        name="fs", attempt=1, seq=1, time=received[0].time
    )  # decoded back into its type at the socket edge
    assert received[-2:] == [
        Connected(name="fs", attempt=50, tools=3, seq=51, time=received[-2].time),
        Removed(name="fs", seq=52, time=received[-1].time),
    ]
    await wait_closed(backend.subs[0])  # the client left: subscription closed


@pytest.mark.anyio
async def test_events_since_replay_what_came_before_the_client(
    sock_dir: Path,
) -> None:
    path = sock_dir / "control.sock"
    backend = FakeBackend()
    for attempt in (1, 2, 3):
        backend.bus.publish(Connecting(name="fs", attempt=attempt))
    async with serving(backend, path), raw_client(path) as client:
        assert await client.ask({"cmd": "events", "since": 1}) == {
            "ok": True,
            "result": "streaming",
        }
        backend.bus.publish(Removed(name="fs"))
        assert [(await client.line())["seq"] for _ in range(3)] == [2, 3, 4]
    for since in (-1, "0", True, 1.5):
        async with serving(backend, path), raw_client(path) as client:
            reply = await client.ask({"cmd": "events", "since": since})
            assert reply == {
                "ok": False,
                "error": {
                    "type": "ControlError",
                    "message": 'events: "since" must be an integer >= 0',
                },
            }


@pytest.mark.anyio
async def test_event_dicts_keep_the_wire_form(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    backend = FakeBackend()
    wire: list[dict[str, object]] = []

    def follow() -> None:  # what `events --json` prints
        for data in ControlClient(path).event_dicts():
            wire.append(data)
            break

    async with serving(backend, path), anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, follow)
        with anyio.fail_after(5):
            await backend.subscribed.wait()
        backend.bus.publish(Connected(name="fs", attempt=2, tools=3))
    assert wire == [
        {
            "seq": 1,
            "time": wire[0]["time"],
            "kind": "connected",
            "name": "fs",
            "attempt": 2,
            "tools": 3,
            "server_name": "",
            "server_version": "",
            "protocol": "",
            "elapsed": 0.0,
            "pid": None,
            "stable_after": 10.0,
        }
    ]
    await wait_closed(backend.subs[0])  # the client left: subscription closed


@pytest.mark.anyio
async def test_subscribe_returns_once_subscribed_and_close_ends_a_waiting_read(
    sock_dir: Path,
) -> None:
    path = sock_dir / "control.sock"
    backend = FakeBackend()
    received: list[Event] = []
    async with serving(backend, path):
        stream = await anyio.to_thread.run_sync(ControlClient(path).subscribe)
        # Subscribed before `subscribe` returned: nothing published now is lost.
        assert len(backend.subs) == 1
        backend.bus.publish(Connecting(name="fs", attempt=1))

        got_one = threading.Event()

        def read() -> None:
            with stream:
                for event in stream:  # blocks until close() below
                    received.append(event)
                    got_one.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, read)
            assert await anyio.to_thread.run_sync(got_one.wait, 5)
            stream.close()  # from another thread than the reader's
        await wait_closed(backend.subs[0])
    assert [e.kind for e in received] == ["connecting"]


@pytest.mark.anyio
async def test_client_leaving_mid_stream_closes_its_subscription(
    sock_dir: Path,
) -> None:
    path = sock_dir / "control.sock"
    backend = FakeBackend()
    async with serving(backend, path):
        async with raw_client(path) as client:
            assert await client.ask({"cmd": "events", "json": True}) == {
                "ok": True,
                "result": "streaming",
            }
            backend.bus.publish(Connecting(name="fs", attempt=1))
            assert (await client.line())["kind"] == "connecting"
        await wait_closed(backend.subs[0])
        # Publishing after the client left is harmless.
        backend.bus.publish(Connecting(name="fs", attempt=2))
        assert await anyio.to_thread.run_sync(ControlClient(path).ping)


@pytest.mark.anyio
async def test_event_stream_ends_when_the_daemon_closes_it(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    backend = FakeBackend()
    async with serving(backend, path), raw_client(path) as client:
        await client.ask({"cmd": "events"})
        backend.subs[0].close()
        assert await client.at_eof()


# ------------------------------------------------------------------ malformed


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"this is not json", "not valid JSON"),
        (b"\xff\xfe{}", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object, got list"),
        (b'{"command": "status"}', 'needs "cmd"'),
        (b'{"cmd": 5}', 'needs "cmd"'),
        (b'{"cmd": "explode"}', "unknown command 'explode'"),
        (b'{"cmd": "status", "verbose": true}', "unknown argument(s) verbose"),
        (b'{"cmd": "call", "server": 1, "tool": "t"}', '"server" must be'),
        (b'{"cmd": "call", "server": "fs", "tool": ""}', '"tool" must be'),
        (b'{"cmd": "call", "server": "fs", "tool": "t", "args": [1]}', '"args" must'),
        (
            b'{"cmd": "call", "server": "fs", "tool": "t", "timeout": -1}',
            '"timeout" must be',
        ),
        (
            b'{"cmd": "call", "server": "fs", "tool": "t", "timeout": true}',
            '"timeout" must be',
        ),
    ],
)
async def test_malformed_requests_get_an_error_and_the_connection_goes_on(
    sock_dir: Path, line: bytes, message: str
) -> None:
    path = sock_dir / "control.sock"
    async with serving(FakeBackend(), path), raw_client(path) as client:
        await client.send(line + b"\n")
        response = await client.line()
        assert response["ok"] is False
        error = response["error"]
        assert isinstance(error, dict)
        assert error["type"] == "ControlError"
        assert message in str(error["message"])
        assert (await client.ask({"cmd": "ping"}))["ok"] is True


@pytest.mark.anyio
@pytest.mark.parametrize("key", [None, "not-the-key"])
async def test_a_client_without_the_daemon_s_key_is_refused_and_named(
    sock_dir: Path, caplog: pytest.LogCaptureFixture, key: str | None
) -> None:
    """The socket is the user's, but a server the daemon confined runs as
    the user too: only a client that can read the key beside the socket
    (`control.keys`) drives the daemon; the log says who tried."""
    path = sock_dir / "control.sock"
    backend = FakeBackend()
    caplog.set_level(logging.WARNING, logger="manager.control")
    request: dict[str, object] = {"cmd": "status"}
    if key is not None:
        request["key"] = key
    async with serving(backend, path), raw_client(path, prove=False) as client:
        answer = await client.ask(request)
        assert answer["ok"] is False
        assert "does not carry the daemon's key" in str(answer["error"])
        assert str(path.with_name("control.key")) in str(answer["error"])
        assert await client.at_eof()  # and nothing more is read from it
        assert (path.with_name("control.key").stat().st_mode & 0o777) == 0o600
    assert f"refused pid {os.getpid()} (" in caplog.text
    assert not path.with_name("control.key").exists()  # gone with the daemon


@pytest.mark.anyio
async def test_several_requests_share_one_connection(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    async with serving(FakeBackend(), path), raw_client(path) as client:
        await client.send(b'{"cmd": "ping"}\n\n{"cmd": "status"}\n')
        assert (await client.line())["result"] == {"pid": os.getpid()}
        status = await client.line()
        assert isinstance(status["result"], list)
        assert len(status["result"]) == 2


@pytest.mark.anyio
async def test_a_last_request_without_newline_is_answered(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    async with serving(FakeBackend(), path), raw_client(path) as client:
        await client.send(b'{"cmd": "ping"}')
        await client.stream.send_eof()
        assert (await client.line())["ok"] is True
        assert await client.at_eof()


@pytest.mark.anyio
async def test_an_overlong_request_is_refused_and_the_client_dropped(
    sock_dir: Path,
) -> None:
    path = sock_dir / "control.sock"
    async with serving(FakeBackend(), path):
        async with raw_client(path) as client:
            await client.send(b"x" * (MAX_REQUEST_BYTES + 100))
            response = await client.line()
            assert "longer than" in str(response["error"])
            assert await client.at_eof()
        assert await anyio.to_thread.run_sync(ControlClient(path).ping)


@pytest.mark.anyio
async def test_an_idle_client_is_dropped(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    async with serving(FakeBackend(), path, 0.05), raw_client(path) as client:
        assert await client.at_eof()


@pytest.mark.anyio
async def test_a_streaming_client_is_not_dropped_for_idling(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    backend = FakeBackend()
    async with serving(backend, path, 0.05), raw_client(path) as client:
        await client.ask({"cmd": "events"})
        # An idle timeout has passed once a client that says nothing is
        # dropped, opened after the streaming one began to idle.
        async with raw_client(path) as idle:
            assert await idle.at_eof()
        backend.bus.publish(Connecting(name="fs", attempt=1))
        assert (await client.line())["kind"] == "connecting"


@pytest.mark.anyio
async def test_requests_and_catalogs_cross_the_socket(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    client = ControlClient(path)
    async with serving(FakeBackend(), path):
        got = await anyio.to_thread.run_sync(
            lambda: client.mcp_request("fs", "prompt", "greet", {"name": "x"}, 2.0)
        )
        assert got == {
            "op": "prompt",
            "target": "greet",
            "args": {"name": "x"},
            "timeout": 2.0,
        }
        rows = await anyio.to_thread.run_sync(lambda: client.catalog("prompts", "web"))
        assert rows == [CatalogRow("prompts", server="web", name="one of the prompts")]
        with pytest.raises(UnknownServer):
            await anyio.to_thread.run_sync(
                lambda: client.mcp_request("nope", "read", "file:///x")
            )
        with pytest.raises(ControlError, match='"op" must be one of'):
            await anyio.to_thread.run_sync(
                lambda: client.request({"cmd": "request", "server": "fs", "op": "x"})
            )


@pytest.mark.anyio
async def test_changes_and_approve_come_back_typed(sock_dir: Path) -> None:
    path = sock_dir / "control.sock"
    client = ControlClient(path)
    async with serving(FakeBackend(), path):
        changes = await anyio.to_thread.run_sync(client.changes)
        approved = await anyio.to_thread.run_sync(lambda: client.approve("web", []))
        with pytest.raises(UnknownServer, match="declared: web"):
            await anyio.to_thread.run_sync(lambda: client.approve("nope", []))
    assert changes == [ToolChanged(name="web", item="fetch", diff="-a\n+b", held=True)]
    assert approved == ApproveReply(server="web", approved=("fetch",))


@pytest.mark.anyio
async def test_update_comes_back_typed_and_bad_requests_say_which_field(
    sock_dir: Path,
) -> None:
    path = sock_dir / "control.sock"
    client = ControlClient(path)
    async with serving(FakeBackend(), path):
        shown = await anyio.to_thread.run_sync(lambda: client.update("srv"))
        taken = await anyio.to_thread.run_sync(
            lambda: client.update("srv", take=True, version="1.1.0")
        )
        with pytest.raises(ControlError, match="now offers 1.1.0, not 1.0.9"):
            await anyio.to_thread.run_sync(
                lambda: client.update("srv", take=True, version="1.0.9")
            )
        with pytest.raises(UnknownServer):
            await anyio.to_thread.run_sync(lambda: client.update("nope"))
        with pytest.raises(ControlError, match='"take" must be true or false'):
            await anyio.to_thread.run_sync(
                lambda: client.request({"cmd": "update", "server": "srv", "take": 1})
            )
    assert shown == UpdateReply(
        server="srv", package="pkg", locked="1.0.0", available="1.1.0"
    )
    assert taken.taken and taken.locked == "1.1.0" and not taken.available


@pytest.mark.anyio
async def test_log_says_how_many_calls_the_daemon_could_not_log(
    sock_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The daemon's log is where its `call_log` reply says (here: none yet)."""
    path = sock_dir / "control.sock"
    async with serving(FakeBackend(), path):
        code = await anyio.to_thread.run_sync(main, ["log", "--socket", str(path)])
    assert code == 0
    out = capsys.readouterr()
    assert out.out == "no calls logged (yet) that match\n"
    assert "could not log 4 calls" in out.err


@pytest.mark.anyio
async def test_a_call_whose_client_left_before_it_was_read_is_not_made(
    sock_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A daemon that reads a request late (it was stopped, or busy) does not
    make the call of a client that has left; a client that only shut its
    writing half still gets its answer."""
    path = sock_dir / "control.sock"
    backend = FakeBackend()
    caplog.set_level(logging.INFO, logger="manager.control")

    def request(text: str) -> dict[str, object]:
        return {"cmd": "call", "server": "fs", "tool": "echo", "args": {"text": text}}

    async with serving(backend, path):
        # No await between these lines: the requests wait in their sockets,
        # one client already gone, as under a daemon that was stopped.
        gone = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        gone.connect(str(path))
        gone.sendall(keyed_line(path, request("late")))
        gone.close()
        half = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        half.connect(str(path))
        half.sendall(keyed_line(path, request("half")))
        half.shutdown(socket.SHUT_WR)
        with half, half.makefile("rb") as reader:
            answer = await anyio.to_thread.run_sync(reader.readline)
        assert json.loads(answer)["ok"] is True
        with anyio.fail_after(5):
            while "not made: call of fs" not in caplog.text:  # noqa: ASYNC110
                await anyio.sleep(0.01)
    assert [args for _, _, args, _ in backend.calls] == [{"text": "half"}]


@pytest.mark.anyio
async def test_a_call_whose_client_leaves_while_it_waits_is_withdrawn(
    sock_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A call waiting for the user's approval whose client was killed (a
    `timeout 3 mcp-manager call ...`) stayed pending, and an `allow` then ran
    a destructive tool nobody waited for (found by an audit): the client's
    hang-up cancels the call."""
    path = sock_dir / "control.sock"
    backend = FakeBackend()
    caplog.set_level(logging.INFO, logger="manager.control")
    call = {"cmd": "call", "server": "held", "tool": "remove_tool", "args": {}}
    async with serving(backend, path):
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(str(path))
        client.sendall(keyed_line(path, call))
        with anyio.fail_after(5):
            while not backend.calls:  # noqa: ASYNC110 - the fake's own record
                await anyio.sleep(0.01)
        client.close()  # killed
        with anyio.fail_after(5):
            await backend.withdrawn.wait()
            said = "call of held cancelled: its client left while it waited"
            while said not in caplog.text:  # noqa: ASYNC110 - logged just after
                await anyio.sleep(0.01)
