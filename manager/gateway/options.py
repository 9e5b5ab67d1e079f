"""What `--listen`, the token flags and the allow flags mean, checked up front.

Every request to the endpoint carries a bearer token, on loopback too: any
local process (another account, a program the user did not mean to trust)
could otherwise call every tool with the user's credentials. The token comes
from `--token-file`, else `$MCP_MANAGER_TOKEN`, else the daemon's own file
(`endpoint-token` in the state directory, made once, 0600, kept across
restarts: `own_token`). `--no-token` turns it off, on loopback only.
`endpoint_options` refuses what cannot be safe and names the flag to fix;
`EndpointError` is every way the endpoint cannot be set up.
`SESSION_IDLE_TIMEOUT` is how long an HTTP session lives without a request (the
SDK's session manager and the gateway's `list_changed` peers both use it).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import secrets
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import (
    ManagerError,
)
from ..files import default_state_dir

__all__ = [
    "EndpointError",
    "EndpointOptions",
    "MAX_REQUEST_BODY",
    "SESSION_IDLE_TIMEOUT",
    "TOKEN_ENV",
    "TOKEN_FILE",
    "endpoint_options",
    "own_token",
    "own_token_path",
    "write_token",
]

logger = logging.getLogger("manager.gateway")

TOKEN_ENV = "MCP_MANAGER_TOKEN"
"""Environment variable holding the bearer token (`--token-file` wins)."""

TOKEN_FILE = "endpoint-token"
"""The daemon's own token, in the state directory."""

MAX_REQUEST_BODY = 64 * 1024 * 1024
"""Bytes of one HTTP request body the endpoint takes (the SDK's default is 4
MiB): as much as a stdio server's answer (`transport.stdio.process.MAX_LINE`),
so a tool argument that a server takes straight (a file, as base64) gets
through us too."""

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
        host: Interface to bind (an IP literal or `localhost`); "" with `unix`.
        port: TCP port; 0 picks a free one.
        unix: A Unix socket path to serve HTTP on instead (`--listen
            unix:PATH`), mode 0600 in a directory only its owner can enter.
        token: Bearer token every request must carry; None for none
            (`--no-token`).
        token_from: Where the token comes from, for the start-up line and
            `status` (a file's path, or `$MCP_MANAGER_TOKEN`); never the token.
        token_path: The file the token is read from (None: from the
            environment, or none); `mcp-manager token --rotate` rewrites the
            daemon's own.
        allowed_hosts: Extra Host header names accepted (besides loopback names
            and the bound address).
        allowed_origins: Extra Origin values accepted (besides the endpoint's
            own loopback origins).
    """

    host: str
    port: int
    token: str | None = field(default=None, repr=False)
    token_from: str = ""
    token_path: Path | None = None
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    unix: Path | None = None

    @property
    def loopback(self) -> bool:
        """Whether only this machine can reach the bound address."""
        return self.unix is not None or _is_loopback(self.host)


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


def own_token_path(state_dir: Path | None = None) -> Path:
    """The daemon's own token file: `STATE/endpoint-token`."""
    return (state_dir if state_dir is not None else default_state_dir()) / TOKEN_FILE


def own_token(path: Path) -> str:
    """The token in the daemon's own file, made (random, 0600) if there is none.

    Two daemons starting at once agree: the file is created exclusively, and
    the one that loses reads what the other wrote.

    Raises:
        EndpointError: It cannot be read or written.
    """
    try:
        return _read_token_file(str(path))
    except EndpointError:
        if path.exists():
            raise
    token = secrets.token_urlsafe(32)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_token_file(str(path))
    except OSError as exc:
        raise EndpointError(
            f"cannot create the endpoint's token file {path}: "
            f"{exc.strerror or exc}; pass --token-file FILE"
        ) from None
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    logger.info("made a new bearer token for the MCP endpoint in %s", path)
    return token


def write_token(path: Path) -> str:
    """Replace the token in `path` with a new random one (0600, atomically).

    Raises:
        EndpointError: It cannot be written.
    """
    token = secrets.token_urlsafe(32)
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(token + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        raise EndpointError(
            f"cannot write the token file {path}: {exc.strerror or exc}"
        ) from None
    return token


def endpoint_options(
    listen: str,
    *,
    token_file: str | None = None,
    no_token: bool = False,
    env: Mapping[str, str] = os.environ,
    state_dir: Path | None = None,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
) -> EndpointOptions:
    """Validate `--listen` and the token settings.

    The token comes from `token_file` if given, else `$MCP_MANAGER_TOKEN`,
    else the daemon's own file (`own_token`); `no_token` (loopback only) means
    none. The daemon registers it as a secret, so it is masked wherever it
    would be logged.

    Raises:
        EndpointError: Bad address, unreadable or empty token file, a token
            setting beside `no_token`, or `no_token` off loopback.
    """
    unix = None
    if listen.startswith("unix:"):
        unix = Path(listen.removeprefix("unix:")).expanduser()
        if not unix.is_absolute() or unix.name == "":
            raise EndpointError(
                f"--listen {listen!r}: give the socket's absolute path, e.g. "
                "unix:/run/user/1000/mcp-manager/http.sock"
            )
        host, port = "", 0
    else:
        host, port = _parse_listen(listen)
    loopback = unix is not None or _is_loopback(host)
    token_path: Path | None = None
    if no_token:
        if token_file or env.get(TOKEN_ENV, "").strip():
            given = "--token-file" if token_file else f"${TOKEN_ENV}"
            raise EndpointError(
                f"--no-token and {given} contradict each other: drop one"
            )
        if not loopback:
            raise EndpointError(
                f"refusing --no-token on {listen}: anyone who can reach that "
                "address could call every tool as you. Drop --no-token (a "
                "token is made for you; `mcp-manager token` prints it), or "
                "listen on 127.0.0.1"
            )
        token, token_from = None, "none (--no-token)"
    elif token_file:
        token_path = Path(token_file)
        token, token_from = _read_token_file(token_file), token_file
    elif env.get(TOKEN_ENV, "").strip():
        token, token_from = env[TOKEN_ENV].strip(), f"${TOKEN_ENV}"
    else:
        token_path = own_token_path(state_dir)
        token, token_from = own_token(token_path), str(token_path)
    if token is not None and any(ch.isspace() for ch in token):
        raise EndpointError("the token must not contain whitespace")
    return EndpointOptions(
        host=host,
        port=port,
        unix=unix,
        token=token,
        token_from=token_from,
        token_path=token_path,
        allowed_hosts=tuple(h.lower() for h in allowed_hosts),
        allowed_origins=tuple(o.rstrip("/") for o in allowed_origins),
    )
