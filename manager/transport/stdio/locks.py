"""Launch locks: a server fetched from a registry starts the version it was
locked to at its first start, never silently a newer one.

`core.launch` finds the package in a stdio command line (`npx -y pkg`,
`uvx pkg`, `docker run image`). Here:

- **The first start resolves** what the launcher would take now (the npm
  registry through `npm view`, so `.npmrc`, scopes and private registries
  count as they do for `npx`; a Python index through its JSON simple API,
  PEP 691/700; an OCI registry through its v2 API, anonymous token
  included), records it in `locks/NAME.json` beside the pins (0600), and
  starts exactly that version (`name@1.2.3`, `name==1.2.3`,
  `image@sha256:...`).
- **Later starts** use the record, without asking any registry.
- **A newer release** is looked for in the background (`LaunchLocks.run`), at
  most once an hour per connection: it is offered (a `launch_lock` event,
  `drift`: a WARNING and a HUD mark), never taken. `mcp-manager update NAME`
  shows it and takes it (`offer`, `take`).
- **`min_age = N`** (days): a release younger than that is not locked nor
  offered (a cooldown against a package taken over for a day).
- **A command the user already pinned** (`pkg@1.2.3`, `pkg==1.2.3`, a
  digest) is left as written. A launcher whose package is a path, a URL or
  a git reference, or a first resolution that fails (offline, no `npm`), is
  said (`unlocked`, with the reason) and started as written; resolving is
  tried again at a later start, at most every `RETRY_UNLOCKED` seconds.

Registry answers are bounded: `RESOLVE_TIMEOUT` seconds in all. A lock is
kept per connection name; editing the package or what it asks for (`@2`)
locks anew, other edits keep it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx2

from ...core.errors import ConnectFailed
from ...core.launch import Launch, LaunchNote, Unlockable, parse_launch
from ...core.replies import UpdateReply
from ...core.spec import ConnectionSpec
from ...files import write_private_json
from .registries import Resolution, ResolveFailed, newer, resolve

__all__ = [
    "CHECK_EVERY",
    "RESOLVE_TIMEOUT",
    "LaunchLocks",
    "LockRecord",
]

logger = logging.getLogger(__name__)

RESOLVE_TIMEOUT = 20.0
"""Seconds one resolution may take in all (`npm view` starts a Node process)."""

CHECK_EVERY = 3600.0
"""Seconds between two looks for a newer release of one connection's package."""

RETRY_UNLOCKED = 300.0
"""Seconds before a failed first resolution is tried again at a start."""


@dataclass(frozen=True, slots=True)
class LockRecord:
    """One connection's lock, as `locks/NAME.json` keeps it."""

    launcher: str
    package: str
    wanted: str
    version: str
    published: str = ""
    locked_at: str = ""

    def fits(self, launch: Launch) -> bool:
        """Whether this lock is for what `launch` asks."""
        return (self.launcher, self.package, self.wanted) == (
            launch.launcher,
            launch.package,
            launch.wanted,
        )


Resolver = Callable[[Launch, ConnectionSpec, float], Any]
"""`resolve`'s shape: (launch, resolved spec, now) -> awaitable Resolution."""


