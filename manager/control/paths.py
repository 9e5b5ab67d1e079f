"""Where the control socket lives, and the rules its directory must follow.

The socket is mode 0600 in a 0700 directory owned by the daemon's user: nobody
else may connect, and the client never talks to a socket in a directory someone
else could have prepared.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from pathlib import Path

from ..core.errors import ControlError

__all__ = [
    "KEY_FIELD",
    "RUNTIME_BASE",
    "TMP_BASE",
    "attach_key_path",
    "attach_socket_path",
    "check_socket_dir",
    "clear_stale_socket",
    "find_socket",
    "key_path",
    "prepare_socket_dir",
    "read_attach_key",
    "read_key",
    "socket_path",
]


STALE_PROBE_TIMEOUT = 1.0
"""Seconds spent checking whether an existing socket file has a live daemon."""

RUNTIME_BASE = Path("/run/user")
"""Where the system keeps each user's runtime directory (`/run/user/UID`, what
`$XDG_RUNTIME_DIR` names on a systemd machine)."""

TMP_BASE = Path("/tmp")
"""Where the socket's directory goes when there is no runtime directory
(`/tmp/mcp-manager-UID`)."""


def socket_path(explicit: str | None = None) -> Path:
    """Where the control socket lives.

    In order: `explicit` (the `--socket` option), `$MCP_MANAGER_SOCKET`,
    `$XDG_RUNTIME_DIR/mcp-manager/control.sock`, then, without
    `$XDG_RUNTIME_DIR` (a client that spawns `attach` passes on only a few
    variables), `/run/user/UID/mcp-manager/control.sock` if that runtime
    directory is ours, else `/tmp/mcp-manager-UID/control.sock`.
    Nothing is created.
    """
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("MCP_MANAGER_SOCKET")
    if env:
        return Path(env).expanduser()
    return _candidates()[0]


def find_socket(explicit: str | None = None) -> Path:
    """The control socket a client should talk to: `socket_path`, unless
    neither `explicit` nor `$MCP_MANAGER_SOCKET` chose it and a daemon
    listens at another of the default places (one started where
    `$XDG_RUNTIME_DIR` was set, asked from where it is not, or the other way
    round). Nothing is created.
    """
    chosen = socket_path(explicit)
    if explicit or os.environ.get("MCP_MANAGER_SOCKET"):
        return chosen
    for candidate in (chosen, *_candidates()):
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(os.stat(candidate).st_mode):
                return candidate
    return chosen


def _candidates() -> list[Path]:
    """The default places, the one a daemon here would take first."""
    places = []
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        places.append(Path(runtime) / "mcp-manager" / "control.sock")
    own = RUNTIME_BASE / str(os.getuid())
    with contextlib.suppress(OSError):
        st = os.stat(own)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
            places.append(own / "mcp-manager" / "control.sock")
    places.append(TMP_BASE / f"mcp-manager-{os.getuid()}" / "control.sock")
    return list(dict.fromkeys(places))


def attach_socket_path(control: Path) -> Path:
    """Where the daemon serves MCP for `mcp-manager attach`: beside the control
    socket, in its private directory (`control.sock` -> `control.mcp.sock`)."""
    return control.with_name(f"{control.stem}.mcp{control.suffix or '.sock'}")


KEY_FIELD = "key"
"""Where a control request (or the attach greeting) carries the daemon's key
(`control.keys`)."""


def key_path(control: Path) -> Path:
    """Where the daemon listening on `control` keeps its key (`control.key`)."""
    return control.with_name(f"{control.stem}.key")


def attach_key_path(attach: Path) -> Path:
    """The key file of the daemon serving the attach socket `attach` (its
    control socket's, `key_path`)."""
    stem = attach.stem.removesuffix(".mcp")
    return attach.with_name(f"{stem}.key")


def read_key(control: Path) -> str | None:
    """The key of the daemon listening on `control`; None if there is none to
    read (an older daemon, or the file cannot be read: the daemon then says
    so when it refuses the request)."""
    return _read_key_file(key_path(control))


def _read_key_file(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def read_attach_key(attach: Path) -> str | None:
    """`read_key` for a client of the attach socket `attach`."""
    return _read_key_file(attach_key_path(attach))


def check_socket_dir(directory: Path) -> None:
    """Refuse a socket directory that another user could reach or control.

    Raises:
        ControlError: `directory` is not a directory, is owned by another user, or
            is accessible to its group or to others.
    """
    st = os.stat(directory)
    if not stat.S_ISDIR(st.st_mode):
        raise ControlError(f"{directory} is not a directory; choose another --socket")
    if st.st_mode & stat.S_ISVTX and st.st_uid in (0, os.getuid()):
        # A sticky shared directory such as /tmp: nobody else can remove or
        # replace our socket, whose own mode (0600) keeps others from connecting,
        # and the client checks that the socket is ours.
        return
    if st.st_uid != os.getuid():
        raise ControlError(
            f"{directory} is owned by uid {st.st_uid}, not by you (uid {os.getuid()}); "
            "refusing to use it for the control socket"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise ControlError(
            f"{directory} is accessible to other users (mode {mode:04o}); "
            f"run `chmod 700 {directory}` or choose a --socket in a private directory"
        )


def prepare_socket_dir(directory: Path) -> None:
    """Create `directory` with mode 0700 (parents as needed), or check the one there.

    Raises:
        ControlError: It cannot be created, or fails `check_socket_dir`.
    """
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        directory.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise ControlError(
            f"cannot create the control socket directory {directory}: "
            f"{exc.strerror or exc}"
        ) from exc
    else:
        os.chmod(directory, 0o700)  # mkdir's mode is filtered by the umask
    check_socket_dir(directory)


def clear_stale_socket(path: Path) -> None:
    """Remove a stale socket file at `path`; refuse a live one or a non-socket
    (the control socket's and the HTTP endpoint's on a Unix socket).

    Raises:
        ControlError: Something other than a socket is there, or a daemon
            answers on it.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise ControlError(
            f"{path} exists and is not a socket; remove it or choose another --socket"
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(STALE_PROBE_TIMEOUT)
    try:
        probe.connect(os.fspath(path))
    except (ConnectionRefusedError, FileNotFoundError):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # stale: left behind by a daemon that died
        return
    except OSError as exc:
        raise ControlError(f"cannot check the existing socket {path}: {exc}") from exc
    finally:
        probe.close()
    raise ControlError(f"another mcp-manager is already running on {path}")
