"""Run `startup.lua` in a sandboxed Lua 5.4 runtime and collect what it declares.

This module owns the Lua boundary and is the only one that imports lupa. Each run
gets a fresh `lupa.lua54` runtime with no Python objects in reach: `python`, `os`,
`io`, `load`, `debug`, `package` and friends are removed, data goes in as plain Lua
tables built by `table_from(..., recursive=True)`, and Lua tables come back as plain
Python values (depth- and size-limited) before `parse_spec` sees them. The Python
callbacks hide in the upvalues of small Lua shims, which also turn a Python failure
into a Lua error blamed on the caller's line. A *sticky* count hook stops runaway
scripts, including `pcall` loops and loops inside coroutines, at the time budget;
`max_memory` caps allocations. Every failure leaves as one `ConfigError` naming the
file, the line and, when known, the connection.

The script only records intent: `mcp_add` validates a declaration and returns in
microseconds; it never touches the network or the event loop.
"""

from __future__ import annotations

import builtins
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from lupa.lua54 import LuaError, LuaMemoryError, LuaRuntime, LuaSyntaxError, lua_type

from .core.errors import ConfigError
from .core.events import EVENT_TYPES
from .core.redact import SECRETS, is_sensitive_key, redact
from .core.spec import ConnectionSpec, changed_fields, parse_spec, validate_name

__all__ = [
    "DEFAULT_HOOK_BUDGET",
    "DEFAULT_MEMORY_LIMIT",
    "DEFAULT_TIME_BUDGET",
    "PYTHON_VARIABLE",
    "LiveHost",
    "LiveScript",
    "LuaCall",
    "LuaHost",
    "ScriptResult",
    "load_file",
    "run_script",
    "start_file",
]

logger = logging.getLogger(__name__)

DEFAULT_TIME_BUDGET = 2.0
"""Seconds a script may run before it is stopped."""

DEFAULT_HOOK_BUDGET = 0.25
"""Seconds one callback (`mcp_on` hook, `mcp_call` completion) may run. Shorter than
the script's budget: callbacks run on the live event loop, between events."""

PYTHON_VARIABLE = "MCP_MANAGER_PYTHON"
"""`env(PYTHON_VARIABLE)` is the daemon's own Python unless the variable is set, so
startup.lua can run the bundled demo server (`python -m manager.demo_server`)."""

DEFAULT_MEMORY_LIMIT = 64 * 1024 * 1024
"""Bytes the Lua runtime may allocate."""

_MAX_DEPTH = 32
"""Deepest table nesting converted to Python (also what stops self-referencing
tables: lupa wraps a table anew on each access, so identity checks do not work)."""

_MAX_ENTRIES = 10_000
"""Most table entries converted for one call, counted over all nesting levels."""

_HOOK_COUNT = 10_000
"""Lua VM instructions between two deadline checks (about 0.1 ms of Lua)."""

_MODULE_NAME = re.compile(r"^[A-Za-z0-9_]+$")
_LOCATION = re.compile(r"^(?P<src>[^\n]+?):(?P<line>\d+): (?P<body>.*)$", re.DOTALL)
_TRACEBACK = "\nstack traceback:"
_OUT_OF_MEMORY = "not enough memory"
_MIB = 1024 * 1024
_PATH_DEPTH = 4  # nesting levels spelled out in "endpoint.env.X" paths

_REMOVED_GLOBALS = (
    "os",
    "io",
    "package",
    "dofile",
    "loadfile",
    "load",
    "debug",
    "python",
    "collectgarbage",
    "warn",
)
"""Removed after the prelude captured what it needs. `require` is not listed: the
prelude replaces it with `mcp_load`. `warn` would write to stderr."""

