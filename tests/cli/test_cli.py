"""The command line: `main([...])` against a control server on a background loop."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio.from_thread
import pytest

from manager import __version__
from manager.cli import main
from manager.control.server import serve_control
from manager.core.errors import (
    CallError,
    CallTimeout,
    ConfigError,
    ServerUnavailable,
    UnknownServer,
)
from manager.core.events import AttemptFailed, Connecting, Event, ToolChanged
from manager.core.info import DaemonInfo
from manager.core.login import CallbackReply, LoginResult, LoginStart, LogoutReply
from manager.core.replies import (
    AlreadyApplied,
    CatalogRow,
    ReconnectReply,
    ReloadSummary,
)
from manager.core.status import ConnectionStatus
from manager.engine.bus import EventBus, Subscription

STATUS: list[dict[str, object]] = [
    {
        "name": "fs",
        "transport": "stdio",
        "state": "connected",
        "attempt": 1,
        "tools": 12,
        "error": None,
        "next_retry_in": None,
        "since": 0.0,
        "pid": 4242,
        "exit_code": None,
    },
    {
        "name": "web",
        "transport": "http",
        "state": "reconnecting",
        "attempt": 41,
        "tools": 0,
        "error": "connection refused\nmore detail",
        "next_retry_in": 2.5,
        "since": 0.0,
        "pid": None,
        "exit_code": None,
    },
]


class FakeBackend:
    """A daemon stand-in living on the portal's event loop."""

    def __init__(self) -> None:
        self.bus = EventBus()
        self.subs: list[Subscription] = []
        self.subscribed = threading.Event()
        self.reload_error: ConfigError | None = None
        self.already_applied: AlreadyApplied | None = None
        self.login_start = LoginStart(
            server="api",
            state="needs_login",
            url="https://auth.example/authorize?x=1",
            redirect_uri="http://127.0.0.1:33418/callback",
        )
        self.login_end = LoginResult(
            server="api", done=True, connected=True, state="connected"
        )
        self.device_asked = False

    def status(self) -> list[ConnectionStatus]:
        return [ConnectionStatus.from_dict(row) for row in STATUS]

    def info(self) -> DaemonInfo:
        return DaemonInfo(config="startup.lua")

    def subscribe(self, name: str, since: int | None = None) -> Subscription:
        sub = self.bus.subscribe(name, since=since)
        self.subs.append(sub)
        self.subscribed.set()
        return sub

    def end_streams(self) -> None:
        for sub in self.subs:
            sub.close()

    def reconnect(self, server: str) -> ReconnectReply:
        if server not in ("fs", "web"):
            raise UnknownServer(f"no connection named {server!r}")
        state = "reconnecting" if server == "web" else "connected"
        return ReconnectReply(server=server, retrying=server == "web", state=state)

    async def reload(self) -> ReloadSummary:
        if self.reload_error is not None:
            raise self.reload_error
        if self.already_applied is not None:
            return ReloadSummary(
                file="startup.lua",
                unchanged=4,
                connections=4,
                already_applied=self.already_applied,
            )
        return ReloadSummary(
            file="startup.lua",
            added=("new",),
            changed=("fs",),
            unchanged=3,
            connections=5,
        )

    def changes(self, server: str | None) -> list[ToolChanged]:
        return [
            ToolChanged(
                name="web",
                item="fetch",
                change="changed",
                diff="-a\n+b",
                suspicious="asks the model to hide something",
            )
        ]

    def catalog(self, kind: str, server: str | None) -> list[CatalogRow]:
        rows = {
            "tools": [
                CatalogRow(
                    "tools",
                    server="fs",
                    name="read_file",
                    exposed="fs__read_file",
                    description="Read a file.",
                    input_schema={"type": "object"},
                ),
                CatalogRow("tools", server="fs", name="rm", hidden=True),
            ],
            "prompts": [],
            "resources": [
                CatalogRow(
                    "resources", server="fs", name="file:///a", exposed="file:///a"
                ),
                CatalogRow(
                    "resources",
                    server="fs",
                    name="file:///{path}",
                    exposed="file:///{path}",
                    template=True,
                ),
            ],
        }[kind]
        return [row for row in rows if server is None or row.server == server]

    async def login(
        self,
        server: str,
        timeout: float,  # noqa: ASYNC109
        device: bool = False,
    ) -> LoginStart:
        self.device_asked = device
        if server == "nosuch":
            raise UnknownServer("no connection named 'nosuch' (declared: api, web)")
        return self.login_start

    def login_callback(self, server: str, url: str) -> CallbackReply:
        raise CallError(f"{server}: the state does not match this login")

    async def login_wait(self, server: str, timeout: float) -> LoginResult:  # noqa: ASYNC109
        return self.login_end

    def logout(self, server: str) -> LogoutReply:
        if server == "nosuch":
            raise UnknownServer("no connection named 'nosuch' (declared: api, web)")
        return LogoutReply(server=server, forgot=server == "api")

    async def call(
        self,
        server: str,
        tool: str,
        args: dict[str, object],
        timeout: float | None,  # noqa: ASYNC109 - mirrors ControlBackend
        answer: dict[str, object] | None = None,
    ) -> dict[str, object]:
        if server == "down":
            raise ServerUnavailable(
                "down is reconnecting (attempt 3, next try in 1.6 s)"
            )
        if server == "slow":
            raise CallTimeout(f"no result within {timeout} s")
        if server != "fs":
            raise UnknownServer(f"no connection named {server!r} (declared: fs)")
        text = json.dumps({"tool": tool, "args": args, "timeout": timeout})
        return {"content": [{"type": "text", "text": text}], "isError": tool == "fail"}


