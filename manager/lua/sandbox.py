"""One sandboxed Lua 5.4 runtime per run, around the API the script sees
(`api.ScriptApi`).

A fresh `lupa.lua54` runtime with no Python objects in reach: `python`, `os`,
`io`, `load`, `debug`, `package` and friends are removed after the prelude
(`prelude.lua`) captured what it needs; the Python callbacks hide in the
upvalues of small Lua shims, which also turn a Python failure into a Lua error
blamed on the caller's line. A *sticky* count hook stops runaway scripts,
including `pcall` loops and loops inside coroutines, at the time budget;
`max_memory` caps allocations.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from lupa.lua54 import LuaMemoryError, LuaRuntime, LuaSyntaxError

from ..core.errors import ConfigError
from ..core.redact import SecretRegistry, redact
from ..core.text import meant
from .api import ScriptApi
from .convert import (
    as_text,
    deny_attribute,
    format_bytes,
    plain,
    strip_lua_text,
)
from .host import LuaHost, ScriptResult

__all__ = [
    "DEFAULT_HOOK_BUDGET",
    "DEFAULT_MEMORY_LIMIT",
    "DEFAULT_TIME_BUDGET",
    "PRELUDE",
    "ScriptRun",
    "budget_message",
]

logger = logging.getLogger("manager.lua")

DEFAULT_TIME_BUDGET = 2.0
"""Seconds a script may run before it is stopped."""

DEFAULT_HOOK_BUDGET = 0.25
"""Seconds one callback (`mcp_on` hook, `mcp_call` completion) may run. Shorter than
the script's budget: callbacks run on the live event loop, between events."""

DEFAULT_MEMORY_LIMIT = 64 * 1024 * 1024
"""Bytes the Lua runtime may allocate."""


_HOOK_COUNT = 10_000
"""Lua VM instructions between two deadline checks (about 0.1 ms of Lua)."""

_MODULE_NAME = re.compile(r"^[A-Za-z0-9_]+$")
_LOCATION = re.compile(r"^(?P<src>[^\n]+?):(?P<line>\d+): (?P<body>.*)$", re.DOTALL)

_OUT_OF_MEMORY = "not enough memory"

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

PRELUDE = (Path(__file__).with_name("prelude.lua")).read_text()
"""The Lua prelude (`prelude.lua`): the API functions around the Python callbacks."""

_API_NAMES = frozenset(re.findall(r"^(\w+) = ", PRELUDE, re.MULTILINE))
"""The globals the prelude defines (`mcp_add`, `env`...): what a call to an
unknown global most likely meant."""

_NIL_CALL = re.compile(r"attempt to call a nil value \(global '(?P<name>\w+)'\)$")


class ScriptRun(ScriptApi):
    """One run of a script: its sandboxed runtime, budgets and errors, around
    the API it sees (`api.ScriptApi`)."""

    def __init__(
        self,
        *,
        file: str,
        host: LuaHost | None,
        getenv: Callable[[str], str | None],
        on_print: Callable[[str], None] | None,
        config_dir: Path | None,
        deadline: float,
        secrets: SecretRegistry,
    ) -> None:
        super().__init__(
            file=file, host=host, getenv=getenv, on_print=on_print, secrets=secrets
        )
        self.config_dir = config_dir
        self.deadline = deadline
        self.expired = False
        self.out_of_memory = False
        self.fault: BaseException | None = None
        self.chunks = {file}  # chunk names errors may point into
        self.step: Any = None
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
            attribute_filter=deny_attribute,
            max_memory=memory_limit,
        )
        self._rt = rt
        prelude = rt.compile(PRELUDE, name="=prelude")
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
            self._entry(self._profile),
            self._entry(self._policy),
            self._entry(self._defaults),
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
        return plain(value)

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

    def _load(self, *args: object) -> object:
        name = args[0] if args else None
        if not isinstance(name, str) or not _MODULE_NAME.match(name):
            raise ConfigError(
                "mcp_load: module name must be letters, digits and '_' only "
                f"(the file config/NAME.lua), got {as_text(name)}"
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
            raise ConfigError(f"{prefix}: {strip_lua_text(str(exc))}") from exc
        self.chunks.add(f"{name}.lua")
        return chunk

    def _to_lua(self, value: object) -> object:
        """A Lua table holding a plain copy of `value` (never a Python object)."""
        return self._rt.table_from(plain(value), recursive=True)

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
        text = strip_lua_text(text)
        file, line, body = self._locate(text)
        if (
            isinstance(exc, LuaMemoryError)
            or self.out_of_memory
            or body == _OUT_OF_MEMORY
        ):
            return ConfigError(
                f"script exceeded its memory limit of {format_bytes(memory_limit)} "
                "(a table that grows without end, or a function that calls "
                "itself without end, ends here too)",
                file=file,
                line=line,
            )
        if self.expired:
            return ConfigError(budget_message(time_budget), file=file, line=line)
        if not body:
            body = "script raised an error without a message (a table or nil?)"
        origin = self._errors.get(body)
        connection = origin.connection if origin is not None else None
        nil_call = _NIL_CALL.search(body)
        if nil_call is not None:  # `mcp_ad(...)`: no such function
            body += meant(nil_call["name"], _API_NAMES)
        return ConfigError(
            redact(body, self.secrets), file=file, line=line, connection=connection
        )

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


def budget_message(time_budget: float) -> str:
    return (
        f"script exceeded its time budget of {float(time_budget)} s; "
        "look for an endless loop"
    )
