"""How a stdio server is confined: `sandbox` (`core.sandbox`) turned into the
launcher that starts it under Linux Landlock (`manager/confine.py`), or said
and refused where this machine cannot (`confined_as` for status and the HUD).
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from ...core.errors import ConnectFailed
from ...core.sandbox import SYSTEM_READ, covers, rules, starved
from ...core.spec import ConnectionSpec
from ...files import default_state_dir

__all__ = [
    "LAUNCHER",
    "confined_as",
    "confinement",
    "keep_private",
    "landlock_abi",
    "launcher_rules",
    "system_read",
]

logger = logging.getLogger(__name__)

LAUNCHER = Path(__file__).resolve().parents[2] / "confine.py"
"""The confining launcher (run by path, standard library only)."""

_unconfined_told: set[str] = set()
_withheld_told: set[str] = set()


def confined_as(spec: ConnectionSpec) -> str:
    """How `spec`'s server runs, as status and the HUD say it: "" (not a
    stdio server), `off`, `landlock` (confined), `refused` (its sandbox is
    required and cannot be set up: it does not start) or `UNCONFINED: WHY`."""
    if spec.transport != "stdio":
        return ""
    if not spec.sandbox.active:
        return "off"
    problem = _cannot_confine(spec)
    if problem is None:
        return "landlock"
    return "refused" if spec.sandbox.required else f"UNCONFINED: {problem}"


def _cannot_confine(spec: ConnectionSpec) -> str | None:
    """Why this machine cannot confine `spec`'s server as declared, if not."""
    version = landlock_abi()
    if version < 1:
        return "this kernel has no Landlock (Linux 5.13+)"
    if spec.sandbox.ports is not None and version < 4:
        return f"Landlock ABI {version} cannot limit TCP (needs ABI 4, Linux 6.7)"
    return None


@functools.cache
def landlock_abi() -> int:
    """This kernel's Landlock ABI version, 0 without Landlock."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return max(int(libc.syscall(444, None, 0, 1)), 0)
    except (OSError, AttributeError):
        return 0


def confinement(
    spec: ConnectionSpec, env: dict[str, str]
) -> tuple[list[str], str | None]:
    """The argv that starts `spec`'s server confined (`core.sandbox`), and its
    private temporary directory (set as `TMPDIR` in `env`); unconfined, said
    once, where Landlock cannot do it, unless `sandbox_required`.

    Raises:
        ConnectFailed: The sandbox is required and cannot be set up here.
    """
    sandbox = spec.sandbox
    problem = _cannot_confine(spec)
    if problem is not None:
        if sandbox.required:
            raise ConnectFailed(
                f"not starting {spec.command!r}: its sandbox is required and cannot "
                f"be set up: {problem}"
            )
        if spec.name not in _unconfined_told:
            _unconfined_told.add(spec.name)
            logger.warning(
                "%s: runs UNCONFINED: its sandbox cannot be set up (%s); set "
                "sandbox_required = true to refuse to start it instead",
                spec.name,
                problem,
            )
        return [spec.command, *spec.args], None
    hungry = starved(spec.command, spec.args, sandbox)
    if hungry is not None and spec.name not in _unconfined_told:
        _unconfined_told.add(spec.name)
        logger.warning("%s: %s", spec.name, hungry)
    found = shutil.which(spec.command, path=env.get("PATH")) or spec.command
    tmpdir = tempfile.mkdtemp(prefix=f"mcp-sandbox-{spec.name}-")
    env["TMPDIR"] = tmpdir
    private = _private_dirs()
    confined = rules(
        sandbox,
        command_paths=[found, os.path.realpath(found)],
        args=spec.args,
        cwd=spec.cwd or os.getcwd(),
        tmpdir=tmpdir,
        home=os.path.expanduser("~"),
        private=private,
        system=system_read(private),
    )
    withheld = confined.get("withheld")
    if withheld and spec.name not in _withheld_told:
        _withheld_told.add(spec.name)
        said = "; ".join(f"{path} ({what})" for path, what in withheld)  # type: ignore[attr-defined]
        logger.warning(
            "%s: its sandbox does not let it read %s: that would open your home "
            "directory or the daemon's own files to it; give it a `cwd`, or name "
            "what it needs in sandbox.read",
            spec.name,
            said,
        )
    launcher = [sys.executable, "-I", "-S", str(LAUNCHER), *launcher_rules(confined)]
    return [*launcher, "--", found, *spec.args], tmpdir


_kept_private: set[str] = set()


def keep_private(directory: Path | str) -> None:
    """Never let a confined server read `directory` by implication: the
    daemon's socket directory, wherever `--socket` put it (its key is there,
    `control.keys`)."""
    _kept_private.add(os.path.realpath(directory))


def _private_dirs() -> list[str]:
    """What no confined server reads by implication: the daemon's state
    directory (pins, tokens, the endpoint's key), the runtime directory and
    the socket directory (`keep_private`: its sockets and their key); each as
    given and as its real path (a symlinked home)."""
    dirs = [str(default_state_dir())]
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        dirs.append(runtime)
    dirs.append(f"/run/user/{os.getuid()}")
    dirs += sorted(_kept_private)
    return list(dict.fromkeys([*dirs, *(os.path.realpath(d) for d in dirs)]))


def system_read(
    private: Sequence[str], system: Sequence[str] = SYSTEM_READ
) -> list[str]:
    """`system` (`SYSTEM_READ`), where one of them holds a `private`
    directory (the users' runtime directories are under `/run`) replaced by
    what it holds but that: Landlock grants, never takes back."""
    out: list[str] = []
    for path in system:
        out += _around(path, private)
    return out


def _around(path: str, private: Sequence[str]) -> list[str]:
    inside = [p for p in private if covers(path, p)]
    if not inside:
        return [path]
    if path in inside:
        return []
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return []  # not on this machine, or not ours to list
    out: list[str] = []
    for name in names:
        out += _around(os.path.join(path, name), inside)
    return out


def launcher_rules(confined: Mapping[str, object]) -> list[str]:
    """`core.sandbox.rules` as the launcher's `RULE` arguments (`confine.py`)."""
    out = [f"read={path}" for path in _strings(confined.get("read"))]
    out += [f"write={path}" for path in _strings(confined.get("write"))]
    ports = confined.get("ports")
    if isinstance(ports, list):
        out += [f"port={int(port)}" for port in ports]
        out.append("net=limited")
    return out


def _strings(value: object) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []
