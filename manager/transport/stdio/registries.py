"""What registries say a launch would take (`locks` asks, `core.launch`
finds the package).

- **npm** (`npx`, `bunx`): `npm view --json`, so `.npmrc`, scoped
  registries, tokens and proxies count as they do for `npx` itself; the
  version a dist-tag (`latest`) or a range names, and when each release was
  published.
- **Python indexes** (`uvx`, `pipx run`): the JSON simple API (PEP 691, with
  PEP 700's upload times) of the index the server's environment or command
  line names, else PyPI; yanked files do not count.
- **OCI registries** (`docker run`): a tag's manifest digest (the v2 API,
  with the anonymous pull token Docker Hub and GHCR ask for).

`min_age` days: a release younger than that is not taken (the newest
however young is still reported, for `update` to say what waits).
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

import anyio
import httpx2
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from ...core.launch import Launch
from ...core.spec import ConnectionSpec

__all__ = ["PYPI_INDEX", "Resolution", "ResolveFailed", "newer", "resolve"]

logger = logging.getLogger(__name__)

PYPI_INDEX = "https://pypi.org/simple/"
"""The Python index asked when neither the server's environment nor its
command line names one (`UV_DEFAULT_INDEX`, `UV_INDEX_URL`, `PIP_INDEX_URL`,
`--index-url`, `--default-index`, `-i`)."""

_DAY = 86400.0

TIMEOUT = 20.0
"""Seconds an HTTP request to a registry may take."""


class ResolveFailed(Exception):
    """The registry did not say which version to take (the message says why)."""


@dataclass(frozen=True, slots=True)
class Resolution:
    """What a registry has for one launch.

    Attributes:
        version: The release to lock: the newest that the launch asks for
            and that is at least `min_age` days old.
        published: When it was published (ISO 8601), "" if not known.
        newest: The newest the launch asks for, however young.
    """

    version: str
    published: str = ""
    newest: str = ""


_SEMVER = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?")


def _semver(text: str) -> tuple[int, int, int, int, tuple[tuple[int, int | str], ...]]:
    """An npm version's order: a release sorts after its prereleases."""
    match = _SEMVER.match(text)
    if match is None:
        return (-1, -1, -1, 0, ())
    major, minor, patch, pre = match.groups()
    parts: tuple[tuple[int, int | str], ...] = ()
    if pre:
        parts = tuple(
            (0, int(part)) if part.isdigit() else (1, part) for part in pre.split(".")
        )
    return (int(major), int(minor), int(patch), 0 if pre else 1, parts)


def _old_enough(published: str, now: float, min_age: float) -> bool:
    if min_age <= 0:
        return True
    when = _epoch(published)
    return when is not None and now - when >= min_age * _DAY


def _epoch(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


async def resolve(launch: Launch, spec: ConnectionSpec, now: float) -> Resolution:
    """Ask `launch`'s registry what to lock (`Resolver`).

    Raises:
        ResolveFailed: The registry, or `npm`, did not say.
    """
    if launch.ecosystem == "npm":
        return await _npm(launch, spec, now)
    if launch.ecosystem == "pypi":
        return await _pypi(launch, spec, now)
    return await _oci(launch, spec)


def _environment(spec: ConnectionSpec) -> dict[str, str]:
    return {**os.environ, **dict(spec.env)}


async def _npm_view(spec: ConnectionSpec, *what: str) -> Any:
    try:
        done = await anyio.run_process(
            ["npm", "view", "--json", *what],
            env=_environment(spec),
            cwd=spec.cwd or None,
            check=False,
            # Not the daemon's terminal: npm resets a terminal it sees to
            # cooked mode on exit, and the HUD reading it stops seeing keys.
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except FileNotFoundError:
        raise ResolveFailed(
            "npm is not installed (it resolves npx/bunx packages)"
        ) from None
    out = done.stdout.decode(errors="replace").strip()
    if done.returncode != 0:
        detail = out or done.stderr.decode(errors="replace").strip()
        try:
            detail = json.loads(detail)["error"]["summary"]
        except (ValueError, KeyError, TypeError):
            detail = detail.splitlines()[0] if detail else f"exit {done.returncode}"
        raise ResolveFailed(f"npm view {what[0]}: {detail}")
    return json.loads(out) if out else None


async def _npm(launch: Launch, spec: ConnectionSpec, now: float) -> Resolution:
    facts = await _npm_view(spec, launch.package, "time", "dist-tags")
    if not isinstance(facts, dict):
        raise ResolveFailed(f"npm view {launch.package}: no answer")
    times: Mapping[str, str] = facts.get("time") or {}
    tags: Mapping[str, str] = facts.get("dist-tags") or {}
    wanted = launch.wanted or "latest"
    if wanted in tags:
        newest = tags[wanted]
        if _old_enough(times.get(newest, ""), now, spec.min_age):
            return Resolution(newest, times.get(newest, ""), newest)
        matching = await _npm_view(spec, f"{launch.package}@<={newest}", "version")
    else:
        matching = await _npm_view(spec, f"{launch.package}@{wanted}", "version")
    versions = [matching] if isinstance(matching, str) else list(matching or [])
    if not versions:
        raise ResolveFailed(f"no release of {launch.display}")
    newest = max(versions, key=_semver)
    ripe = [v for v in versions if _old_enough(times.get(v, ""), now, spec.min_age)]
    if not ripe:
        raise ResolveFailed(
            f"no release of {launch.display} is {spec.min_age:g} days old (min_age)"
        )
    version = max(ripe, key=_semver)
    return Resolution(version, times.get(version, ""), newest)


def _python_index(spec: ConnectionSpec) -> str:
    args = spec.args
    for flag in ("--default-index", "--index-url", "-i"):
        for index, arg in enumerate(args):
            if arg == flag and index + 1 < len(args):
                return args[index + 1]
            if arg.startswith(flag + "="):
                return arg.partition("=")[2]
    env = _environment(spec)
    for key in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"):
        if env.get(key):
            return env[key]
    return PYPI_INDEX


async def _pypi(launch: Launch, spec: ConnectionSpec, now: float) -> Resolution:
    index = _python_index(spec).rstrip("/") + "/"
    url = f"{index}{quote(canonicalize_name(launch.package))}/"
    async with httpx2.AsyncClient(timeout=TIMEOUT, follow_redirects=True) as c:
        answer = await c.get(
            url, headers={"Accept": "application/vnd.pypi.simple.v1+json"}
        )
    if answer.status_code == 404:
        raise ResolveFailed(f"{launch.package} is not on {index}")
    if answer.status_code != 200:
        raise ResolveFailed(f"{url} answered HTTP {answer.status_code}")
    try:
        page = answer.json()
        files = list(page.get("files") or [])
    except (ValueError, AttributeError):
        raise ResolveFailed(f"{url} is not a JSON simple index (PEP 691)") from None
    published: dict[Version, str] = {}
    for item in files:
        if not isinstance(item, dict) or item.get("yanked"):
            continue
        version = _file_version(str(item.get("filename", "")))
        if version is None:
            continue
        when = str(item.get("upload-time") or "")
        if version not in published or (when and when < published[version]):
            published[version] = when
    try:
        specifier = SpecifierSet(launch.wanted)
    except InvalidSpecifier:
        raise ResolveFailed(f"{launch.display}: not a version specifier") from None
    matching = sorted(specifier.filter(published), reverse=True)
    if not matching:
        raise ResolveFailed(f"no release of {launch.display} on {index}")
    ripe = [v for v in matching if _old_enough(published[v], now, spec.min_age)]
    if not ripe:
        raise ResolveFailed(
            f"no release of {launch.display} is {spec.min_age:g} days old (min_age)"
        )
    return Resolution(str(ripe[0]), published[ripe[0]], str(matching[0]))


def _file_version(filename: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        return parse_sdist_filename(filename)[1]
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None


_MANIFESTS = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


def _registry(package: str) -> tuple[str, str]:
    """(registry base URL, repository) of an image name, Docker's way."""
    first, slash, rest = package.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        host, repository = first, rest
    else:
        host, repository = "registry-1.docker.io", package
        if "/" not in repository:
            repository = f"library/{repository}"
    local = host.startswith(("localhost", "127.0.0.1", "[::1]"))
    return f"{'http' if local else 'https'}://{host}", repository


async def _oci(launch: Launch, spec: ConnectionSpec) -> Resolution:
    if spec.min_age:
        logger.debug("%s: min_age does not apply to images", spec.name)
    base, repository = _registry(launch.package)
    url = f"{base}/v2/{repository}/manifests/{quote(launch.wanted, safe='')}"
    headers = {"Accept": _MANIFESTS}
    async with httpx2.AsyncClient(timeout=TIMEOUT, follow_redirects=True) as c:
        answer = await c.head(url, headers=headers)
        if answer.status_code == 401:
            token = await _registry_token(c, answer, repository)
            headers["Authorization"] = f"Bearer {token}"
            answer = await c.head(url, headers=headers)
    if answer.status_code == 404:
        raise ResolveFailed(f"{launch.display}: no such image or tag at {base}")
    if answer.status_code != 200:
        raise ResolveFailed(
            f"{base} answered HTTP {answer.status_code} for the manifest"
        )
    digest = answer.headers.get("Docker-Content-Digest", "")
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise ResolveFailed(f"{base} gave no digest for {launch.display}")
    return Resolution(digest, "", digest)


async def _registry_token(
    client: httpx2.AsyncClient, answer: httpx2.Response, repository: str
) -> str:
    """An anonymous pull token, as the registry's `WWW-Authenticate` asks."""
    challenge = answer.headers.get("WWW-Authenticate", "")
    if not challenge.lower().startswith("bearer "):
        raise ResolveFailed("the registry asks for a login (not an anonymous token)")
    fields = dict(_CHALLENGE.findall(challenge))
    realm = fields.get("realm", "")
    if not realm.startswith(("https://", "http://")):
        raise ResolveFailed("the registry's token address is not a URL")
    params = {"service": fields.get("service", "")}
    params["scope"] = fields.get("scope") or f"repository:{repository}:pull"
    got = await client.get(realm, params=params)
    try:
        data = got.json()
        token = str(data.get("token") or data.get("access_token") or "")
    except (ValueError, AttributeError):
        token = ""
    if got.status_code != 200 or not token:
        raise ResolveFailed(f"the registry's token service answered {got.status_code}")
    return token


def newer(launch: Launch, candidate: str, locked: str) -> bool:
    """Whether `candidate` is a newer release than `locked` (for an image:
    another digest)."""
    if candidate == locked:
        return False
    if launch.ecosystem == "oci":
        return True
    if launch.ecosystem == "pypi":
        try:
            return Version(candidate) > Version(locked)
        except InvalidVersion:
            return False
    return _semver(candidate) > _semver(locked)
