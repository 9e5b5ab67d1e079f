"""`ConnectionSpec`: one declared connection, validated and frozen.

`parse_spec(name, endpoint, opts)` turns the plain values Lua handed over (str,
int, float, bool, dict, list) into a `ConnectionSpec` or raises `ConfigError` that
names the connection, the bad option and the fix. Values may contain
`${env:NAME}`; they stay unresolved in the spec (so a reload compares what the
operator wrote) and `resolve_spec` substitutes them at connect time, registering
the resolved values as secrets.

`changed_fields(old, new)` names what a reload changed; `applies_live(old, new)`
says whether that needs no reconnect (only `LIVE_FIELDS`, and roots offered
before and after).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Literal
from urllib.parse import urlsplit

from .backoff import BackoffPolicy
from .errors import ConfigError
from .exposure import EXPOSURE_OPTIONS, Exposure, parse_exposure_option
from .oauth import OAuthSpec, parse_oauth
from .policy import annotation_overrides
from .redact import MASK, redact_args, redact_url
from .sandbox import OFF, Sandbox, parse_sandbox
from .text import meant

__all__ = [
    "LIVE_FIELDS",
    "OPTION_DEFAULTS",
    "TEMPLATE",
    "ConnectionSpec",
    "Transport",
    "applies_live",
    "changed_fields",
    "display_endpoint",
    "endpoint_key",
    "manager_endpoint",
    "SECRET_KINDS",
    "STDIO_ONLY_OPTIONS",
    "URL_ONLY_OPTIONS",
    "parse_defaults",
    "parse_max_output",
    "parse_reference",
    "parse_spec",
    "spec_summary",
    "validate_name",
    "unknown_option",
    "value_text",
    "with_defaults",
]

Transport = Literal["stdio", "http", "sse"]

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
"""Connection names: they become tool prefixes (`{server}__{tool}`) and CLI words."""

MIN_PING = 0.1
"""Seconds: the shortest `ping_interval` (0 turns pings off)."""

TEMPLATE = re.compile(r"\$\{([^}]*)\}")
"""A `${...}` template in a declared value: `${env:NAME}`, or a secret
reference (`parse_reference`)."""
_ENV_TEMPLATE = re.compile(r"^env:([A-Za-z_][A-Za-z0-9_]*)$")
_KEYRING_REF = re.compile(r"^keyring:([^/\s][^/]*)/(\S.*)$")
_OP_REF = re.compile(r"^op://[^/\s]+/[^/\s]+(/[^/\s]+)+$")

SECRET_KINDS = ("keyring", "cmd", "op")
"""Where a secret reference is read (`engine.vault`): the OS keychain
(`${keyring:SERVICE/NAME}`), a command's output (`${cmd:COMMAND ARGS}`), or
the 1Password CLI (`${op://VAULT/ITEM/FIELD}`)."""


def parse_reference(inner: str) -> tuple[str, str] | None:
    """(kind, reference) of a secret template's inside (`keyring:svc/name`,
    `cmd:pass show x`, `op://vault/item/field`); None if it is no such
    reference (an `env:` template, or nothing valid)."""
    if _KEYRING_REF.fullmatch(inner):
        return "keyring", inner.removeprefix("keyring:")
    if inner.startswith("cmd:") and inner[4:].strip():
        return "cmd", inner[4:].strip()
    if _OP_REF.fullmatch(inner):
        return "op", inner
    return None


OPTION_DEFAULTS: dict[str, object] = {
    "connect_timeout": 10.0,
    "call_timeout": 60.0,
    "ping_interval": 10.0,
    "ping_timeout": 5.0,
    "hold": 5.0,
    "stable_after": 10.0,
    "enabled": True,
}
"""Defaults of the options every endpoint form accepts."""

_DURATION_OPTIONS = (
    "connect_timeout",
    "call_timeout",
    "ping_interval",
    "ping_timeout",
    "hold",
    "stable_after",
)
_COMMON_OPTIONS = frozenset(
    {
        *OPTION_DEFAULTS,
        "headers",
        "backoff",
        "oauth",
        "protocol",
        "start",
        "idle_stop",
        "pin",
        "max_output",
        "sandbox",
        "sandbox_required",
        "lock",
        "min_age",
        "annotations",
        "log_arguments",
        *EXPOSURE_OPTIONS,
    }
)
STARTS = ("always", "on_demand")
"""`start` values: keep the connection up from the start (the default), or
start it at the first request and stop it after `idle_stop` seconds unused."""
PINS = ("warn", "strict", "off")
"""`pin` values (`engine.pins`): a changed tool definition is flagged and still
listed, held back until approved, or not checked."""
DEFAULT_IDLE_STOP = 300.0
"""Seconds an on-demand connection stays up with no request."""
PROTOCOLS = ("auto", "legacy", "2026-07-28")
"""`protocol` values: learn the server's era (remembered), the handshake era
(`initialize`), or the stateless 2026-07-28 revision."""
_STDIO_KEYS = frozenset({"command", "args", "env", "cwd"})
_URL_KEYS = frozenset({"url", "transport"})
_MAX_DURATION = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class ConnectionSpec:
    """Everything needed to run one connection. Equal specs mean "unchanged".

    Attributes:
        name: Unique connection name.
        transport: `stdio`, `http` (streamable HTTP) or `sse` (legacy SSE).
        url: Endpoint URL for `http` and `sse`.
        command: Executable for `stdio`.
        args: Arguments for `stdio`.
        env: Extra environment for `stdio`, as sorted (key, value) pairs.
        cwd: Working directory for `stdio`.
        headers: HTTP headers for `http`/`sse`, as sorted (key, value) pairs.
        connect_timeout: Seconds for connect + initialize + listing all tools.
        call_timeout: Default seconds for one tool call.
        ping_interval: Seconds between liveness pings (0 disables pings).
        ping_timeout: Seconds a ping may take.
        hold: Seconds a call waits for a reconnecting server.
        stable_after: Seconds connected before the attempt counter resets.
        backoff: Delays between attempts.
        enabled: False keeps the connection declared but not running.
        exposure: Prefix and filters of what the endpoint shows (changing
            them needs no reconnect).
        roots: Paths or `file://` URIs answered to `roots/list`.
        oauth: How access tokens are obtained (`core.oauth`), if at all.
        protocol: Which era to speak to the server (`PROTOCOLS`).
        start: `always`, or `on_demand` (`STARTS`).
        idle_stop: Seconds an on-demand connection stays up with no request.
        pin: What a changed tool definition does (`PINS`).
        max_output: Most tokens of one tool result the endpoint passes on
            (`core.output`); None for no limit.
        sandbox: What a stdio server may touch (`core.sandbox`).
        lock: A stdio server launched from a registry (`npx`, `uvx`, `docker
            run`, ... `core.launch`) starts the version locked at its first
            start, not the newest (`transport.stdio.locks`).
        min_age: Days a release must have been published before a lock takes
            it (0: any).
        annotations: Tool hints the user trusts over the server's, as
            (glob on the tool's own name, hints) in key order
            (`core.policy.annotation_overrides`).
        log_arguments: The call log keeps the arguments' values (secrets
            masked), not only their names and types.
    """

    name: str
    transport: Transport
    url: str = ""
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    connect_timeout: float = 10.0
    call_timeout: float = 60.0
    ping_interval: float = 10.0
    ping_timeout: float = 5.0
    hold: float = 5.0
    stable_after: float = 10.0
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    enabled: bool = True
    exposure: Exposure = field(default_factory=Exposure)
    roots: tuple[str, ...] = ()
    oauth: OAuthSpec | None = None
    protocol: str = "auto"
    start: str = "always"
    idle_stop: float = DEFAULT_IDLE_STOP
    pin: str = "warn"
    max_output: int | None = None
    sandbox: Sandbox = OFF
    lock: bool = True
    min_age: float = 0.0
    annotations: tuple[tuple[str, dict[str, bool]], ...] = ()
    log_arguments: bool = False

    def annotated(self, tool: str, given: Mapping[str, object]) -> dict[str, object]:
        """`given` (a tool's annotations as its server lists them) with this
        connection's overrides for `tool` applied, in key order."""
        out = dict(given)
        for glob, hints in self.annotations:
            if fnmatchcase(tool, glob):
                out.update(hints)
        return out

    @property
    def on_demand(self) -> bool:
        """Started at the first request, stopped after `idle_stop` unused."""
        return self.start == "on_demand"

    @property
    def prefix(self) -> str:
        """The prefix of exposed tool and prompt names ("" for none)."""
        prefix = self.exposure.prefix
        return self.name if prefix is None else prefix


def validate_name(name: object) -> str:
    """Return `name` if it is a valid connection name, else raise ConfigError."""
    if not isinstance(name, str):
        raise ConfigError(f"connection name must be a string, got {value_text(name)}")
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError(
            f"invalid connection name {name!r}: use 1-64 letters, digits, '_', '.' "
            "or '-', starting with a letter or digit",
            connection=name,
        )
    if "__" in name:
        raise ConfigError(
            f"invalid connection name {name!r}: '__' separates the server from the "
            "tool in the names the endpoint exposes (SERVER__TOOL), so a name "
            f"cannot hold it; use one '_' ({name.replace('__', '_')!r})",
            connection=name,
        )
    return name


def parse_spec(
    name: object, endpoint: object, opts: Mapping[str, object] | None = None
) -> ConnectionSpec:
    """Validate a declaration and build its spec.

    Args:
        name: The connection name.
        endpoint: A URL string (streamable HTTP), or a table with `url` (and
            optionally `transport = "sse"`) or `command` (stdio), which may also
            carry any option.
        opts: Options (see OPTION_DEFAULTS, plus `headers` and `backoff`).

    Returns:
        The frozen spec.

    Raises:
        ConfigError: Naming the connection and what to change.
    """
    cname = validate_name(name)
    try:
        return _parse(cname, endpoint, opts)
    except ConfigError as exc:
        if exc.connection is None:
            exc.connection = cname
            exc.args = (exc.message,)
        raise


def _parse(
    name: str, endpoint: object, opts: Mapping[str, object] | None
) -> ConnectionSpec:
    prefix = f"mcp_add({name!r})"
    if opts is not None and not isinstance(opts, Mapping):
        raise ConfigError(f"{prefix}: options must be a table, got {value_text(opts)}")
    options: dict[str, object] = dict(opts or {})
    fields: dict[str, object] = {}
    if isinstance(endpoint, str):
        fields.update(_parse_url(prefix, endpoint, "http"))
    elif isinstance(endpoint, Mapping):
        table = dict(endpoint)
        has_url, has_cmd = "url" in table, "command" in table
        if has_url == has_cmd:
            typos = [
                f"{key!r}{meant(str(key), ('url', 'command'))}"
                for key in table
                if not has_url and meant(str(key), ("url", "command"))
            ]
            raise ConfigError(
                f"{prefix}: endpoint table needs exactly one of 'url' or 'command', "
                'e.g. {url="http://127.0.0.1:8000/mcp"} or {command="my-server"}'
                + (f"; it has {typos[0]}" if typos else "")
            )
        own = _URL_KEYS if has_url else _STDIO_KEYS
        for key in list(table):
            if key not in own and key in _COMMON_OPTIONS:
                if key in options:
                    raise ConfigError(
                        f"{prefix}: option {key!r} given both in the endpoint and "
                        "in the options table; keep one"
                    )
                options[key] = table.pop(key)
        unknown = sorted(set(table) - own, key=str)
        if unknown:
            allowed = sorted(own | _COMMON_OPTIONS)
            raise ConfigError(
                f"{prefix}: unknown endpoint key {unknown[0]!r}"
                f"{meant(str(unknown[0]), allowed)}; allowed here: {', '.join(allowed)}"
            )
        fields.update(
            _parse_url_table(prefix, table) if has_url else _parse_stdio(prefix, table)
        )
    else:
        raise ConfigError(
            f"{prefix}: endpoint must be a URL string or a table, got "
            f"{value_text(endpoint)}"
        )
    fields.update(_parse_options(prefix, options, fields["transport"]))
    return ConnectionSpec(name=name, **fields)  # type: ignore[arg-type]


def _parse_url(prefix: str, url: str, transport: str) -> dict[str, object]:
    _check_templates(prefix, "url", url)
    if any(c.isspace() or not c.isprintable() for c in url):
        raise ConfigError(
            f"{prefix}: bad URL {redact_url(url)!r}: it contains whitespace or a "
            "control character; percent-encode it (a space is %20)"
        )
    # A digit stands in for each template, so `http://h:${env:PORT}/` still parses.
    probe = TEMPLATE.sub("0", url)
    try:
        parts = urlsplit(probe)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{prefix}: bad URL {redact_url(url)!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"{prefix}: bad URL {redact_url(url)!r}: use http://HOST[:PORT]/PATH or "
            "https://…; for a local program use {command=...}"
        )
    del port
    return {"transport": transport, "url": url}


def _parse_url_table(prefix: str, table: dict[str, object]) -> dict[str, object]:
    url = _expect_str(prefix, "url", table["url"])
    transport = table.get("transport", "http")
    if transport not in ("http", "sse"):
        raise ConfigError(
            f'{prefix}: transport must be "http" (streamable HTTP) or "sse" '
            f"(legacy SSE), got {transport!r}"
        )
    return _parse_url(prefix, url, str(transport))


_OWN_COMMANDS = ("attach", "stdio")
"""`mcp-manager` subcommands that are the daemon's endpoint to a client."""


def manager_endpoint(command: str, args: Sequence[str]) -> str | None:
    """The subcommand (`attach`, `stdio`) when `command args` runs
    mcp-manager's own endpoint (`mcp-manager attach ...`, `python -m manager
    stdio ...`): what `client-config` gives an editor, never a server."""
    program = command.replace("\\", "/").rsplit("/", 1)[-1]
    if program in ("mcp-manager", "mcp-manager.exe") and args:
        return args[0] if args[0] in _OWN_COMMANDS else None
    if list(args[:2]) == ["-m", "manager"] and len(args) > 2:
        return args[2] if args[2] in _OWN_COMMANDS else None
    return None


def _parse_stdio(prefix: str, table: dict[str, object]) -> dict[str, object]:
    command = _expect_str(prefix, "command", table["command"]).strip()
    if not command:
        raise ConfigError(
            f"{prefix}: command is empty; give the program to run, e.g. "
            'command="npx", args={"-y", "some-mcp-server"}'
        )
    _check_templates(prefix, "command", command)
    raw_args = table.get("args", [])
    if isinstance(raw_args, Mapping) and not raw_args:
        raw_args = []  # `{}` in Lua is an empty table: treat it as an empty list
    if not isinstance(raw_args, list):
        raise ConfigError(
            f'{prefix}: args must be a list of strings, e.g. args={{"--port", "1"}}; '
            f"got {value_text(raw_args)}"
        )
    args: list[str] = []
    for i, arg in enumerate(raw_args, 1):
        if isinstance(arg, bool) or not isinstance(arg, str | int | float):
            raise ConfigError(
                f"{prefix}: args[{i}] must be a string, got {value_text(arg)}"
            )
        text = _number_text(arg) if not isinstance(arg, str) else arg
        _check_templates(prefix, f"args[{i}]", text)
        args.append(text)
    own = manager_endpoint(command, args)
    if own is not None:
        raise ConfigError(
            f"{prefix}: runs `mcp-manager {own}`, the daemon's own endpoint: the "
            "daemon would attach to itself without end; remove this mcp_add "
            "(an editor runs `mcp-manager attach`; another daemon is reached at "
            "its HTTP endpoint)"
        )
    env = _string_map(prefix, "env", table.get("env", {}))
    cwd = table.get("cwd")
    if cwd is not None:
        cwd = _expect_str(prefix, "cwd", cwd)
        _check_templates(prefix, "cwd", cwd)
    for s in (command, *args):
        if "\x00" in s:
            raise ConfigError(f"{prefix}: command and args must not contain NUL bytes")
    return {
        "transport": "stdio",
        "command": command,
        "args": tuple(args),
        "env": env,
        "cwd": cwd,
    }


def _parse_options(
    prefix: str, options: dict[str, object], transport: object
) -> dict[str, object]:
    out: dict[str, object] = {}
    shown: dict[str, object] = {}
    for key, value in options.items():
        if key not in _COMMON_OPTIONS:
            raise unknown_option(prefix, key, _COMMON_OPTIONS)
        if key in _DURATION_OPTIONS:
            seconds = _duration(
                prefix,
                key,
                value,
                allow_zero=key in ("ping_interval", "hold", "stable_after"),
            )
            if key == "ping_interval" and 0 < seconds < MIN_PING:
                raise ConfigError(
                    f"{prefix}: ping_interval {value_text(value)} would ping the "
                    f"server {1 / seconds:.0f} times a second; use at least "
                    f"{MIN_PING:g} s, or 0 to turn pings off"
                )
            out[key] = seconds
        elif key == "enabled":
            if not isinstance(value, bool):
                raise ConfigError(
                    f"{prefix}: enabled must be true or false, got {value_text(value)}"
                )
            out[key] = value
        elif key == "headers":
            if transport == "stdio":
                raise ConfigError(
                    f"{prefix}: headers apply to http/sse endpoints only; for a "
                    "stdio server use env={...}"
                )
            out[key] = _string_map(prefix, "headers", value)
        elif key == "backoff":
            out[key] = _backoff(prefix, value)
        elif key in _CHOICES:
            out[key] = _choice(prefix, key, value, _CHOICES[key])
        elif key == "idle_stop":
            out[key] = _duration(prefix, key, value)
        elif key == "max_output":
            out[key] = parse_max_output(prefix, value)
        elif key == "annotations":
            out[key] = annotation_overrides(prefix, value)
        elif key == "log_arguments":
            if not isinstance(value, bool):
                raise ConfigError(
                    f"{prefix}: log_arguments must be true or false, got "
                    f"{value_text(value)}"
                )
            out[key] = value
        elif key in ("lock", "min_age"):
            if transport != "stdio":
                raise ConfigError(
                    f"{prefix}: {key} applies to stdio servers launched from a "
                    "registry (npx, uvx, docker run, ...); remove it here"
                )
            out[key] = _lock_option(prefix, key, value)
        elif key in ("sandbox", "sandbox_required"):
            if transport != "stdio":
                raise ConfigError(
                    f"{prefix}: {key} applies to stdio servers (a process the "
                    "daemon starts); remove it here"
                )
            if key == "sandbox":
                out[key] = parse_sandbox(
                    prefix, value, options.get("sandbox_required", False)
                )
            elif "sandbox" not in options:
                raise ConfigError(
                    f"{prefix}: sandbox_required without sandbox; add "
                    'sandbox = "strict" (or a table)'
                )
        elif key == "roots":
            out[key] = parse_exposure_option(prefix, key, value)
        elif key == "oauth":
            oauth = parse_oauth(prefix, value, transport)
            if oauth.client_secret is not None:
                _check_templates(prefix, "oauth.client_secret", oauth.client_secret)
            if oauth.private_key is not None:
                _check_templates(prefix, "oauth.private_key", oauth.private_key)
            out[key] = oauth
        elif key in EXPOSURE_OPTIONS:
            shown[key] = parse_exposure_option(prefix, key, value)
    if shown:
        out["exposure"] = Exposure(**shown)  # type: ignore[arg-type]
    if "idle_stop" in out and out.get("start") != "on_demand":
        raise ConfigError(
            f'{prefix}: idle_stop applies to start = "on_demand" connections; add '
            'start = "on_demand", or remove idle_stop'
        )
    return out


_CHOICES = {"protocol": PROTOCOLS, "start": STARTS, "pin": PINS}
"""Options whose value is one of a few words."""


def _choice(prefix: str, key: str, value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(
            f"{prefix}: {key} must be one of "
            f"{', '.join(repr(c) for c in choices)}, got {value_text(value)}"
        )
    return str(value)


def _backoff(prefix: str, value: object) -> BackoffPolicy:
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{prefix}: backoff must be a table like {{initial=0.1, cap=3}}, got "
            f"{value_text(value)}"
        )
    unknown = sorted(set(value) - {"initial", "cap"}, key=str)
    if unknown:
        raise ConfigError(
            f"{prefix}: unknown backoff key {unknown[0]!r}; use initial and cap"
        )
    initial = _duration(prefix, "backoff.initial", value.get("initial", 0.1))
    cap = _duration(prefix, "backoff.cap", value.get("cap", 3.0))
    if initial > cap:
        raise ConfigError(
            f"{prefix}: backoff.initial ({initial}) must not exceed backoff.cap ({cap})"
        )
    return BackoffPolicy(initial=initial, cap=cap)


def _duration(
    prefix: str, key: str, value: object, *, allow_zero: bool = False
) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(
            f"{prefix}: {key} must be a number of seconds, got {value_text(value)}"
        )
    number = float(value)
    low_ok = number >= 0 if allow_zero else number > 0
    if not math.isfinite(number) or not low_ok or number > _MAX_DURATION:
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(
            f"{prefix}: {key} must be {bound} and at most {_MAX_DURATION:.0f} seconds, "
            f"got {value!r}"
        )
    return number


_MAX_MIN_AGE = 365.0
"""The longest `min_age`, in days."""


def _lock_option(prefix: str, key: str, value: object) -> bool | float:
    if key == "lock":
        if not isinstance(value, bool):
            raise ConfigError(
                f"{prefix}: lock must be true or false, got {value_text(value)}"
            )
        return value
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= _MAX_MIN_AGE
    ):
        raise ConfigError(
            f"{prefix}: min_age must be a number of days from 0 to "
            f"{_MAX_MIN_AGE:.0f}, got {value_text(value)}"
        )
    return float(value)