# The prelude runs once per runtime, before the script and before `debug` is
# removed. Its arguments are the Python callbacks; they stay in its upvalues, out of
# the script's reach (no `debug.getupvalue`). Each callback returns `ok, value`;
# `pcall` turns a Python exception raised outside our code (e.g. lupa failing to
# decode a non-UTF-8 argument) into a message via `fault`.
_PRELUDE = """
local check, fault, raw_add, raw_remove, raw_status, raw_list, raw_env, raw_print,
      raw_load, raw_on, raw_call, raw_async, count = ...
local sethook, getinfo = debug.sethook, debug.getinfo
local error, pcall, rawget, tostring, type = error, pcall, rawget, tostring, type
local raw_setmetatable = setmetatable
local co_create, co_resume = coroutine.create, coroutine.resume
local pack, unpack, concat = table.pack, table.unpack, table.concat
local utf8len, gsub = utf8.len, string.gsub

-- Sticky time budget: once past the deadline the hook fires on every instruction,
-- so an error swallowed by a pcall is raised again right outside it.
local expired = false
local function hook()
  if check() then  -- sticky on the Python side until rearmed
    expired = true
    sethook(hook, "", 1)
    -- Blame the script's line, not a line of this prelude.
    local level = 2
    while true do
      local info = getinfo(level, "S")
      if info == nil then level = 2 break end
      if info.source ~= "=prelude" and info.what ~= "C" then break end
      level = level + 1
    end
    error("script exceeded its time budget", level)
  end
end

-- Hooks are per coroutine: give every coroutine the script creates its own.
local function create(f)
  if type(f) ~= "function" then
    error("bad argument #1 to 'create' (function expected)", 2)
  end
  local co = co_create(f)
  sethook(co, hook, "", expired and 1 or count)
  return co
end
coroutine.create = create
coroutine.wrap = function(f)
  if type(f) ~= "function" then
    error("bad argument #1 to 'wrap' (function expected)", 2)
  end
  local co = create(f)
  return function(...)
    local r = pack(co_resume(co, ...))
    if not r[1] then error(r[2], 0) end
    return unpack(r, 2, r.n)
  end
end

-- Lua runs an error handler with hooks disabled when the error came from a hook,
-- and coroutine.close runs __close handlers on a thread a hook error killed with
-- hooks still disabled; past the deadline, skip both.
local raw_xpcall, co_close = xpcall, coroutine.close
xpcall = function(f, handler, ...)
  return raw_xpcall(f, function(e)
    if expired then return e end
    return handler(e)
  end, ...)
end
local function stop_if_expired()
  if expired then error("script exceeded its time budget", 3) end
end
coroutine.close = function(co)
  stop_if_expired()
  return co_close(co)
end
coroutine.resume = function(co, ...)
  local r = pack(co_resume(co, ...))
  stop_if_expired()
  return unpack(r, 1, r.n)
end

-- Finalizers run with hooks disabled, so a loop in __gc could not be stopped.
setmetatable = function(t, mt)
  if type(mt) == "table" and rawget(mt, "__gc") ~= nil then
    error("setmetatable: __gc metamethods are not allowed", 2)
  end
  return raw_setmetatable(t, mt)
end

local function invoke(label, raw, ...)
  local pok, ok, res = pcall(raw, ...)
  if not pok then return false, fault(label, ok) end
  return ok, res
end

local function api(label, raw)
  return function(...)
    local ok, res = invoke(label, raw, ...)
    if not ok then error(res, 2) end
    return res
  end
end

-- The first Lua frame above the shim: where mcp_add was written.
local function caller()
  local level = 3
  while true do
    local info = getinfo(level, "Sl")
    if info == nil then return nil, nil end
    if info.currentline > 0 then return info.short_src, info.currentline end
    level = level + 1
  end
end

mcp_add = function(...)
  local src, line = caller()
  local ok, res = invoke("mcp_add", raw_add, src, line, ...)
  if not ok then error(res, 2) end
  return res
end
mcp_remove = api("mcp_remove", raw_remove)
mcp_status = api("mcp_status", raw_status)
mcp_list = api("mcp_list", raw_list)
mcp_on = api("mcp_on", raw_on)
mcp_call = api("mcp_call", raw_call)

-- Coroutine style: mcp_async(fn) runs fn as a job in which
-- `local result, err = mcp_await(server, tool, args)` waits for a call without
-- blocking anything. The daemon drives jobs through `step` (returned below).
local jobs, awaiting, next_job = {}, {}, 0
local co_running, co_status = coroutine.running, coroutine.status
local co_yield = coroutine.yield
mcp_async = function(fn)
  if type(fn) ~= "function" then
    error("mcp_async(fn): fn must be a function, got " .. type(fn), 2)
  end
  next_job = next_job + 1
  jobs[next_job] = create(fn)
  local ok, res = invoke("mcp_async", raw_async, next_job)
  if not ok then error(res, 2) end
  return next_job
end
mcp_await = function(server, tool, args)
  local co, main = co_running()
  if main then
    error("mcp_await: only inside mcp_async(function() ... end)", 2)
  end
  local known = false
  for _, job in pairs(jobs) do if job == co then known = true break end end
  if not known then
    error("mcp_await: only inside mcp_async(function() ... end)", 2)
  end
  awaiting[co] = {server, tool, args}
  return co_yield()
end
local function step(id, ...)
  local co = jobs[id]
  if co == nil then return false, "no such job", "dead" end
  local ok, err = co_resume(co, ...)
  local status = co_status(co)
  local request = awaiting[co]
  awaiting[co] = nil
  if status == "dead" then jobs[id] = nil end
  if not ok then jobs[id] = nil return false, err, "dead" end
  if status == "suspended" and request == nil then
    jobs[id] = nil
    return false, "mcp_async: the job yielded without mcp_await; "
      .. "only mcp_await may wait", "dead"
  end
  if request ~= nil then return true, request[1], request[2], request[3] end
  return true, nil
end

env = function(name, ...)
  local ok, res = invoke("env", raw_env, name)
  if not ok then error(res, 2) end
  if res == nil then return (...) end
  return res
end

print = function(...)
  local args = pack(...)
  for i = 1, args.n do
    local s = tostring(args[i])
    if not utf8len(s) then s = gsub(s, "[\\128-\\255]", "?") end
    args[i] = s
  end
  local ok, res = invoke("print", raw_print, concat(args, "\\t", 1, args.n))
  if not ok then error(res, 2) end
end

-- Like require, but only for <config_dir>/<name>.lua, cached for this run.
local loaded, loading = {}, {}
mcp_load = function(name)
  local cached = loaded[name]
  if cached ~= nil then return cached end
  if loading[name] then
    error("mcp_load('" .. name .. "'): circular load; " .. name
          .. ".lua is still loading", 2)
  end
  local ok, chunk = invoke("mcp_load", raw_load, name)
  if not ok then error(chunk, 2) end
  loading[name] = true
  local cok, result = pcall(chunk, name)
  loading[name] = nil
  if not cok then error(result, 0) end
  if result == nil then result = true end
  loaded[name] = result
  return result
end
require = mcp_load

sethook(hook, "", count)
-- The runner (drops the script's return values), and `rearm`, which gives a
-- callback run later (mcp_on, mcp_call) a fresh budget after a runaway one.
return function(chunk) chunk() end, function()
  expired = false
  sethook(hook, "", count)
end, step
"""


