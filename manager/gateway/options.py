"""What `--listen`, `--token-file` and the allow flags mean, checked up front.

`endpoint_options` refuses a non-loopback bind without a token and names the
flag to fix; `EndpointError` is every way the endpoint cannot be set up.
`SESSION_IDLE_TIMEOUT` is how long an HTTP session lives without a request (the
SDK's session manager and the gateway's `list_changed` peers both use it).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import (
    ManagerError,
)

__all__ = [
    "EndpointError",
    "EndpointOptions",
    "SESSION_IDLE_TIMEOUT",
    "TOKEN_ENV",
    "endpoint_options",
]

logger = logging.getLogger("manager.gateway")

TOKEN_ENV = "MCP_MANAGER_TOKEN"
"""Environment variable holding the bearer token (`--token-file` wins)."""

SESSION_IDLE_TIMEOUT = 30 * 60.0
"""Seconds without a request after which an HTTP session is forgotten (the SDK
closes it after the same time)."""


class EndpointError(ManagerError):
    """The MCP endpoint cannot be set up: bad `--listen`, a non-loopback bind
    without a token, an unreadable token file, or the address is taken."""


@dataclass(frozen=True, slots=True)
class EndpointOptions:
    """Where and how the HTTP endpoint listens.

    Attributes:
        host: Interface to bind (an IP literal or `localhost`).
        port: TCP port; 0 picks a free one.
        token: Bearer token every request must carry; None for none.
        allowed_hosts: Extra Host header names accepted (besides loopback names
            and the bound address).
        allowed_origins: Extra Origin values accepted (besides the endpoint's
            own loopback origins).
    """

    host: str
    port: int
    token: str | None = field(default=None, repr=False)
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()

    @property
    def loopback(self) -> bool:
        """Whether only this machine can reach the bound address."""
        return _is_loopback(self.host)


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[V6]:PORT`, `:PORT` or `PORT` -> (host, port)."""
    value = text.strip()
    if value.isdigit():
        host, port_text = "127.0.0.1", value
    elif value.startswith("["):
        host, _, rest = value[1:].partition("]")
        if not rest.startswith(":"):
            raise EndpointError(f"--listen {text!r}: use [IPV6]:PORT, e.g. [::1]:8765")
        port_text = rest[1:]
    else:
        host, sep, port_text = value.rpartition(":")
        if not sep:
            raise EndpointError(
                f"--listen {text!r}: use HOST:PORT, e.g. 127.0.0.1:8765"
            )
        host = host or "127.0.0.1"
        if ":" in host:
            raise EndpointError(f"--listen {text!r}: write IPv6 as [ADDR]:PORT")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise EndpointError(f"--listen {text!r}: port must be a number 0-65535")
    if host.lower() != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise EndpointError(
                f"--listen {text!r}: give an IP address (or localhost), "
                "not a host name, so the bound interface is unambiguous"
            ) from None
    return host, int(port_text)


def _read_token_file(path: str) -> str:
    file = Path(path)
    try:
        info = file.stat()
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise EndpointError(
            f"cannot read token file {path}: {exc.strerror or exc}"
        ) from None
    except UnicodeDecodeError:
        raise EndpointError(f"token file {path} is not UTF-8 text") from None
    token = text.strip()
    if not token:
        raise EndpointError(f"token file {path} is empty")
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        logger.warning(
            "token file %s is readable by other users (mode %o); chmod 600 it",
            path,
            stat.S_IMODE(info.st_mode),
        )
    return token


def endpoint_options(
    listen: str,
    *,
    token_file: str | None = None,
    env: Mapping[str, str] = os.environ,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
) -> EndpointOptions:
    """Validate `--listen` and the token settings.

    The token comes from `token_file` if given, else `$MCP_MANAGER_TOKEN`; the
    daemon registers it as a secret, so it is masked wherever it would be logged.

    Raises:
        EndpointError: Bad address, unreadable or empty token file, or a
            non-loopback address without a token.
    """
    host, port = _parse_listen(listen)
    token = _read_token_file(token_file) if token_file else None
    if token is None:
        token = env.get(TOKEN_ENV, "").strip() or None
    if token is not None:
        if any(ch.isspace() for ch in token):
            raise EndpointError("the token must not contain whitespace")
    options = EndpointOptions(
        host=host,
        port=port,
        token=token,
        allowed_hosts=tuple(h.lower() for h in allowed_hosts),
        allowed_origins=tuple(o.rstrip("/") for o in allowed_origins),
    )
    if not options.loopback and token is None:
        raise EndpointError(
            f"refusing to listen on {listen} without a token: anyone who can reach "
            f"that address could call every tool. Set {TOKEN_ENV} or pass "
            "--token-file FILE (or listen on 127.0.0.1)"
        )
    return options
