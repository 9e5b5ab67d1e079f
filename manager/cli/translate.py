"""A client's server as one `mcp_add(...)` statement: name, templates, secrets.

- `connection_name(text)`: a name `mcp_add` accepts, made from a client's.
- `Translator.declaration(name, server, section)`: the `Declaration` of one
  `ClientServer`, checked with `core.spec.parse_spec` (what `mcp_add` runs),
  or `Untranslatable` saying why not. Every value that looks like a secret
  becomes a `${env:NAME}` reference, and the translator remembers which
  variables the user must export (`Translator.exports`), never their values.
- `lua_statement(declaration)`: the Lua text, strings double-quoted and
  escaped.

The secret rule: a value is a secret when its key (env variable, header, flag,
query parameter) names one (`secret_key`: token, key, auth as the last word;
secret, password, credential, pat, cookie, ... anywhere), when the value itself
looks like one (`Bearer ...`, a known token prefix such as `ghp_` or `sk-`, a
URL with a password, a long random-looking string), or when it holds one among
other text (`holds_secret`: JSON headers, a connection string): then the whole
value is. `Bearer X` keeps its scheme: `Bearer ${env:NAME}`.

Client templates become mcp-manager's: `${env:X}`, and outside the editors
(VS Code, Cursor) `${X}`, `${X:-default}` and Gemini's `$X`, become `${env:X}`;
VS Code's `${input:id}` becomes `${env:ID}`; `${workspaceFolder}`,
`${userHome}` and `${pathSeparator}` become what they stand for. Anything else
cannot be expressed.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..core.errors import ConfigError
from ..core.redact import SecretRegistry
from ..core.spec import parse_spec
from .clients import ClientServer, Section

__all__ = [
    "Declaration",
    "Export",
    "LuaValue",
    "Translator",
    "Untranslatable",
    "connection_name",
    "holds_secret",
    "looks_secret",
    "lua_statement",
    "lua_string",
    "secret_key",
    "what_it_runs",
]

LuaValue = str | bool | float | list["LuaValue"] | dict[str, "LuaValue"]
"""What a declaration holds: Lua strings, booleans, numbers and tables."""

LINE_WIDTH = 88
"""Characters; a longer statement is written one field per line."""


KEYCHAIN_SERVICE = "mcp-manager"
"""The keychain service `import --keychain` stores secrets under."""


class Untranslatable(Exception):
    """A server `mcp_add` cannot express; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class Declaration:
    """One `mcp_add(name, fields)` statement.

    Attributes:
        name: The connection name.
        fields: The endpoint table with its options, in the order written.
        notes: What the user should know about it (no secret values).
    """

    name: str
    fields: dict[str, LuaValue]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Export:
    """An environment variable the daemon will need.

    Attributes:
        name: The variable.
        where: Which connection and setting reads it (`github: env TOKEN`).
        secret: True when it replaces a secret found in a client's file;
            False when the client already read it from the environment.
        stored: The secret goes to the keychain (`import --keychain`): the
            reference is `${keyring:mcp-manager/NAME}`, nothing to export.
    """

    name: str
    where: str
    secret: bool
    stored: bool = False


# ----------------------------------------------------------------------- names

_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")


def connection_name(text: str) -> str:
    """A connection name (1-64 letters, digits, `_`, `.`, `-`, starting with a
    letter or digit, no `__`) made from `text`; `text` itself when it is one."""
    name = _NAME_CHARS.sub("-", text)
    name = re.sub(r"_{2,}", "_", name)
    if name != text:
        name = name.strip("_.-")
    name = name.lstrip("_.-")[:64]
    return name or "server"


def _env_name(*parts: str) -> str:
    """A variable name made from `parts` (`my-api`, `X-Key` -> `MY_API_X_KEY`)."""
    name = re.sub(r"[^A-Za-z0-9]+", "_", "_".join(parts)).strip("_").upper()
    if not name or name[0].isdigit():
        name = "MCP_" + name
    return name


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# --------------------------------------------------------------------- secrets

