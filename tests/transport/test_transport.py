"""Connections against real servers: stdio subprocesses, HTTP and SSE.

Over HTTP, where our transport is the point (kills, restarts, loss detection,
reconnects), the server is the hand-written `raw_http.py` (handshake era, a
tenth of the demo server's start-up CPU); the SDK's demo server under uvicorn,
met in 2026-07-28, stays where that era's own path is the point (a killed
server noticed by its `subscriptions/listen` stream, a call in flight on the
2026 relay) and for SSE.

Each test waits on events (never on sleeps) and checks that no child process is
left behind.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator

import anyio
import psutil
import pytest
from fakes import Recorder, eventually
from servers import (
    CLOSING_HTTP_SCRIPT,
    Blackhole,
    HttpServerFactory,
    own_children,
    raw_command,
    raw_http,
    stdio_command,
)

from manager.core.errors import CallTimeout, ServerUnavailable
from manager.core.events import Reconnecting
from manager.core.spec import parse_spec
from manager.engine.bus import EventBus
from manager.engine.manager import Manager

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]

FAST = {"backoff": {"initial": 0.05, "cap": 0.4}}


def stdio(
    name: str, *flags: str, raw: bool = False, fork: bool = True, **opts: object
) -> object:
    command, args = raw_command(*flags) if raw else stdio_command(*flags, fork=fork)
    return parse_spec(name, {"command": command, "args": args}, {**FAST, **opts})


def _gone(pid: int, *, zombie_ok: bool = False) -> bool:
    """The process no longer exists (or, for someone else's child, is a zombie)."""
    try:
        status = psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return True
    return zombie_ok and bool(status == psutil.STATUS_ZOMBIE)


@pytest.fixture
async def env() -> AsyncIterator[tuple[Manager, Recorder]]:
    bus = EventBus()
    rec = Recorder(bus)
    async with Manager(bus) as mgr:
        yield mgr, rec


async def test_stdio_server_killed_comes_back_by_itself(
    env: tuple[Manager, Recorder],
) -> None:
    mgr, rec = env
    mgr.add(stdio("demo", raw=True))  # type: ignore[arg-type]
    first = await rec.wait_for("connected", "demo")
    pid = mgr.statuses()[0].pid
    assert isinstance(pid, int) and psutil.pid_exists(pid)
    os.kill(pid, signal.SIGKILL)
    lost = await rec.wait_for("disconnected", "demo")
    assert lost.exit_code == -signal.SIGKILL  # type: ignore[attr-defined]
    assert "SIGKILL" in lost.reason  # type: ignore[attr-defined]
    await rec.wait_for("connected", "demo", after=first.seq)
    status = mgr.statuses()[0]
    assert status.state == "connected"
    assert status.pid not in (None, pid)
    assert _gone(pid)
    result = await mgr.call("demo", "echo", {"text": "back"})
    assert "back" in str(result.data)


async def test_a_server_whose_child_keeps_its_stdout_is_seen_dying_at_once(
    env: tuple[Manager, Recorder],
) -> None:
    """A helper the server started in the background holds its stdout, so
    no end of stdout comes: the process's own exit is the news (no ping
    here to find it later)."""
    mgr, rec = env
    command, args = raw_command()
    wrapper = 'sleep 60 & exec "$0" "$@"'  # the child keeps fds 1 and 2
    spec = parse_spec(
        "held",
        {"command": "/bin/sh", "args": ["-c", wrapper, command, *args]},
        {**FAST, "ping_interval": 0},
    )
    mgr.add(spec)
    first = await rec.wait_for("connected", "held")
    pid = mgr.statuses()[0].pid
    assert isinstance(pid, int)
    os.kill(pid, signal.SIGKILL)
    lost = await rec.wait_for("disconnected", "held")
    assert lost.exit_code == -signal.SIGKILL  # type: ignore[attr-defined]
    assert "its stdout stays open" in lost.reason  # type: ignore[attr-defined]
    await rec.wait_for("connected", "held", after=first.seq)


async def test_stdio_tools_are_listed_across_pages_and_relisted_on_change(
    env: tuple[Manager, Recorder],
) -> None:
    mgr, rec = env
    command, args = stdio_command()
    spec = parse_spec(
        "demo", {"command": command, "args": args, "env": {"DEMO_PAGE_SIZE": "2"}}
    )
    mgr.add(spec)
    connected = await rec.wait_for("connected", "demo")
    count = connected.tools  # type: ignore[attr-defined]
    assert count >= 5 and len(mgr.tools("demo")) == count
    await mgr.call("demo", "add_tool", {"name": "fresh"})
    changed = await rec.wait_for("tools_changed", "demo")
    assert changed.added == ("fresh",)  # type: ignore[attr-defined]
    assert "fresh" in {t.name for t in mgr.tools("demo")}


async def test_tool_errors_and_timeouts_are_reported_not_retried(
    env: tuple[Manager, Recorder],
) -> None:
    mgr, rec = env
    # The hand-written server: its `sleep` holds the whole server, which is
    # what a slow tool of a single-threaded server does; it stays connected.
    mgr.add(stdio("demo", "--sleep-tool", "--fail-tool", raw=True))  # type: ignore[arg-type]
    await rec.wait_for("connected", "demo")
    failed = await mgr.call("demo", "fail", {"message": "nope"})
    assert failed.is_error
    with pytest.raises(CallTimeout, match="no result within 0.2 s"):
        await mgr.call("demo", "sleep", {"seconds": 5}, call_timeout=0.2)
    assert mgr.statuses()[0].state == "connected"  # a slow tool is not a dead server


async def test_missing_executable_is_retried_forever_with_a_clear_error(
    env: tuple[Manager, Recorder],
) -> None:
    mgr, rec = env
    mgr.add(parse_spec("ghost", {"command": "/nonexistent/mcp-server"}, FAST))
    await rec.wait_for("connect_failed", "ghost", where=lambda e: e.attempt >= 3)  # type: ignore[attr-defined]
    status = mgr.statuses()[0]
    assert status.state == "reconnecting"
    assert "cannot start '/nonexistent/mcp-server': not found" in str(status.error)


async def test_a_missing_cwd_is_named_as_such(env: tuple[Manager, Recorder]) -> None:
    """Not "not found (check command, PATH and cwd)" for a command that
    exists (found by an audit)."""
    mgr, rec = env
    mgr.add(parse_spec("lost", {"command": "cat", "cwd": "/nonexistent/dir"}, FAST))
    failed = await rec.wait_for("connect_failed", "lost")
    assert "cannot start 'cat': its cwd '/nonexistent/dir' is not a directory" in str(
        failed.error  # type: ignore[attr-defined]
    )


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (("--exit-immediately", "7"), "server exited with code 7"),
        (("--garbage",), "not JSON-RPC"),
        (
            ("--hang-on-initialize",),
            "no complete handshake within connect_timeout 0.5 s",
        ),
    ],
    ids=["exits-at-once", "garbage-on-stdout", "hangs-on-initialize"],
)
async def test_broken_stdio_servers_get_a_clear_error_and_are_retried(
    env: tuple[Manager, Recorder], flags: tuple[str, ...], expected: str
) -> None:
    mgr, rec = env
    mgr.add(stdio("bad", *flags, raw=True, connect_timeout=0.5))  # type: ignore[arg-type]
    await rec.wait_for("connect_failed", "bad", where=lambda e: e.attempt >= 2)  # type: ignore[attr-defined]
    status = mgr.statuses()[0]
    stderr_and_error = f"{status.error} {list(status.stderr)}"
    assert expected in stderr_and_error
    assert status.state == "reconnecting"


