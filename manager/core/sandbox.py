"""`sandbox`: what a stdio server may touch, declared per connection.

    mcp_add("fs", {command = "npx", args = {...}}, {sandbox = "strict"})
    mcp_add("db", {...}, {sandbox = {read = {"~/data"}, write = {"~/out"},
                                     network = {5432}}})

- `"off"` (the default): the server runs with the user's whole account.
- `"strict"`: it may read (and run) the system's directories (`SYSTEM_READ`,
  without the users' runtime directories under `/run/user`), its own
  installation (the directory its command lives in, and the one its real
  path lives in, one level above `bin`), its working directory (neither of
  these when it is the home directory or above it), and any absolute path
  among its arguments; it may write only a private temporary
  directory (its `TMPDIR`, removed when it stops) and `/dev/null`; it may not
  connect to or listen on any TCP port.
- a table: `strict` plus `read` and `write` paths (`~` is the home
  directory), and `network`: `"none"` (the default), `"all"`, or a list of
  TCP ports.
- `sandbox_required = true`: refuse to start the server where the sandbox
  cannot be set up, rather than run it unconfined (said either way).

Enforced by Linux Landlock (`manager/confine.py`): by port, not host; UDP and
Unix sockets are not limited. Pure: `rules` turns a declaration and the facts
the transport found (the command's paths, the working directory) into the
launcher's rules.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .errors import ConfigError
from .launch import Launch, parse_launch

__all__ = [
    "OFF",
    "SYSTEM_READ",
    "Sandbox",
    "covers",
    "parse_sandbox",
    "rules",
    "starved",
]

SYSTEM_READ = (
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/bin",
    "/sbin",
    "/etc",
    "/opt",
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/nix",
)
"""What every confined server may read: the system's programs and libraries,
its configuration, and the process and device trees."""


@dataclass(frozen=True, slots=True)
class Sandbox:
    """One connection's confinement.

    Attributes:
        mode: `off`, or `strict` (a table is strict plus its paths).
        read: More paths it may read (and run).
        write: More paths it may write.
        ports: TCP ports it may connect to and bind; None: any.
        required: Refuse to start it unconfined.
    """

    mode: str = "off"
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    ports: tuple[int, ...] | None = ()
    required: bool = False

    @property
    def active(self) -> bool:
        return self.mode != "off"


OFF = Sandbox()


def parse_sandbox(prefix: str, value: object, required: object = False) -> Sandbox:
    """`sandbox = "off" | "strict" | {read, write, network}`.

    Raises:
        ConfigError: Anything else, naming the form.
    """
    if not isinstance(required, bool):
        raise ConfigError(f"{prefix}: sandbox_required must be true or false")
    if value in ("off", "strict"):
        return Sandbox(mode=str(value), required=required)
    if not isinstance(value, Mapping):
        raise ConfigError(
            f'{prefix}: sandbox must be "off", "strict" or a table like '
            '{read = {"~/data"}, write = {"~/out"}, network = {5432}}'
        )
    unknown = sorted(set(map(str, value)) - {"read", "write", "network"})
    if unknown:
        raise ConfigError(
            f"{prefix}: unknown sandbox key {unknown[0]!r}; use read, write, network"
        )
    return Sandbox(
        mode="strict",
        read=_paths(prefix, "read", value.get("read")),
        write=_paths(prefix, "write", value.get("write")),
        ports=_network(prefix, value.get("network", "none")),
        required=required,
    )


def _list(value: object) -> list[object]:
    if value is None:
        return []
    if isinstance(value, Mapping) and all(isinstance(k, int) for k in value):
        return [value[k] for k in sorted(value)]
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


def _paths(prefix: str, key: str, value: object) -> tuple[str, ...]:
    paths = _list(value)
    for path in paths:
        if not isinstance(path, str) or not (path.startswith(("/", "~"))):
            raise ConfigError(
                f"{prefix}: sandbox.{key}: {path!r} must be an absolute path "
                "(or start with ~)"
            )
    return tuple(str(p) for p in paths)


def _network(prefix: str, value: object) -> tuple[int, ...] | None:
    if value == "all":
        return None
    if value == "none":
        return ()
    ports = _list(value)
    if not ports or not all(
        isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536 for p in ports
    ):
        raise ConfigError(
            f'{prefix}: sandbox.network must be "none", "all" or a list of TCP '
            "ports, e.g. {5432, 443} (Landlock limits ports, not hosts)"
        )
    return tuple(int(p) for p in ports)  # type: ignore[call-overload]


def covers(path: str, inner: str) -> bool:
    """Whether `path` is `inner` or a directory above it."""
    path = path.rstrip("/") or "/"
    return inner == path or inner.startswith("/" if path == "/" else path + "/")


def rules(
    sandbox: Sandbox,
    *,
    command_paths: Sequence[str],
    args: Sequence[str],
    cwd: str,
    tmpdir: str,
    home: str,
    private: Sequence[str] = (),
    system: Sequence[str] = SYSTEM_READ,
) -> dict[str, object]:
    """The launcher's rules (`manager/confine.py`) for one start.

    What `strict` grants by itself (its installation, its working directory)
    never covers the home directory or a `private` one: a server started in
    `~` or run from `~/bin` does not read the whole home (its SSH keys, the
    daemon's state). Those are `withheld` (path, what it was), to be said;
    the command's own directory (or file) is granted instead. Paths the
    declaration names (`read`, absolute arguments) are granted as named.

    Args:
        command_paths: The command as found on PATH and its real path.
        args: Its arguments (absolute paths among them may be read).
        cwd: Its working directory.
        tmpdir: Its private temporary directory (writable).
        home: What `~` means.
        private: Directories never granted by implication (the daemon's
            state and runtime directories; `home` is one by itself).
        system: The system's directories (`SYSTEM_READ`, or what the
            transport found of them without anything `private` inside).
    """

    def expand(path: str) -> str:
        return home + path[1:] if path.startswith("~") else path

    # By real path too: a home that is a symlink (/home -> /var/home) is
    # still the home, and the working directory comes as its real path.
    guarded = {home, os.path.realpath(home), *private}
    guarded |= {os.path.realpath(p) for p in private}

    def exposes(path: str) -> bool:
        real = os.path.realpath(path)
        return any(covers(path, inner) or covers(real, inner) for inner in guarded)

    withheld: list[tuple[str, str]] = []
    implied: list[str] = []
    for path in command_paths:
        if not path:
            continue
        install = os.path.dirname(os.path.dirname(path))
        if install not in ("", "/") and not exposes(install):
            implied.append(install)
            continue
        if install not in ("", "/"):
            withheld.append((install, "the directory above its command's"))
        folder = os.path.dirname(path)
        implied.append(path if exposes(folder) else folder)
    if exposes(cwd):
        withheld.append((cwd, "its working directory"))
    else:
        implied.append(cwd)
    read = [*system, *sorted(set(implied)), *(a for a in args if a.startswith("/"))]
    read += [expand(p) for p in sandbox.read]
    write = [tmpdir, "/dev/null", *(expand(p) for p in sandbox.write)]
    return {
        "read": list(dict.fromkeys(read)),
        "write": list(dict.fromkeys(write)),
        "ports": None if sandbox.ports is None else list(sandbox.ports),
        "withheld": list(dict.fromkeys(withheld)),
    }


_CACHES = {
    "npx": "~/.npm",
    "bunx": "~/.bun/install/cache",
    "uvx": "~/.cache/uv",
    "uv tool run": "~/.cache/uv",
    "pipx run": "~/.local/pipx",
}
"""Where each package runner keeps what it fetched (and must write)."""

REGISTRY_PORT = 443


def starved(command: str, args: Sequence[str], sandbox: Sandbox) -> str | None:
    """Why `sandbox` keeps a package runner (`npx`, `uvx`, ...) from starting
    its server, if it does: it fetches the package from its registry (HTTPS)
    and writes its cache at every start not served from that cache. None
    when nothing is in the way (or the command is no such runner)."""
    if not sandbox.active:
        return None
    launch = parse_launch(command, tuple(args))
    if not isinstance(launch, Launch) or launch.launcher not in _CACHES:
        return None
    cache = _CACHES[launch.launcher]
    reaches = sandbox.ports is None or REGISTRY_PORT in sandbox.ports
    writes = any(
        os.path.expanduser(cache).startswith(os.path.expanduser(w).rstrip("/"))
        for w in sandbox.write
    )
    if reaches and writes:
        return None
    lacks = " and ".join(
        what
        for what, ok in (
            (f"no TCP port {REGISTRY_PORT}", reaches),
            (f"no write to {cache}", writes),
        )
        if not ok
    )
    return (
        f"its sandbox allows {lacks}, but {launch.launcher!r} fetches "
        f"{launch.package} from its registry and caches it there, so the start "
        f"hangs or fails; give sandbox = {{network = {{{REGISTRY_PORT}}}, read = "
        f'{{"{cache}"}}, write = {{"{cache}"}}}}, or install the package and '
        "name its command"
    )