_STRONG_WORDS = frozenset(
    {
        "secret",
        "secrets",
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "credential",
        "credentials",
        "cookie",
        "cookies",
        "apikey",
        "authorization",
        "bearer",
        "jwt",
        "pat",
    }
)
"""Words that make a name a secret's wherever they stand (`DB_PASSWORD`,
`clientCredential`), unless the name ends in a word of `_ABOUT_WORDS`."""
_WEAK_WORDS = frozenset(
    {"token", "key", "auth", "oauth", "sig", "signature", "pass", "authentication"}
)
"""Words that make a name a secret's only as its last word (`GITHUB_TOKEN`,
`X-Api-Key`, but not `MAX_TOKENS`, `PRIMARY_KEY_COLUMN`, `SSH_AUTH_SOCK`,
`TOKENIZER` or `KEYBOARD_LAYOUT`)."""
_CARRIER_WORDS = frozenset({"id", "header", "headers", "value", "string", "str"})
"""Last words that carry the secret named before them (`AUTH_HEADER`,
`ACCESS_KEY_ID`): skipped when looking for the last word."""
_ABOUT_WORDS = frozenset(
    {
        "file",
        "path",
        "dir",
        "sock",
        "socket",
        "url",
        "uri",
        "endpoint",
        "length",
        "len",
        "count",
        "limit",
        "size",
        "max",
        "min",
        "type",
        "mode",
        "name",
        "ttl",
        "expiry",
        "expires",
        "enabled",
        "required",
    }
)
"""Last words of a name about a secret, not holding one (`TOKEN_URL`,
`PASSWORD_FILE`, `SECRET_NAME`, `KEY_FILE`)."""
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_PLAIN_WORDS = frozenset({"", "true", "false", "yes", "no", "on", "off", "0", "1"})
"""Values that are no secret whatever their key says."""
_AUTH_SCHEME = re.compile(r"^(Bearer|Basic|Token|Bot)\s+(\S.*)$", re.IGNORECASE)
_PREFIXES = (
    r"(ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|glpat-|gldt-|sk-|sk_live_|sk_test_|"
    r"rk_live_|xox[a-z]-|xapp-|AKIA|ASIA|AIza|ya29\.|npm_|pypi-|hf_|shp(at|ss|ca)_|"
    r"lin_api_|dop_v1_|sq0atp-|ntn_|secret_|eyJ)[A-Za-z0-9._~+/=-]{8,}"
)
"""Known token prefixes: GitHub, GitLab, OpenAI/Anthropic/Stripe, Slack, AWS,
Google, npm, PyPI, Hugging Face, Shopify, Linear, DigitalOcean, Square, Notion,
JWTs."""
_PREFIXED = re.compile(f"^{_PREFIXES}$")
_HELD_PREFIXED = re.compile(f"(?<![A-Za-z0-9_-]){_PREFIXES}")
_HELD_SCHEME = re.compile(
    r"(?<![A-Za-z0-9])(Bearer|Basic|Token)\s+(?=[A-Za-z0-9._~+/=-]*[\d_.~+/=-])"
    r"[A-Za-z0-9._~+/=-]{8,}",
    re.IGNORECASE,
)
"""`Bearer X` inside a longer value (an authorization header in JSON), X
having a digit or a sign no word has."""
_HELD_PAIR = re.compile(
    r"([A-Za-z][A-Za-z0-9_.-]*)[\"']?\s*[=:]\s*[\"']?([^;&,\"'\s{}]+)"
)
"""`name=value` or `"name": "value"` inside a longer value (a connection
string, JSON)."""
_HELD_USERINFO = re.compile(r"://[^/\s:@]+:[^/\s@]+@")
_TOKEN_CHARS = re.compile(r"^[A-Za-z0-9+/=]+$")