class LuaHost(Protocol):
    """What the script can see of the running daemon (read-only)."""

    def status(self, name: str) -> dict[str, object] | None:
        """The JSON-ready status of one connection, or None if it is not running.

        Keys: state, attempt, tools, error, next_retry_in, since, pid, exit_code.
        """
        ...

    def list(self) -> builtins.list[dict[str, object]]:
        """The status of every connection, sorted by name, each with a `name` key."""
        ...


@runtime_checkable
class LiveHost(LuaHost, Protocol):
    """The running daemon, as callbacks see it: they may change the running set."""

    def add(self, spec: ConnectionSpec) -> bool:
        """Declare (or restart with a changed spec) one connection now."""
        ...

    def remove(self, name: str) -> bool:
        """Remove one connection now; returns whether it existed."""
        ...


@dataclass(frozen=True, slots=True)
class LuaCall:
    """A tool call a script started with `mcp_call`; `fn(result, err)` gets the end."""

    server: str
    tool: str
    arguments: dict[str, object]
    fn: Any = field(repr=False)


@dataclass(frozen=True, slots=True)
class ScriptResult:
    """What one run of the script declared.

    Attributes:
        specs: Declared connections, in declaration order (after removes).
        removed: Names passed to `mcp_remove` and not declared again afterwards.
        duration: Seconds the run took.
    """

    specs: tuple[ConnectionSpec, ...]
    removed: tuple[str, ...]
    duration: float


def run_script(
    source: str,
    *,
    file: str = "startup.lua",
    host: LuaHost | None = None,
    getenv: Callable[[str], str | None] = os.environ.get,
    time_budget: float = DEFAULT_TIME_BUDGET,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    on_print: Callable[[str], None] | None = None,
    config_dir: Path | None = None,
) -> ScriptResult:
    """Run a config script in a fresh sandboxed runtime and return its declarations.

    Args:
        source: The Lua source.
        file: The name used in messages and as the chunk name (`@file`).
        host: The running daemon, for `mcp_status`, `mcp_list` and `mcp_remove`.
        getenv: The environment seen through `env()`.
        time_budget: Seconds the whole run may take.
        memory_limit: Bytes the runtime may allocate.
        on_print: Receives each `print` line (redacted); without it lines go to
            the log at INFO.
        config_dir: Where `mcp_load`/`require` find `<name>.lua` modules; None
            means modules are unavailable.

    Returns:
        The declared specs, the removed names and the duration.

    Raises:
        ConfigError: The script failed: syntax, runtime error, bad declaration,
            time budget or memory limit. It names the file, the line when known
            and the connection when the error is about one.
    """
    run = _execute(
        source, file, host, getenv, time_budget, memory_limit, on_print, config_dir
    )
    run.release()
    return run.result