class LaunchLocks:
    """The launch locks of every connection, one file each.

    Args:
        directory: Where the lock files live (`STATE/locks`).
        resolver: Asks the registry (`resolve`; tests pass their own).
        clock: Wall time (epoch seconds).
        check_every: Seconds between two looks for a newer release of one
            connection's package.
        read_only: Start what a lock says, but make none and look for no
            newer release (`mcp-manager pins check`: what the daemon would
            start, no side effect).
        resolve_timeout: Seconds one resolution may take in all.
    """

    def __init__(
        self,
        directory: Path,
        resolver: Resolver | None = None,
        clock: Callable[[], float] = time.time,
        check_every: float = CHECK_EVERY,
        read_only: bool = False,
        resolve_timeout: float = RESOLVE_TIMEOUT,
    ) -> None:
        self.directory = directory
        self._resolve = resolver or resolve
        self._clock = clock
        self._check_every = check_every
        self._read_only = read_only
        self._resolve_timeout = resolve_timeout
        self._checked: dict[str, float] = {}
        """When each connection's package was last looked at for a newer one."""
        self._failed: dict[str, float] = {}
        """When a connection's first resolution last failed."""
        self._records: dict[str, LockRecord | None] = {}
        self.unreadable: dict[str, str] = {}
        """The connections whose lock file is there but cannot be read, and why."""
        self._told: dict[str, str] = {}
        """What was last said about each connection (said again only if new)."""
        self._due: dict[
            str, tuple[ConnectionSpec, Launch, Callable[[LaunchNote], None]]
        ]
        self._due = {}
        self._wake: anyio.Event | None = None
        """Set when a check is due; made by `run` (an event needs the loop)."""

    def path(self, name: str) -> Path:
        """Where `name`'s lock lives."""
        return self.directory / f"{name}.json"

    def record(self, name: str) -> LockRecord | None:
        """`name`'s lock, or None (none yet, or the file is unreadable: then
        `unreadable` says why, and it is read again next time); read once,
        then kept (this object writes every change)."""
        if name in self._records:
            return self._records[name]
        path = self.path(name)
        try:
            data = json.loads(path.read_text())
            record: LockRecord | None = LockRecord(
                **{k: str(v) for k, v in data.items()}
            )
        except FileNotFoundError:
            record = None
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            self.unreadable[name] = str(exc) or type(exc).__name__
            return None
        self.unreadable.pop(name, None)
        self._records[name] = record
        return record

    def _write(self, name: str, record: LockRecord) -> None:
        write_private_json(
            self.path(name),
            {
                "launcher": record.launcher,
                "package": record.package,
                "wanted": record.wanted,
                "version": record.version,
                "published": record.published,
                "locked_at": record.locked_at,
            },
            indent=2,
        )
        self._records[name] = record
        self.unreadable.pop(name, None)

    def _tell(
        self, name: str, tell: Callable[[LaunchNote], None], note: LaunchNote
    ) -> None:
        key = f"{note.change}|{note.version}|{note.available}|{note.reason}"
        if self._told.get(name) == key:
            return
        self._told[name] = key
        tell(note)

    async def apply(
        self, spec: ConnectionSpec, tell: Callable[[LaunchNote], None]
    ) -> ConnectionSpec:
        """The spec to start: `spec` with its package locked, as written if
        there is nothing to lock. `spec` has its `${...}` values resolved
        (the registry is asked with the server's own environment). A
        registry that does not answer starts the server as written, and says
        so (`tell`).

        Raises:
            ConnectFailed: Its lock file is there but cannot be read (as a
                pin file that cannot be read trusts nothing).
        """
        if spec.transport != "stdio" or not spec.lock:
            return spec
        launch = parse_launch(spec.command, spec.args)
        if launch is None:
            return spec
        if isinstance(launch, Unlockable):
            self._tell(spec.name, tell, LaunchNote("unlocked", reason=launch.reason))
            return spec
        if launch.exact:
            return spec
        record = self.record(spec.name)
        why = self.unreadable.get(spec.name)
        if why is not None:
            # Never "no lock, take the newest": that is what a lock is against.
            raise ConnectFailed(
                f"its launch lock {self.path(spec.name)} cannot be read ({why}); "
                f"not starting {launch.display} unlocked (that would take what "
                f"the registry has newest): run `mcp-manager update {spec.name}` "
                "to lock it again, or remove the file to lock the newest release"
            )
        now = self._clock()
        if record is not None and record.fits(launch):
            if not self._read_only:
                self._due[spec.name] = (spec, launch, tell)
                if self._wake is not None:
                    self._wake.set()
            return replace(spec, args=launch.locked(spec.args, record.version))
        if self._read_only:
            return spec
        failed = self._failed.get(spec.name)
        if failed is not None and now - failed < RETRY_UNLOCKED:
            return spec
        try:
            found = await self._resolved(launch, spec, now)
        except ResolveFailed as exc:
            self._failed[spec.name] = now
            self._tell(
                spec.name,
                tell,
                LaunchNote(
                    "unlocked",
                    package=launch.display,
                    reason=f"{exc}; started as written, locked at a later start",
                ),
            )
            return spec
        self._failed.pop(spec.name, None)
        self._checked[spec.name] = now
        self._write(spec.name, self._new_record(launch, found, now))
        self._tell(
            spec.name,
            tell,
            LaunchNote("locked", package=launch.display, version=found.version),
        )
        return replace(spec, args=launch.locked(spec.args, found.version))

    def _new_record(self, launch: Launch, found: Resolution, now: float) -> LockRecord:
        return LockRecord(
            launch.launcher,
            launch.package,
            launch.wanted,
            found.version,
            found.published,
            datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"),
        )

    async def _resolved(
        self, launch: Launch, spec: ConnectionSpec, now: float
    ) -> Resolution:
        try:
            with anyio.fail_after(self._resolve_timeout):
                found: Resolution = await self._resolve(launch, spec, now)
        except TimeoutError:
            raise ResolveFailed(
                f"the registry gave no answer within {self._resolve_timeout:g} s"
            ) from None
        except ResolveFailed:
            raise
        except (OSError, httpx2.HTTPError, ValueError) as exc:
            raise ResolveFailed(f"{type(exc).__name__}: {exc}") from None
        return found

    async def run(self) -> None:
        """Look for newer releases of the locked packages, one at a time, at
        most once every `CHECK_EVERY` seconds each, until cancelled."""
        while True:
            self._wake = anyio.Event()
            while self._due:
                name, (spec, launch, tell) = next(iter(self._due.items()))
                del self._due[name]
                now = self._clock()
                last = self._checked.get(name)
                if last is not None and now - last < self._check_every:
                    continue
                self._checked[name] = now
                await self._check(spec, launch, tell, now)
            await self._wake.wait()

    async def _check(
        self,
        spec: ConnectionSpec,
        launch: Launch,
        tell: Callable[[LaunchNote], None],
        now: float,
    ) -> None:
        record = self.record(spec.name)
        if record is None or not record.fits(launch):
            return
        try:
            found = await self._resolved(launch, spec, now)
        except ResolveFailed as exc:
            logger.debug("%s: no look at newer releases: %s", spec.name, exc)
            return
        if newer(launch, found.version, record.version):
            self._tell(
                spec.name,
                tell,
                LaunchNote(
                    "drift",
                    package=launch.display,
                    version=record.version,
                    available=found.version,
                ),
            )

    async def offer(self, spec: ConnectionSpec) -> UpdateReply:
        """What `mcp-manager update` would do for `spec` (its `${...}`
        resolved): the lock and the newer release it could take."""
        shown = UpdateReply(server=spec.name)
        launch = parse_launch(spec.command, spec.args)
        if launch is None:
            return replace(shown, note="its command does not fetch from a registry")
        if isinstance(launch, Unlockable):
            return replace(shown, note=launch.reason)
        shown = replace(shown, package=launch.display)
        if launch.exact:
            return replace(
                shown,
                locked=launch.wanted,
                note="its command names one version already: edit it to change",
            )
        if not spec.lock:
            return replace(shown, note="lock = false: it takes the newest")
        record = self.record(spec.name)
        if record is not None and record.fits(launch):
            shown = replace(shown, locked=record.version)
        try:
            found = await self._resolved(launch, spec, self._clock())
        except ResolveFailed as exc:
            return replace(shown, note=f"the registry: {exc}")
        if found.newest != found.version:
            shown = replace(shown, newest=found.newest)
        if shown.locked and not newer(launch, found.version, shown.locked):
            return shown
        return replace(shown, available=found.version, published=found.published)

    def take(self, spec: ConnectionSpec, version: str, published: str = "") -> str:
        """Lock `spec`'s package to `version` (`update`); the previous one."""
        launch = parse_launch(spec.command, spec.args)
        if not isinstance(launch, Launch) or launch.exact:
            raise ValueError(f"{spec.name}: nothing to lock in its command")
        record = self.record(spec.name)
        before = record.version if record is not None and record.fits(launch) else ""
        found = Resolution(version, published)
        self._write(spec.name, self._new_record(launch, found, self._clock()))
        self._told.pop(spec.name, None)
        return before
