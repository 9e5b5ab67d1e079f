"""Call policy: what a tool call may do without asking (`mcp_policy` in startup.lua).

Rules are tried in the order they were written; the first that matches gives
the verdict: `allow`, `ask` (the user is asked out of band: the HUD or
`mcp-manager allow ID`, never the calling client) or `deny` (a tool error the
model can read, naming the rule). No rule matching means `allow`, so a script
without rules behaves as before; a last rule with no conditions is the
default posture.

    mcp_policy("deny", {tool = "*delete*"})
    mcp_policy("ask", {server = "github", destructive = true, timeout = 300})
    mcp_policy("deny", {guard = {secrets = true}})         -- secret-looking values
    mcp_policy("ask", {tool = "fs__write_file", check = function(args)
      return args.path:find("^/etc") ~= nil                -- nil/false: next rule
    end})
    mcp_policy("allow", {read_only = true})
    mcp_policy("ask")                                      -- everything else

Conditions (all given must hold): `server`, `tool` (exposed or the server's own
name), `client` and `profile` (globs, one or a list; `profile = ""` is the
endpoint without a profile); `read_only`, `destructive`, `open_world` (the
tool's annotations after the connection's `annotations` overrides, with the
protocol's defaults for what a server left out); `guard` (`secrets = true`:
an argument value looks like a secret; `max_bytes = N`: the arguments are
longer than N bytes as JSON); `check` (a function of the arguments that
returns true or a verdict to match, nil or false not to; one that fails or
runs out of time counts as `ask`). `timeout` (seconds) is how long an `ask`
waits for the user, at least the call's own `call_timeout`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Literal

from .errors import ConfigError
from .redact import MASK, MIN_SECRET_LENGTH, SecretRegistry, is_sensitive_key, redact

__all__ = [
    "RULE_OPTIONS",
    "SURFACES",
    "VERDICTS",
    "CallFacts",
    "Check",
    "Decision",
    "Guard",
    "Rule",
    "Verdict",
    "annotation_overrides",
    "decide",
    "hints",
    "looks_secret",
    "masked",
    "masked_names",
    "parse_rule",
    "secret_name",
]

Verdict = Literal["allow", "ask", "deny"]

VERDICTS: tuple[Verdict, ...] = ("allow", "ask", "deny")

SURFACES = frozenset({"cli", "lua"})
"""The names of the daemon's own callers (`mcp-manager call`, `mcp_call`)
in the `client` condition; an endpoint client that says it is one is not."""

RULE_OPTIONS = frozenset(
    {
        "server",
        "tool",
        "client",
        "profile",
        "read_only",
        "destructive",
        "open_world",
        "guard",
        "check",
        "timeout",
    }
)
"""What the second argument of `mcp_policy` may hold."""

_SECRET_KEY = re.compile(
    r"(^|[_-])(token|secret|password|passwd|api[_-]?key|authorization|cookie|"
    r"credentials?|private[_-]?key)($|[_-])",
    re.IGNORECASE,
)
_SECRET_VALUE = re.compile(
    r"\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|sk-[A-Za-z0-9_-]{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|glpat-[A-Za-z0-9_-]{20}"
    r"|eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+)"
    r"|-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"
    r"|\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@"
)
"""Well-known credential shapes (GitHub, OpenAI-style, Slack, AWS, GitLab
tokens, JWTs, PEM private keys, a URL's password). A PEM block starts with
dashes, so it is outside the word-boundary group (a value that begins with
it has no word boundary before it)."""


@dataclass(frozen=True, slots=True)
class Guard:
    """Checks of a call's arguments that make a rule match.

    Attributes:
        secrets: An argument value looks like a secret: one the daemon knows
            (its `${env:}`, keychain and header values), a well-known token
            shape, or a non-empty value of a key named like one (`token`,
            `password`, `api_key`, ...).
        max_bytes: The arguments are longer than this as JSON.
    """

    secrets: bool = False
    max_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Rule:
    """One `mcp_policy` rule (`core.policy`); empty conditions match anything."""

    verdict: Verdict
    where: str
    servers: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    clients: tuple[str, ...] = ()
    profiles: tuple[str, ...] = ()
    read_only: bool | None = None
    destructive: bool | None = None
    open_world: bool | None = None
    guard: Guard | None = None
    check: object = field(default=None, compare=False)
    """A function of the arguments (a Lua function), judged by the host."""
    timeout: float | None = None


@dataclass(frozen=True, slots=True)
class CallFacts:
    """What a rule is matched against: one call as the daemon sees it."""

    server: str
    tool: str
    exposed: str
    client: str
    profile: str
    annotations: Mapping[str, object]
    arguments: Mapping[str, object]


@dataclass(frozen=True, slots=True)
class Decision:
    """A rule's verdict on a call (`rule` None: no rule matched, `allow`)."""

    verdict: Verdict
    rule: Rule | None = None
    reason: str = ""

    @property
    def where(self) -> str:
        return self.rule.where if self.rule is not None else ""


Check = Callable[[object, Mapping[str, object]], Awaitable[object]]
"""Runs a rule's `check` on the arguments (in a copy of the script's runtime
that can be stopped, `lua.isolated`: hence awaited); raises `ConfigError`
when it fails."""


def parse_rule(verdict: object, match: object, where: str) -> Rule:
    """One `mcp_policy(verdict, match)` call, checked.

    Raises:
        ConfigError: An unknown verdict or condition, or a value of the wrong
            type, with what to write instead.
    """
    label = f"mcp_policy({verdict!r})"
    if verdict not in VERDICTS:
        raise ConfigError(
            f"mcp_policy: the verdict must be one of {', '.join(VERDICTS)}, got "
            f'{verdict!r}; e.g. mcp_policy("ask", {{server = "github"}})'
        )
    if match is None:
        match = {}
    if not isinstance(match, Mapping):
        raise ConfigError(
            f"{label}: the second argument must be a table of conditions, like "
            '{server = "github", destructive = true}'
        )
    unknown = sorted(str(k) for k in match if k not in RULE_OPTIONS)
    if unknown:
        raise ConfigError(
            f"{label}: unknown condition {unknown[0]!r}; use "
            + ", ".join(sorted(RULE_OPTIONS))
        )
    timeout = match.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout <= 86_400
    ):
        raise ConfigError(
            f"{label}: timeout must be seconds in (0, 86400], got {timeout!r}"
        )
    return Rule(
        verdict=verdict,
        where=where,
        servers=_globs(label, "server", match.get("server")),
        tools=_globs(label, "tool", match.get("tool")),
        clients=_globs(label, "client", match.get("client")),
        profiles=_globs(label, "profile", match.get("profile"), empty=True),
        read_only=_flag(label, "read_only", match.get("read_only")),
        destructive=_flag(label, "destructive", match.get("destructive")),
        open_world=_flag(label, "open_world", match.get("open_world")),
        guard=_guard(label, match.get("guard")),
        check=match.get("check"),
        timeout=float(timeout) if timeout is not None else None,
    )