def secret_key(name: str) -> bool:
    """Whether an env variable, header, flag or parameter name names a secret,
    read word by word (`_STRONG_WORDS`, `_WEAK_WORDS`): a name that only
    mentions one (`MAX_TOKENS`, `TOKEN_URL`) holds none."""
    words = [word.lower() for word in _WORDS.findall(name)]
    while len(words) > 1 and words[-1] in _CARRIER_WORDS:
        words.pop()
    if not words or words[-1] in _ABOUT_WORDS:
        return False
    return bool(_STRONG_WORDS.intersection(words)) or words[-1] in _WEAK_WORDS


def _random_looking(text: str) -> bool:
    """A long run of letters and digits mixed the way generated tokens are
    (hex, base64), not the way words, versions and paths are."""
    if text.startswith(("/", "~", ".", "-")) or any(c.isspace() for c in text):
        return False
    for run in re.split(r"[-_.:@]", text):
        if len(run) < 20 or not _TOKEN_CHARS.fullmatch(run):
            continue
        digits = sum(c.isdigit() for c in run)
        switches = sum(
            run[i].isdigit() != run[i + 1].isdigit() for i in range(len(run) - 1)
        )
        counts = Counter(run).values()
        entropy = -sum(n / len(run) * math.log2(n / len(run)) for n in counts)
        if digits >= 2 and switches >= 3 and entropy >= 3.0:
            return True
    return False


def _url_password(text: str) -> bool:
    try:
        return urlsplit(text).password is not None
    except ValueError:
        return False


def holds_secret(value: str) -> bool:
    """Whether `value` holds a credential among other text: a JSON object of
    headers with `Authorization: Bearer ...`, a connection string with
    `Password=...;`, a URL with a password, a known token."""
    if _HELD_SCHEME.search(value) or _HELD_PREFIXED.search(value):
        return True
    if _HELD_USERINFO.search(value):
        return True
    for key, held in _HELD_PAIR.findall(value):
        if secret_key(key) and held.lower() not in _PLAIN_WORDS:
            return True
    return False


def looks_secret(value: str) -> bool:
    """Whether `value` itself looks like a credential, whatever its key."""
    text = value.strip()
    if text.lower() in _PLAIN_WORDS:
        return False
    if _AUTH_SCHEME.match(text) or _PREFIXED.match(text):
        return True
    if "://" in text:
        return _url_password(text)
    return _random_looking(text)


# ------------------------------------------------------------------- templates

_TEMPLATE = re.compile(r"\$\{([^}]*)\}")
_BARE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_DEFAULTED = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):?-")
_ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_EDITORS = frozenset({"vscode", "cursor"})
"""Clients where `${NAME}` is an editor variable (the environment is `${env:NAME}`)."""


def _has_template(text: str, section: Section) -> bool:
    return "${" in text or (section.client == "gemini" and bool(_BARE.search(text)))


def _fill_templates(
    text: str, where: str, section: Section, home: Path, notes: list[str]
) -> str:
    """`text` with the client's templates made mcp-manager's (see the module)."""

    def one(match: re.Match[str]) -> str:
        inner = match.group(1)
        if inner.startswith("env:") and _ENV_NAME.fullmatch(inner[4:]):
            return match.group(0)
        if inner.startswith(f"keyring:{KEYCHAIN_SERVICE}/"):  # --keychain's own
            return match.group(0)
        if inner.startswith("input:"):
            name = _env_name(inner[6:])
            notes.append(
                f"{where}: VS Code asks for input {inner[6:]!r}; the daemon reads "
                f"${{env:{name}}} instead"
            )
            return f"${{env:{name}}}"
        if inner == "userHome":
            return str(home)
        if inner in ("pathSeparator", "/"):
            return os.sep
        if inner in ("workspaceFolder", "workspaceRoot", "workspaceFolderBasename"):
            if section.workspace is None:
                raise Untranslatable(
                    f"{where} uses ${{{inner}}}, which depends on the folder the "
                    "editor has open; write the path instead"
                )
            folder = section.workspace
            return folder.name if inner.endswith("Basename") else str(folder)
        if section.client not in _EDITORS:
            if _ENV_NAME.fullmatch(inner):
                return f"${{env:{inner}}}"
            defaulted = _DEFAULTED.match(inner)
            if defaulted:
                notes.append(
                    f"{where}: the default of ${{{defaulted.group(1)}:-...}} was "
                    "dropped: the variable must be set"
                )
                return f"${{env:{defaulted.group(1)}}}"
        raise Untranslatable(
            f"{where} uses ${{{inner}}}, which mcp-manager cannot fill in; write "
            "the value, or ${env:NAME} to read it from the environment"
        )

    text = _TEMPLATE.sub(one, text)
    if section.client == "gemini":
        text = _BARE.sub(lambda m: f"${{env:{m.group(1)}}}", text)
    return text