async def test_a_server_that_exits_at_start_is_told_with_its_last_words(
    env: tuple[Manager, Recorder],
) -> None:
    """Not only the exit code: the last line the server wrote to stderr,
    which is where a server says why it cannot start."""
    mgr, rec = env
    script = "echo starting >&2; echo 'boom: missing API key' >&2; exit 7"
    mgr.add(parse_spec("bad", {"command": "/bin/sh", "args": ["-c", script]}, FAST))
    await rec.wait_for("connect_failed", "bad", where=lambda e: e.attempt >= 2)  # type: ignore[attr-defined]
    error = str(mgr.statuses()[0].error)
    assert (
        "server exited with code 7 (its last stderr line: boom: missing API key)"
        in error
    )


async def test_crash_after_handshake_backs_off_to_the_cap(
    env: tuple[Manager, Recorder],
) -> None:
    mgr, rec = env
    mgr.add(stdio("crashy", "--crash-after-handshake", raw=True))  # type: ignore[arg-type]
    await rec.wait_for(
        "reconnecting",
        "crashy",
        where=lambda e: e.attempt >= 6,  # type: ignore[attr-defined]
    )
    delays = [
        e.delay for e in rec.of("reconnecting", "crashy") if isinstance(e, Reconnecting)
    ]
    assert delays[0] <= 0.05 and delays[-1] >= 0.4 * 0.9
    assert all(b >= a * 0.9 for a, b in zip(delays, delays[1:], strict=False))
    assert {e.exit_code for e in rec.of("disconnected", "crashy")} == {3}  # type: ignore[attr-defined]


