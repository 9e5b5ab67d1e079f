"""A script that stays alive in the daemon: its hooks and `mcp_call` completions.

`LiveScript` keeps the run's runtime, feeds it events (`mcp_on`), completes its
calls (`mcp_call`, `mcp_async`/`mcp_await` jobs), each under a fresh budget.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import anyio
from lupa.lua54 import LuaError, lua_type

from ..core.errors import ConfigError
from .convert import MAX_ENTRIES, lua_to_py
from .host import LuaCall, ScriptResult
from .isolated import run_isolated
from .sandbox import ScriptRun

__all__ = ["RUNAWAY_LIMIT", "LiveScript"]

RUNAWAY_LIMIT = 3
"""Times a hook may run out of its budget before it is turned off (until the
script loads again)."""

logger = logging.getLogger("manager.lua")


JUDGING_AT_ONCE = 4
"""Policy checks run at once (each in a forked copy of the daemon): more
calls to judge wait their turn, not the daemon's loop."""


class LiveScript:
    """A script that ran cleanly, kept alive for the callbacks it registered.

    Callbacks (`mcp_on` hooks, `mcp_call` completions) run on the daemon's loop,
    each under `hook_budget`; an error or a runaway in one is returned as a
    `ConfigError` naming its line, and never affects the next. A hook that
    runs away `RUNAWAY_LIMIT` times is turned off. `close()` drops the
    runtime: callbacks of a replaced script never run again.
    """

    def __init__(self, run: ScriptRun, hook_budget: float) -> None:
        self._run = run
        self._hook_budget = hook_budget
        self._judging = anyio.Semaphore(JUDGING_AT_ONCE)
        self._ran_out = False
        self._overruns: dict[int, int] = {}
        """Times each hook (by identity) ran out of time."""
        self._run.live = True

    @property
    def result(self) -> ScriptResult:
        """What the script declared."""
        return self._run.result

    @property
    def file(self) -> str:
        """The script's file name, as in messages."""
        return self._run.file

    @property
    def closed(self) -> bool:
        """Whether `close()` was called."""
        return self._run.released

    def hook_kinds(self) -> frozenset[str]:
        """The event kinds with at least one hook (`*` included)."""
        return frozenset(self._run.hooks)

    def take_calls(self) -> list[LuaCall]:
        """The `mcp_call`s started since the last take, oldest first."""
        calls, self._run.calls = self._run.calls, []
        return calls

    def dispatch(self, event: Mapping[str, object]) -> list[ConfigError]:
        """Call every hook for `event["kind"]` and for "*" with the event as a table.

        Returns:
            One error per hook that failed (raised, or ran out of time).
        """
        run = self._run
        if run.released:
            return []
        fns = [*run.hooks.get(str(event.get("kind")), ()), *run.hooks.get("*", ())]
        if not fns:
            return []
        errors = []
        for fn in fns:
            error = self._invoke(fn, event)
            if error is None:
                continue
            if self._ran_out:
                overruns = self._overruns[id(fn)] = self._overruns.get(id(fn), 0) + 1
                if overruns >= RUNAWAY_LIMIT:
                    self._turn_off(fn)
                    error.message += (
                        f"; it ran out of time {overruns} times, so it is turned "
                        "off until startup.lua is loaded again"
                    )
                    error.args = (error.message,)
            errors.append(error)
        return errors

    def _turn_off(self, fn: Any) -> None:
        """Drop a hook that keeps running away: each run blocks the daemon's
        loop for the whole budget, and a busy fleet sends events all the time."""
        self._overruns.pop(id(fn), None)
        hooks = self._run.hooks
        for kind in list(hooks):
            kept = [other for other in hooks[kind] if other is not fn]
            if kept:
                hooks[kind] = kept
            else:
                del hooks[kind]

    def deliver(
        self, call: LuaCall, result: Mapping[str, object] | None, error: str | None
    ) -> ConfigError | None:
        """Run `fn(result, err)` of a finished `mcp_call` (dropped once closed)."""
        if self._run.released:
            return None
        return self._invoke(call.fn, result, error)

    async def judge(self, fn: Any, arguments: Mapping[str, object]) -> object:
        """Run an `mcp_policy` rule's `check` on a call's arguments (a table)
        under the callback budget, in a copy of the runtime that is killed at
        the budget whatever it runs (`lua.isolated`: the arguments are an
        agent's, and a string pattern on them can run for minutes in C);
        what it returned (nil, a boolean or a string; other values as
        `a table`, ...).

        Raises:
            ConfigError: It failed or ran out of time (naming its line), or
                the runtime was released (a replaced script).
        """
        if self._run.released:
            raise ConfigError("the script that declared this rule was replaced")
        async with self._judging:
            answer = await run_isolated(
                lambda: self._judged(fn, arguments), self._hook_budget
            )
        if not isinstance(answer, dict):
            raise ConfigError(
                f"callback exceeded its time budget ({self._hook_budget:g} s) in a "
                "call that could not be interrupted (a string pattern that "
                "backtracks on a long argument, say)",
                file=self.file,
            )
        if "error" in answer:
            line = answer.get("line")
            raise ConfigError(
                str(answer["error"]),
                file=answer.get("file") or None,
                line=line if isinstance(line, int) else None,
            )
        return answer.get("said")

    def _judged(self, fn: Any, arguments: Mapping[str, object]) -> dict[str, object]:
        """`judge`'s work in its isolated copy (`lua.isolated`), as JSON."""
        said, error = self._guarded(fn, dict(arguments))
        if error is not None:
            return {"error": error.message, "file": error.file, "line": error.line}
        if said is None or isinstance(said, bool | str):
            return {"said": said}
        return {"said": f"a {lua_type(said) or type(said).__name__}"}

    def close(self) -> None:
        """Release the runtime; later dispatches and deliveries do nothing."""
        self._run.release()

    def take_jobs(self) -> list[int]:
        """The `mcp_async` jobs started since the last take, oldest first."""
        jobs, self._run.jobs = self._run.jobs, []
        return jobs

    def resume(
        self,
        job: int,
        result: Mapping[str, object] | None = None,
        error: str | None = None,
    ) -> tuple[LuaCall | None, ConfigError | None]:
        """Run an `mcp_async` job until it awaits a call or ends.

        Args:
            job: The job id (from `take_jobs`).
            result: What the awaited call returned (None to start the job).
            error: Why the awaited call could not be made.

        Returns:
            `(call, None)` when the job awaits `call` (its `fn` is unused);
            `(None, None)` when it finished; `(None, error)` when it failed.
        """
        run = self._run
        if run.released:
            return None, None
        outcome, failure = self._guarded(run.step, job, result, error)
        if failure is not None:
            return None, failure
        assert isinstance(outcome, tuple)
        ok, *rest = outcome
        if not ok:
            text = str(rest[0]) if rest else "job failed"
            run.expired = self._ran_out  # the job's coroutine hit the budget
            failed = run.config_error(text, None, self._hook_budget, run.memory_limit)
            run.expired = False
            return None, self._callback_error(failed)
        if not rest or rest[0] is None:
            return None, None
        server, tool, raw_args, op = (rest + [None, None, None, None])[:4]
        op = op if op in ("read", "prompt") else "call"
        try:
            arguments = lua_to_py(raw_args, "args", [MAX_ENTRIES]) if raw_args else {}
        except ConfigError as exc:
            return self.resume(job, None, f"mcp_await: {exc.message}")
        if not isinstance(server, str) or not isinstance(tool, str):
            return self.resume(job, None, "mcp_await: server and tool must be strings")
        if not isinstance(arguments, dict):
            if arguments == []:
                arguments = {}
            else:
                return self.resume(
                    job, None, "mcp_await: args must be a table of named arguments"
                )
        return LuaCall(server, tool, arguments, None, op=op), None

    def _invoke(self, fn: Any, *values: object) -> ConfigError | None:
        return self._guarded(fn, *values)[1]

    def _guarded(self, fn: Any, *values: object) -> tuple[object, ConfigError | None]:
        """Call into Lua under the callback budget; errors come back as values."""
        run = self._run
        args = [
            v if isinstance(v, int) else None if v is None else run.to_lua_value(v)
            for v in values
        ]
        run.deadline = time.monotonic() + self._hook_budget
        run.fault = None
        try:
            return fn(*args), None
        except (LuaError, UnicodeDecodeError) as exc:
            cause = exc.with_traceback(None)
            text = str(exc) if isinstance(exc, LuaError) else "invalid UTF-8 in error"
            error = run.config_error(text, cause, self._hook_budget, run.memory_limit)
            if run.fault is not None:
                logger.error("Lua callback: host error", exc_info=run.fault)
            return None, self._callback_error(error)
        finally:
            self._ran_out = run.expired
            if run.expired or run.out_of_memory:
                run.gc_and_rearm()
                run.expired = run.out_of_memory = False

    def _callback_error(self, error: ConfigError) -> ConfigError:
        if error.message.startswith("script exceeded its time budget"):
            error.message = error.message.replace("script", "callback", 1)
            error.args = (error.message,)
        return error