def _execute(
    source: str,
    file: str,
    host: LuaHost | None,
    getenv: Callable[[str], str | None],
    time_budget: float,
    memory_limit: int,
    on_print: Callable[[str], None] | None,
    config_dir: Path | None,
) -> _Run:
    """Run the script; the returned run still holds its runtime."""
    if not time_budget > 0 or memory_limit <= 0:
        raise ValueError("time_budget and memory_limit must be positive")
    started = time.perf_counter()
    run = _Run(
        file=file,
        host=host,
        getenv=getenv,
        on_print=on_print,
        config_dir=config_dir,
        deadline=time.monotonic() + time_budget,
    )
    try:
        run.execute(source, memory_limit)
    except (LuaError, UnicodeDecodeError) as exc:
        run.release()
        # The cause keeps no traceback: its frames would keep the runtime alive
        # for as long as someone holds the ConfigError.
        cause = exc.with_traceback(None)
        if run.fault is not None:
            raise run.fault from cause  # a bug in the host or here, not the script
        if isinstance(exc, UnicodeDecodeError):
            # lupa could not decode the error message the script raised.
            raw = exc.object if isinstance(exc.object, bytes) else b""
            text = raw.decode("utf-8", "replace")
        else:
            text = str(exc)
        raise run.config_error(text, exc, time_budget, memory_limit) from cause
    except BaseException:
        run.release()
        raise
    if run.fault is not None:
        run.release()
        raise run.fault  # the script caught it with pcall; still a bug to surface
    if run.expired:  # every path that could swallow the budget error is closed; still
        run.release()
        raise ConfigError(_budget_message(time_budget), file=file)
    run.result = ScriptResult(
        specs=tuple(d.spec for d in run.declared.values()),
        removed=tuple(run.removed),
        duration=time.perf_counter() - started,
    )
    run.memory_limit = memory_limit
    return run


def load_file(
    path: Path,
    *,
    host: LuaHost | None = None,
    getenv: Callable[[str], str | None] = os.environ.get,
    time_budget: float = DEFAULT_TIME_BUDGET,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    on_print: Callable[[str], None] | None = None,
    config_dir: Path | None = None,
) -> ScriptResult:
    """Read a config script and run it with `run_script`.

    Args:
        path: The script. Messages name it as `path.name`.
        host: See `run_script`.
        getenv: See `run_script`.
        time_budget: See `run_script`.
        memory_limit: See `run_script`.
        on_print: See `run_script`.
        config_dir: See `run_script`; defaults to the `config/` directory next to
            the script, if there is one.

    Returns:
        What the script declared.

    Raises:
        ConfigError: The file cannot be read, is not UTF-8, or the script failed.
    """
    source, config_dir = _read(path, config_dir)
    return run_script(
        source,
        file=path.name,
        host=host,
        getenv=getenv,
        time_budget=time_budget,
        memory_limit=memory_limit,
        on_print=on_print,
        config_dir=config_dir,
    )


def start_file(
    path: Path,
    *,
    host: LiveHost,
    getenv: Callable[[str], str | None] = os.environ.get,
    time_budget: float = DEFAULT_TIME_BUDGET,
    hook_budget: float = DEFAULT_HOOK_BUDGET,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    on_print: Callable[[str], None] | None = None,
    config_dir: Path | None = None,
) -> LiveScript:
    """Run a config script and keep its runtime for its `mcp_on`/`mcp_call` callbacks.

    Args:
        path: The script.
        host: The running daemon; callbacks may add and remove connections.
        getenv: See `run_script`.
        time_budget: Seconds the script itself may run.
        hook_budget: Seconds each later callback may run.
        memory_limit: See `run_script`.
        on_print: See `run_script`.
        config_dir: See `load_file`.

    Returns:
        The live script: its declarations, and its callbacks ready to be driven.

    Raises:
        ConfigError: As `load_file`.
    """
    source, config_dir = _read(path, config_dir)
    run = _execute(
        source, path.name, host, getenv, time_budget, memory_limit, on_print, config_dir
    )
    return LiveScript(run, hook_budget)


def _read(path: Path, config_dir: Path | None) -> tuple[str, Path | None]:
    try:
        source = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(f"cannot read {path}: {reason}", file=path.name) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path} is not UTF-8 text (bad byte at offset {exc.start}); "
            "save it as UTF-8",
            file=path.name,
        ) from exc
    if config_dir is None and (path.parent / "config").is_dir():
        config_dir = path.parent / "config"
    return source, config_dir


