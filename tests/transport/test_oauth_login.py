"""Logging in with OAuth: needs_login, the login, tokens that last and renew.

A real authorization server in front of the demo server (`servers.oauth`: PRM,
RFC 8414 metadata, dynamic registration, an authorization endpoint that
approves at once, PKCE-checked codes, rotating refresh tokens). The tests play
the user's browser: they GET the authorization URL the daemon hands out without
following its redirect, then GET the daemon's loopback callback.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from servers.daemon import DaemonProcess
from servers.oauth import oauth_demo
from support.oauth import browse, daemon_parts, log_in, spec

from manager.core.errors import ServerUnavailable
from manager.core.events import AuthStep, NeedsLogin, event_from_dict
from manager.hud.state import HudState
from manager.hud.view import cells

pytestmark = pytest.mark.anyio


async def test_a_connection_waits_for_a_login_and_asks_the_server_nothing_until_then(
    tmp_path: Path,
) -> None:
    async with oauth_demo() as server, daemon_parts(tmp_path) as parts:
        parts.manager.add(spec("tracker", server))
        event = await parts.rec.wait_for("needs_login", "tracker")
        assert isinstance(event, NeedsLogin)
        assert event.command == "mcp-manager login tracker"
        (status,) = parts.manager.statuses()
        assert (status.state, status.auth) == ("needs_login", "needs_login")
        assert status.next_retry_in is None  # nothing scheduled: no storm
        with pytest.raises(ServerUnavailable, match="mcp-manager login tracker"):
            await parts.manager.call("tracker", "echo", {"text": "x"})
        for endpoint in ("/register", "/authorize", "/token"):
            assert server.hits[endpoint] == 0, endpoint
        assert not any("well-known" in path for path in server.hits)

        await log_in(parts, server, "tracker")
        result = await parts.manager.call("tracker", "echo", {"text": "hi"})
        assert result.data["content"] == [{"type": "text", "text": "hi"}]
        assert (server.hits["/register"], server.hits["/authorize"]) == (1, 1)
        steps = {e.step for e in parts.rec.events if isinstance(e, AuthStep)}
        assert {"discovery", "registration", "authorize", "token"} <= steps
        stored = tmp_path / "tokens" / "tracker.json"
        assert stat.S_IMODE(stored.stat().st_mode) == 0o600
        assert stat.S_IMODE(stored.parent.stat().st_mode) == 0o700
        (status,) = parts.manager.statuses()
        assert status.auth == "oauth" and status.auth_expires_in is not None


async def test_a_restarted_daemon_connects_without_a_new_login(tmp_path: Path) -> None:
    async with oauth_demo(expires_in=3600) as server:
        async with daemon_parts(tmp_path) as parts:
            parts.manager.add(spec("tracker", server))
            await parts.rec.wait_for("needs_login", "tracker")
            await log_in(parts, server, "tracker")
        async with daemon_parts(tmp_path) as parts:
            parts.manager.add(spec("tracker", server))
            await parts.rec.wait_for("connected", "tracker")
            assert not any(e.kind == "needs_login" for e in parts.rec.events)
            await parts.manager.call("tracker", "echo", {"text": "again"})
        assert (server.hits["/register"], server.hits["/authorize"]) == (1, 1)


async def test_tokens_that_expire_while_calls_run_are_refreshed_once_at_a_time(
    tmp_path: Path,
) -> None:
    async with (
        oauth_demo(expires_in=2, refresh_delay=0.2) as server,
        daemon_parts(tmp_path) as parts,
    ):
        parts.manager.add(spec("tracker", server))
        await parts.rec.wait_for("needs_login", "tracker")
        await log_in(parts, server, "tracker")
        failures: list[BaseException] = []
        done = [0]

        async def caller(n: int) -> None:
            while server.issued < 3:  # the login's token and two refreshes
                try:
                    result = await parts.manager.call("tracker", "echo", {"text": "x"})
                    assert not result.is_error
                    done[0] += 1
                except Exception as exc:
                    failures.append(exc)
                    return

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for n in range(6):
                    tg.start_soon(caller, n)
        assert failures == []
        assert done[0] > 20  # calls ran across both refreshes
        assert server.max_refreshes_in_flight == 1  # one refresh in flight
        assert server.refused_refreshes == 0
        refreshes = [
            e
            for e in parts.rec.events
            if isinstance(e, AuthStep) and e.step == "refresh"
        ]
        assert len(refreshes) == 2 and all(e.outcome == "ok" for e in refreshes)
        assert not any(e.kind == "needs_login" for e in parts.rec.events[-50:])


async def test_a_refused_refresh_sends_the_connection_back_to_needs_login(
    tmp_path: Path,
) -> None:
    async with oauth_demo() as server, daemon_parts(tmp_path) as parts:
        parts.manager.add(spec("tracker", server))
        first = await parts.rec.wait_for("needs_login", "tracker")
        await log_in(parts, server, "tracker")
        server.revoke_refresh_tokens()
        server.expire_all()
        with pytest.raises(ServerUnavailable) as refused:
            await parts.manager.call("tracker", "echo", {"text": "x"})
        # The server answered 401: the call did not run (not "may have run").
        assert "it did not run it" in str(refused.value)
        assert "may have run" not in str(refused.value)
        assert "mcp-manager login tracker" in str(refused.value)
        event = await parts.rec.wait_for("needs_login", "tracker", after=first.seq)
        assert isinstance(event, NeedsLogin)
        assert "refused to refresh" in event.reason
        assert server.refused_refreshes == 1
        (status,) = parts.manager.statuses()
        assert status.auth == "needs_login"
        await log_in(parts, server, "tracker")  # and a new login brings it back
        await parts.manager.call("tracker", "echo", {"text": "back"})


async def test_a_refresh_slower_than_the_ping_deadline_keeps_the_login(
    tmp_path: Path,
) -> None:
    """A ping's deadline that ends while the token is being refreshed does not
    lose the refresh's answer: the server rotated the refresh token, so a cut
    refresh would leave nothing to refresh with (found by an audit)."""
    async with (
        oauth_demo(refresh_delay=1.5) as server,
        daemon_parts(tmp_path) as parts,
    ):
        parts.manager.add(spec("tracker", server, ping_interval=0.2, ping_timeout=0.5))
        await parts.rec.wait_for("needs_login", "tracker")
        await log_in(parts, server, "tracker")
        mark = parts.rec.events[-1].seq
        server.expire_all()  # the next ping is refused: refreshed, for 1.5 s
        step = await parts.rec.wait_for(
            "auth",
            "tracker",
            after=mark,
            where=lambda e: isinstance(e, AuthStep) and e.step == "refresh",
        )
        assert isinstance(step, AuthStep) and step.outcome == "ok"
        # The ping failed at its deadline (the connection reconnects); the
        # refresh's answer was kept, so it connects with no new login.
        await parts.rec.wait_for("connected", "tracker", after=step.seq)
        result = await parts.manager.call("tracker", "echo", {"text": "still in"})
        assert result.data["content"] == [{"type": "text", "text": "still in"}]
        assert server.refused_refreshes == 0
        assert not any(
            e.kind == "needs_login" for e in parts.rec.events if e.seq > mark
        )


async def test_two_connections_to_one_server_log_in_and_out_separately(
    tmp_path: Path,
) -> None:
    async with oauth_demo() as server, daemon_parts(tmp_path) as parts:
        parts.manager.add(spec("work", server))
        parts.manager.add(spec("home", server))
        await parts.rec.wait_for("needs_login", "work")
        await parts.rec.wait_for("needs_login", "home")
        await log_in(parts, server, "work")
        await log_in(parts, server, "home")
        assert server.hits["/register"] == 2  # a client registration each
        work = json.loads((tmp_path / "tokens" / "work.json").read_text())
        home = json.loads((tmp_path / "tokens" / "home.json").read_text())
        assert work["token"]["access_token"] != home["token"]["access_token"]
        for name in ("work", "home"):
            await parts.manager.call(name, "echo", {"text": name})

        mark = parts.rec.events[-1].seq
        assert parts.logins.logout("work")
        await parts.rec.wait_for("needs_login", "work", after=mark)
        assert not (tmp_path / "tokens" / "work.json").exists()
        states = {s.name: s.state for s in parts.manager.statuses()}
        assert states == {"work": "needs_login", "home": "connected"}


async def test_the_callback_checks_state_and_takes_one_answer_only(
    tmp_path: Path,
) -> None:
    async with oauth_demo() as server, daemon_parts(tmp_path) as parts:
        parts.manager.add(spec("tracker", server))
        await parts.rec.wait_for("needs_login", "tracker")
        login = await parts.logins.begin("tracker", timeout=20)
        assert login is not None
        await parts.logins.first_answer(login, 10)
        async with httpx2.AsyncClient() as client:
            forged = f"{login.redirect_uri}?code=stolen&state=not-yours"
            refused = await client.get(forged)
            assert refused.status_code == 400
            assert not login.done.is_set()  # a stray request does not end it
            landed = await browse(server, login)
            assert landed.status_code == 200
            with anyio.fail_after(10):
                await login.done.wait()
            with pytest.raises(httpx2.ConnectError):  # one-shot: gone after use
                await client.get(forged)
        assert login.error is None


async def test_a_user_slower_than_connect_timeout_still_logs_in(tmp_path: Path) -> None:
    """The try waits for the browser as long as the login does, not only its
    connect_timeout (a person takes longer than 1 s)."""
    async with oauth_demo() as server, daemon_parts(tmp_path) as parts:
        parts.manager.add(spec("tracker", server, connect_timeout=1))
        await parts.rec.wait_for("needs_login", "tracker")
        login = await parts.logins.begin("tracker", timeout=20)
        assert login is not None
        await parts.logins.first_answer(login, 10)
        await anyio.sleep(1.5)  # the user reads the consent page
        landed = await browse(server, login)
        assert landed.status_code == 200
        with anyio.fail_after(10):
            await login.done.wait()
        assert login.error is None
        await parts.rec.wait_for("connected", "tracker")


async def test_a_login_nobody_completes_ends_with_the_reason(tmp_path: Path) -> None:
    async with oauth_demo() as server, daemon_parts(tmp_path) as parts:
        parts.manager.add(spec("tracker", server))
        first = await parts.rec.wait_for("needs_login", "tracker")
        login = await parts.logins.begin("tracker", timeout=0.5)
        assert login is not None
        with anyio.fail_after(10):
            await login.done.wait()
        assert login.error is not None and "within 0.5 s" in login.error
        await parts.rec.wait_for("needs_login", "tracker", after=first.seq)
        assert server.hits["/token"] == 0


def _hud_text(rows: list[Any], events: list[dict[str, object]]) -> str:
    """What the HUD shows: its rows and log lines, folded from the real stream."""
    hud = HudState()
    now = time.time()
    hud.seed(rows, now)
    for data in events:
        hud.apply(event_from_dict(data), now)
    shown = [str(cells(row, now)) for row in hud.sorted_rows()]
    return "\n".join([*shown, *(line.text for line in hud.log)])


def _run(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "manager", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )


async def test_login_from_the_cli_then_a_restart_without_one_and_no_secret_shown(
    tmp_path: Path,
) -> None:
    """The real daemon at DEBUG with spans on the console; `mcp-manager login
    NAME --no-browser`; a token renewed during a call; a second daemon on the
    same state that needs no login. No token, refresh token, code, PKCE
    verifier or client secret shows on any surface."""
    script = tmp_path / "startup.lua"
    env = {
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "OTEL_SDK_DISABLED": "false",
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
    }
    async with oauth_demo() as server:
        script.write_text(f'mcp_add("tracker", "{server.base}/mcp", {{hold = 5}})\n')

        def first_daemon() -> dict[str, str]:
            surfaces: dict[str, str] = {}
            with DaemonProcess(script, "--log-level", "DEBUG", env=env) as daemon:
                daemon.wait_event("needs_login", "tracker")
                surfaces["status before"] = json.dumps(
                    [row.to_dict() for row in daemon.client.status()]
                )
                login = _run(
                    ["login", "tracker", "--no-browser", "--timeout", "30"]
                    + ["--socket", str(daemon.socket)],
                    env,
                )
                assert login.stdout is not None
                url = login.stdout.readline().strip()
                callback = anyio.from_thread.run(server.approve, url)
                landed = httpx2.get(callback)
                assert landed.status_code == 200
                out, err = login.communicate(timeout=30)
                assert login.returncode == 0, err
                assert "tracker: connected" in out
                surfaces["login output"] = url + out + err
                client = daemon.client
                client.call("tracker", "echo", {"text": "one"})
                server.expire_all()  # the next call refreshes its token
                client.call("tracker", "echo", {"text": "two"})
                # Published before the call's answer, but on the event stream,
                # which the harness reads on a thread of its own.
                daemon.wait_event(
                    "auth",
                    "tracker",
                    where=lambda e: e["step"] == "refresh" and e["outcome"] == "ok",
                )
                surfaces["status"] = json.dumps(
                    [row.to_dict() for row in client.status()]
                )
                surfaces["details"] = json.dumps(client.details("tracker").to_dict())
                surfaces["events"] = json.dumps(daemon.events)
                surfaces["hud"] = _hud_text(client.status(), daemon.events)
            surfaces["log"] = daemon.log()
            return surfaces

        def second_daemon() -> dict[str, str]:
            with DaemonProcess(script, "--log-level", "DEBUG", env=env) as daemon:
                daemon.wait_event("connected", "tracker")
                daemon.client.call("tracker", "echo", {"text": "three"})
                events = json.dumps(daemon.events)
            return {"events again": events, "log again": daemon.log()}

        surfaces = await anyio.to_thread.run_sync(first_daemon)
        surfaces |= await anyio.to_thread.run_sync(second_daemon)
    assert "needs_login" in surfaces["status before"]
    assert "needs_login" not in surfaces["events again"]
    assert "oauth refresh ok" in surfaces["hud"]  # the HUD saw the steps
    assert server.hits["/authorize"] == 1  # one login, for both daemons
    assert server.refused_refreshes == 0 and server.issued == 2  # login + refresh
    assert '"name": "mcp.auth"' in surfaces["log"]  # the steps were traced
    assert len(server.seen_secrets) >= 5  # token, refresh, code, verifier, secret
    for surface, text in surfaces.items():
        for secret in server.seen_secrets:
            assert secret not in text, f"an OAuth secret leaked into {surface}"


async def test_a_call_that_needs_more_scope_asks_for_it_at_the_next_login(
    tmp_path: Path,
) -> None:
    """Step-up: a tool the token's scope does not cover is refused with 403
    `insufficient_scope`; the connection waits for a login, and that login asks
    for the old scopes plus the challenged ones (once), after which the call
    works."""
    async with (
        oauth_demo(admin_tools=frozenset({"add"})) as server,
        daemon_parts(tmp_path) as parts,
    ):
        parts.manager.add(spec("tracker", server))
        first = await parts.rec.wait_for("needs_login", "tracker")
        await log_in(parts, server, "tracker")
        assert server.asked_scopes == ["tools"]  # the resource's scopes_supported
        with pytest.raises(ServerUnavailable):
            await parts.manager.call("tracker", "add", {"a": 1, "b": 2})
        event = await parts.rec.wait_for("needs_login", "tracker", after=first.seq)
        assert isinstance(event, NeedsLogin) and "more scope" in event.reason
        await log_in(parts, server, "tracker")
        assert server.asked_scopes[-1].split() == ["tools", "admin"]
        assert len(server.asked_scopes) == 2  # one authorization per login
        result = await parts.manager.call("tracker", "add", {"a": 1, "b": 2})
        assert not result.is_error


async def test_requests_refused_together_during_a_login_share_one_authorization(
    tmp_path: Path,
) -> None:
    """Two requests of one connection get 401 at the same moment while a login
    is under way: the first authorizes, the second waits for it and goes out
    with the new token (no second authorization racing for the same login)."""
    from manager.transport.oauth.door import oauth_auth
    from manager.transport.oauth.login import LoginDesk
    from manager.transport.oauth.tokens import FileTokens

    async with oauth_demo() as server:
        desk = LoginDesk()
        tokens = FileTokens(tmp_path / "t.json", None)
        steps: list[str] = []
        auth = oauth_auth(
            spec("tracker", server), tokens, desk, lambda step, *_: steps.append(step)
        )
        assert auth is not None
        login = await desk.begin("tracker", timeout=20)
        statuses: list[int] = []
        both = anyio.Event()

        async def request(client: httpx2.AsyncClient) -> None:
            response = await client.get(f"{server.base}/mcp")
            statuses.append(response.status_code)
            if len(statuses) == 2:
                both.set()

        async with (
            httpx2.AsyncClient(auth=auth) as client,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(login.serve)
            tg.start_soon(request, client)
            tg.start_soon(request, client)
            with anyio.fail_after(10):
                await login.url_ready.wait()
            landed = await browse(server, login)
            assert landed.status_code == 200
            with anyio.fail_after(10):
                await both.wait()
            login.finish(None)
        assert 401 not in statuses  # both went through with the login's token
        assert server.hits["/authorize"] == 1 and steps.count("authorize") == 1
        assert server.issued == 1