MIN_OUTPUT = 500
"""The smallest `max_output`: room for a little content besides the note."""


def parse_max_output(prefix: str, value: object) -> int:
    """`max_output = N`: tokens, a whole number of at least `MIN_OUTPUT`."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or value != int(value)
        or value < MIN_OUTPUT
    ):
        raise ConfigError(
            f"{prefix}: max_output must be a whole number of tokens, at least "
            f"{MIN_OUTPUT} (e.g. max_output = 20000), got {value_text(value)}"
        )
    return int(value)


def _string_map(prefix: str, key: str, value: object) -> tuple[tuple[str, str], ...]:
    if isinstance(value, list) and not value:
        return ()
    if not isinstance(value, Mapping):
        raise ConfigError(
            f'{prefix}: {key} must be a table of strings, e.g. {key}={{NAME="value"}}; '
            f"got {value_text(value)}"
        )
    out: list[tuple[str, str]] = []
    for k, v in value.items():
        if not isinstance(k, str) or not k:
            raise ConfigError(f"{prefix}: {key} keys must be non-empty strings")
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise ConfigError(
                f"{prefix}: {key}.{k} must be a string, got {value_text(v)}"
            )
        text = v if isinstance(v, str) else _number_text(v)
        _check_templates(prefix, f"{key}.{k}", text)
        if "\x00" in text or (key == "headers" and ("\n" in text or "\r" in text)):
            raise ConfigError(f"{prefix}: {key}.{k} contains a forbidden character")
        out.append((k, text))
    return tuple(sorted(out))


def _check_templates(prefix: str, key: str, text: str) -> None:
    for m in TEMPLATE.finditer(text):
        if not _ENV_TEMPLATE.fullmatch(m.group(1)) and not parse_reference(m.group(1)):
            raise ConfigError(
                f"{prefix}: {key}: unknown template ${{{m.group(1)}}}; the forms are "
                "${env:NAME}, ${keyring:SERVICE/NAME}, ${cmd:COMMAND ARGS} and "
                "${op://VAULT/ITEM/FIELD}"
            )


def _expect_str(prefix: str, key: str, value: object) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{prefix}: {key} must be a string, got {value_text(value)}")
    return value


def _number_text(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def unknown_option(
    where: str, key: str, known: Iterable[object], listed: str = "known options"
) -> ConfigError:
    """The error for an option nobody knows, with the likeliest one meant
    ("did you mean 'connect_timeout'?") when one is close."""
    names = sorted(str(name) for name in known)
    return ConfigError(
        f"{where}: unknown option {key!r}{meant(key, names)}; {listed}: "
        f"{', '.join(names)}"
    )


def value_text(value: object) -> str:
    """How a declared value reads in an error message ("a number (3)")."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})"
    if isinstance(value, Mapping | list):
        return "a table"
    return type(value).__name__


