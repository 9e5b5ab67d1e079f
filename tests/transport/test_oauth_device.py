"""Logging in without a browser: the device authorization grant (RFC 8628).

The test authorization server (`servers.oauth`, `device` on) advertises a
device authorization endpoint, hands out device and user codes, and answers
the daemon's polls with `authorization_pending` (or `slow_down`) until the test
decides for the user (`OAuthServer.decide`, an HTTP endpoint standing in for
the verification page). Polls are 0 s apart here: the tests wait on the
login's events, never on sleeps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from servers.daemon import DaemonProcess
from servers.oauth import OAuthServer, oauth_demo
from support.oauth import Parts, daemon_parts

from manager.core.events import AuthStep, NeedsLogin
from manager.core.spec import parse_spec
from manager.transport.oauth import device
from manager.transport.oauth.login import Login

pytestmark = pytest.mark.anyio

FAST = {"backoff": {"initial": 0.05, "cap": 0.2}, "hold": 0, "connect_timeout": 10}


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test server names `interval` 0: polls as quick as it answers
    (the floor, `MIN_INTERVAL`, has its own test)."""
    monkeypatch.setattr(device, "MIN_INTERVAL", 0.0)


def spec(name: str, server: OAuthServer) -> Any:
    return parse_spec(name, f"{server.base}/mcp", dict(FAST))


async def begin(parts: Parts, name: str = "tracker", lasts: float = 20) -> Login:
    """`login NAME --device`: the login, once it shows its code (or ended)."""
    await parts.rec.wait_for("needs_login", name)
    login = await parts.logins.begin(name, timeout=lasts, device=True)
    assert login is not None and login.device
    await parts.logins.first_answer(login, 10)
    return login


async def ended(login: Login) -> str | None:
    with anyio.fail_after(10):
        await login.done.wait()
    return login.error


async def test_a_device_login_shows_a_code_and_connects_once_the_user_approves(
    tmp_path: Path,
) -> None:
    async with oauth_demo(device=True) as server:
        async with daemon_parts(tmp_path) as parts:
            parts.manager.add(spec("tracker", server))
            login = await begin(parts)
            assert login.user_code is not None and login.redirect_uri is None
            assert login.url == f"{server.issuer}/device/verify"
            assert login.url_complete is not None
            assert login.user_code in login.url_complete
            assert await server.decide(login.user_code) == 200
            assert await ended(login) is None
            await parts.rec.wait_for("connected", "tracker")
            result = await parts.manager.call("tracker", "echo", {"text": "hi"})
            assert result.data["content"] == [{"type": "text", "text": "hi"}]
            # As the browser flow would ask: its client, scope and resource.
            (asked,) = server.device_requests
            assert asked["scope"] == "tools"
            assert asked["resource"] == f"{server.base}/mcp"
            assert asked["client_id"].startswith("client-")
            assert server.hits["/authorize"] == 0  # no browser anywhere
            steps = [
                (e.step, e.outcome)
                for e in parts.rec.events
                if isinstance(e, AuthStep) and e.step in ("device", "authorize")
            ]
            assert steps == [("device", "ok"), ("authorize", "ok")]
            server.expire_all()  # refreshed as a browser login's token is
            await parts.manager.call("tracker", "echo", {"text": "again"})
            assert server.refused_refreshes == 0 and server.issued >= 2
            refreshes = [
                e.outcome
                for e in parts.rec.events
                if isinstance(e, AuthStep) and e.step == "refresh"
            ]
            assert refreshes and set(refreshes) == {"ok"}
        stored = json.loads((tmp_path / "tokens" / "tracker.json").read_text())
        assert stored["issuer"] is None and "refresh_token" in stored["token"]
        assert stored["auth_server"]["device_endpoint"] == f"{server.issuer}/device"
        async with daemon_parts(tmp_path) as parts:  # a restart: no new login
            parts.manager.add(spec("tracker", server))
            await parts.rec.wait_for("connected", "tracker")
        assert len(server.device_requests) == 1


async def test_a_denied_device_login_ends_with_the_reason_and_is_not_counted(
    tmp_path: Path,
) -> None:
    async with oauth_demo(device=True) as server, daemon_parts(tmp_path) as parts:
        parts.manager.add(spec("tracker", server))
        first = await parts.rec.wait_for("needs_login", "tracker")
        login = await begin(parts)
        assert login.user_code is not None
        assert await server.decide(login.user_code, "deny") == 200
        error = await ended(login)
        assert error is not None and "denied" in error
        event = await parts.rec.wait_for("needs_login", "tracker", after=first.seq)
        assert isinstance(event, NeedsLogin) and "logins in a row" not in event.reason
        assert server.polls[-1][1] == "access_denied"


async def test_a_device_code_nobody_approves_expires_with_the_reason(
    tmp_path: Path,
) -> None:
    async with oauth_demo(device=True) as server, daemon_parts(tmp_path) as parts:
        server.device_expires_in = 0.3
        parts.manager.add(spec("tracker", server))
        login = await begin(parts)
        error = await ended(login)
        assert error is not None and "expired" in error
        assert server.issued == 0


async def test_a_device_login_past_its_own_timeout_ends_with_the_reason(
    tmp_path: Path,
) -> None:
    async with oauth_demo(device=True) as server, daemon_parts(tmp_path) as parts:
        parts.manager.add(spec("tracker", server))
        login = await begin(parts, lasts=0.3)
        error = await ended(login)
        assert error is not None and "not approved within 0.3 s" in error
        assert server.issued == 0