async def test_remove_during_a_connect_attempt_reaps_the_server(
    env: tuple[Manager, Recorder],
) -> None:
    mgr, rec = env
    mgr.add(stdio("hang", "--hang-on-initialize", raw=True))  # type: ignore[arg-type]
    await rec.wait_for("connecting", "hang")
    await eventually(lambda: mgr.statuses()[0].pid is not None)
    pid = mgr.statuses()[0].pid
    assert isinstance(pid, int)
    mgr.remove("hang")
    await rec.wait_for("removed", "hang", within=3)
    assert _gone(pid)


async def test_a_server_that_ignores_sigterm_is_killed_within_the_teardown_bound(
    env: tuple[Manager, Recorder],
) -> None:
    mgr, rec = env
    mgr.add(stdio("stubborn", "--ignore-sigterm", raw=True))  # type: ignore[arg-type]
    await rec.wait_for("connected", "stubborn")
    pid = mgr.statuses()[0].pid
    started = anyio.current_time()
    mgr.remove("stubborn")
    await rec.wait_for("removed", "stubborn", within=3)
    assert anyio.current_time() - started < 2.5
    assert isinstance(pid, int) and _gone(pid)


async def test_grandchildren_of_a_stdio_server_are_swept_on_removal(
    env: tuple[Manager, Recorder],
) -> None:
    mgr, rec = env
    mgr.add(stdio("parent", fork=False))  # type: ignore[arg-type]  # its group
    await rec.wait_for("connected", "parent")
    result = await mgr.call("parent", "spawn_child", {"seconds": 300})
    text = str(result.data)
    grandchild = int("".join(ch for ch in text.split("pid")[-1] if ch.isdigit()))
    assert psutil.pid_exists(grandchild)
    mgr.remove("parent")
    await rec.wait_for("removed", "parent")
    # reparented to init, which reaps it in its own time: a zombie counts as gone
    await eventually(lambda: _gone(grandchild, zombie_ok=True), within=3)


async def test_http_server_stopped_and_started_again_reconnects(
    env: tuple[Manager, Recorder], make_http_server: HttpServerFactory
) -> None:
    mgr, rec = env
    server = make_http_server("http", raw=True)
    mgr.add(
        parse_spec(
            "web", server.url, {**FAST, "ping_interval": 0.3, "ping_timeout": 0.5}
        )
    )
    first = await rec.wait_for("connected", "web")
    assert (await mgr.call("web", "echo", {"text": "x"})).is_error is False
    server.kill()
    await rec.wait_for("disconnected", "web", after=first.seq)
    await rec.wait_for("connect_failed", "web", after=first.seq)
    assert "connection refused" in str(mgr.statuses()[0].error)
    await anyio.to_thread.run_sync(server.start)
    await rec.wait_for("connected", "web", after=first.seq)
    assert (await mgr.call("web", "echo", {"text": "y"})).is_error is False


async def test_sse_server_death_is_noticed_without_traffic(
    env: tuple[Manager, Recorder], make_http_server: HttpServerFactory
) -> None:
    mgr, rec = env
    server = make_http_server("sse")
    mgr.add(
        parse_spec(
            "legacy",
            {"url": server.url, "transport": "sse"},
            {**FAST, "ping_interval": 0},
        )
    )
    first = await rec.wait_for("connected", "legacy")
    assert (await mgr.call("legacy", "echo", {"text": "x"})).is_error is False
    server.kill()
    await rec.wait_for("disconnected", "legacy", after=first.seq)
    await anyio.to_thread.run_sync(server.start)
    await rec.wait_for("connected", "legacy", after=first.seq)