def endpoint_key(spec: ConnectionSpec) -> str:
    """What a remembered fact (an era, a listing) belongs to: the endpoint, not
    its secrets (a digest of the transport, URL or command line)."""
    parts = [spec.transport, spec.url, spec.command, *spec.args]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def display_endpoint(spec: ConnectionSpec) -> str:
    """A one-line endpoint for humans: secrets masked, templates left as written."""
    if spec.transport == "stdio":
        return " ".join([spec.command, *redact_args(spec.args)])
    return redact_url(spec.url)


def spec_summary(spec: ConnectionSpec) -> dict[str, object]:
    """A JSON-ready view of `spec` with every secret masked (for status and the HUD)."""
    out: dict[str, object] = {
        "name": spec.name,
        "transport": spec.transport,
        "endpoint": display_endpoint(spec),
    }
    if spec.transport == "stdio":
        out["env"] = {k: MASK for k, _ in spec.env}
        if spec.cwd:
            out["cwd"] = spec.cwd
    else:
        out["headers"] = {k: MASK for k, _ in spec.headers}
    for key in _DURATION_OPTIONS:
        out[key] = getattr(spec, key)
    out["backoff"] = {"initial": spec.backoff.initial, "cap": spec.backoff.cap}
    out["enabled"] = spec.enabled
    out["pin"] = spec.pin
    if spec.sandbox.active:
        box = spec.sandbox
        out["sandbox"] = {
            "mode": box.mode,
            "read": list(box.read),
            "write": list(box.write),
            "network": "all" if box.ports is None else list(box.ports) or "none",
            "required": box.required,
        }
    if spec.transport == "stdio" and not spec.lock:
        out["lock"] = False
    if spec.min_age:
        out["min_age"] = spec.min_age
    if spec.max_output is not None:
        out["max_output"] = spec.max_output
    if spec.log_arguments:
        out["log_arguments"] = True
    if spec.annotations:
        out["annotations"] = {glob: dict(given) for glob, given in spec.annotations}
    if spec.on_demand:
        out["start"] = spec.start
        out["idle_stop"] = spec.idle_stop
    out["prefix"] = spec.prefix
    for kind in ("tools", "prompts", "resources"):
        item_filter = getattr(spec.exposure, kind)
        if not item_filter.is_open:
            out[kind] = {
                "allow": None if item_filter.allow is None else list(item_filter.allow),
                "deny": list(item_filter.deny),
            }
    if spec.roots:
        out["roots"] = list(spec.roots)
    if spec.oauth is not None:
        oauth = spec.oauth
        shown_oauth: dict[str, object] = {
            "grant": oauth.grant,
            "client_id": oauth.client_id,
            "client_secret": MASK if oauth.client_secret is not None else None,
            "issuer": oauth.issuer,
            "scope": oauth.scope,
            "auth_method": oauth.auth_method,
            "client_metadata_url": oauth.client_metadata_url,
            "callback_port": oauth.callback_port,
        }
        if oauth.private_key is not None:
            shown_oauth["private_key"] = MASK
            shown_oauth["signing_algorithm"] = oauth.signing_algorithm
        out["oauth"] = shown_oauth
    return out