def _absolute_cwd(cwd: str, section: Section, notes: list[str]) -> str:
    """A relative `cwd` is the project's folder's (a project file), as the
    editor that reads the file has it; elsewhere it depends on where the
    client was started, and the daemon runs anywhere."""
    if cwd.startswith(("/", "~", "${")) or os.path.isabs(cwd):
        return cwd
    if section.workspace is None:
        raise Untranslatable(
            f"its cwd {cwd!r} is relative to where the client was started; "
            "write the full path"
        )
    absolute = os.path.normpath(section.workspace / cwd)
    notes.append(f"cwd {cwd!r} is the project's folder's: {absolute}")
    return absolute


def _read_from_environment(
    text: str, section: Section, own: frozenset[str] = frozenset()
) -> set[str]:
    """The variables `text`'s templates read from the environment (but
    `own`, the entry's own variables)."""
    names: set[str] = set()
    for inner in _TEMPLATE.findall(text):
        if inner.startswith("env:"):
            names.add(inner[4:])
        elif section.client not in _EDITORS:
            defaulted = _DEFAULTED.match(inner)
            if defaulted:
                names.add(defaulted.group(1))
            elif _ENV_NAME.fullmatch(inner) and inner not in own:
                names.add(inner)
    if section.client == "gemini":
        names.update(_BARE.findall(text))
    return names


# -------------------------------------------------------------------- translator