def _globs(
    label: str, key: str, value: object, *, empty: bool = False
) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if isinstance(items, Mapping) and all(isinstance(k, int) for k in items):
        items = [items[k] for k in sorted(items)]
    if not isinstance(items, list | tuple) or not items:
        raise ConfigError(
            f'{label}: {key} must be a glob or a list of globs, like "gh*"'
        )
    for item in items:
        if not isinstance(item, str) or (not item and not empty):
            raise ConfigError(
                f"{label}: {key} must hold non-empty strings, got {item!r}"
            )
    return tuple(items)


def _flag(label: str, key: str, value: object) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise ConfigError(f"{label}: {key} must be true or false, got {value!r}")


def _guard(label: str, value: object) -> Guard | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value:
        raise ConfigError(
            f"{label}: guard must be a table like "
            "{secrets = true, max_bytes = 100000}"
        )
    unknown = sorted(str(k) for k in value if k not in ("secrets", "max_bytes"))
    if unknown:
        raise ConfigError(
            f"{label}: guard: unknown key {unknown[0]!r}; use secrets, max_bytes"
        )
    secrets = _flag(f"{label}: guard", "secrets", value.get("secrets")) or False
    size = value.get("max_bytes")
    if size is not None and (
        isinstance(size, bool) or not isinstance(size, int) or size < 0
    ):
        raise ConfigError(
            f"{label}: guard.max_bytes must be a whole number of bytes, got {size!r}"
        )
    return Guard(secrets=secrets, max_bytes=size)