async def test_slow_down_lengthens_the_interval_for_the_rest_of_the_login(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(device, "SLOW_DOWN_STEP", 0.15)  # RFC 8628: 5 s
    async with oauth_demo(device=True) as server, daemon_parts(tmp_path) as parts:
        server.slow_downs = 2
        parts.manager.add(spec("tracker", server))
        login = await begin(parts)
        assert login.user_code is not None
        await server.decide(login.user_code)
        assert await ended(login) is None
        (t1, a1), (t2, a2), (t3, a3) = server.polls
        assert (a1, a2, a3) == ("slow_down", "slow_down", "granted")
        assert t2 - t1 >= 0.14  # 0 + 0.15
        assert t3 - t2 >= 0.29  # 0 + 0.15 + 0.15


async def test_an_interval_of_0_is_polled_at_the_floor_not_as_fast_as_it_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(device, "MIN_INTERVAL", 0.3)  # 1 s in the daemon
    async with oauth_demo(device=True) as server, daemon_parts(tmp_path) as parts:
        parts.manager.add(spec("tracker", server))
        login = await begin(parts)
        assert login.user_code is not None
        with anyio.fail_after(10):
            while len(server.polls) < 3:  # noqa: ASYNC110 - the server's record
                await anyio.sleep(0.05)
        await server.decide(login.user_code)
        assert await ended(login) is None
        times = [t for t, _ in server.polls]
        assert all(b - a >= 0.29 for a, b in zip(times, times[1:], strict=False))


async def test_a_device_grant_the_server_refuses_counts_as_a_refused_login(
    tmp_path: Path,
) -> None:
    async with oauth_demo(device=True) as server, daemon_parts(tmp_path) as parts:
        parts.manager.add(spec("tracker", server))
        first = await parts.rec.wait_for("needs_login", "tracker")
        login = await begin(parts)
        server.device_codes.clear()  # the server forgot it: invalid_grant
        error = await ended(login)
        assert error is not None and "invalid_grant" in error
        event = await parts.rec.wait_for("needs_login", "tracker", after=first.seq)
        assert isinstance(event, NeedsLogin)
        assert "(1 of 3 logins in a row refused)" in event.reason


async def test_a_server_without_device_login_says_so_before_registering(
    tmp_path: Path,
) -> None:
    async with oauth_demo() as server, daemon_parts(tmp_path) as parts:
        parts.manager.add(spec("tracker", server))
        first = await parts.rec.wait_for("needs_login", "tracker")
        login = await begin(parts)
        error = await ended(login)
        assert login.unsupported and login.url is None
        assert error == (
            f"the authorization server at {server.issuer} does not offer device "
            "login (RFC 8628); use `mcp-manager login tracker` (browser) or "
            "`--manual`"
        )
        assert server.hits["/register"] == 0 and server.hits["/device"] == 0
        event = await parts.rec.wait_for("needs_login", "tracker", after=first.seq)
        assert isinstance(event, NeedsLogin)
        assert "logins in a row" not in event.reason  # not counted


def _run(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "manager", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )


async def test_login_device_from_the_cli_and_no_secret_shown(tmp_path: Path) -> None:
    """The real daemon at DEBUG with spans on the console. `login --device`
    against a server without device login exits 2 with the sentence; once it
    offers one, `login --device` prints the address and the code, waits for
    the approval and exits 0; a tool call works. No device code, token or
    client secret shows on any surface, nor the user code outside the CLI."""
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

        def run_daemon() -> dict[str, str]:
            surfaces: dict[str, str] = {}
            with DaemonProcess(script, "--log-level", "DEBUG", env=env) as daemon:
                daemon.wait_event("needs_login", "tracker")
                where = ["--socket", str(daemon.socket)]
                refused = _run(["login", "tracker", "--device", *where], env)
                out, err = refused.communicate(timeout=30)
                assert refused.returncode == 2, err
                assert "does not offer device login (RFC 8628)" in err
                assert "mcp-manager login tracker" in err

                server.device = True
                login = _run(
                    ["login", "tracker", "--device", "--timeout", "30", *where], env
                )
                assert login.stdout is not None
                url = login.stdout.readline().strip()
                assert url == f"{server.issuer}/device/verify"
                line = login.stdout.readline().strip()
                assert line.startswith("and enter the code: ")
                user_code = line.rsplit(" ", 1)[1]
                complete = login.stdout.readline().strip()
                assert complete.endswith(f"user_code={user_code}")
                decided = anyio.from_thread.run(server.decide, user_code)
                assert decided == 200
                out, err = login.communicate(timeout=30)
                assert login.returncode == 0, err
                assert "tracker: connected" in out
                assert "open this address on any device" in err
                client = daemon.client
                client.call("tracker", "echo", {"text": "one"})
                surfaces["status"] = json.dumps(
                    [row.to_dict() for row in client.status()]
                )
                surfaces["details"] = json.dumps(client.details("tracker").to_dict())
                surfaces["events"] = json.dumps(daemon.events)
                surfaces["user code"] = user_code
            surfaces["log"] = daemon.log()
            return surfaces

        surfaces = await anyio.to_thread.run_sync(run_daemon)
    user_code = surfaces.pop("user code")
    assert '"step": "device"' in surfaces["events"]
    assert any(s.startswith("tok-") for s in server.seen_secrets)
    assert len(server.seen_secrets) >= 3  # device code, token, refresh token
    for surface, text in surfaces.items():
        for secret in server.seen_secrets:
            assert secret not in text, f"an OAuth secret leaked into {surface}"
        assert user_code not in text, f"the user code shows in {surface}"