class Translator:
    """Turns client servers into declarations, secrets into `${env:NAME}`.

    One translator per import: it gives each secret value one variable name
    (the same value read twice gets the same name; two values never share
    one) and collects what the user must export.

    Args:
        home: What `${userHome}` means.
        keychain: With it, a secret is meant for the OS keychain as
            `mcp-manager/NAME` and the declaration reads
            `${keyring:mcp-manager/NAME}` instead of `${env:NAME}`.
            `keychain(reference)` is what the keychain already holds there
            (None: nothing): a name holding another value is never taken, so
            an import cannot overwrite a secret another server reads.
    """

    def __init__(
        self, home: Path, keychain: Callable[[str], str | None] | None = None
    ) -> None:
        self._home = home
        self._keychain = keychain
        self.kept: list[str] = []
        """Keychain names that hold another secret: kept, not overwritten."""
        self.to_store: list[tuple[str, str]] = []
        """(reference, value) for the keychain, not stored yet: the caller
        stores them once the import is written (a preview stores nothing)."""
        self._values: dict[str, str] = {}  # variable -> the secret it stands for
        self.exports: list[Export] = []
        """Variables to export before starting the daemon, in order found."""
        self.secrets = SecretRegistry()
        """Every secret value found: anything printed is masked with it."""
        self._reserved: set[str] = set()
        """Variables the clients' own templates read (`reserve`): no secret
        found in a file is given one of these names."""

    def reserve(self, server: ClientServer, section: Section) -> None:
        """Keep the variables `server`'s templates read from the environment
        (`${X}`, `${env:X}`, Gemini's `$X`) for what they are: called for
        every server before any declaration, so a secret written out in one
        server never takes the name another reads (its value would reach
        both). An argument's `${X}` of a variable the entry sets itself reads
        that value (`declaration`), not the environment."""
        own = frozenset(key for key, _ in server.env)
        texts = [server.command, *server.args, server.url, server.cwd or ""]
        texts += [value for _, value in server.headers]
        for text in texts:
            self._reserved.update(_read_from_environment(text, section, own))
        for _, value in server.env:
            self._reserved.update(_read_from_environment(value, section))

    def declaration(
        self, name: str, server: ClientServer, section: Section
    ) -> Declaration:
        """The `mcp_add` statement for `server`, under connection name `name`.

        Raises:
            Untranslatable: A template mcp-manager cannot fill in, or a value
                `mcp_add` would refuse (the message says which).
        """
        notes = list(server.notes)

        def fill(text: str, where: str) -> str:
            return _fill_templates(text, where, section, self._home, notes)

        fields: dict[str, LuaValue] = {}
        if server.transport == "stdio":
            env: dict[str, str] = {}
            for key, value in server.env:
                if not _has_template(value, section) and self._is_secret(key, value):
                    value = self._reference(key, name, value, f"{name}: env {key}")
                env[key] = fill(value, f"env.{key}")

            def own(text: str, where: str) -> str:
                # `${X}` of a variable the entry sets itself is that value (as
                # the server, mcp-remote say, reads it from its environment),
                # not the daemon's $X.
                if section.client not in _EDITORS:
                    text = _TEMPLATE.sub(
                        lambda m: env.get(m.group(1), m.group(0)), text
                    )
                return fill(text, where)

            fields["command"] = own(server.command, "command")
            args: list[LuaValue] = [
                own(arg, f"args[{i}]")
                for i, arg in enumerate(self._args(name, server.args, section), 1)
            ]
            if args:
                fields["args"] = args
            if env:
                fields["env"] = dict(env)
            if server.cwd:
                fields["cwd"] = _absolute_cwd(own(server.cwd, "cwd"), section, notes)
        else:
            fields["url"] = fill(self._url(name, server.url, section), "url")
            fields["transport"] = server.transport
            headers: dict[str, LuaValue] = {}
            for key, value in server.headers:
                if not _has_template(value, section) and self._is_secret(key, value):
                    value = self._scheme_kept(
                        value, _env_name(name, key), f"{name}: header {key}"
                    )
                headers[key] = fill(value, f"headers.{key}")
            if headers:
                fields["headers"] = headers
        self._options(server, fields)
        self._check(name, fields)
        refs = {ref for text in _texts(fields) for ref in _ENV_REF.findall(text)}
        for ref in sorted(refs):
            if ref not in self._values and all(e.name != ref for e in self.exports):
                self.exports.append(Export(ref, f"{name} reads it", secret=False))
        return Declaration(name, fields, tuple(notes))

    @staticmethod
    def _options(server: ClientServer, fields: dict[str, LuaValue]) -> None:
        if not server.enabled:
            fields["enabled"] = False
        if server.connect_timeout is not None:
            fields["connect_timeout"] = server.connect_timeout
        if server.call_timeout is not None:
            fields["call_timeout"] = server.call_timeout
        tools: dict[str, LuaValue] = {}
        if server.allow_tools is not None:
            tools["allow"] = list(server.allow_tools)
        if server.deny_tools:
            tools["deny"] = list(server.deny_tools)
        if tools:
            fields["tools"] = tools
        if server.sandbox is not None:
            fields["sandbox"] = server.sandbox

    def _check(self, name: str, fields: dict[str, LuaValue]) -> None:
        """Run what `mcp_add` runs; its complaint (masked) is ours."""
        try:
            for text in _texts(fields):
                text.encode("utf-8")
            parse_spec(name, fields)
        except UnicodeEncodeError:
            raise Untranslatable("it holds text that is not valid Unicode") from None
        except ConfigError as exc:
            message = exc.message.removeprefix(f"mcp_add({name!r}): ")
            raise Untranslatable(self.secrets.redact(message)) from None

    @staticmethod
    def _is_secret(key: str, value: str) -> bool:
        if value.strip().lower() in _PLAIN_WORDS:
            return False
        return secret_key(key) or looks_secret(value) or holds_secret(value)

    def _reference(self, preferred: str, server: str, value: str, where: str) -> str:
        """`${env:NAME}` standing for the secret `value`: `preferred` if free
        (or already standing for the same value), else one made from `server`."""
        self.secrets.add([value])
        candidates = [preferred] if _ENV_NAME.fullmatch(preferred) else []
        candidates.append(_env_name(server, preferred))
        base = candidates[-1]
        n = 2
        while True:
            for name in candidates:
                held = self._values.get(name)
                if (held is not None and held != value) or name in self._reserved:
                    continue
                if self._keychain is None:
                    if held is None:
                        self._values[name] = value
                        self.exports.append(Export(name, where, secret=True))
                    return f"${{env:{name}}}"
                reference = f"{KEYCHAIN_SERVICE}/{name}"
                if held is None:
                    there = self._keychain(reference)
                    if there is not None and there != value:
                        if reference not in self.kept:
                            self.kept.append(reference)
                        continue  # another server's secret: keep it
                    self._values[name] = value
                    if there is None:
                        self.to_store.append((reference, value))
                    self.exports.append(Export(name, where, secret=True, stored=True))
                return f"${{keyring:{reference}}}"
            candidates = [f"{base}_{n}"]
            n += 1

    def _scheme_kept(self, value: str, preferred: str, where: str) -> str:
        """`Bearer X` -> `Bearer ${env:NAME}`; a bare secret -> `${env:NAME}`."""
        scheme = _AUTH_SCHEME.match(value.strip())
        if scheme:
            ref = self._reference(preferred, "", scheme.group(2), where)
            return f"{scheme.group(1)} {ref}"
        return self._reference(preferred, "", value, where)

    def _args(self, server: str, args: tuple[str, ...], section: Section) -> list[str]:
        """Arguments with their secrets made references: `--token=X`,
        `--token X`, `NAME=X` (docker -e), `Header: X` (mcp-remote --header),
        a URL's password, or a value that looks like a secret by itself."""
        out: list[str] = []
        secret_flag = ""
        for arg in args:
            flag, secret_flag = secret_flag, ""
            templated = _has_template(arg, section)
            if (templated and "://" not in arg) or arg.lower() in _PLAIN_WORDS:
                out.append(arg)  # a URL's parts are looked at one by one below
                continue
            assigned = re.match(r"^(-{0,2}[A-Za-z0-9_.-]+)=(.+)$", arg, re.DOTALL)
            header = re.match(r"^([A-Za-z0-9_-]+):\s*(\S.*)$", arg, re.DOTALL)
            if arg.startswith("-") and assigned is None:
                secret_flag = arg if secret_key(arg.lstrip("-")) else ""
                out.append(arg)
            elif (
                assigned
                and not templated
                and self._is_secret(assigned.group(1), assigned.group(2))
            ):
                key = assigned.group(1)
                where = f"{server}: argument {key}=..."
                preferred = key if _ENV_NAME.fullmatch(key) else _env_name(server, key)
                ref = self._reference(preferred, server, assigned.group(2), where)
                out.append(f"{key}={ref}")
            elif "://" in arg:
                out.append(self._url(server, arg, section))
            elif header and self._is_secret(header.group(1), header.group(2)):
                key = header.group(1)
                where = f"{server}: argument {key}: ..."
                ref = self._scheme_kept(header.group(2), _env_name(server, key), where)
                out.append(f"{key}: {ref}")
            elif (
                (flag and not arg.startswith(("/", "~", ".")))
                or looks_secret(arg)
                or holds_secret(arg)
            ):
                label = flag.lstrip("-") or "secret"
                where = (
                    f"{server}: argument after {flag}"
                    if flag
                    else f"{server}: argument"
                )
                out.append(self._reference(_env_name(server, label), "", arg, where))
            else:
                out.append(arg)
        return out

    def _url(self, server: str, url: str, section: Section) -> str:
        """`url` with its password, secret query values and secret-looking path
        segments made references."""
        if "://" not in url:
            return url
        scheme, rest = url.split("://", 1)
        cut = min(
            (i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest)
        )
        authority, tail = rest[:cut], rest[cut:]
        if "@" in authority:
            userinfo, host = authority.rsplit("@", 1)
            user, colon, password = userinfo.partition(":")
            if colon and password and not _has_template(password, section):
                where = f"{server}: URL password"
                password = self._reference(
                    _env_name(server, "url_password"), "", password, where
                )
            authority = f"{user}{colon}{password}@{host}"
        path, mark, query = tail.partition("?")
        query, hash_mark, fragment = query.partition("#")
        segments = path.split("/")
        for i, segment in enumerate(segments):
            if _has_template(segment, section) or not looks_secret(segment):
                continue
            where = f"{server}: URL path"
            segments[i] = self._reference(
                _env_name(server, "url_secret"), "", segment, where
            )
        pairs = query.split("&") if query else []
        for i, pair in enumerate(pairs):
            key, eq, value = pair.partition("=")
            if not eq or not value or _has_template(value, section):
                continue
            if self._is_secret(key, value):
                where = f"{server}: URL parameter {key}"
                pairs[i] = (
                    f"{key}={self._reference(_env_name(server, key), '', value, where)}"
                )
        return (
            f"{scheme}://{authority}{'/'.join(segments)}{mark}{'&'.join(pairs)}"
            f"{hash_mark}{fragment}"
        )


