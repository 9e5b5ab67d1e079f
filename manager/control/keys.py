"""The key that proves a client may drive the daemon.

The sockets (`control.sock`, `control.mcp.sock`) are mode 0600 in a 0700
directory, so no other user can connect. That is not enough against the
daemon's own servers: a server confined by Landlock (`sandbox`) still runs as
the user, and Landlock does not stop a connect to a Unix socket by path. So
each daemon writes a fresh random key beside its control socket
(`control.key`, mode 0600) and every client sends it: with its first request
on the control socket, in its greeting on the attach socket. A confined
server cannot read the file (`core.sandbox` never lets it read the socket's
directory), so it cannot prove it, and the daemon refuses it and says who it
was. Where the key lives and how a client reads it are in `paths` (the CLI
loads only that).
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import socket
import struct
from pathlib import Path

from .paths import key_path

__all__ = ["matches", "peer", "remove_key", "write_key"]


def write_key(control: Path) -> tuple[str, int]:
    """A new key for the daemon listening on `control`, written (0600,
    atomically, replacing any older one); the key and the file's inode (for
    `remove_key`)."""
    key = secrets.token_urlsafe(32)
    path = key_path(control)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, key.encode())
    finally:
        os.close(fd)
    os.replace(temporary, path)
    return key, os.lstat(path).st_ino


def remove_key(control: Path, inode: int) -> None:
    """Remove the key file, unless another daemon has replaced it since."""
    path = key_path(control)
    with contextlib.suppress(FileNotFoundError):
        if os.lstat(path).st_ino == inode:
            os.unlink(path)


def matches(expected: str, given: object) -> bool:
    """Whether `given` is the key (in constant time)."""
    return isinstance(given, str) and hmac.compare_digest(
        expected.encode(), given.encode("utf-8", "replace")
    )


def peer(sock: socket.socket) -> str:
    """Who is at the other end of a Unix socket, for a refusal's log line:
    `pid 4242 (python3 srv.py)`, or `an unknown process`."""
    try:
        creds = sock.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
        )
        pid = struct.unpack("3i", creds)[0]
    except (OSError, AttributeError, struct.error):
        return "an unknown process"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            argv = file.read().split(b"\0")
        command = " ".join(a.decode(errors="replace") for a in argv if a)[:120]
    except OSError:
        command = "?"
    return f"pid {pid} ({command})"