async def test_a_blackhole_times_out_and_is_retried(
    env: tuple[Manager, Recorder], blackhole: Blackhole
) -> None:
    mgr, rec = env
    mgr.add(parse_spec("hole", blackhole.url(), {**FAST, "connect_timeout": 0.3}))
    await rec.wait_for("connect_failed", "hole", where=lambda e: e.attempt >= 2)  # type: ignore[attr-defined]
    error = str(mgr.statuses()[0].error)
    assert "no complete handshake within connect_timeout 0.3 s" in error


async def test_an_sse_blackhole_times_out_at_connect_timeout_too(
    env: tuple[Manager, Recorder], blackhole: Blackhole
) -> None:
    """The SDK's SSE client waits for the stream's first words with the
    stream's own read timeout (300 s): the attempt still ends at
    `connect_timeout`."""
    mgr, rec = env
    options = {**FAST, "connect_timeout": 0.3}
    mgr.add(parse_spec("hole", {"url": blackhole.url(), "transport": "sse"}, options))
    await rec.wait_for("connect_failed", "hole", where=lambda e: e.attempt >= 2)  # type: ignore[attr-defined]
    error = str(mgr.statuses()[0].error)
    assert "no SSE stream with its endpoint within connect_timeout 0.3 s" in error


async def test_a_call_during_an_outage_fails_clearly_after_hold(
    env: tuple[Manager, Recorder], make_http_server: HttpServerFactory
) -> None:
    mgr, rec = env
    server = make_http_server("http", raw=True)
    mgr.add(parse_spec("web", server.url, {**FAST, "hold": 0.3, "ping_interval": 0.2}))
    first = await rec.wait_for("connected", "web")
    server.kill()
    await rec.wait_for("connect_failed", "web", after=first.seq)
    with pytest.raises(
        ServerUnavailable, match=r"web is reconnecting .*connection refused"
    ):
        await mgr.call("web", "echo", {"text": "x"})


async def test_shutdown_with_connections_in_every_state_leaves_nothing_running(
    blackhole: Blackhole,
) -> None:
    bus = EventBus()
    rec = Recorder(bus)
    tasks_before = len(anyio.get_running_tasks())
    started = anyio.current_time()
    async with Manager(bus) as mgr:
        mgr.add(stdio("up", raw=True))  # type: ignore[arg-type]
        mgr.add(stdio("stubborn", "--ignore-sigterm", raw=True))  # type: ignore[arg-type]
        mgr.add(stdio("hang", "--hang-on-initialize", raw=True))  # type: ignore[arg-type]
        mgr.add(parse_spec("hole", blackhole.url(), FAST))
        mgr.add(parse_spec("refused", "http://127.0.0.1:9/mcp", FAST))
        await rec.wait_for("connected", "up")
        await rec.wait_for("connected", "stubborn")
        await rec.wait_for("connect_failed", "refused")
        started = anyio.current_time()
    assert anyio.current_time() - started < 3.0  # teardowns ran in parallel
    assert {e.name for e in rec.of("removed")} == {
        "up",
        "stubborn",
        "hang",
        "hole",
        "refused",
    }
    assert own_children() == []
    assert len(anyio.get_running_tasks()) == tasks_before


@pytest.mark.parametrize(
    "era",
    [
        "handshake",  # raw_http: the GET event stream ends (or the sentinel's)
        "2026-07-28",  # the demo server: the subscriptions/listen stream breaks
    ],
)
async def test_a_killed_http_server_is_noticed_without_waiting_for_a_ping(
    env: tuple[Manager, Recorder], make_http_server: HttpServerFactory, era: str
) -> None:
    mgr, rec = env
    server = make_http_server("http", raw=era == "handshake")
    # No ping before the test's own timeout: only the event stream's end can tell.
    opts = {**FAST, "ping_interval": 600.0, "ping_timeout": 1.0}
    mgr.add(parse_spec("web", server.url, opts))
    first = await rec.wait_for("connected", "web")
    assert first.protocol == ("2025-06-18" if era == "handshake" else era)  # type: ignore[attr-defined]
    await server.akill()
    lost = await rec.wait_for("disconnected", "web", after=first.seq)
    # Whichever notices first: the probe (refused) or the stream read (broke).
    assert "connection" in lost.reason  # type: ignore[attr-defined]
    await server.astart()
    await rec.wait_for("connected", "web", after=lost.seq)
    assert (await mgr.call("web", "echo", {"text": "again"})).is_error is False