def _texts(value: LuaValue) -> Iterator[str]:
    """Every string in `value`, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _texts(item)


# ------------------------------------------------------------------------- Lua

_LUA_KEYWORDS = frozenset(
    "and break do else elseif end false for function goto if in local nil not or "
    "repeat return then true until while".split()
)
_LUA_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def lua_string(text: str) -> str:
    """`text` as a double-quoted Lua string: `\\`, `"` and control characters
    escaped (`\\ddd`, always three digits, so a digit after one stays a digit)."""
    out = ['"']
    for char in text:
        if char in _LUA_ESCAPES:
            out.append(_LUA_ESCAPES[char])
        elif ord(char) < 32 or ord(char) == 127:
            out.append(f"\\{ord(char):03d}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _lua_key(key: str) -> str:
    if _ENV_NAME.fullmatch(key) and key not in _LUA_KEYWORDS:
        return key
    return f"[{lua_string(key)}]"


def _lua_value(value: LuaValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return lua_string(value)
    if isinstance(value, float | int):
        return repr(int(value)) if float(value).is_integer() else repr(value)
    if isinstance(value, list):
        return "{" + ", ".join(_lua_value(item) for item in value) + "}"
    items = ", ".join(f"{_lua_key(k)} = {_lua_value(v)}" for k, v in value.items())
    return "{" + items + "}"


def what_it_runs(declaration: Declaration) -> str:
    """The exact command a declaration starts (shell-quoted), or the URL it
    connects to: what a user is shown before it is written."""
    fields = declaration.fields
    if "command" not in fields:
        return f"connects to {fields.get('url', '?')}"
    listed = fields.get("args")
    argv = [str(fields["command"])]
    argv += [str(arg) for arg in listed] if isinstance(listed, list) else []
    return " ".join(shlex.quote(part) for part in argv)


def lua_statement(declaration: Declaration) -> str:
    """`mcp_add("name", {...})`: one line, or one field per line if too long."""
    name = lua_string(declaration.name)
    line = f"mcp_add({name}, {_lua_value(declaration.fields)})"
    if len(line) <= LINE_WIDTH:
        return line
    fields = [
        f"  {_lua_key(key)} = {_lua_value(value)},"
        for key, value in declaration.fields.items()
    ]
    return "\n".join([f"mcp_add({name}, {{", *fields, "})"])
