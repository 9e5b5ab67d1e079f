"""The private key a `private_key_jwt` client signs its assertions with
(`oauth.private_key`: the PEM itself or its file) and the JWT algorithm for
it (`signing_key`).
"""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from ...core.errors import (
    ConfigError,
)
from ...core.oauth import OAuthSpec

__all__ = ["signing_key"]


def signing_key(name: str, oauth: OAuthSpec) -> tuple[str, str]:
    """The PEM private key of `oauth.private_key` (the key, or its file) and the
    JWT algorithm to sign with (declared, else the one the key's type implies).

    Raises:
        ConfigError: No such file, not a PEM private key, or no algorithm fits.
    """
    value = oauth.private_key or ""
    if "-----BEGIN" in value:
        pem = value
    else:
        path = Path(value).expanduser()
        try:
            pem = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"{name}: cannot read oauth.private_key file {str(path)!r} "
                f"({getattr(exc, 'strerror', None) or exc})",
                connection=name,
            ) from None
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        # Never the text itself: it may be (part of) the key.
        raise ConfigError(
            f"{name}: oauth.private_key is not an unencrypted PEM private key",
            connection=name,
        ) from None
    if oauth.signing_algorithm is not None:
        return pem, oauth.signing_algorithm
    if isinstance(key, rsa.RSAPrivateKey):
        return pem, "RS256"
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return pem, "EdDSA"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        curves = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
        if key.curve.name in curves:
            return pem, curves[key.curve.name]
    raise ConfigError(
        f"{name}: no JWT algorithm for this oauth.private_key; "
        "set oauth.signing_algorithm",
        connection=name,
    )
