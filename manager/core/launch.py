"""Launches that fetch their server at start, and how to lock them.

`npx -y pkg`, `bunx pkg`, `uvx pkg`, `pipx run pkg` and `docker run image`
take whatever the registry has newest at each start: the server the user
approved may be replaced under them by a release they never saw (the
postmark-mcp backdoor shipped 15 clean versions, then one that copied every
mail). A launch lock (`transport.stdio.locks`) resolves the exact version (an
image's digest) at the first start, records it, and starts exactly that from
then on. This module is the pure part: find the package in a command line,
say whether it is already exact, and write the command line that starts one
exact version.

What is recognised, by the command's base name:

- `npx` and `bunx` (the npm registry): the first argument that is not an
  option, or the value of `-p`/`--package`; `name`, `@scope/name`, either
  with `@version`, `@tag` or `@range`.
- `uvx`, `uv tool run`, `pipx run` (PyPI): the first argument that is not an
  option, or the value of `--from` (uvx) or `--spec` (pipx); a requirement
  (`name`, `name[extra]`, `name==1.2`, `name>=1,<2`) or uvx's `name@1.2`.
- `docker run` and `podman run` (an OCI registry): the image, the first
  argument that is not an option (every `docker run` option takes a value
  but the few flags in `_DOCKER_FLAGS`).

A package that is not from a registry (a path, a URL, a git reference) is
`Unlockable`, with the reason: the daemon says so rather than pretending.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import Literal

__all__ = [
    "ECOSYSTEMS",
    "Launch",
    "LaunchNote",
    "Unlockable",
    "lock_line",
    "parse_launch",
]

Ecosystem = Literal["npm", "pypi", "oci"]
ECOSYSTEMS: tuple[Ecosystem, ...] = ("npm", "pypi", "oci")
"""Where a launch's package comes from: the npm registry, a Python package
index, an OCI (Docker) registry."""


@dataclass(frozen=True, slots=True)
class Launch:
    """A command line that fetches its server from a registry at start.

    Attributes:
        launcher: What runs it (`npx`, `bunx`, `uvx`, `pipx`, `docker`, ...).
        ecosystem: Where the package comes from (`ECOSYSTEMS`).
        package: The package's name (an image's repository, with its
            registry host when one is named).
        wanted: What the command asks for: a version, tag, range or
            specifier as written ("" for none: the newest).
        exact: Whether `wanted` already names one version (`1.2.3`,
            `==1.2.3`) or an image digest: nothing to lock.
        index: Which argument holds the package.
        extras: A Python requirement's extras, as written (`[cli]`), kept.
        tag: An image's tag, kept beside the digest for the reader.
    """

    launcher: str
    ecosystem: Ecosystem
    package: str
    wanted: str
    exact: bool
    index: int
    extras: str = ""
    tag: str = ""

    def locked(self, args: tuple[str, ...], version: str) -> tuple[str, ...]:
        """`args` with the package argument naming exactly `version` (for an
        image: its digest, `sha256:...`)."""
        if self.ecosystem == "npm":
            pinned = f"{self.package}@{version}"
        elif self.ecosystem == "pypi":
            pinned = f"{self.package}{self.extras}=={version}"
        else:
            tag = f":{self.tag}" if self.tag else ""
            pinned = f"{self.package}{tag}@{version}"
        return (*args[: self.index], pinned, *args[self.index + 1 :])

    @property
    def display(self) -> str:
        """The package as a person reads it: `name`, `name@wanted`."""
        if not self.wanted:
            return self.package
        joint = "" if self.ecosystem == "pypi" and self.wanted[0] in "=<>!~" else "@"
        if self.ecosystem == "oci" and not self.wanted.startswith("sha256:"):
            joint = ":"
        return f"{self.package}{joint}{self.wanted}"


@dataclass(frozen=True, slots=True)
class LaunchNote:
    """What a launch lock tells its connection (`core.events.LaunchLock`
    has the meaning of each field)."""

    change: str
    package: str = ""
    version: str = ""
    available: str = ""
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Unlockable:
    """A launcher command whose package cannot be locked, and why."""

    launcher: str
    reason: str


_NPM_VALUED = frozenset(
    {
        "-p",
        "--package",
        "-c",
        "--call",
        "--registry",
        "--cache",
        "--userconfig",
        "-w",
        "--workspace",
        "--node-options",
        "--prefix",
        "--loglevel",
        "--script-shell",
    }
)
"""npx/bunx options that take the next argument as their value."""

_UV_VALUED = frozenset(
    {
        "--from",
        "--with",
        "--with-editable",
        "--with-requirements",
        "-p",
        "--python",
        "--index",
        "--index-url",
        "--default-index",
        "--extra-index-url",
        "-i",
        "--find-links",
        "-f",
        "-c",
        "--constraints",
        "--overrides",
        "-b",
        "--build-constraints",
        "--env-file",
        "--refresh-package",
        "--reinstall-package",
        "-P",
        "--upgrade-package",
        "--cache-dir",
        "--directory",
        "--project",
        "--config-file",
        "--color",
        "--python-preference",
        "--resolution",
        "--prerelease",
        "--index-strategy",
        "--keyring-provider",
        "--exclude-newer",
        "--link-mode",
        "--allow-insecure-host",
        "--python-platform",
    }
)
"""uvx options that take the next argument as their value."""

_PIPX_VALUED = frozenset(
    {"--spec", "--python", "--pip-args", "--index-url", "-i", "--backend"}
)
"""`pipx run` options that take the next argument as their value."""

_DOCKER_FLAGS = frozenset(
    {
        "-d",
        "--detach",
        "-i",
        "--interactive",
        "-t",
        "--tty",
        "--rm",
        "--init",
        "--privileged",
        "--read-only",
        "-P",
        "--publish-all",
        "--no-healthcheck",
        "--oom-kill-disable",
        "-q",
        "--quiet",
        "--help",
    }
)
"""`docker run` options that take no value (every other one takes one)."""

_NPM_EXACT = re.compile(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?")
_NPM_NAME = re.compile(r"(?:@[a-z0-9][\w.-]*/)?[a-z0-9][\w.-]*", re.IGNORECASE)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def parse_launch(command: str, args: tuple[str, ...]) -> Launch | Unlockable | None:
    """The registry launch in a stdio command line, or None if it is none.

    Returns:
        A `Launch`; an `Unlockable` for a launcher whose package is not from
        a registry or not found; None for any other command.
    """
    base = PurePath(command).name.lower()
    if base in ("npx", "bunx"):
        return _npm(base, args, 0)
    if base == "uvx":
        return _pypi(base, args, 0, _UV_VALUED, "--from")
    if base == "uv" and args[:2] == ("tool", "run"):
        return _pypi("uv tool run", args, 2, _UV_VALUED, "--from")
    if base == "pipx" and args[:1] == ("run",):
        return _pypi("pipx run", args, 1, _PIPX_VALUED, "--spec")
    if base in ("docker", "podman") and args[:1] == ("run",):
        return _image(base, args, 1)
    return None


def _positional(
    args: tuple[str, ...], start: int, valued: frozenset[str], *, flags: bool = False
) -> tuple[int | None, dict[str, int]]:
    """The index of the first argument that is not an option (None if
    none), and where each option's value is (`--opt=value` counts as its own
    argument). `flags`: `valued` lists the options that take *no* value."""
    values: dict[str, int] = {}
    index = start
    while index < len(args):
        arg = args[index]
        if arg == "--":
            return (index + 1 if index + 1 < len(args) else None), values
        if not arg.startswith("-") or arg == "-":
            return index, values
        name, equals, _ = arg.partition("=")
        takes_value = (name not in valued) if flags else (name in valued)
        if equals:
            values[name] = index
        elif takes_value:
            values[name] = index + 1
            index += 1
        index += 1
    return None, values


def _npm(launcher: str, args: tuple[str, ...], start: int) -> Launch | Unlockable:
    first, values = _positional(args, start, _NPM_VALUED)
    for option in ("--package", "-p"):
        if option in values:
            at = values[option]
            if "=" in args[at] and args[at].startswith("-"):
                return Unlockable(
                    launcher, f"write {option} VALUE as two arguments to lock it"
                )
            return _npm_package(launcher, args, at)
    if first is None:
        return Unlockable(launcher, "no package named")
    return _npm_package(launcher, args, first)


def _npm_package(
    launcher: str, args: tuple[str, ...], index: int
) -> Launch | Unlockable:
    if index >= len(args):
        return Unlockable(launcher, "no package named")
    token = args[index]
    scoped = token.startswith("@")
    name, at, wanted = token[1:].partition("@") if scoped else token.partition("@")
    name = "@" + name if scoped else name
    if not _NPM_NAME.fullmatch(name) or ":" in wanted or "/" in wanted:
        return Unlockable(
            launcher,
            f"{token!r} is not a package from the registry (a path, URL or git)",
        )
    wanted = wanted if at else ""
    return Launch(
        launcher,
        "npm",
        name,
        wanted,
        exact=bool(_NPM_EXACT.fullmatch(wanted)),
        index=index,
    )


def _pypi(
    launcher: str,
    args: tuple[str, ...],
    start: int,
    valued: frozenset[str],
    spec_option: str,
) -> Launch | Unlockable:
    first, values = _positional(args, start, valued)
    index = values.get(spec_option, first)
    if index is None or index >= len(args):
        return Unlockable(launcher, "no package named")
    token = args[index]
    if token.startswith(spec_option + "="):
        return Unlockable(
            launcher, f"write {spec_option} VALUE as two arguments to lock it"
        )
    text = token
    # uvx's own form, `name@1.2` (and `name@latest`): a requirement's `==`.
    shorthand = re.fullmatch(r"([A-Za-z0-9][\w.\-]*(?:\[[^\]]*\])?)@([^\s/:]+)", token)
    if shorthand:
        version = shorthand.group(2)
        text = shorthand.group(1) + ("" if version == "latest" else f"=={version}")
    # Here, not at the top: `packaging.requirements` costs about 30 ms to
    # import, and `mcp-manager status` reaches this module (through the HUD's
    # state) without ever reading a requirement.
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return Unlockable(launcher, f"{token!r} is not a package requirement")
    if requirement.url:
        return Unlockable(launcher, f"{token!r} names a URL, not a package index")
    specifiers = list(requirement.specifier)
    exact = (
        len(specifiers) == 1
        and specifiers[0].operator in ("==", "===")
        and "*" not in specifiers[0].version
    )
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    return Launch(
        launcher,
        "pypi",
        requirement.name,
        str(requirement.specifier),
        exact=exact,
        index=index,
        extras=extras,
    )


def _image(launcher: str, args: tuple[str, ...], start: int) -> Launch | Unlockable:
    index, _ = _positional(args, start, _DOCKER_FLAGS, flags=True)
    if index is None:
        return Unlockable(launcher, "no image named")
    reference = args[index]
    name, _, digest = reference.partition("@")
    if digest:
        if not _DIGEST.fullmatch(digest):
            return Unlockable(launcher, f"{reference!r}: a digest is sha256:<64 hex>")
        repository, _, tag = _split_tag(name)
        return Launch(
            launcher, "oci", repository, digest, exact=True, index=index, tag=tag
        )
    repository, _, tag = _split_tag(name)
    if not repository:
        return Unlockable(launcher, f"{reference!r} is not an image reference")
    return Launch(
        launcher, "oci", repository, tag or "latest", exact=False, index=index, tag=tag
    )


def _split_tag(name: str) -> tuple[str, str, str]:
    """`host:5000/repo:tag` -> (`host:5000/repo`, ":", `tag`): a colon after
    the last slash is the tag's."""
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        return name[:colon], ":", name[colon + 1 :]
    return name, "", ""


def lock_line(package: str, version: str, available: str = "") -> str:
    """A launch lock in one line, as `status` and the HUD show it:
    `PACKAGE VERSION locked`, and `; AVAILABLE available` when a newer
    release waits for `mcp-manager update`."""
    text = f"{package} {version} locked"
    return f"{text}; {available} available" if available else text