class LiveScript:
    """A script that ran cleanly, kept alive for the callbacks it registered.

    Callbacks (`mcp_on` hooks, `mcp_call` completions) run on the daemon's loop,
    each under `hook_budget`; an error or a runaway in one is returned as a
    `ConfigError` naming its line, and never affects the next. `close()` drops the
    runtime: callbacks of a replaced script never run again.
    """

    def __init__(self, run: _Run, hook_budget: float) -> None:
        self._run = run
        self._hook_budget = hook_budget
        self._ran_out = False
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
            if error is not None:
                errors.append(error)
        return errors

    def deliver(
        self, call: LuaCall, result: Mapping[str, object] | None, error: str | None
    ) -> ConfigError | None:
        """Run `fn(result, err)` of a finished `mcp_call` (dropped once closed)."""
        if self._run.released:
            return None
        return self._invoke(call.fn, result, error)

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
        server, tool, raw_args = (rest + [None, None, None])[:3]
        try:
            arguments = _lua_to_py(raw_args, "args", [_MAX_ENTRIES]) if raw_args else {}
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
        return LuaCall(server, tool, arguments, None), None

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


@dataclass(frozen=True, slots=True)
class _Declared:
    spec: ConnectionSpec
    where: str  # "startup.lua:3", for the "declared twice" message