def annotation_overrides(
    label: str, value: object
) -> tuple[tuple[str, dict[str, bool]], ...]:
    """`mcp_add`'s `annotations = {GLOB = {readOnlyHint = true, ...}}`: the
    hints a user trusts over the server's, per tool (its own name, a glob).

    Raises:
        ConfigError: Not a table of tables of the four boolean hints.
    """
    hints_known = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
    if not isinstance(value, Mapping) or not value:
        raise ConfigError(
            f"{label}: annotations must be a table like "
            '{["delete_*"] = {destructiveHint = true}}'
        )
    out: list[tuple[str, dict[str, bool]]] = []
    for glob in sorted(value, key=str):
        given = value[glob]
        if not isinstance(glob, str) or not glob or not isinstance(given, Mapping):
            raise ConfigError(
                f"{label}: annotations: each key is a tool name or glob and each value "
                f"a table of hints, got {glob!r}"
            )
        for hint, flag in given.items():
            if hint not in hints_known or not isinstance(flag, bool):
                raise ConfigError(
                    f"{label}: annotations[{glob!r}]: {hint!r} = {flag!r}; use "
                    + ", ".join(hints_known)
                    + " = true or false"
                )
        out.append((glob, dict(given)))
    return tuple(out)


def hints(annotations: Mapping[str, object]) -> tuple[bool, bool, bool]:
    """(read-only, destructive, open-world) with the protocol's defaults for
    what a server left out: not read-only, destructive unless read-only,
    open-world."""
    read_only = annotations.get("readOnlyHint") is True
    destructive = not read_only and annotations.get("destructiveHint") is not False
    open_world = annotations.get("openWorldHint") is not False
    return read_only, destructive, open_world


def _any(globs: tuple[str, ...], *names: str) -> bool:
    return not globs or any(fnmatchcase(n, g) for g in globs for n in names)


def _matches(rule: Rule, facts: CallFacts) -> bool:
    if not (
        _any(rule.servers, facts.server)
        and _any(rule.tools, facts.exposed, facts.tool)
        and _any(rule.clients, facts.client)
        and _any(rule.profiles, facts.profile)
    ):
        return False
    if rule.read_only is None and rule.destructive is None and rule.open_world is None:
        return True
    read_only, destructive, open_world = hints(facts.annotations)
    return (
        rule.read_only in (None, read_only)
        and rule.destructive in (None, destructive)
        and rule.open_world in (None, open_world)
    )


def _values(value: object, key: str = "") -> Iterable[tuple[str, str]]:
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _values(v, str(k))
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _values(v, key)


