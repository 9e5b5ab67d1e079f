"""The Lua API a script sees, on the Python side: what it declares and asks.

`ScriptApi` holds what a run of startup.lua declares (`mcp_add`,
`mcp_remove`, `mcp_profile`, `mcp_policy`, `mcp_defaults`, `mcp_on`) and
what it asks of the daemon (`mcp_status`, `mcp_list`, `env`, `print`,
`mcp_call`/`mcp_read`/`mcp_prompt`, `mcp_async`). Each function takes the
Lua values as the prelude's shims pass them and raises `ConfigError` with
what to write instead; the sandbox (`sandbox.ScriptRun`, which builds on
this class) turns that into a Lua error at the caller's line.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, cast

from lupa.lua54 import lua_type

from ..core.errors import ConfigError
from ..core.events import EVENT_TYPES
from ..core.policy import Rule, parse_rule
from ..core.profile import Profile, parse_profile
from ..core.redact import SecretRegistry, is_sensitive_key, redact
from ..core.resolve import spec_secrets
from ..core.spec import (
    ConnectionSpec,
    changed_fields,
    parse_defaults,
    parse_spec,
    validate_name,
    with_defaults,
)
from .convert import MAX_ENTRIES, as_text, lua_to_py
from .host import LiveHost, LuaCall, LuaHost

__all__ = ["PRINT_BURST", "PRINT_RATE", "PYTHON_VARIABLE", "Declared", "ScriptApi"]

logger = logging.getLogger("manager.lua")

PRINT_BURST = 1000
"""Lines `print` lets through at once; beyond, `PRINT_RATE` a second (the
rest is counted and said with the next line let through)."""

PRINT_RATE = 100.0

PYTHON_VARIABLE = "MCP_MANAGER_PYTHON"
"""`env(PYTHON_VARIABLE)` is the daemon's own Python unless the variable is set, so
startup.lua can run the bundled demo server (`python -m manager.demo_server`)."""


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


class ScriptApi:
    """What one run of a script declared and asked for, and the functions
    that take it (the sandbox calls them, `_to_lua` makes its tables).

    Args:
        file: The script, as errors and `print` name it.
        host: The daemon the script runs in (None: `mcp-manager check`).
        getenv: Reads `env(NAME)`.
        on_print: Where `print` goes (else the log).
        secrets: Where `env` registers what it reads under a secret-looking
            name, and what `print` masks.
    """

    def __init__(
        self,
        *,
        file: str,
        host: LuaHost | None,
        getenv: Callable[[str], str | None],
        on_print: Callable[[str], None] | None,
        secrets: SecretRegistry,
    ) -> None:
        self.file = file
        self.secrets = secrets
        self.host = host
        self.getenv = getenv
        self.on_print = on_print
        self._print_tokens = float(PRINT_BURST)
        self._printed_at = time.monotonic()
        self.prints_dropped = 0
        """Lines `print` dropped since the last one it let through."""
        self.declared: dict[str, Declared] = {}
        self.removed: dict[str, None] = {}  # ordered set
        self.profiles: dict[str, Profile] = {}
        self.rules: list[Rule] = []  # mcp_policy, in the order written
        self.defaults: dict[str, object] = {}  # mcp_defaults, for later mcp_adds
        self.hooks: dict[str, list[Any]] = {}  # mcp_on: kind -> Lua functions
        self.calls: list[LuaCall] = []  # mcp_call: started, not yet handed out
        self.jobs: list[int] = []  # mcp_async: started, not yet handed out
        self.live = False  # after the script: mcp_add/mcp_remove act at once

    def _to_lua(self, value: object) -> object:
        """A Lua table holding a plain copy of `value` (the sandbox's)."""
        raise NotImplementedError

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
        # Masked from now on (a later print, an error of this run), not only
        # once the connection resolves them at its first try.
        self.secrets.add(spec_secrets(spec))
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
        now = time.monotonic()
        self._print_tokens = min(
            PRINT_BURST, self._print_tokens + (now - self._printed_at) * PRINT_RATE
        )
        self._printed_at = now
        if self._print_tokens < 1:
            self.prints_dropped += 1
            return
        self._print_tokens -= 1
        if self.prints_dropped:
            dropped, self.prints_dropped = self.prints_dropped, 0
            self._say(
                f"print: {dropped} line(s) dropped (more than {PRINT_RATE:g} a "
                f"second after a burst of {PRINT_BURST})"
            )
        self._say(redact(str(args[0]), self.secrets) if args else "")

    def _say(self, text: str) -> None:
        if self.on_print is not None:
            self.on_print(text)
        else:
            logger.info("%s: %s", self.file, text)

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