class _Run:
    """The state of one script run, and the Python side of the Lua API."""

    def __init__(
        self,
        *,
        file: str,
        host: LuaHost | None,
        getenv: Callable[[str], str | None],
        on_print: Callable[[str], None] | None,
        config_dir: Path | None,
        deadline: float,
    ) -> None:
        self.file = file
        self.host = host
        self.getenv = getenv
        self.on_print = on_print
        self.config_dir = config_dir
        self.deadline = deadline
        self.declared: dict[str, _Declared] = {}
        self.removed: dict[str, None] = {}  # ordered set
        self.expired = False
        self.out_of_memory = False
        self.fault: BaseException | None = None
        self.chunks = {file}  # chunk names errors may point into
        self.hooks: dict[str, list[Any]] = {}  # mcp_on: kind -> Lua functions
        self.calls: list[LuaCall] = []  # mcp_call: started, not yet handed out
        self.jobs: list[int] = []  # mcp_async: started, not yet handed out
        self.step: Any = None
        self.live = False  # after the script: mcp_add/mcp_remove act at once
        self.released = False
        self.result = ScriptResult((), (), 0.0)
        self.memory_limit = DEFAULT_MEMORY_LIMIT
        self.rearm: Any = None
        self._errors: dict[str, ConfigError] = {}  # raised into Lua, by message
        self._rt: Any = None

    # ------------------------------------------------------------ running

    def execute(self, source: str, memory_limit: int) -> None:
        """Build the sandbox, then compile and run `source` in it."""
        rt = LuaRuntime(
            register_eval=False,
            register_builtins=False,
            unpack_returned_tuples=True,
            attribute_filter=_deny_attribute,
            max_memory=memory_limit,
        )
        self._rt = rt
        prelude = rt.compile(_PRELUDE, name="=prelude")
        runner, self.rearm, self.step = prelude(
            self._check_deadline,
            self._fault,
            self._entry(self._add),
            self._entry(self._remove),
            self._entry(self._status),
            self._entry(self._list),
            self._entry(self._env),
            self._entry(self._print),
            self._entry(self._load),
            self._entry(self._on),
            self._entry(self._call),
            self._entry(self._async),
            _HOOK_COUNT,
        )
        lua_globals = rt.globals()
        for name in _REMOVED_GLOBALS:
            lua_globals[name] = None
        chunk = rt.compile(source, name=f"@{self.file}")
        runner(chunk)

    def release(self) -> None:
        """Drop the runtime, so its memory goes back now."""
        self._rt = None
        self.rearm = None
        self.hooks = {}
        self.calls = []
        self.released = True

    def to_lua_value(self, value: object) -> object:
        """A Lua value for `value`: plain data, tables for mappings and lists."""
        if isinstance(value, Mapping | list | tuple):
            return self._to_lua(value)
        return _plain(value)

    def gc_and_rearm(self) -> None:
        """After a runaway or out-of-memory callback: a fresh budget for the next."""
        self.deadline = time.monotonic() + DEFAULT_HOOK_BUDGET  # for rearm itself
        self.expired = False
        if self._rt is not None:
            self._rt.gccollect()
        if self.rearm is not None:
            self.rearm()

    def _check_deadline(self) -> bool:
        if time.monotonic() > self.deadline:
            self.expired = True
        return self.expired

    def _entry(self, fn: Callable[..., object]) -> Callable[..., tuple[bool, object]]:
        """Wrap an API function: ConfigError becomes `false, message` for the shim."""

        def entry(*args: object) -> tuple[bool, object]:
            try:
                return True, fn(*args)
            except ConfigError as exc:
                self._errors[exc.message] = exc
                return False, exc.message
            except LuaMemoryError:
                self.out_of_memory = True
                return False, _OUT_OF_MEMORY

        return entry

    def _fault(self, label: object, error: object) -> str:
        """Turn an exception that escaped a callback into a message for Lua."""
        if isinstance(error, str):  # a Lua error, e.g. out of memory
            return error
        if isinstance(error, UnicodeError):  # lupa converting an argument
            return f"{label}: an argument is not valid UTF-8 text"
        if isinstance(error, LuaMemoryError):
            self.out_of_memory = True
            return _OUT_OF_MEMORY
        if isinstance(error, BaseException) and self.fault is None:
            self.fault = error
        return f"{label}: internal error ({type(error).__name__})"

    # ------------------------------------------------------------ the API

    def _add(self, src: object, line: object, *args: object) -> bool:
        if not args:
            raise ConfigError(
                'mcp_add(name, endpoint [, opts]): name missing, e.g. mcp_add("web", '
                '"http://127.0.0.1:8000/mcp")'
            )
        name = args[0]
        if not isinstance(name, str):
            raise ConfigError(
                f"mcp_add: connection name must be a string, got {_describe(name)}"
            )
        prefix = f"mcp_add({name!r})"
        try:
            validate_name(name)
        except ConfigError as exc:
            raise ConfigError(f"{prefix}: {exc.message}", connection=name) from exc
        if len(args) == 1:
            raise ConfigError(
                f"{prefix}: endpoint missing; give a URL or a table, e.g. "
                f'mcp_add({name!r}, "http://127.0.0.1:8000/mcp") or '
                f'mcp_add({name!r}, {{command="my-server"}})',
                connection=name,
            )
        if len(args) > 3:
            raise ConfigError(
                f"{prefix}: too many arguments ({len(args)}); "
                "use mcp_add(name, endpoint [, opts])",
                connection=name,
            )
        budget = [_MAX_ENTRIES]
        try:
            endpoint = _lua_to_py(args[1], "endpoint", budget)
            opts = _lua_to_py(args[2], "opts", budget) if len(args) == 3 else None
        except ConfigError as exc:
            raise ConfigError(f"{prefix}: {exc.message}", connection=name) from exc
        if opts is not None and not isinstance(opts, dict):
            raise ConfigError(
                f"{prefix}: options must be a table, got {_describe(args[2])}",
                connection=name,
            )
        spec = parse_spec(name, endpoint, opts)
        if self.live:  # from a callback: the running set changes now
            return self._live_host().add(spec)
        here = f"{src}:{line}" if isinstance(line, int) else str(src or self.file)
        previous = self.declared.get(name)
        if previous is not None:
            if previous.spec == spec:
                return False
            fields = ", ".join(changed_fields(previous.spec, spec))
            raise ConfigError(
                f"{prefix}: declared twice with different specs at {previous.where} "
                f"and {here}; keep one (they differ in: {fields})",
                connection=name,
            )
        self.declared[name] = _Declared(spec, here)
        self.removed.pop(name, None)
        return True

    def _remove(self, *args: object) -> bool:
        name = args[0] if args else None
        if not isinstance(name, str):
            raise ConfigError(
                f"mcp_remove: connection name must be a string, got {_describe(name)}"
            )
        if self.live:
            return self._live_host().remove(name)
        existed = self.declared.pop(name, None) is not None
        if not existed and self.host is not None:
            existed = any(item.get("name") == name for item in self.host.list())
        self.removed[name] = None
        return existed

    def _status(self, *args: object) -> object:
        name = args[0] if args else None
        if not isinstance(name, str):
            raise ConfigError(
                f"mcp_status: connection name must be a string, got {_describe(name)}"
            )
        status = self.host.status(name) if self.host is not None else None
        return None if status is None else self._to_lua(status)

    def _list(self, *args: object) -> object:
        items = self.host.list() if self.host is not None else []
        items = sorted(items, key=lambda item: str(item.get("name", "")))
        return self._to_lua(items)

    def _env(self, *args: object) -> str | None:
        name = args[0] if args else None
        if not isinstance(name, str) or not name:
            raise ConfigError(
                f"env: variable name must be a non-empty string, got {_describe(name)}"
            )
        value = self.getenv(name)
        if value is None and name == PYTHON_VARIABLE:
            return sys.executable
        if value is None:
            return None
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ConfigError(f"env: {name} is not valid UTF-8 text") from exc
        if is_sensitive_key(name):  # env() is how scripts read tokens
            SECRETS.add([value])
        return value

    def _print(self, *args: object) -> None:
        text = redact(str(args[0])) if args else ""
        if self.on_print is not None:
            self.on_print(text)
        else:
            logger.info("%s: %s", self.file, text)

    def _load(self, *args: object) -> object:
        name = args[0] if args else None
        if not isinstance(name, str) or not _MODULE_NAME.match(name):
            raise ConfigError(
                "mcp_load: module name must be letters, digits and '_' only "
                f"(the file config/NAME.lua), got {_describe(name)}"
            )
        prefix = f"mcp_load({name!r})"
        if self.config_dir is None:
            raise ConfigError(
                f"{prefix}: no config directory; put {name}.lua in a config/ "
                "directory next to the script"
            )
        path = self.config_dir / f"{name}.lua"
        try:
            source = path.read_bytes().decode("utf-8-sig")
        except FileNotFoundError as exc:
            raise ConfigError(f"{prefix}: module not found: {path}") from exc
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise ConfigError(f"{prefix}: cannot read {path}: {reason}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{prefix}: {path} is not UTF-8 text") from exc
        try:
            chunk = self._rt.compile(source, name=f"@{name}.lua")
        except LuaSyntaxError as exc:
            raise ConfigError(f"{prefix}: {_strip_lua_text(str(exc))}") from exc
        self.chunks.add(f"{name}.lua")
        return chunk

    def _on(self, *args: object) -> None:
        kind = args[0] if args else None
        fn = args[1] if len(args) > 1 else None
        if not isinstance(kind, str) or (kind != "*" and kind not in EVENT_TYPES):
            known = ", ".join(sorted(EVENT_TYPES))
            raise ConfigError(
                f'mcp_on: the first argument must be an event kind or "*", got '
                f"{_describe(kind)}; kinds: {known}"
            )
        if lua_type(fn) != "function":
            raise ConfigError(
                f"mcp_on({kind!r}, fn): fn must be a function, got {_describe(fn)}"
            )
        self.hooks.setdefault(kind, []).append(fn)

    def _call(self, *args: object) -> None:
        if len(args) != 4:
            raise ConfigError(
                "mcp_call(server, tool, args, fn) takes 4 arguments, e.g. "
                'mcp_call("demo", "echo", {text = "hi"}, function(result, err) end)'
            )
        server, tool, raw_args, fn = args
        if not isinstance(server, str) or not isinstance(tool, str):
            raise ConfigError(
                "mcp_call: server and tool must be strings, got "
                f"{_describe(server)} and {_describe(tool)}"
            )
        arguments = _lua_to_py(raw_args, "args", [_MAX_ENTRIES]) if raw_args else {}
        if isinstance(arguments, list) and not arguments:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ConfigError(
                f"mcp_call({server!r}, {tool!r}): args must be a table of named "
                f"arguments, got {_describe(raw_args)}"
            )
        if lua_type(fn) != "function":
            raise ConfigError(
                f"mcp_call({server!r}, {tool!r}): fn must be a function(result, err), "
                f"got {_describe(fn)}"
            )
        self.calls.append(LuaCall(server, tool, arguments, fn))

    def _async(self, *args: object) -> None:
        job = args[0] if args else None
        if isinstance(job, int):
            self.jobs.append(job)

    def _live_host(self) -> LiveHost:
        host = self.host
        if not isinstance(host, LiveHost):
            raise ConfigError(
                "mcp_add/mcp_remove from a callback need a running daemon"
            )
        return host

    def _to_lua(self, value: object) -> object:
        """A Lua table holding a plain copy of `value` (never a Python object)."""
        return self._rt.table_from(_plain(value), recursive=True)

    # ------------------------------------------------------------ errors

    def config_error(
        self,
        text: str,
        exc: BaseException | None,
        time_budget: float,
        memory_limit: int,
    ) -> ConfigError:
        """The ConfigError for a Lua error text that ended the run."""
        logger.debug("%s failed: %s", self.file, text)
        text = _strip_lua_text(text)
        file, line, body = self._locate(text)
        if (
            isinstance(exc, LuaMemoryError)
            or self.out_of_memory
            or body == _OUT_OF_MEMORY
        ):
            return ConfigError(
                f"script exceeded its memory limit of {_format_bytes(memory_limit)}",
                file=self.file,
            )
        if self.expired:
            return ConfigError(_budget_message(time_budget), file=file, line=line)
        if not body:
            body = "script raised an error without a message (a table or nil?)"
        origin = self._errors.get(body)
        connection = origin.connection if origin is not None else None
        return ConfigError(redact(body), file=file, line=line, connection=connection)

    def _locate(self, text: str) -> tuple[str, int | None, str]:
        """Split `startup.lua:3: msg` into file, line and message."""
        m = _LOCATION.match(text)
        if m is not None:
            src = m["src"]
            for chunk in self.chunks:
                # Lua shortens long chunk names to "..." plus their tail.
                if src == chunk or (src.startswith("...") and chunk.endswith(src[3:])):
                    return chunk, int(m["line"]), m["body"]
        return self.file, None, text


