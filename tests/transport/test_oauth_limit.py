"""OAuth stops asking on its own, and answers for another server are refused.

The daemon in this process against the real authorization server of
`servers.oauth`, and a script standing in for a user (or a tool) that logs in
whenever the daemon says `needs_login`: the bound on logins is the daemon's.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import anyio
import pytest
from servers.oauth import OAuthServer, oauth_demo
from support.oauth import Parts, browse, daemon_parts, log_in, spec

from manager.core.errors import ServerUnavailable
from manager.core.events import Event, NeedsLogin, Refused, event_to_dict
from manager.core.state import LOGIN_LIMIT

pytestmark = pytest.mark.anyio

MAX_LOGINS = 10
"""Logins the script makes at most (a daemon that never stops fails the test)."""


async def log_in_whenever_asked(
    parts: Parts, server: OAuthServer, name: str, after: int = 0
) -> tuple[Event, int]:
    """Log `name` in each time it says `needs_login`, until it is connected or
    refused. Returns that event and the number of logins made."""
    logins = 0
    seen = after
    while True:
        event = await parts.rec.wait_for(
            ("needs_login", "refused", "connected"), name, after=seen
        )
        seen = event.seq
        if event.kind != "needs_login":
            return event, logins
        assert logins < MAX_LOGINS, "the daemon keeps asking for logins"
        logins += 1
        login = await parts.logins.begin(name, timeout=20)
        assert login is not None
        await parts.logins.first_answer(login, 10)
        if login.url is not None:
            await browse(server, login)
        with anyio.fail_after(10):
            await login.done.wait()


def daemon_log(caplog: pytest.LogCaptureFixture) -> str:
    """The log lines of the daemon and the SDK (not of this test's browser,
    whose HTTP client logs the callback URL with its code)."""
    return "\n".join(
        record.getMessage()
        for record in caplog.records
        if record.name.startswith(("manager", "mcp"))
    )


def assert_nothing_secret_shown(
    parts: Parts, server: OAuthServer, caplog: pytest.LogCaptureFixture
) -> None:
    """No token, refresh token, code, verifier or client secret the server
    handed out or received is in an event, a status or a log line."""
    shown = "\n".join(
        [
            json.dumps([event_to_dict(e) for e in parts.rec.events]),
            json.dumps([s.to_dict() for s in parts.manager.statuses()]),
            daemon_log(caplog),
        ]
    )
    assert len(server.seen_secrets) >= 4
    for secret in server.seen_secrets:
        assert secret not in shown


async def test_a_server_refusing_the_scope_it_asks_for_gets_three_logins_then_none(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with (
        oauth_demo(refuse_scope=True) as server,
        daemon_parts(tmp_path) as parts,
    ):
        parts.manager.add(spec("tracker", server))
        event, logins = await log_in_whenever_asked(parts, server, "tracker")
        assert isinstance(event, Refused)
        assert server.hits["/authorize"] == LOGIN_LIMIT == logins
        last = parts.logins.last("tracker")  # what `mcp-manager login` says
        assert last is not None and last.error == event.reason
        assert event.reason.startswith(
            "the server refused the scope it asked for after 3 logins: "
            "HTTP 403 insufficient_scope, it asks for scope 'tools admin'"
        )
        reasons = [
            e.reason
            for e in parts.rec.of("needs_login", "tracker")
            if isinstance(e, NeedsLogin)
        ]
        assert reasons[0] == "the server wants a login"  # not counted: no login yet
        assert "(1 of 3 logins in a row refused)" in reasons[1]
        assert "(2 of 3 logins in a row refused)" in reasons[2]
        (status,) = parts.manager.statuses()
        assert (status.state, status.auth) == ("refused", "refused")
        assert status.next_retry_in is None  # nothing scheduled: it stopped asking
        with pytest.raises(ServerUnavailable, match="mcp-manager reconnect tracker"):
            await parts.manager.call("tracker", "echo", {"text": "x"})

        # `reconnect` allows three more, and so does a login of the user.
        mark = parts.rec.last_seq
        parts.manager.reconnect("tracker")
        event, logins = await log_in_whenever_asked(parts, server, "tracker", mark)
        assert isinstance(event, Refused) and logins == LOGIN_LIMIT
        assert server.hits["/authorize"] == 2 * LOGIN_LIMIT

        mark = parts.rec.last_seq
        login = await parts.logins.begin("tracker", timeout=20)
        assert login is not None
        await parts.logins.first_answer(login, 10)
        assert login.url is not None
        await browse(server, login)
        event, logins = await log_in_whenever_asked(parts, server, "tracker", mark)
        assert isinstance(event, Refused) and logins == LOGIN_LIMIT - 1
        assert server.hits["/authorize"] == 3 * LOGIN_LIMIT
        assert_nothing_secret_shown(parts, server, caplog)


async def test_a_refresh_that_keeps_being_refused_stops_the_asking_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with (
        oauth_demo(refuse_refresh=True) as server,
        daemon_parts(tmp_path) as parts,
    ):
        parts.manager.add(spec("tracker", server))
        seen = (await parts.rec.wait_for("needs_login", "tracker")).seq
        for n in range(1, LOGIN_LIMIT + 1):
            await log_in(parts, server, "tracker")
            server.expire_all()  # the next call needs a refresh: refused
            with pytest.raises(ServerUnavailable):
                await parts.manager.call("tracker", "echo", {"text": "x"})
            event = await parts.rec.wait_for(
                ("needs_login", "refused"), "tracker", after=seen
            )
            seen = event.seq
            if n < LOGIN_LIMIT:
                assert isinstance(event, NeedsLogin)
                assert f"({n} of 3 logins in a row refused)" in event.reason
        assert isinstance(event, Refused)
        assert event.reason.startswith(
            "the authorization server refused to refresh the token after 3 logins: "
            "HTTP 400"
        )
        assert server.refused_refreshes == LOGIN_LIMIT
        assert_nothing_secret_shown(parts, server, caplog)


async def test_a_refresh_the_server_grants_forgives_earlier_refusals(
    tmp_path: Path,
) -> None:
    async with oauth_demo() as server, daemon_parts(tmp_path) as parts:
        parts.manager.add(spec("tracker", server))
        seen = (await parts.rec.wait_for("needs_login", "tracker")).seq
        for _ in range(LOGIN_LIMIT - 1):
            await log_in(parts, server, "tracker")
            server.revoke_refresh_tokens()
            server.expire_all()
            with pytest.raises(ServerUnavailable):
                await parts.manager.call("tracker", "echo", {"text": "x"})
            seen = (await parts.rec.wait_for("needs_login", "tracker", after=seen)).seq
        assert parts.manager.connection("tracker").state.refusals == 2  # type: ignore[union-attr]
        await log_in(parts, server, "tracker")
        server.expire_all()  # refreshed, and the call goes through
        await parts.manager.call("tracker", "echo", {"text": "y"})
        assert parts.manager.connection("tracker").state.refusals == 0  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("setting", "value", "sentence"),
    [
        (
            "prm_resource",
            "https://elsewhere.test/mcp",
            "the server's protected resource metadata is for another resource "
            "('https://elsewhere.test/mcp', not ",
        ),
        (
            "metadata_issuer",
            "https://attacker.test",
            "the authorization server's metadata names another issuer "
            "('https://attacker.test', not ",
        ),
        (
            "iss",
            "wrong",
            "the authorization response names another issuer "
            "(iss 'https://evil.test', not ",
        ),
        (
            "iss",
            "missing",
            "promises an iss in its answers "
            "(authorization_response_iss_parameter_supported) and sent none",
        ),
    ],
)
async def test_oauth_answers_for_another_server_are_refused_with_a_sentence(
    tmp_path: Path,
    setting: str,
    value: str,
    sentence: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with oauth_demo() as server, daemon_parts(tmp_path) as parts:
        setattr(server, setting, value)
        parts.manager.add(spec("tracker", server))
        event, logins = await log_in_whenever_asked(parts, server, "tracker")
        assert isinstance(event, Refused) and logins == 1  # no login can fix it
        assert sentence in event.reason
        assert server.hits["/token"] == 0  # no code exchanged, no token asked
        login = parts.logins.last("tracker")
        assert login is not None and login.error is not None
        assert sentence in login.error  # what `mcp-manager login` prints
        (status,) = parts.manager.statuses()
        assert status.state == "refused" and status.error is not None
        assert sentence in status.error
        for secret in server.seen_secrets:  # a code, where one was handed out
            assert secret not in daemon_log(caplog) + json.dumps(status.to_dict())


async def test_an_iss_from_the_right_server_is_taken(
    tmp_path: Path,
) -> None:
    async with oauth_demo() as server, daemon_parts(tmp_path) as parts:
        server.iss = "correct"
        parts.manager.add(spec("tracker", server))
        event, logins = await log_in_whenever_asked(parts, server, "tracker")
        assert event.kind == "connected" and logins == 1


async def test_logins_whose_code_is_refused_stop_the_asking_too(
    tmp_path: Path,
) -> None:
    async with oauth_demo() as server, daemon_parts(tmp_path) as parts:
        server.refuse_code = True
        parts.manager.add(spec("tracker", server))
        event, logins = await log_in_whenever_asked(parts, server, "tracker")
        assert isinstance(event, Refused) and logins == LOGIN_LIMIT
        assert event.reason.startswith("the login failed after 3 logins: ")
        assert server.hits["/token"] == LOGIN_LIMIT


async def test_a_refused_code_is_told_to_the_browser_and_the_user_plainly(
    tmp_path: Path,
) -> None:
    """The browser's page said "Logged in" as soon as the code came, before
    its exchange failed, and the reason was the SDK's class name and raw
    JSON (found by an audit). The page says what is known (the code came),
    and the reason is a sentence."""
    async with oauth_demo() as server, daemon_parts(tmp_path) as parts:
        server.refuse_code = True
        parts.manager.add(spec("tracker", server))
        await parts.rec.wait_for("needs_login", "tracker")
        login = await parts.logins.begin("tracker", timeout=20)
        assert login is not None
        await parts.logins.first_answer(login, 10)
        landed = await browse(server, login)
        assert "Logged in" not in landed.text  # not before the code's exchange
        assert "Authorization received" in landed.text
        with anyio.fail_after(10):
            await login.done.wait()
        assert login.error is not None
        assert "OAuthTokenError" not in login.error and "{" not in login.error
        assert "the token endpoint refused the authorization code" in login.error


async def test_a_restarted_daemon_refreshes_at_the_issuer_it_logged_in_with(
    tmp_path: Path,
) -> None:
    """The authorization server is not the resource server (issuer `BASE/as`):
    a daemon started on stored tokens refreshes them at that issuer's token
    endpoint, never at the resource server's `/token` (which would see the
    refresh token, and refuse it)."""
    async with oauth_demo(expires_in=2) as server:
        server.as_path = "/as"
        async with daemon_parts(tmp_path) as parts:
            parts.manager.add(spec("tracker", server))
            await parts.rec.wait_for("needs_login", "tracker")
            await log_in(parts, server, "tracker")
        assert server.hits["/as/token"] == 1 and server.issued == 1
        async with daemon_parts(tmp_path) as parts:  # the token is due: refreshed
            parts.manager.add(spec("tracker", server))
            await parts.rec.wait_for("connected", "tracker")
            await parts.manager.call("tracker", "echo", {"text": "again"})
            assert not parts.rec.of("needs_login", "tracker")
        assert server.hits["/as/token"] == 2 and server.issued == 2
        assert (
            server.hits["/token"] == 0
            and server.hits["/.well-known/oauth-authorization-server/as"] == 1
        )


async def test_tokens_the_resource_never_takes_are_refused_logins_not_a_lack_of_them(
    tmp_path: Path,
) -> None:
    """The token a login got is answered 401 at once: the connection says so
    (never "we connected without credentials"), forgets that token, and
    stops asking after 3 such logins."""
    async with oauth_demo() as server, daemon_parts(tmp_path) as parts:
        server.refuse_tokens = True
        parts.manager.add(spec("tracker", server))
        event, logins = await log_in_whenever_asked(parts, server, "tracker")
        assert isinstance(event, Refused) and logins == LOGIN_LIMIT
        assert event.reason == (
            "the server refused the token the login got after 3 logins: HTTP 401"
        )
        assert server.hits["/authorize"] == server.issued == LOGIN_LIMIT
        shown = json.dumps([event_to_dict(e) for e in parts.rec.events])
        assert "without credentials" not in shown
        stored = json.loads((tmp_path / "tokens" / "tracker.json").read_text())
        assert "token" not in stored and "client" in stored  # registration kept