async def test_an_http_server_restarted_between_pings_loses_the_session(
    env: tuple[Manager, Recorder], make_http_server: HttpServerFactory
) -> None:
    mgr, rec = env
    server = make_http_server("http", raw=True)
    opts = {**FAST, "ping_interval": 2.0, "ping_timeout": 1.0}
    mgr.add(parse_spec("web", server.url, opts))
    first = await rec.wait_for("connected", "web")
    await server.akill()
    await server.astart()  # back at once: the old session is unknown to it
    lost = await rec.wait_for("disconnected", "web", after=first.seq)
    reason = lost.reason.lower()  # type: ignore[attr-defined]
    # The event stream's end, the probe after it, the next ping (which finds
    # its connection closed or reset while the old process dies) or a 2026-07-28
    # session's subscriptions/listen stream finds out: whichever is first.
    assert any(
        words in reason
        for words in (
            "session not found",
            "connection refused",
            "connection broke",
            "connection reset by peer",  # the old process's socket, killed
            "closed the connection without answering",
            "subscriptions/listen stream broke",
        )
    ), reason
    await rec.wait_for("connected", "web", after=lost.seq)
    assert (await mgr.call("web", "echo", {"text": "again"})).is_error is False


async def test_an_http_server_that_forgot_the_session_is_met_with_a_new_one(
    env: tuple[Manager, Recorder], make_http_server: HttpServerFactory
) -> None:
    mgr, rec = env
    server = make_http_server("http", raw=True)
    opts = {**FAST, "ping_interval": 600.0, "ping_timeout": 1.0}
    mgr.add(parse_spec("web", server.url, opts))
    first = await rec.wait_for("connected", "web")
    # SIGHUP: raw_http forgets its sessions (their event streams end) and keeps
    # its process and connections: the probe after the stream's end meets 404.
    os.kill(server.pid, signal.SIGHUP)
    lost = await rec.wait_for("disconnected", "web", after=first.seq)
    reason = lost.reason.lower()  # type: ignore[attr-defined]
    assert "session not found" in reason
    # Said as it happened: the stream ended (not "its connections closed").
    assert "the server ended its event stream" in reason, reason
    await rec.wait_for("connected", "web", after=lost.seq)
    assert (await mgr.call("web", "echo", {"text": "again"})).is_error is False


@pytest.mark.parametrize(
    ("server_kind", "how"),
    [
        ("raw-http", "kill"),
        ("raw-http", "stop"),
        ("demo-http", "kill"),  # 2026-07-28: the call goes by our relay in rounds
        ("demo-sse", "kill"),
        ("demo-sse", "stop"),
    ],
)
async def test_a_call_in_flight_when_an_http_server_dies_fails_as_disconnected(
    env: tuple[Manager, Recorder],
    make_http_server: HttpServerFactory,
    server_kind: str,
    how: str,
) -> None:
    mgr, rec = env
    if server_kind == "raw-http":
        server = make_http_server("http", "--sleep-tool", raw=True)
    else:
        server = make_http_server("sse" if server_kind == "demo-sse" else "http")
    endpoint = {"url": server.url, "transport": server.transport}
    mgr.add(parse_spec("web", endpoint, {**FAST, "ping_interval": 600.0, "hold": 0.2}))
    first = await rec.wait_for("connected", "web")
    errors: list[BaseException] = []

    async def slow_call() -> None:
        try:
            await mgr.call("web", "sleep", {"seconds": 30})
        except ServerUnavailable as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(slow_call)
        await rec.wait_for("call_started", "web")
        await (server.akill() if how == "kill" else server.astop())
        lost = await rec.wait_for("disconnected", "web", after=first.seq)
        # A call made now, before any reconnect: held, then the same clear error.
        with pytest.raises(ServerUnavailable, match="web"):
            await mgr.call("web", "echo", {"text": "late"})
    assert len(errors) == 1
    assert "disconnected during the call" in str(errors[0])
    assert "-32603" not in str(errors[0])
    assert lost.seq > first.seq


