"""`oauth = {grant = "client_credentials", private_key = ...}`: private_key_jwt.

The settings and the key; the whole flow (a signed assertion the authorization
server verifies, then the token) is the conformance suite's
`auth/client-credentials-jwt`, run by `bench/conformance.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from manager.core.errors import ConfigError
from manager.core.redact import MASK, SecretRegistry
from manager.core.resolve import resolve_spec
from manager.core.spec import parse_spec, spec_summary
from manager.transport.oauth.keys import signing_key


def pem(key: Any) -> str:
    data: bytes = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return data.decode()


EC_KEY = pem(ec.generate_private_key(ec.SECP256R1()))


def spec(**oauth: Any) -> Any:
    table = {
        "grant": "client_credentials",
        "client_id": "ci",
        "issuer": "https://auth.example.com",
        **oauth,
    }
    return parse_spec("ci", "https://mcp.example.com/mcp", {"oauth": table})


def test_a_private_key_means_private_key_jwt() -> None:
    oauth = spec(private_key="${env:CI_KEY}").oauth
    assert oauth.private_key == "${env:CI_KEY}"
    assert oauth.token_auth_method == "private_key_jwt"
    assert oauth.signing_algorithm is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"client_secret": "s"}, "client_secret or private_key, not both"),
        ({"auth_method": "client_secret_basic"}, "auth_method is private_key_jwt"),
        ({"signing_algorithm": "HS256"}, "signing_algorithm must be one of"),
    ],
)
def test_private_key_settings_that_cannot_work_are_refused(
    extra: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        spec(private_key="${env:CI_KEY}", **extra)


def test_private_key_is_for_client_credentials_only() -> None:
    with pytest.raises(ConfigError, match="private_key is for grant"):
        parse_spec(
            "app",
            "https://mcp.example.com/mcp",
            {"oauth": {"client_id": "app", "private_key": "${env:KEY}"}},
        )
    with pytest.raises(ConfigError, match="private_key_jwt needs oauth.private_key"):
        spec(client_secret="s", auth_method="private_key_jwt")
    with pytest.raises(ConfigError, match="signing_algorithm needs oauth.private_key"):
        spec(client_secret="s", signing_algorithm="ES256")


def test_the_key_is_a_secret_resolved_from_the_environment_and_masked() -> None:
    secrets = SecretRegistry()
    declared = spec(private_key="${env:CI_KEY}")
    resolved = resolve_spec(declared, {"CI_KEY": EC_KEY}.get, secrets)
    assert resolved.oauth is not None
    assert resolved.oauth.private_key == EC_KEY
    assert EC_KEY in secrets
    shown = spec_summary(resolved)["oauth"]
    assert isinstance(shown, dict)
    assert shown["private_key"] == MASK
    assert EC_KEY not in str(spec_summary(resolved))


@pytest.mark.parametrize(
    ("key", "algorithm"),
    [
        (EC_KEY, "ES256"),
        (pem(ec.generate_private_key(ec.SECP384R1())), "ES384"),
        (pem(rsa.generate_private_key(public_exponent=65537, key_size=2048)), "RS256"),
        (pem(ed25519.Ed25519PrivateKey.generate()), "EdDSA"),
    ],
)
def test_the_algorithm_follows_the_key(key: str, algorithm: str) -> None:
    none: dict[str, str] = {}
    oauth = resolve_spec(spec(private_key=key), none.get, SecretRegistry()).oauth
    assert oauth is not None
    assert signing_key("ci", oauth) == (key, algorithm)


def test_the_key_may_be_a_file_and_a_declared_algorithm_wins(tmp_path: Path) -> None:
    path = tmp_path / "ci.pem"
    path.write_text(EC_KEY)
    oauth = spec(private_key=str(path), signing_algorithm="ES256").oauth
    assert signing_key("ci", oauth) == (EC_KEY, "ES256")


def test_a_bad_key_is_named_never_shown(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read oauth.private_key file"):
        signing_key("ci", spec(private_key=str(tmp_path / "absent.pem")).oauth)
    broken = (
        "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWJ1dC1icm9rZW4=\n"
        "-----END PRIVATE KEY-----\n"
    )
    with pytest.raises(ConfigError) as caught:
        signing_key("ci", spec(private_key=broken).oauth)
    assert "not an unencrypted PEM private key" in str(caught.value)
    assert "c2VjcmV0" not in str(caught.value)