@dataclass
class Daemon:
    backend: FakeBackend
    socket: str
    portal: anyio.from_thread.BlockingPortal

    def publish(self, event: Event) -> None:
        self.portal.call(self.backend.bus.publish, event)


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="mm-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def daemon(sock_dir: Path) -> Iterator[Daemon]:
    backend = FakeBackend()
    path = sock_dir / "control.sock"
    with anyio.from_thread.start_blocking_portal("asyncio") as portal:
        future, _ = portal.start_task(serve_control, backend, path)
        yield Daemon(backend, str(path), portal)
        future.cancel()


def stderr_line(err: str) -> str:
    assert err.endswith("\n")
    assert err.count("\n") == 1, err
    return err.rstrip("\n")


# ---------------------------------------------------------------------- status


def test_status_prints_an_aligned_table(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--socket", daemon.socket]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6
    header, rule, web, fs, config, facts = lines  # trouble first
    assert header.split() == [
        "NAME",
        "STATE",
        "TRANSPORT",
        "ATTEMPT",
        "RETRY",
        "TOOLS",
        "FOR",
        "PID",
        "EXIT",
        "LAST",
        "ERROR",
    ]
    assert set(rule) == {"─"}
    assert web.split()[:6] == ["web", "↻", "reconnecting", "http", "41", "2.5s"]
    assert web.endswith("connection refused")  # first line of the error only
    assert fs.split()[:6] == ["fs", "●", "connected", "stdio", "1", "12"]
    assert fs.endswith("4242")  # no trailing blanks in a pipe
    assert header.index("STATE") == fs.index("●") == web.index("↻")
    assert config == "config startup.lua"
    assert facts.endswith("2 connections: ● 1 connected  ↻ 1 reconnecting")


def test_status_json_is_the_daemons_array(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--socket", daemon.socket, "status", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    # Every field the daemon sent, as sent (the rest at their typed defaults).
    assert [
        {k: row[k] for k in sent} for row, sent in zip(rows, STATUS, strict=True)
    ] == STATUS
    assert rows == [ConnectionStatus.from_dict(sent).to_dict() for sent in STATUS]


def test_socket_comes_from_the_environment_too(
    daemon: Daemon,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MCP_MANAGER_SOCKET", daemon.socket)
    assert main(["status", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["status"],
        ["events"],
        ["reload"],
        ["call", "fs", "echo"],
    ],
)
def test_an_unreachable_daemon_is_one_line_and_exit_2(
    argv: list[str], sock_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = sock_dir / "nobody.sock"
    assert main([*argv, "--socket", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    line = stderr_line(err)
    assert line.startswith(
        f"mcp-manager: cannot reach the mcp-manager daemon at {path}"
    )


def test_client_commands_do_not_import_heavy_libraries(sock_dir: Path) -> None:
    code = (
        "import json, sys\n"
        "from manager.cli import main\n"
        f"rc = main(['status', '--socket', {str(sock_dir / 'x.sock')!r}])\n"
        "heavy = {'mcp', 'lupa', 'textual', 'opentelemetry', 'rich', 'anyio',\n"
        "         'manager.core.events'}\n"  # 18 dataclasses: `events` only
        "names = {m.split('.')[0] for m in sys.modules} | set(sys.modules)\n"
        "loaded = sorted(names & heavy)\n"
        "print(json.dumps([rc, loaded]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30
    )
    assert json.loads(proc.stdout) == [2, []], proc.stderr


def test_status_json_prints_the_daemon_s_rows_without_the_dataclasses_import(
    daemon: Daemon,
) -> None:
    """`status --json` is the command scripts run every few seconds: it prints
    the rows the daemon sent, and pays for no `dataclasses` (`inspect`, `ast`,
    `dis`: a third of its CPU over a bare interpreter) and no `typing`
    (~4 ms)."""
    code = (
        "import json, sys\n"
        "from manager.cli import main\n"
        f"rc = main(['status', '--json', '--socket', {daemon.socket!r}])\n"
        "heavy = [m for m in ('dataclasses', 'typing') if m in sys.modules]\n"
        "print(json.dumps([rc, heavy]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30
    )
    rows_end = proc.stdout.rindex("]\n[")  # the rows, then the probe's line
    rows = json.loads(proc.stdout[: rows_end + 1])
    assert json.loads(proc.stdout[rows_end + 2 :]) == [0, []], proc.stderr
    assert rows == [status.to_dict() for status in daemon.backend.status()]


def test_tools_changed_says_each_change_and_what_was_suspicious_once(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    """The finding was printed twice: in the change's line and again below."""
    assert main(["tools", "--changed", "--socket", daemon.socket]) == 1
    out = capsys.readouterr().out
    assert out.count("asks the model to hide something") == 1
    assert "web: tool 'fetch' changed since it was approved" in out
    assert "  -a\n  +b\n" in out


# ---------------------------------------------------------------------- events


def follow(argv: list[str]) -> tuple[threading.Thread, list[int]]:
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(main(argv)), daemon=True)
    thread.start()
    return thread, codes


@pytest.mark.parametrize("as_json", [True, False])
def test_events_follows_the_stream_until_it_ends(
    daemon: Daemon, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    argv = ["events", "--socket", daemon.socket] + (["--json"] if as_json else [])
    thread, codes = follow(argv)
    assert daemon.backend.subscribed.wait(5)
    daemon.publish(Connecting(name="web", attempt=1))
    daemon.publish(AttemptFailed(name="web", attempt=1, error="connection refused"))
    daemon.portal.call(daemon.backend.end_streams)
    thread.join(5)
    assert codes == [1]  # the daemon ended it: not a quiet hour
    out = capsys.readouterr()
    assert out.err == "mcp-manager: the daemon ended the event stream (it stopped)\n"
    lines = out.out.splitlines()
    assert len(lines) == 2
    if as_json:
        first, second = (json.loads(line) for line in lines)
        assert first["kind"] == "connecting"
        assert first["attempt"] == 1
        assert second["error"] == "connection refused"
    else:
        # The sentences of the daemon log and the HUD (`describe`), timestamped.
        assert lines[0].split(" ", 1)[1] == "web: connecting (attempt 1)"
        assert lines[1].split(" ", 1)[1] == (
            "web: connect failed (attempt 1): connection refused"
        )


def test_events_since_prints_what_came_before_first(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon.publish(Connecting(name="web", attempt=1))
    daemon.publish(Connecting(name="web", attempt=2))
    thread, codes = follow(["events", "--socket", daemon.socket, "--since", "1"])
    assert daemon.backend.subscribed.wait(5)
    daemon.publish(Connecting(name="web", attempt=3))
    daemon.portal.call(daemon.backend.end_streams)
    thread.join(5)
    assert codes == [1]
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        "web: connecting (attempt 2)",
        "web: connecting (attempt 3)",
    ]


# ------------------------------------------------------------------------ call


def test_call_prints_the_result_as_json(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["call", "fs", "echo", '{"text": "hi"}', "--timeout", "2.5"]
    assert main([*argv, "--socket", daemon.socket]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["isError"] is False
    sent = json.loads(result["content"][0]["text"])
    assert sent == {"tool": "echo", "args": {"text": "hi"}, "timeout": 2.5}


def test_call_without_args_sends_an_empty_object(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["call", "fs", "echo", "--socket", daemon.socket]) == 0
    result = json.loads(capsys.readouterr().out)
    assert json.loads(result["content"][0]["text"])["args"] == {}


@pytest.mark.parametrize(
    "argv",
    [
        ["fs__read_file", '{"path": "/a"}'],  # the name `tools` lists
        ["fs", "read_file", '{"path": "/a"}'],  # the server's own names
    ],
)
def test_call_takes_the_exposed_name_or_the_servers_own(
    daemon: Daemon, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert main(["call", *argv, "--socket", daemon.socket]) == 0
    sent = json.loads(json.loads(capsys.readouterr().out)["content"][0]["text"])
    assert sent["tool"] == "read_file" and sent["args"] == {"path": "/a"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["fs__rm"], "no connection or exposed tool named 'fs__rm'"),  # hidden
        (["nope__x", "{}"], "(connections: fs), or a name that `mcp-manager tools`"),
        (["fs"], "fs: which tool? `mcp-manager call fs TOOL [JSON_ARGS]`"),
        (["fs__read_file", "{}", "{}"], "give SERVER TOOL [JSON_ARGS], or one"),
    ],
)
def test_a_name_that_is_neither_exits_2_saying_what_to_give(
    daemon: Daemon,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    assert main(["call", *argv, "--socket", daemon.socket]) == 2
    out, err = capsys.readouterr()
    assert out == "" and message in stderr_line(err)


def test_a_tool_error_result_exits_1(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["call", "fs", "fail", "--socket", daemon.socket]) == 1
    assert json.loads(capsys.readouterr().out)["isError"] is True


@pytest.mark.parametrize(
    ("server", "kind"),
    [
        ("down", "ServerUnavailable"),
        ("slow", "CallTimeout"),
        ("nope", "UnknownServer"),
    ],
)
def test_a_call_that_cannot_be_made_exits_2_with_one_line(
    daemon: Daemon, capsys: pytest.CaptureFixture[str], server: str, kind: str
) -> None:
    assert main(["call", server, "echo", "--socket", daemon.socket]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert stderr_line(err).startswith(
        f"mcp-manager: call {server} echo failed ({kind}): "
    )


@pytest.mark.parametrize(
    ("json_args", "message"),
    [
        ("{not json", "JSON_ARGS is not valid JSON"),
        ("[1, 2]", "JSON_ARGS must be a JSON object"),
        ('"text"', "JSON_ARGS must be a JSON object"),
    ],
)
def test_bad_json_args_exit_2_before_calling(
    sock_dir: Path, capsys: pytest.CaptureFixture[str], json_args: str, message: str
) -> None:
    socket = str(sock_dir / "unused.sock")
    assert main(["call", "fs", "echo", json_args, "--socket", socket]) == 2
    assert message in stderr_line(capsys.readouterr().err)


def test_a_bad_timeout_is_a_usage_error(
    sock_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["call", "fs", "echo", "--timeout", "-1"]) == 2
    assert "must be a positive number" in capsys.readouterr().err


# ---------------------------------------------------------------------- reload


def test_version_prints_the_package_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"mcp-manager {__version__}\n"


def test_reconnect_cuts_a_backoff_wait_short_or_says_there_is_none(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    sock = ["--socket", daemon.socket]
    assert main(["reconnect", "web", *sock]) == 0
    assert (
        capsys.readouterr().out == "web: trying now (its backoff wait was cut short)\n"
    )
    assert main(["reconnect", "fs", *sock]) == 0
    assert capsys.readouterr().out == "fs: connected; nothing to do\n"
    assert main(["reconnect", "nope", *sock]) == 2
    assert "no connection named 'nope'" in capsys.readouterr().err


def test_reload_prints_a_one_line_summary(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["reload", "--socket", daemon.socket]) == 0
    assert capsys.readouterr().out == (
        "config loaded from startup.lua: 1 added (new), 0 removed, 1 changed (fs), "
        "3 unchanged\n"
    )


def test_a_reload_of_an_applied_script_says_when_it_was_applied(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    at = time.mktime((2026, 7, 28, 9, 30, 5, 0, 0, -1))
    daemon.backend.already_applied = AlreadyApplied(time=at, trigger="file watcher")
    assert main(["reload", "--socket", daemon.socket]) == 0
    assert capsys.readouterr().out == (
        "startup.lua is unchanged: already applied at 09:30:05 by the file "
        "watcher; 4 connection(s), nothing to do\n"
    )


def test_a_bad_script_on_reload_exits_1_with_file_and_line(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon.backend.reload_error = ConfigError(
        "mcp_add('x'): unknown option 'hold_on'\nstack traceback: ...",
        file="startup.lua",
        line=12,
    )
    assert main(["reload", "--socket", daemon.socket]) == 1
    err = capsys.readouterr().err
    assert stderr_line(err) == "startup.lua:12: mcp_add('x'): unknown option 'hold_on'"


# --------------------------------------------------------- catalog, login


def test_tools_and_resources_list_each_item_with_its_exposed_name(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    sock = ["--socket", daemon.socket]
    assert main(["tools", *sock]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "fs           read_file  fs__read_file",
        "fs           rm         (hidden)",
    ]
    assert main(["resources", "fs", *sock]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "fs           file:///a",
        "fs           file:///{path}  (template)",
    ]
    assert main(["prompts", *sock]) == 0
    assert capsys.readouterr().out == "no prompts\n"


def test_tools_json_prints_the_rows_in_their_wire_form(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tools", "fs", "--json", "--socket", daemon.socket]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0] == {
        "server": "fs",
        "name": "read_file",
        "exposed": "fs__read_file",
        "hidden": False,
        "held": False,
        "description": "Read a file.",
        "inputSchema": {"type": "object"},
    }
    assert [row["exposed"] for row in rows] == ["fs__read_file", None]


def test_login_prints_the_address_then_waits_for_the_end(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["login", "api", "--no-browser", "--timeout", "30"]
    assert main([*argv, "--socket", daemon.socket]) == 0
    out, err = capsys.readouterr()
    assert out == "https://auth.example/authorize?x=1\napi: connected\n"
    assert "Open this address to log api in:" in err


@pytest.mark.parametrize(
    ("start", "code", "said"),
    [
        (
            LoginStart(server="api", done=True, connected=True, state="connected"),
            0,
            "api: connected (no login needed)",
        ),
        (
            LoginStart(
                server="api", done=True, state="needs_login", error="access_denied"
            ),
            1,
            "mcp-manager: login of api failed: access_denied",
        ),
        (
            LoginStart(server="api", done=True, state="reconnecting"),
            1,
            "mcp-manager: login of api failed: the connection is reconnecting",
        ),
    ],
)
def test_a_login_that_ends_before_its_address_says_how(
    daemon: Daemon,
    capsys: pytest.CaptureFixture[str],
    start: LoginStart,
    code: int,
    said: str,
) -> None:
    daemon.backend.login_start = start
    assert main(["login", "api", "--no-browser", "--socket", daemon.socket]) == code
    out, err = capsys.readouterr()
    assert said in (out if code == 0 else err)


def test_login_device_prints_the_address_and_the_code_then_waits(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon.backend.login_start = LoginStart(
        server="api",
        state="needs_login",
        url="https://auth.example/device",
        user_code="WDJB-MJHT",
        url_complete="https://auth.example/device?user_code=WDJB-MJHT",
    )
    assert main(["login", "api", "--device", "--socket", daemon.socket]) == 0
    out, err = capsys.readouterr()
    assert daemon.backend.device_asked
    assert out.splitlines() == [
        "https://auth.example/device",
        "and enter the code: WDJB-MJHT",
        "https://auth.example/device?user_code=WDJB-MJHT",
        "api: connected",
    ]
    assert "open this address on any device" in err
    assert "waiting for the approval" in err


def test_login_device_where_the_server_offers_none_exits_2_with_the_sentence(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    sentence = (
        "the authorization server at https://auth.example does not offer "
        "device login (RFC 8628); use `mcp-manager login api` (browser) or "
        "`--manual`"
    )
    daemon.backend.login_start = LoginStart(
        server="api",
        done=True,
        state="needs_login",
        error=sentence,
        unsupported=True,
    )
    assert main(["login", "api", "--device", "--socket", daemon.socket]) == 2
    assert capsys.readouterr().err == f"mcp-manager: api: {sentence}\n"
    assert main(["login", "api", "--device", "--manual"]) == 2
    assert "pick one" in capsys.readouterr().err


def test_logout_says_whether_tokens_were_forgotten(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    sock = ["--socket", daemon.socket]
    assert main(["logout", "api", *sock]) == 0
    assert capsys.readouterr().out == (
        "api: logged out (forgot its tokens); it now waits for a login\n"
    )
    assert main(["logout", "web", *sock]) == 0
    assert "(no tokens were stored)" in capsys.readouterr().out


def test_login_and_logout_mistakes_are_one_line_not_a_traceback(
    daemon: Daemon,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sock = ["--socket", daemon.socket]
    said = "mcp-manager: no connection named 'nosuch' (declared: api, web)\n"
    for argv in (["login", "nosuch", "--no-browser"], ["login", "nosuch", "--device"]):
        assert main([*argv, *sock]) == 2
        assert capsys.readouterr().err == said
    assert main(["logout", "nosuch", *sock]) == 2
    assert capsys.readouterr().err == said
    # a pasted address that is not this login's callback: the login failed
    monkeypatch.setattr(
        "sys.stdin", io.StringIO("http://127.0.0.1:1/callback?state=x\n")
    )
    assert main(["login", "api", "--manual", *sock]) == 1
    assert capsys.readouterr().err.endswith(
        "mcp-manager: login of api failed: api: the state does not match this login\n"
    )


# ----------------------------------------------------------------- run, check


def test_run_with_a_missing_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "startup.lua"
    assert main(["run", str(missing), "--log-level", "debug", "--no-hud"]) == 2
    assert stderr_line(capsys.readouterr().err) == (
        f"mcp-manager: cannot run {missing}: no such file"
    )


def test_check_accepts_a_good_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("manager.lua")
    script = tmp_path / "startup.lua"
    script.write_text(
        'mcp_add("web", "http://127.0.0.1:9/mcp")\nmcp_add("fs", {command = "cat"})\n'
    )
    assert main(["check", str(script)]) == 0
    assert capsys.readouterr().out == f"{script}: OK, 2 connections (web, fs)\n"
    with script.open("a") as more:
        more.write('mcp_profile("agent", {servers = {"fs"}, discovery = "search"})\n')
    assert main(["check", str(script)]) == 0
    assert capsys.readouterr().out.endswith("; profiles: agent (search)\n")


def test_check_warns_of_a_command_that_would_not_start_here(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A command missing from PATH (`npx` on a machine without Node, say)
    is named before the daemon runs into it; the script is still OK."""
    pytest.importorskip("manager.lua")
    script = tmp_path / "startup.lua"
    script.write_text(
        'mcp_add("gone", {command = "no-such-command-here"})\n'
        'mcp_add("path", {command = "/no/such/dir/server"})\n'
        'mcp_add("fine", {command = "cat"})\n'
        'mcp_add("own", {command = "cat", env = {PATH = "/nowhere"}})\n'
        'mcp_add("moved", {command = "cat", cwd = "/no/such/dir"})\n'
    )
    assert main(["check", str(script)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"{script}: OK, 5 connections")
    warned = [line for line in err.splitlines() if ": warning: " in line]
    assert len(warned) == 4, err
    # Each names the line that declared it (an audit: only the file).
    assert [line.split(": warning: ")[0] for line in warned] == [
        f"{script}:{n}" for n in (1, 2, 4, 5)
    ]
    assert "gone: command 'no-such-command-here' is not on PATH" in warned[0]
    assert "path: command '/no/such/dir/server' is not an executable" in warned[1]
    assert "own: command 'cat' is not on PATH (/nowhere)" in warned[2]
    assert "moved: its cwd '/no/such/dir' is not a directory here" in warned[3]


def test_check_warns_of_a_policy_rule_for_a_server_not_declared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo in a rule's server makes the rule match nothing: said, not
    silently accepted (found by an audit); globs that match are fine."""
    pytest.importorskip("manager.lua")
    script = tmp_path / "startup.lua"
    script.write_text(
        'mcp_add("github", {command = "cat"})\n'
        'mcp_policy("deny", {server = "gihtub"})\n'
        'mcp_policy("ask", {server = "git*"})\n'
    )
    assert main(["check", str(script)]) == 0
    err = capsys.readouterr().err
    warned = [line for line in err.splitlines() if ": warning: " in line]
    assert warned == [
        f"{script}: warning: startup.lua:2: mcp_policy('deny') names 'gihtub', "
        "which the "
        "script does not declare: it matches no call (a typo?)"
    ]


def test_check_reports_a_bad_script_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("manager.lua")
    script = tmp_path / "startup.lua"
    script.write_text('mcp_add("web", "http://127.0.0.1:9/mcp")\nmcp_add("x", 5)\n')
    assert main(["check", str(script)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert stderr_line(err).startswith("startup.lua:2: ")


def test_check_of_an_unreadable_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", str(tmp_path / "nope.lua")]) == 2
    assert "cannot read" in stderr_line(capsys.readouterr().err)


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["frobnicate"]) == 2
    assert main(["--help"]) == 0
    assert "status" in capsys.readouterr().out


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path) -> None:
    """`mcp-manager check FILE | head -1`-style use: the pipe closes early."""
    script = tmp_path / "startup.lua"
    script.write_text(
        "".join(f'mcp_add("s{i}", "http://127.0.0.1:9/mcp")\n' for i in range(3))
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "manager", "check", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before anything is written
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=30) == 0, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