async def test_a_killed_http_server_without_an_event_stream_is_noticed_too(
    env: tuple[Manager, Recorder], make_http_server: HttpServerFactory
) -> None:
    mgr, rec = env
    # This server answers the GET stream with 405: only the idle sentinel
    # connection can tell that its process died.
    server = make_http_server("http", "--mode", "close", start=False)
    server.program = [sys.executable, str(CLOSING_HTTP_SCRIPT)]
    await server.astart()
    mgr.add(parse_spec("web", server.url, {**FAST, "ping_interval": 600.0}))
    first = await rec.wait_for("connected", "web")
    await server.akill()
    lost = await rec.wait_for("disconnected", "web", after=first.seq)
    # The sentinel's end, then the probe: refused, reset, or "cannot connect".
    assert "connect" in lost.reason  # type: ignore[attr-defined]


async def test_a_ping_answered_503_keeps_the_session_and_the_call_it_runs(
    env: tuple[Manager, Recorder], make_http_server: HttpServerFactory
) -> None:
    """A server behind an overloaded proxy answers two pings 503 while a call
    runs: it is there, so the session stays and the call's result arrives
    (one 503 dropped the session, and the call was lost with it)."""
    mgr, rec = env
    server = make_http_server("http", "--sleep-tool", "--ping-errors", "2", raw=True)
    mgr.add(parse_spec("web", server.url, {**FAST, "ping_interval": 0.1}))
    connected = await rec.wait_for("connected", "web")
    got: list[object] = []

    async def call() -> None:
        got.append(await mgr.call("web", "sleep", {"seconds": 2}))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            while server.log_text().count(raw_http.PING_REFUSED) < 2:  # noqa: ASYNC110
                await anyio.sleep(0.02)
    (result,) = got  # it ran to its end: the session was not dropped under it
    assert result.is_error is False  # type: ignore[attr-defined]
    assert rec.of("disconnected") == [] and mgr.statuses()[0].state == "connected"
    echoed = await mgr.call("web", "echo", {"text": "still here"})
    assert echoed.is_error is False
    assert rec.of("connected")[-1].seq == connected.seq


async def test_a_call_to_a_session_the_server_forgot_is_sent_again_in_a_new_one(
    env: tuple[Manager, Recorder], make_http_server: HttpServerFactory
) -> None:
    """The server forgot the session and nothing told us (no event stream, no
    ping): a call meets 404, which says it was not processed, so it is sent
    again, once, in the new session (it failed: 'may have run it')."""
    mgr, rec = env
    server = make_http_server("http", "--no-event-stream", raw=True)
    opts = {**FAST, "ping_interval": 0}
    mgr.add(parse_spec("web", server.url, opts))
    first = await rec.wait_for("connected", "web")
    os.kill(server.pid, signal.SIGHUP)
    with anyio.fail_after(10):
        while raw_http.SESSIONS_FORGOTTEN not in server.log_text():  # noqa: ASYNC110
            await anyio.sleep(0.02)
    result = await mgr.call("web", "echo", {"text": "once"})
    assert result.is_error is False
    lost = await rec.wait_for("disconnected", "web", after=first.seq)
    assert "the server forgot the session" in lost.reason  # type: ignore[attr-defined]
    await rec.wait_for("connected", "web", after=lost.seq)


async def test_a_server_that_moved_its_endpoint_by_a_slash_is_called_there(
    env: tuple[Manager, Recorder], make_http_server: HttpServerFactory
) -> None:
    """/mcp answers 307 to /mcp/ (a framework's trailing-slash move): the
    handshake and pings followed it and every call was refused ('redirected
    the request (307); not followed') while status said connected."""
    mgr, rec = env
    server = make_http_server("http", "--moved", raw=True)
    mgr.add(parse_spec("web", server.url, FAST))
    await rec.wait_for("connected", "web")
    result = await mgr.call("web", "echo", {"text": "moved"})
    assert result.is_error is False