def _deny_attribute(obj: object, attr_name: object, is_setting: bool) -> object:
    raise AttributeError(f"access to attribute {attr_name!r} denied")


def _strip_lua_text(text: str) -> str:
    """The user-facing part of a Lua error: no loader prefix, no traceback."""
    text = text.removeprefix("error loading code: ")
    return text.split(_TRACEBACK, 1)[0].rstrip()


def _lua_to_py(value: Any, where: str, budget: list[int], depth: int = 0) -> object:
    """Convert a Lua value to str/int/float/bool/None/list/dict.

    A table whose keys are exactly 1..n becomes a list; any other table a dict
    with string keys (`{}` becomes an empty dict).

    Raises:
        ConfigError: Functions, coroutines, userdata, bad keys, nesting deeper
            than _MAX_DEPTH or more than _MAX_ENTRIES entries in all.
    """
    if value is None or isinstance(value, bool | int | float | str):
        return value
    kind = lua_type(value)
    if kind != "table":
        raise ConfigError(
            f"{where} is {_describe(value)}; only strings, numbers, booleans and "
            "tables can be declared"
        )
    if depth >= _MAX_DEPTH:
        raise ConfigError(
            f"{where}: tables nested deeper than {_MAX_DEPTH} levels "
            "(does a table contain itself?)"
        )
    items: list[tuple[object, object]] = []
    try:
        for key, item in value.items():
            budget[0] -= 1
            if budget[0] < 0:
                raise ConfigError(
                    f"{where}: too many table entries (more than {_MAX_ENTRIES})"
                )
            items.append((key, item))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: a string is not valid UTF-8 text") from exc
    if items and all(type(k) is int for k, _ in items):
        keys = sorted(k for k, _ in items if isinstance(k, int))
        if keys == list(range(1, len(keys) + 1)):
            items.sort(key=lambda kv: kv[0] if isinstance(kv[0], int) else 0)
            return [
                _lua_to_py(item, _child(where, f"[{key}]", depth), budget, depth + 1)
                for key, item in items
            ]
    out: dict[str, object] = {}
    for key, item in items:
        if isinstance(key, bool) or not isinstance(key, str | int | float):
            raise ConfigError(
                f"{where}: table keys must be strings or numbers, got {_describe(key)}"
            )
        text = key if isinstance(key, str) else str(key)
        out[text] = _lua_to_py(
            item, _child(where, f".{text}", depth), budget, depth + 1
        )
    return out


def _child(where: str, step: str, depth: int) -> str:
    """The path of a nested value for messages, kept short for deep nesting."""
    return f"{where}{step}" if depth < _PATH_DEPTH else where


def _plain(value: object, depth: int = 0) -> object:
    """A copy of host data made only of str/int/float/bool/None/list/dict."""
    if value is None:
        return None
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str.__str__(value)
    if depth < _MAX_DEPTH and isinstance(value, Mapping):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if depth < _MAX_DEPTH and isinstance(value, list | tuple):
        return [_plain(v, depth + 1) for v in value]
    return str(value)


def _describe(value: object) -> str:
    """How a Lua value reads in a message."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})"
    kind = lua_type(value)
    if kind == "table":
        return "a table"
    if kind is not None:
        return f"a {kind}"
    return "an unsupported value"


def _budget_message(time_budget: float) -> str:
    return (
        f"script exceeded its time budget of {float(time_budget)} s; "
        "look for an endless loop"
    )


def _format_bytes(size: int) -> str:
    if size % _MIB == 0:
        return f"{size // _MIB} MiB"
    if size % 1024 == 0:
        return f"{size // 1024} KiB"
    return f"{size} bytes"