def _names(value: object) -> Iterable[str]:
    """The keys of `value`'s tables, at any depth."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield str(k)
            yield from _names(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _names(v)


def secret_name(name: str, known: SecretRegistry | None) -> bool:
    """Whether an argument's *name* is a secret (a value the daemon knows,
    a well-known token shape): a client may put one there as well."""
    if len(name) < MIN_SECRET_LENGTH:
        return False
    if known is not None and known.redact(name) != name:
        return True
    return _SECRET_VALUE.search(name) is not None


def looks_secret(arguments: Mapping[str, object], known: SecretRegistry | None) -> str:
    """The argument key whose value looks like a secret ("" for none); the
    value itself is never returned, nor a key that is one itself."""
    for key, text in _values(arguments):
        shown = "(an argument's name)" if secret_name(key, known) else key
        if known is not None and known.redact(text) != text:
            return shown or "(a value)"
        if _SECRET_VALUE.search(text):
            return shown or "(a value)"
        if key and len(text) >= 8 and _SECRET_KEY.search(key):
            return shown
    if any(secret_name(name, known) for name in _names(arguments)):
        return "(an argument's name)"
    return ""


def masked_names(
    arguments: Mapping[str, object], known: SecretRegistry | None
) -> Mapping[str, object]:
    """`arguments` with a top-level key that is a secret (`secret_name`)
    replaced by `***` (then `***2`, ...); the same object when none is."""
    if not any(secret_name(str(k), known) for k in arguments):
        return arguments
    out: dict[str, object] = {}
    for k, v in arguments.items():
        name = str(k)
        if secret_name(name, known):
            name, n = MASK, 1
            while name in out:
                n += 1
                name = f"{MASK}{n}"
        out[name] = v
    return out


def masked(value: object, known: SecretRegistry | None, key: str = "") -> object:
    """`value` (a call's arguments) with what looks like a secret masked:
    values of keys named like one, well-known token shapes and the values
    the daemon knows (`MASK`), for showing a call to the user."""
    if isinstance(value, str):
        # Showing more masked than needed is harmless: any value of a key
        # named like a secret (`is_sensitive_key`: token, key, passw, ...).
        if (value and key and is_sensitive_key(key)) or _SECRET_VALUE.search(value):
            return MASK
        return redact(value, known)
    if isinstance(value, Mapping):
        named = masked_names(value, known)
        return {str(k): masked(v, known, str(k)) for k, v in named.items()}
    if isinstance(value, list | tuple):
        return [masked(v, known, key) for v in value]
    return value


def _tripped(guard: Guard, facts: CallFacts, known: SecretRegistry | None) -> str:
    if guard.secrets:
        key = looks_secret(facts.arguments, known)
        if key:
            return f"the argument {key!r} looks like a secret"
    if guard.max_bytes is not None:
        # as sent: compact JSON in UTF-8 (not `\u00e9` escapes, 6 bytes for 2)
        text = json.dumps(
            facts.arguments, default=str, ensure_ascii=False, separators=(",", ":")
        )
        size = len(text.encode())
        if size > guard.max_bytes:
            return f"the arguments are {size} bytes, more than {guard.max_bytes}"
    return ""


async def decide(
    rules: Iterable[Rule],
    facts: CallFacts,
    check: Check | None = None,
    known: SecretRegistry | None = None,
) -> Decision:
    """The first matching rule's verdict on `facts` (`allow` when none does).

    A rule with a `check` matches when it returns true (its own verdict) or a
    verdict (that one); nil or false go on to the next rule. A check that
    fails (`ConfigError` from `check`) decides `ask`, saying why.
    """
    for rule in rules:
        if not _matches(rule, facts):
            continue
        reason = ""
        if rule.guard is not None:
            reason = _tripped(rule.guard, facts, known)
            if not reason:
                continue
        if rule.check is not None:
            if check is None:
                return Decision("ask", rule, "its check cannot run here")
            try:
                said = await check(rule.check, facts.arguments)
            except ConfigError as exc:
                return Decision("ask", rule, f"its check failed: {exc.message}")
            if said is None or said is False:
                continue
            if said in VERDICTS:
                return Decision(said, rule, reason)
            if said is not True:
                return Decision(
                    "ask", rule, f"its check returned {said!r}, not true or a verdict"
                )
        return Decision(rule.verdict, rule, reason)
    return Decision("allow")