def changed_fields(old: ConnectionSpec, new: ConnectionSpec) -> tuple[str, ...]:
    """Names of the fields that differ between two specs of one connection."""
    return tuple(
        f.name
        for f in dataclasses.fields(ConnectionSpec)
        if getattr(old, f.name) != getattr(new, f.name)
    )


LIVE_FIELDS = frozenset(
    {"exposure", "roots", "max_output", "annotations", "log_arguments"}
)
"""Spec fields that apply to a running connection without a reconnect."""


def applies_live(old: ConnectionSpec, new: ConnectionSpec) -> bool:
    """Whether `new` differs from `old` only in what needs no reconnect.

    Roots apply live only while there are some before and after: whether we
    offer `roots` at all is declared in the handshake.
    """
    changed = set(changed_fields(old, new))
    return changed <= LIVE_FIELDS and bool(old.roots) == bool(new.roots)


STDIO_ONLY_OPTIONS = frozenset({"sandbox", "sandbox_required", "lock", "min_age"})
"""Options that apply to stdio servers only (a default skips the others)."""

URL_ONLY_OPTIONS = frozenset({"headers", "oauth"})
"""Options that apply to http and sse endpoints only."""


def parse_defaults(opts: object) -> dict[str, object]:
    """`mcp_defaults{...}`: options every later `mcp_add` of the script takes
    where it does not set them itself, validated now (an option for stdio
    servers only, like `sandbox`, is validated as one and given only to
    them; `headers` and `oauth` only to URLs).

    Raises:
        ConfigError: Not a table, an unknown option, or a bad value: the
            message starts `mcp_defaults: `.
    """
    if not isinstance(opts, dict):
        raise ConfigError(
            "mcp_defaults: options must be a table, e.g. mcp_defaults({sandbox = "
            f'"strict", pin = "strict"}}), got {value_text(opts)}'
        )
    unknown = sorted(str(key) for key in opts if key not in _COMMON_OPTIONS)
    if unknown:
        raise unknown_option("mcp_defaults", unknown[0], _COMMON_OPTIONS)
    stdio = {k: v for k, v in opts.items() if k not in URL_ONLY_OPTIONS}
    url = {k: v for k, v in opts.items() if k not in STDIO_ONLY_OPTIONS}
    try:
        parse_spec("defaults", {"command": "server"}, stdio)
        parse_spec("defaults", "http://127.0.0.1/mcp", url)
    except ConfigError as exc:
        message = exc.message.replace("mcp_add('defaults'): ", "", 1)
        raise ConfigError(f"mcp_defaults: {message}") from None
    return dict(opts)


def with_defaults(
    endpoint: object, opts: Mapping[str, object] | None, defaults: Mapping[str, object]
) -> dict[str, object] | None:
    """`opts` with each of `defaults` it does not set and that applies to
    `endpoint`'s kind (`STDIO_ONLY_OPTIONS`, `URL_ONLY_OPTIONS`)."""
    if not defaults:
        return dict(opts) if opts is not None else None
    stdio = isinstance(endpoint, Mapping) and "command" in endpoint
    out = dict(opts or {})
    for key, value in defaults.items():
        skip = URL_ONLY_OPTIONS if stdio else STDIO_ONLY_OPTIONS
        if key not in out and key not in skip:
            out[key] = value
    return out
