"""The live config script: load and reconcile, watch the file, run Lua callbacks.

`ConfigRunner` owns the current `LiveScript` (the last one that ran cleanly).
`load()` runs startup.lua in a fresh runtime and, only if it succeeds, applies
its declarations to the manager as a diff and retires the previous runtime (and
with it every callback the previous version registered). A failing script
changes nothing and publishes `config_error`.

`run()` is the runner's task: it follows the bus for `mcp_on` hooks, drives
`mcp_call`s through the manager and hands results back to Lua, and watches the
script's directory (editors save by rename) to reload after a burst of saves has
settled. Callbacks run on the event loop under their own small time budget; a
failure becomes a `hook_error` event and a log line, never a crash.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..core.errors import ConfigError, ManagerError
from ..core.events import ConfigLoaded, ConfigRejected, HookFailed, event_to_dict
from ..core.info import LastReload
from ..core.policy import Rule
from ..core.profile import Profile
from ..core.replies import AlreadyApplied, ReloadSummary
from ..core.spec import ConnectionSpec
from ..core.status import ConnectionStatus
from ..engine.bus import EventBus, Subscription
from ..engine.manager import Manager
from ..engine.policy import Caller
from ..lua import LiveScript, LuaCall, start_file
from ..transport.ops import OPS

__all__ = ["RELOAD_MAX_DELAY", "RELOAD_QUIET", "ConfigRunner"]

logger = logging.getLogger(__name__)

RELOAD_QUIET = 0.2
"""Seconds without a new save before a watched change is reloaded."""

RELOAD_MAX_DELAY = 2.0
"""Seconds a stream of saves may postpone its reload at most."""

EMPTY_GRACE = 2.0
"""Seconds an emptied script waits for the rest of its save before it is
applied (removing every connection)."""

WATCH_TIMEOUT_MS = 500
"""How often the file watcher wakes up when nothing changes (it must, to be
stoppable); its first wake-up also tells that it is watching."""

HOOK_QUEUE = 10_000
"""Events the hook dispatcher may fall behind by (then it is told how many)."""


class ConfigRunner:
    """Runs startup.lua for the daemon and keeps its callbacks going.

    Args:
        path: The script.
        manager: Receives the declared set.
        bus: Where config and hook events go, and where hooks come from.
        getenv: The environment scripts see through `env()`.
    """

    def __init__(
        self,
        path: Path,
        manager: Manager,
        bus: EventBus,
        *,
        getenv: Callable[[str], str | None] | None = None,
    ) -> None:
        self.path = path
        self.manager = manager
        self.bus = bus
        self.script: LiveScript | None = None
        self.last_reload: LastReload | None = None
        self.reloads = 0
        self._getenv = getenv
        self.watching = False
        self._hook_events: Subscription | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._last_digest: str | None = None
        self._applied: tuple[str | None, float, str] | None = None
        """(file digest, time, trigger) of the load that last changed something."""

    # --- loading ----------------------------------------------------------------

    def load(self, trigger: str = "load") -> ReloadSummary:
        """Run the script; apply its declarations only if it succeeds.

        Traced as `mcp.reload`: the `mcp.add`/`mcp.remove` spans it causes are
        its children.

        Args:
            trigger: Who asked ("file watcher", "SIGHUP", "reload command"...).

        Returns:
            What changed; when the same file content was already applied and
            nothing changed, also when and by whom (`already_applied`).

        Raises:
            ConfigError: The script failed; the running set is unchanged.
        """
        attributes: dict[str, str | int] = {
            "mcp.config.file": str(self.path),
            "mcp.reload.count": self.reloads + 1,
            "mcp.reload.trigger": trigger,
        }
        with self.manager.tracing.span("mcp.reload", attributes) as span:
            result = self._load(trigger)
            span.set_attribute("mcp.reload.added", len(result.added))
            span.set_attribute("mcp.reload.removed", len(result.removed))
            span.set_attribute("mcp.reload.changed", len(result.changed))
            span.set_attribute("mcp.reload.unchanged", result.unchanged)
        return result

    def _load(self, trigger: str) -> ReloadSummary:
        file = str(self.path)
        self.reloads += 1
        self._last_digest = digest = _digest(self.path)
        getenv = self._getenv if self._getenv is not None else os.environ.get
        try:
            script = start_file(
                self.path,
                host=_Host(self.manager),
                getenv=getenv,
                secrets=self.manager.secrets,
            )
        except ConfigError as exc:
            where = _as_given(exc.file, self.path)
            self.last_reload = LastReload(
                ok=False,
                time=time.time(),
                file=where,
                line=exc.line,
                message=exc.message,
            )
            self.bus.publish(
                ConfigRejected(file=where, line=exc.line, message=exc.message)
            )
            raise
        old, self.script = self.script, script
        if old is not None:
            old.close()  # its hooks and pending call callbacks are gone now
        self._sync_hooks()
        profiles = {p.name: p for p in script.result.profiles}
        settings = (
            _settings_changed(
                self.manager.profiles,
                profiles,
                self.manager.policy.rules,
                script.result.rules,
            )
            if old is not None
            else ()
        )
        self.manager.profiles = profiles
        self.manager.policy.set_rules(script.result.rules, script.judge)
        result = self.manager.reconcile(script.result.specs)
        self.last_reload = LastReload(ok=True, time=time.time(), file=file)
        self.bus.publish(
            ConfigLoaded(
                file=file,
                added=result.added,
                removed=result.removed,
                changed=result.changed,
                unchanged=len(result.unchanged),
                settings=settings,
            )
        )
        self._start_calls()
        previous, now = self._applied, time.time()
        nothing = not (result.added or result.removed or result.changed or settings)
        earlier = None
        if nothing and previous is not None and previous[0] == digest:
            earlier = AlreadyApplied(time=previous[1], trigger=previous[2])
        else:
            self._applied = (digest, now, trigger)
        return ReloadSummary(
            file=file,
            added=result.added,
            removed=result.removed,
            changed=result.changed,
            unchanged=len(result.unchanged),
            connections=len(script.result.specs),
            already_applied=earlier,
            settings=settings,
        )

    def close(self) -> None:
        """Stop for good: no more reloads, hooks or call callbacks."""
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
        if self.script is not None:
            self.script.close()
        self.watching = False

    # --- the task -----------------------------------------------------------------

    async def run(
        self,
        *,
        watch: bool = True,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Dispatch hooks, drive `mcp_call`s and (if `watch`) reload on save."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                self._sync_hooks()
                self._start_calls()
                task_status.started()
                if watch:
                    await tg.start(self._watch)
                    self.watching = True
                await anyio.sleep_forever()
            finally:
                if self._hook_events is not None:
                    self._hook_events.close()

    def _sync_hooks(self) -> None:
        """Follow the bus only while the script has hooks.

        A subscription wakes its task on every event; with hundreds of dead
        upstreams retrying, that is most of the daemon's idle cost, for nothing
        when no script listens.
        """
        wanted = self.script is not None and bool(self.script.hook_kinds())
        if wanted and self._hook_events is None and self._tg is not None:
            self._hook_events = self.bus.subscribe("lua-hooks", HOOK_QUEUE)
            self._tg.start_soon(self._dispatch_hooks, self._hook_events)
        elif not wanted and self._hook_events is not None:
            self._hook_events.close()  # its dispatcher ends
            self._hook_events = None

    async def _dispatch_hooks(self, events: Subscription) -> None:
        async for event in events:
            script = self.script
            if script is None or event.kind == HookFailed.kind:
                continue
            kinds = script.hook_kinds()
            if event.kind not in kinds and "*" not in kinds:
                continue
            errors = script.dispatch(event_to_dict(event))
            for error in errors:
                self._hook_failed(error, event.kind)
            self._start_calls()
            if errors:
                self._sync_hooks()  # a hook turned off may have been the last

    def _start_calls(self) -> None:
        script = self.script
        if script is None or self._tg is None:
            return  # started once `run()` is up
        for call in script.take_calls():
            self._tg.start_soon(self._run_call, script, call)
        for job in script.take_jobs():
            self._tg.start_soon(self._drive_job, script, job)

    async def _run_call(self, script: LiveScript, call: LuaCall) -> None:
        data: dict[str, object] | None = None
        err: str | None = None
        try:
            data = await self._perform(call)
        except ManagerError as exc:
            err = str(exc)
        error = script.deliver(call, data, err)
        if error is not None:
            self._hook_failed(error, f"mcp_{call.op}")
        self._start_calls()

    async def _perform(self, call: LuaCall) -> dict[str, object]:
        """Make a script's request: a tool call, a resource read or a prompt."""
        if call.op == "call":
            result = await self.manager.call(
                call.server, call.tool, call.arguments, caller=Caller(client="lua")
            )
            return dict(result.data)
        method, make = OPS[call.op]
        return await self.manager.request(
            call.server, method, call.tool, make(call.tool, call.arguments)
        )

    async def _drive_job(self, script: LiveScript, job: int) -> None:
        """Resume an `mcp_async` job until it ends, making the calls it awaits."""
        result: dict[str, object] | None = None
        err: str | None = None
        while True:
            call, failure = script.resume(job, result, err)
            self._start_calls()  # the job may have started calls or jobs itself
            if failure is not None:
                self._hook_failed(failure, "mcp_async")
                return
            if call is None:
                return
            result, err = None, None
            try:
                result = await self._perform(call)
            except ManagerError as exc:
                err = str(exc)

    def _hook_failed(self, error: ConfigError, hook: str) -> None:
        self.bus.publish(
            HookFailed(
                file=error.file or str(self.path),
                line=error.line,
                message=error.message,
                hook=hook,
            )
        )

    # --- watching -----------------------------------------------------------------

    async def _watch(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Reload when the script changes on disk (after a burst settles)."""
        send, receive = anyio.create_memory_object_stream[None](1)
        async with anyio.create_task_group() as tg:
            stop = anyio.Event()
            tg.start_soon(self._settle_and_reload, receive)
            try:
                await tg.start(_watch_directory, self.path, send, stop)
                task_status.started()
                await anyio.sleep_forever()
            finally:
                stop.set()

    async def _settle(self, changes: MemoryObjectReceiveStream[None]) -> None:
        """Wait for a burst of saves to stop (at most `RELOAD_MAX_DELAY`)."""
        deadline = anyio.current_time() + RELOAD_MAX_DELAY
        while True:
            quiet = min(RELOAD_QUIET, deadline - anyio.current_time())
            if quiet <= 0:
                return
            with anyio.move_on_after(quiet) as settled:
                await changes.receive()
            if settled.cancelled_caught:
                return

    async def _settle_and_reload(
        self, changes: MemoryObjectReceiveStream[None]
    ) -> None:
        async with changes:
            async for _ in changes:
                await self._settle(changes)
                if _is_empty(self.path) and self.manager.connections():
                    # A save that truncates first and writes later (in two
                    # steps, slowly) must not remove every connection between.
                    logger.info(
                        "%s is empty: waiting %g s for the rest of the save "
                        "before removing every connection",
                        self.path,
                        EMPTY_GRACE,
                    )
                    with anyio.move_on_after(EMPTY_GRACE):
                        await changes.receive()
                        await self._settle(changes)
                if _digest(self.path) == self._last_digest:
                    logger.debug("%s saved without changes; not reloading", self.path)
                    continue
                logger.info("%s changed: reloading", self.path)
                with contextlib.suppress(ConfigError):  # logged as config_error
                    self.load("file watcher")


def _is_empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except OSError:
        return False


async def _watch_directory(
    path: Path,
    send: MemoryObjectSendStream[None],
    stop: anyio.Event,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Signal every change of the script or of a module in its `config/` directory.

    Watches directories, not the file: editors save by writing a new file and
    renaming it over the old one.
    """
    from watchfiles import awatch  # lazy: only the daemon watches

    link = path.absolute()  # noqa: ASYNC240 - the name given, maybe a symlink
    modules = link.parent / "config"  # where `require` looks (`read_script`)
    script = link

    def relevant(change: object, changed: str) -> bool:
        p = Path(changed)
        return (
            p in (script, link)
            or p == modules  # made after the start: watched from then on
            or (p.parent == modules and p.suffix == ".lua")
        )

    started = False
    async with send:  # the reloader's stream ends with the watcher
        while True:
            script = path.resolve()  # noqa: ASYNC240 - once per watch
            with_modules = modules.is_dir()
            roots = list(
                dict.fromkeys(
                    [link.parent, script.parent, *([modules] if with_modules else [])]
                )
            )
            watch = awatch(
                *roots,
                watch_filter=relevant,
                stop_event=stop,
                debounce=50,
                step=50,  # how often the watcher thread wakes; 10 ms: ~1 % of a core
                recursive=False,
                yield_on_timeout=True,  # the first (empty) yield: it is watching
                rust_timeout=WATCH_TIMEOUT_MS,
            )
            async with contextlib.aclosing(watch):
                async for changes in watch:
                    if not started:
                        started = True
                        task_status.started()
                    if not changes:
                        continue
                    try:
                        send.send_nowait(None)
                    except anyio.WouldBlock:
                        pass  # a reload is pending; it will see this change too
                    except anyio.BrokenResourceError:
                        return  # the daemon is stopping: the reloader went first
                    if not with_modules and modules.is_dir():
                        break  # watch the new config/ too
                    if path.resolve() != script:  # noqa: ASYNC240
                        break  # a symlink pointed elsewhere: watch its target
                else:
                    return  # stopped


class _Host:
    """What Lua may see and (from callbacks) change of the running daemon."""

    def __init__(self, manager: Manager) -> None:
        self._manager = manager

    def status(self, name: str) -> ConnectionStatus | None:
        return self._manager.status(name)

    def list(self) -> list[ConnectionStatus]:
        return self._manager.statuses()

    def add(self, spec: ConnectionSpec) -> bool:
        return self._manager.add(spec)

    def remove(self, name: str) -> bool:
        return self._manager.remove(name)


def _settings_changed(
    old_profiles: Mapping[str, Profile],
    profiles: Mapping[str, Profile],
    old_rules: tuple[Rule, ...],
    rules: tuple[Rule, ...],
) -> tuple[str, ...]:
    """What a reload changed besides connections: `policy`, `profile NAME`
    (where a declaration stands, `FILE:LINE`, is not a change)."""
    changed = ["policy"] if _unplaced(old_rules) != _unplaced(rules) else []
    for name in sorted(old_profiles.keys() | profiles.keys()):
        before, after = old_profiles.get(name), profiles.get(name)
        if (
            before is None
            or after is None
            or _unplaced((before,)) != _unplaced((after,))
        ):
            changed.append(f"profile {name}")
    return tuple(changed)


def _unplaced(items: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(dataclasses.replace(item, where="") for item in items)


def _digest(path: Path) -> str | None:
    """The script's content and its modules' (`config/*.lua`): a save that
    changed neither is no reason to reload."""
    try:
        digest = hashlib.sha256(path.read_bytes())
    except OSError:
        return None
    with contextlib.suppress(OSError):
        for module in sorted((path.parent / "config").glob("*.lua")):
            with contextlib.suppress(OSError):
                digest.update(b"\0" + module.name.encode() + b"\0")
                digest.update(module.read_bytes())
    return digest.hexdigest()


def _as_given(file: str | None, script: Path) -> str:
    """The file an error is in, named as the script was given (as
    `config_loaded` names it): Lua names its chunks by their bare file name
    (`startup.lua`, `config/x.lua`), relative to the script's directory."""
    if not file:
        return str(script)
    if Path(file).is_absolute():
        return file
    if file == script.name:
        return str(script)
    return str(script.parent / file)
