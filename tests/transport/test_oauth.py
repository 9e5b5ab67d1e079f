"""OAuth client credentials: a headless connection gets its own tokens.

A real authorization server in front of the demo server (`servers.oauth`, one
uvicorn app on 127.0.0.1). The daemon's connection discovers it all through
the SDK's provider, connects, calls, and gets a new token when one expires;
wrong credentials are `AuthRefused` (no storm) with no secret in any text.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import anyio
import pytest
from fakes import Recorder
from servers.daemon import DaemonProcess
from servers.oauth import CLIENT_ID, SECRET, oauth_demo

from manager.core.errors import ConfigError
from manager.core.events import AttemptFailed, Reconnecting
from manager.core.redact import SecretRegistry
from manager.core.spec import parse_spec
from manager.core.state import AUTH_RETRY_DELAY
from manager.engine.bus import EventBus
from manager.engine.manager import Manager
from manager.transport.connect import McpTransport

pytestmark = pytest.mark.anyio


def oauth_spec(base: str, secret: str = "${env:MM_TEST_SECRET}", **extra: Any) -> Any:
    return parse_spec(
        "tracker",
        f"{base}/mcp",
        {
            "backoff": {"initial": 0.05, "cap": 0.2},
            "hold": 0,
            "oauth": {
                "grant": "client_credentials",
                "client_id": CLIENT_ID,
                "client_secret": secret,
                "issuer": base,
                **extra,
            },
        },
    )


async def test_client_credentials_connect_call_and_renew_by_themselves(
    tmp_path: Path,
) -> None:
    secrets = SecretRegistry()
    bus = EventBus()
    rec = Recorder(bus)
    env = {"MM_TEST_SECRET": SECRET}
    async with oauth_demo() as server:
        transport = McpTransport(getenv=env.get, secrets=secrets, state_dir=tmp_path)
        async with Manager(bus, transport, secrets=secrets) as oauth_manager:
            oauth_manager.add(oauth_spec(server.base))
            await rec.wait_for("connected", "tracker")
            assert server.issued == 1
            result = await oauth_manager.call("tracker", "echo", {"text": "hi"})
            assert result.data["content"] == [{"type": "text", "text": "hi"}]
            server.expire_all()  # the server forgets the token mid-session
            again = await oauth_manager.call("tracker", "echo", {"text": "again"})
            assert again.data["content"] == [{"type": "text", "text": "again"}]
            assert server.issued == 2  # a new token, fetched by itself
            assert SECRET in secrets  # registered, so masked everywhere
            (status,) = oauth_manager.statuses()
            assert status.auth == "oauth"
            assert status.auth_expires_in is not None
            assert 3000 < status.auth_expires_in <= 3600
            texts = " ".join(str(e) for e in rec.events)
            assert SECRET not in texts and "tok-" not in texts


async def test_wrong_client_credentials_are_refused_once_then_rarely(
    tmp_path: Path,
) -> None:
    secrets = SecretRegistry()
    bus = EventBus()
    rec = Recorder(bus)
    env = {"MM_TEST_SECRET": "not-the-secret-1234"}
    async with oauth_demo() as server:
        transport = McpTransport(getenv=env.get, secrets=secrets, state_dir=tmp_path)
        async with Manager(bus, transport, secrets=secrets) as manager:
            manager.add(oauth_spec(server.base))
            failed = await rec.wait_for("connect_failed", "tracker")
            retry = await rec.wait_for("reconnecting", "tracker")
            assert isinstance(failed, AttemptFailed) and isinstance(retry, Reconnecting)
            assert failed.error_type == "AuthRefused"
            assert f"OAuth client {CLIENT_ID!r}" in failed.error
            assert "not-the-secret-1234" not in failed.error
            assert retry.delay >= AUTH_RETRY_DELAY
            assert server.hits["/token"] <= 2  # one attempt's worth, no storm


def test_oauth_settings_are_checked_with_the_fix_in_the_message() -> None:
    def spec(oauth: object) -> Any:
        return parse_spec("t", "https://h/mcp", {"oauth": oauth})

    cc = {"grant": "client_credentials", "client_id": "x", "client_secret": "y"}
    with pytest.raises(ConfigError, match="oauth needs issuer"):
        spec(cc)
    with pytest.raises(ConfigError, match="needs client_id and client_secret"):
        spec({"grant": "client_credentials", "issuer": "https://a"})
    with pytest.raises(ConfigError, match="oauth.grant must be one of"):
        spec({"grant": "password"})
    with pytest.raises(ConfigError, match="client_secret needs oauth.client_id"):
        spec({"client_secret": "y"})
    with pytest.raises(ConfigError, match="must be an https URL"):
        spec({"client_metadata_url": "http://h/client.json"})
    with pytest.raises(ConfigError, match="needs a path"):
        spec({"client_metadata_url": "https://h/"})
    with pytest.raises(ConfigError, match="callback_port must be a port"):
        spec({"callback_port": 70000})
    with pytest.raises(ConfigError, match="scopes the server names"):
        spec({"scope": "read"})
    with pytest.raises(ConfigError, match="http/sse endpoints only"):
        parse_spec("t", {"command": "x"}, {"oauth": {}})
    # The interactive login needs nothing declared; false turns OAuth off.
    assert spec({}).oauth.interactive
    assert spec({"client_id": "app", "callback_port": 8765}).oauth.callback_port == 8765
    assert spec(False).oauth.grant == "off"


async def test_a_restarted_daemon_reuses_its_stored_token(tmp_path: Path) -> None:
    env = {"MM_TEST_SECRET": SECRET}
    async with oauth_demo() as server:
        for _ in range(2):  # a daemon, then the next one on the same state dir
            bus = EventBus()
            rec = Recorder(bus)
            secrets = SecretRegistry()
            transport = McpTransport(
                getenv=env.get, secrets=secrets, state_dir=tmp_path
            )
            async with Manager(bus, transport, secrets=secrets) as manager:
                manager.add(oauth_spec(server.base))
                await rec.wait_for("connected", "tracker")
        assert server.hits["/token"] == 1  # the second one used the stored token
        stored = tmp_path / "tokens" / "tracker.json"
        assert stat.S_IMODE(stored.stat().st_mode) == 0o600
        assert stat.S_IMODE(stored.parent.stat().st_mode) == 0o700
        assert SECRET not in stored.read_text()  # the token, not the client secret


async def test_a_stored_token_past_its_expiry_is_not_sent(tmp_path: Path) -> None:
    from mcp.shared.auth import OAuthToken

    from manager.transport.oauth.tokens import FileTokens

    now = [1000.0]
    tokens = FileTokens(tmp_path / "t.json", "https://as", clock=lambda: now[0])
    await tokens.set_tokens(OAuthToken(access_token="tok-a", expires_in=60))
    kept = await tokens.get_tokens()
    assert kept is not None and kept.access_token == "tok-a"
    now[0] += 45  # within the margin of its expiry
    assert await tokens.get_tokens() is None
    other = FileTokens(tmp_path / "t.json", "https://elsewhere")
    assert await other.get_tokens() is None  # another issuer's token is not used


async def test_the_authorization_server_is_kept_with_the_tokens(tmp_path: Path) -> None:
    from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata

    from manager.transport.oauth.tokens import AuthServer, FileTokens

    tokens = FileTokens(tmp_path / "t.json", None)
    assert tokens.auth_server() is None
    metadata = OAuthMetadata.model_validate(
        {
            "issuer": "https://as.test/tenant",
            "authorization_endpoint": "https://as.test/tenant/authorize",
            "token_endpoint": "https://as.test/tenant/token",
        }
    )
    resource = ProtectedResourceMetadata.model_validate(
        {
            "resource": "https://mcp.test/mcp",
            "authorization_servers": ["https://as.test/tenant"],
        }
    )
    await tokens.set_auth_server(
        AuthServer("https://as.test/tenant", metadata, resource)
    )
    kept = tokens.auth_server()
    assert kept is not None and kept.issuer == "https://as.test/tenant"
    assert str(kept.metadata.token_endpoint) == "https://as.test/tenant/token"
    assert kept.resource is not None
    assert str(kept.resource.resource) == "https://mcp.test/mcp"
    # A connection declared for another issuer ignores it, like its tokens.
    assert FileTokens(tmp_path / "t.json", "https://other.test").auth_server() is None


async def test_no_oauth_secret_reaches_any_surface_of_the_daemon(
    tmp_path: Path,
) -> None:
    """The real daemon at DEBUG with spans on the console, an OAuth connection
    that connects, calls and renews its token: neither the client secret nor
    any access token shows in the log, events, status or details."""
    script = tmp_path / "startup.lua"
    env = {
        "MM_TEST_SECRET": SECRET,
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "OTEL_SDK_DISABLED": "false",
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
    }
    async with oauth_demo() as server:
        script.write_text(
            f'mcp_add("tracker", "{server.base}/mcp", {{oauth = {{'
            f'grant = "client_credentials", client_id = "{CLIENT_ID}", '
            'client_secret = "${env:MM_TEST_SECRET}", '
            f'issuer = "{server.base}"}}}})\n'
        )

        def run_daemon() -> dict[str, str]:
            surfaces: dict[str, str] = {}
            with DaemonProcess(script, "--log-level", "DEBUG", env=env) as daemon:
                daemon.wait_event("connected", "tracker")
                client = daemon.client
                client.call("tracker", "echo", {"text": "one"})
                server.expire_all()  # the next call gets a fresh token
                client.call("tracker", "echo", {"text": "two"})
                surfaces["status"] = json.dumps(
                    [row.to_dict() for row in client.status()]
                )
                surfaces["details"] = json.dumps(client.details("tracker").to_dict())
                surfaces["events"] = json.dumps(daemon.events)
            surfaces["log"] = daemon.log()
            return surfaces

        surfaces = await anyio.to_thread.run_sync(run_daemon)
    assert server.issued == 2  # the surfaces saw a renewal, not only a first token
    assert '"name": "mcp.connect_attempt"' in surfaces["log"]  # spans were printed
    tokens = [t for t in server.seen_secrets if t.startswith("tok-")]
    assert len(tokens) == 2
    for surface, text in surfaces.items():
        assert SECRET not in text, f"the client secret leaked into {surface}"
        for token in tokens:
            assert token not in text, f"an access token leaked into {surface}"
