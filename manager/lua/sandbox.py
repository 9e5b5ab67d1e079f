"""One sandboxed Lua 5.4 runtime per run, and the API the script sees.

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
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from lupa.lua54 import LuaMemoryError, LuaRuntime, LuaSyntaxError, lua_type

from ..core.errors import ConfigError
from ..core.events import EVENT_TYPES
from ..core.policy import Rule, parse_rule
from ..core.profile import Profile, parse_profile
from ..core.redact import SecretRegistry, is_sensitive_key, redact
from ..core.spec import (
    ConnectionSpec,
    changed_fields,
    parse_defaults,
    parse_spec,
    validate_name,
    with_defaults,
)
from .convert import (
    MAX_ENTRIES,
    as_text,
    deny_attribute,
    format_bytes,
    lua_to_py,
    plain,
    strip_lua_text,
)
from .host import LiveHost, LuaCall, LuaHost, ScriptResult

__all__ = [
    "DEFAULT_HOOK_BUDGET",
    "DEFAULT_MEMORY_LIMIT",
    "DEFAULT_TIME_BUDGET",
    "Declared",
    "PRELUDE",
    "PYTHON_VARIABLE",
    "ScriptRun",
    "budget_message",
]

logger = logging.getLogger("manager.lua")

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


@dataclass(frozen=True, slots=True)
class Declared:
    spec: ConnectionSpec
    where: str  # "startup.lua:3", for the "declared twice" message


_USAGE = {
    "call": "mcp_call(server, tool, args, fn)",
    "read": "mcp_read(server, uri, fn)",
    "prompt": "mcp_prompt(server, name, args, fn)",
}
_EXAMPLES = {
    "call": 'mcp_call("demo", "echo", {text = "hi"}, function(result, err) end)',
    "read": 'mcp_read("demo", "demo://readme", function(result, err) end)',
    "prompt": 'mcp_prompt("demo", "greet", {name = "Ada"}, function(result, err) end)',
}


class ScriptRun:
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
        secrets: SecretRegistry,
    ) -> None:
        self.file = file
        self.secrets = secrets
        self.host = host
        self.getenv = getenv
        self.on_print = on_print
        self.config_dir = config_dir
        self.deadline = deadline
        self.declared: dict[str, Declared] = {}
        self.removed: dict[str, None] = {}  # ordered set
        self.profiles: dict[str, Profile] = {}
        self.rules: list[Rule] = []  # mcp_policy, in the order written
        self.defaults: dict[str, object] = {}  # mcp_defaults, for later mcp_adds
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
                f"mcp_add: connection name must be a string, got {as_text(name)}"
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
        budget = [MAX_ENTRIES]
        try:
            endpoint = lua_to_py(args[1], "endpoint", budget)
            opts = lua_to_py(args[2], "opts", budget) if len(args) == 3 else None
        except ConfigError as exc:
            raise ConfigError(f"{prefix}: {exc.message}", connection=name) from exc
        if opts is not None and not isinstance(opts, dict):
            raise ConfigError(
                f"{prefix}: options must be a table, got {as_text(args[2])}",
                connection=name,
            )
        spec = parse_spec(name, endpoint, with_defaults(endpoint, opts, self.defaults))
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
        self.declared[name] = Declared(spec, here)
        self.removed.pop(name, None)
        return True

    def _in_the_body(
        self, label: str, what: str, args: tuple[object, ...], use: str
    ) -> None:
        """`label` (`mcp_profile`, `mcp_policy`) is declared in the script
        body, with at most two arguments (`use`: how to write it)."""
        first = args[0] if args else None
        if self.live:
            raise ConfigError(
                f"{label}({first!r}): {what} are declared in the script body, "
                "not from a callback"
            )
        if len(args) > 2:
            raise ConfigError(
                f"{label}({first!r}): too many arguments ({len(args)}); use {use}"
            )

    def _profile(self, src: object, line: object, *args: object) -> None:
        name = args[0] if args else None
        self._in_the_body(
            "mcp_profile",
            "profiles",
            args,
            "mcp_profile(name, {servers = {...}, tools = {...}, ...})",
        )
        budget = [MAX_ENTRIES]
        opts = lua_to_py(args[1], "opts", budget) if len(args) == 2 else None
        here = f"{src}:{line}" if isinstance(line, int) else str(src or self.file)
        profile = parse_profile(name, opts, here)
        previous = self.profiles.get(profile.name)
        if previous is not None and replace(previous, where=here) != profile:
            raise ConfigError(
                f"mcp_profile({profile.name!r}): declared twice with different "
                f"options at {previous.where} and {here}; keep one"
            )
        self.profiles.setdefault(profile.name, profile)

    def _defaults(self, src: object, line: object, *args: object) -> None:
        if self.live:
            raise ConfigError(
                "mcp_defaults: defaults are declared in the script body, not from "
                "a callback"
            )
        if len(args) != 1:
            raise ConfigError(
                f"mcp_defaults: takes one table, got {len(args)} arguments; e.g. "
                'mcp_defaults({sandbox = "strict", pin = "strict"})'
            )
        given = lua_to_py(args[0], "defaults", [MAX_ENTRIES])
        # Later calls add to (and override) earlier ones, for what follows.
        self.defaults = {**self.defaults, **parse_defaults(given)}

    def _policy(self, src: object, line: object, *args: object) -> None:
        verdict = args[0] if args else None
        self._in_the_body(
            "mcp_policy",
            "rules",
            args,
            'mcp_policy("ask", {server = "github", destructive = true})',
        )
        raw = args[1] if len(args) == 2 else None
        match: object = None
        if lua_type(raw) == "table":
            # `check` is a function: kept as it is, the rest converted.
            budget = [MAX_ENTRIES]
            converted: dict[str, object] = {}
            for key, value in cast(Any, raw).items():
                if key == "check":
                    if lua_type(value) != "function":
                        raise ConfigError(
                            f"mcp_policy({verdict!r}): check must be a function of "
                            f"the arguments, got {as_text(value)}"
                        )
                    converted[key] = value
                else:
                    converted[str(key)] = lua_to_py(value, str(key), budget)
            match = converted
        elif raw is not None:
            match = lua_to_py(raw, "match", [MAX_ENTRIES])
        here = f"{src}:{line}" if isinstance(line, int) else str(src or self.file)
        self.rules.append(parse_rule(verdict, match, here))

    def _remove(self, *args: object) -> bool:
        name = args[0] if args else None
        if not isinstance(name, str):
            raise ConfigError(
                f"mcp_remove: connection name must be a string, got {as_text(name)}"
            )
        if self.live:
            return self._live_host().remove(name)
        existed = self.declared.pop(name, None) is not None
        if not existed and self.host is not None:
            existed = any(item.name == name for item in self.host.list())
        self.removed[name] = None
        return existed

    def _status(self, *args: object) -> object:
        name = args[0] if args else None
        if not isinstance(name, str):
            raise ConfigError(
                f"mcp_status: connection name must be a string, got {as_text(name)}"
            )
        status = self.host.status(name) if self.host is not None else None
        return None if status is None else self._to_lua(status.to_dict())

    def _list(self, *args: object) -> object:
        items = self.host.list() if self.host is not None else []
        ordered = sorted(items, key=lambda item: item.name)
        return self._to_lua([item.to_dict() for item in ordered])

    def _env(self, *args: object) -> str | None:
        name = args[0] if args else None
        if not isinstance(name, str) or not name:
            raise ConfigError(
                f"env: variable name must be a non-empty string, got {as_text(name)}"
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
            self.secrets.add([value])
        return value

    def _print(self, *args: object) -> None:
        text = redact(str(args[0]), self.secrets) if args else ""
        if self.on_print is not None:
            self.on_print(text)
        else:
            logger.info("%s: %s", self.file, text)

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

    def _on(self, *args: object) -> None:
        kind = args[0] if args else None
        fn = args[1] if len(args) > 1 else None
        if not isinstance(kind, str) or (kind != "*" and kind not in EVENT_TYPES):
            known = ", ".join(sorted(EVENT_TYPES))
            raise ConfigError(
                f'mcp_on: the first argument must be an event kind or "*", got '
                f"{as_text(kind)}; kinds: {known}"
            )
        if lua_type(fn) != "function":
            raise ConfigError(
                f"mcp_on({kind!r}, fn): fn must be a function, got {as_text(fn)}"
            )
        self.hooks.setdefault(kind, []).append(fn)

    def _call(self, *args: object) -> None:
        op, given, *rest = args
        usage = _USAGE[str(op)]
        if given != len(rest) or len(rest) != usage.count(",") + 1:
            raise ConfigError(
                f"{usage} takes {usage.count(',') + 1} arguments, e.g. "
                f"{_EXAMPLES[str(op)]}"
            )
        if op == "read":
            server, target, fn = rest
            raw_args: object = None
        else:
            server, target, raw_args, fn = rest
        label = usage.split("(", 1)[0]
        if not isinstance(server, str) or not isinstance(target, str):
            what = {"read": "uri", "prompt": "name"}.get(str(op), "tool")
            raise ConfigError(
                f"{label}: server and {what} must be strings, got "
                f"{as_text(server)} and {as_text(target)}"
            )
        arguments = lua_to_py(raw_args, "args", [MAX_ENTRIES]) if raw_args else {}
        if isinstance(arguments, list) and not arguments:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ConfigError(
                f"{label}({server!r}, {target!r}): args must be a table of named "
                f"arguments, got {as_text(raw_args)}"
            )
        if lua_type(fn) != "function":
            raise ConfigError(
                f"{label}({server!r}, {target!r}): fn must be a function(result, err), "
                f"got {as_text(fn)}"
            )
        self.calls.append(LuaCall(server, target, arguments, fn, op=str(op)))

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
                f"script exceeded its memory limit of {format_bytes(memory_limit)}",
                file=self.file,
            )
        if self.expired:
            return ConfigError(budget_message(time_budget), file=file, line=line)
        if not body:
            body = "script raised an error without a message (a table or nil?)"
        origin = self._errors.get(body)
        connection = origin.connection if origin is not None else None
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
