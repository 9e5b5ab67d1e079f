"""Where MCP clients keep their servers, and how to read them.

`config_commands.CLIENTS` are the clients `mcp-manager import` knows.
`candidate_files(client)` lists where one client keeps its servers on this
machine: the user's files
(under $HOME, $XDG_CONFIG_HOME, %APPDATA% or $CODEX_HOME, as that client
does) and the current directory's project files. `read_servers(path,
client)` parses one file (JSON, with comments and trailing commas allowed, or
TOML) and returns each server in neutral terms (`ClientServer`), or why
mcp-manager cannot express it (`Unusable`). A file that cannot be parsed
raises `UnreadableFile`, naming the file, the line and the column.

Values stay as the client wrote them, templates (`${input:id}`, `$VAR`) and
secrets included: `translate` makes them mcp-manager's.

Standard library only: client commands start fast.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypedDict

from ..core.spec import Transport

__all__ = [
    "GENERIC",
    "TITLES",
    "ClientServer",
    "FileServers",
    "Section",
    "UnreadableFile",
    "Unusable",
    "candidate_files",
    "read_servers",
    "strip_jsonc",
    "workspace_of",
]


TITLES: dict[str, str] = {
    "claude-desktop": "Claude Desktop",
    "claude-code": "Claude Code",
    "cursor": "Cursor",
    "vscode": "VS Code",
    "windsurf": "Windsurf",
    "gemini": "Gemini CLI",
    "codex": "Codex",
    "mcpServers": "an mcpServers file",
}
"""How messages name each client."""

GENERIC = "mcpServers"
"""The client of a file that has `mcpServers` but no sign of which client wrote it."""

_MAX_SECONDS = 24 * 3600.0
"""The longest timeout `mcp_add` takes (spec.py's bound)."""


class UnreadableFile(Exception):
    """A file that cannot be read or parsed; the message names it (and where)."""


@dataclass(frozen=True, slots=True)
class Section:
    """Where a set of servers was read: a file, or one part of it.

    Attributes:
        path: The file.
        client: One of `CLIENTS`, or `GENERIC`.
        part: Which part of the file, if not all of it (a project of
            `~/.claude.json`).
        workspace: The folder `${workspaceFolder}` means here, if any.
    """

    path: Path
    client: str
    part: str = ""
    workspace: Path | None = None

    @property
    def label(self) -> str:
        """How messages and the `-- from` comment name this section."""
        return f"{self.path} ({self.part})" if self.part else str(self.path)


@dataclass(frozen=True, slots=True)
class ClientServer:
    """One server as a client declares it, in neutral terms.

    Strings are as the client wrote them (its templates, its secrets).

    Attributes:
        name: The client's name for it (any text).
        transport: `stdio`, `http` (streamable HTTP) or `sse`.
        command: The program (stdio).
        args: Its arguments (stdio).
        env: Its extra environment (stdio).
        cwd: Its working directory (stdio).
        url: The endpoint (http, sse).
        headers: HTTP headers (http, sse).
        enabled: False when the client has it switched off.
        connect_timeout: Seconds to start up, if the client says.
        call_timeout: Seconds per tool call, if the client says.
        allow_tools: Globs of the tools to show (None: all).
        deny_tools: Globs of the tools to hide.
        sandbox: `strict` when the client confines it (VS Code's
            `sandboxEnabled`), else None.
        notes: What was not carried over, for the user.
    """

    name: str
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    enabled: bool = True
    connect_timeout: float | None = None
    call_timeout: float | None = None
    allow_tools: tuple[str, ...] | None = None
    deny_tools: tuple[str, ...] = ()
    sandbox: str | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Unusable:
    """A server mcp-manager cannot express; `reason` says what to do instead."""

    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class FileServers:
    """What one file declares: its sections, in order, and notes about the file."""

    sections: tuple[tuple[Section, tuple[ClientServer | Unusable, ...]], ...]
    notes: tuple[str, ...] = ()

    @property
    def client(self) -> str:
        """Which client's file it is (one of `CLIENTS`, or `GENERIC`)."""
        return self.sections[0][0].client

    @property
    def count(self) -> int:
        """How many servers the file declares."""
        return sum(len(servers) for _, servers in self.sections)


# ------------------------------------------------------------------- locations


def _config_home(home: Path, env: Mapping[str, str]) -> Path:
    xdg = env.get("XDG_CONFIG_HOME", "")
    return Path(xdg) if os.path.isabs(xdg) else home / ".config"


def _app_data(home: Path, env: Mapping[str, str]) -> Path:
    """Where desktop apps keep their settings on this platform."""
    if sys.platform == "darwin":
        return home / "Library" / "Application Support"
    if sys.platform == "win32":
        appdata = env.get("APPDATA", "")
        return Path(appdata) if appdata else home / "AppData" / "Roaming"
    return _config_home(home, env)


def candidate_files(
    client: str,
    *,
    home: Path | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Path]:
    """Where `client` keeps MCP servers on this machine, user files first.

    Args:
        client: One of `CLIENTS`.
        home: The home directory (default: `~`, which honours $HOME).
        cwd: The project directory (default: the current directory).
        env: The environment ($XDG_CONFIG_HOME, %APPDATA%, $CODEX_HOME).

    Returns:
        Paths, whether they exist or not.
    """
    home = Path(os.path.expanduser("~")) if home is None else home
    cwd = Path.cwd() if cwd is None else cwd
    env = os.environ if env is None else env
    if client == "claude-desktop":
        return [_app_data(home, env) / "Claude" / "claude_desktop_config.json"]
    if client == "claude-code":
        return [home / ".claude.json", cwd / ".mcp.json"]
    if client == "cursor":
        return [home / ".cursor" / "mcp.json", cwd / ".cursor" / "mcp.json"]
    if client == "vscode":
        user = _app_data(home, env) / "Code" / "User"
        return [user / "mcp.json", user / "settings.json", cwd / ".vscode" / "mcp.json"]
    if client == "windsurf":
        return [home / ".codeium" / "windsurf" / "mcp_config.json"]
    if client == "gemini":
        return [home / ".gemini" / "settings.json", cwd / ".gemini" / "settings.json"]
    if client == "codex":
        codex_home = env.get("CODEX_HOME", "")
        base = Path(codex_home) if codex_home else home / ".codex"
        return [base / "config.toml"]
    raise ValueError(f"unknown client {client!r}")


# --------------------------------------------------------------------- parsing


def strip_jsonc(text: str) -> str:
    """`text` with `//` and `/* */` comments and trailing commas blanked out.

    Blanked, not removed: every other character keeps its line and column, so
    a JSON error still points at the right place. Strings are left alone
    (`"http://x"` is no comment).

    Raises:
        json.JSONDecodeError: A `/*` comment is never closed.
    """
    out = list(text)
    i, n = 0, len(text)
    comma = -1  # a comma not yet followed by anything but blanks
    while i < n:
        char = text[i]
        if char == '"':
            comma = -1
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            continue
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
        elif text.startswith("/*", i):
            close = text.find("*/", i + 2)
            if close < 0:
                raise json.JSONDecodeError("Unterminated /* comment", text, i)
            end = close + 2
        else:
            if char == ",":
                comma = i
            elif char in "}]":
                if comma >= 0:
                    out[comma] = " "
                comma = -1
            elif not char.isspace():
                comma = -1
            i += 1
            continue
        for j in range(i, end):
            if out[j] not in "\r\n":
                out[j] = " "
        i = end
    return "".join(out)


_TOML_WHERE = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def _load(path: Path) -> object:
    """The parsed file (TOML for `.toml`, else JSON with comments)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UnreadableFile(f"cannot read {path}: no such file") from None
    except IsADirectoryError:
        raise UnreadableFile(f"cannot read {path}: it is a directory") from None
    except UnicodeDecodeError as exc:
        raise UnreadableFile(
            f"cannot read {path}: not UTF-8 text (byte {exc.start})"
        ) from None
    except OSError as exc:
        raise UnreadableFile(f"cannot read {path}: {exc.strerror or exc}") from None
    if path.suffix == ".toml":
        import tomllib  # Codex's file only: not on every CLI start

        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            message = str(exc)
            where = _TOML_WHERE.search(message)
            if where is None:
                place = f"{path}: at the end"
            else:
                place = f"{path}:{where.group(1)}:{where.group(2)}"
                message = message[: where.start()]
            raise UnreadableFile(f"{place}: not valid TOML: {message}") from None
    try:
        return json.loads(strip_jsonc(text))
    except json.JSONDecodeError as exc:
        raise UnreadableFile(
            f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}"
        ) from None


def _sniff(path: Path, data: object) -> str | None:
    """Which client wrote `data` (read from `path`), or None if no client did."""
    if not isinstance(data, dict):
        return None
    if path.suffix == ".toml":
        return "codex" if "mcp_servers" in data else None
    if isinstance(data.get("servers"), dict):
        return "vscode"
    mcp = data.get("mcp")
    if isinstance(mcp, dict) and "servers" in mcp:
        return "vscode"  # a settings.json
    if "mcpServers" not in data and "projects" not in data:
        return None
    by_name = {
        ".claude.json": "claude-code",
        ".mcp.json": "claude-code",
        "claude_desktop_config.json": "claude-desktop",
        "mcp_config.json": "windsurf",
    }
    by_dir = {".gemini": "gemini", ".cursor": "cursor", ".codeium": "windsurf"}
    if path.name in by_name:
        return by_name[path.name]
    if "projects" in data:
        return "claude-code"
    if path.parent.name in by_dir:
        return by_dir[path.parent.name]
    entries = data.get("mcpServers")
    if isinstance(entries, dict):
        keys = {k for e in entries.values() if isinstance(e, dict) for k in e}
        if "httpUrl" in keys:
            return "gemini"
        if "serverUrl" in keys:
            return "windsurf"
    return GENERIC


_EXPECTED = (
    '"mcpServers" (Claude, Cursor, Windsurf, Gemini), "servers" (VS Code) '
    "or [mcp_servers.NAME] tables (Codex)"
)


def read_servers(path: Path, client: str | None = None) -> FileServers:
    """Read the MCP servers one file declares.

    Args:
        path: The file.
        client: Which client's file it is; None to tell by its shape (then a
            file without servers is an error).

    Returns:
        Each section of the file with its servers (or why one is unusable).

    Raises:
        UnreadableFile: It cannot be read or parsed, or (client None) it is
            no client's file of servers.
    """
    data = _load(path)
    if client is None:
        client = _sniff(path, data)
        if client is None:
            raise UnreadableFile(f"{path}: found no MCP servers: expected {_EXPECTED}")
    if not isinstance(data, dict):
        raise UnreadableFile(f"{path}: expected an object at the top, as in {{...}}")
    if client == "codex":
        tables = _servers_object(path, data, "mcp_servers")
        section = Section(path, client)
        return FileServers(((section, _entries(tables, "codex", section)),))
    if client == "vscode":
        mcp = data.get("mcp")
        if "servers" not in data and isinstance(mcp, dict):
            tables = _servers_object(path, mcp, "servers", '"mcp": {"servers"')
        else:
            tables = _servers_object(path, data, "servers")
        section = Section(path, client, workspace=workspace_of(path))
        return FileServers(((section, _entries(tables, "vscode", section)),))
    if client == "claude-code" and (path.name == ".claude.json" or "projects" in data):
        return _claude_json(path, data)
    section = Section(path, client, workspace=workspace_of(path))
    tables = _servers_object(path, data, "mcpServers")
    entries = _entries(tables, "mcpServers", section)
    if client == "claude-code" and path.name == ".mcp.json":
        entries = _rejected_off(entries, path.resolve().parent)
    return FileServers(((section, entries),))


def _rejected_off(
    entries: tuple[ClientServer | Unusable, ...], project: Path
) -> tuple[ClientServer | Unusable, ...]:
    """A project's `.mcp.json` servers with the ones the user turned down in
    Claude Code (`disabledMcpjsonServers` of the project in ~/.claude.json)
    switched off, as Claude Code has them."""
    try:
        data = _load(Path.home() / ".claude.json")
    except UnreadableFile:
        return entries
    projects = data.get("projects") if isinstance(data, dict) else None
    if not isinstance(projects, dict):
        return entries
    rejected: set[str] = set()
    for key, settings in projects.items():
        if not isinstance(settings, dict) or Path(key).resolve() != project:
            continue
        names = settings.get("disabledMcpjsonServers")
        if isinstance(names, list):
            rejected.update(name for name in names if isinstance(name, str))
    note = "switched off: turned down in Claude Code (disabledMcpjsonServers)"
    return tuple(
        replace(entry, enabled=False, notes=(*entry.notes, note))
        if isinstance(entry, ClientServer) and entry.name in rejected
        else entry
        for entry in entries
    )


def workspace_of(path: Path) -> Path | None:
    """The project folder of a project file (`.mcp.json`, `.vscode/mcp.json`,
    `.cursor/mcp.json`, `.gemini/settings.json`), wherever it is; None for
    any other file, and for the user's own (`~/.cursor/mcp.json` and
    `~/.gemini/settings.json` are the user's, not a project's in their home)."""
    if path.name == ".mcp.json":
        folder = path.absolute().parent
    elif path.parent.name in (".vscode", ".cursor", ".gemini"):
        folder = path.absolute().parent.parent
    else:
        return None
    home = Path(os.path.expanduser("~"))
    if folder.resolve() == home.resolve():
        return None
    return folder


def _servers_object(
    path: Path, data: Mapping[str, object], key: str, shown: str = ""
) -> Mapping[str, object]:
    servers = data.get(key, {})
    if not isinstance(servers, dict):
        raise UnreadableFile(
            f"{path}: {shown or repr(key)} must be an object of servers, "
            f"{{NAME: {{...}}}}, got {_kind(servers)}"
        )
    return servers


def _claude_json(path: Path, data: Mapping[str, object]) -> FileServers:
    """`~/.claude.json`: the user's servers and this project's (local scope)."""
    cwd = Path.cwd().resolve()
    sections = [Section(path, "claude-code", part="user")]
    tables = [_servers_object(path, data, "mcpServers")]
    projects = data.get("projects", {})
    others = 0
    if isinstance(projects, dict):
        for key, project in projects.items():
            if not isinstance(project, dict) or not project.get("mcpServers"):
                continue
            if Path(key).resolve() != cwd:
                others += 1
                continue
            shown = f'"projects": {{{json.dumps(key)}: {{"mcpServers"'
            tables.append(_servers_object(path, project, "mcpServers", shown))
            sections.append(Section(path, "claude-code", f"project {key}", Path(key)))
    notes: tuple[str, ...] = ()
    if others:
        notes = (
            f"{path}: {others} other project(s) have servers of their own; run "
            "`mcp-manager import claude-code` in their directories to import them",
        )
    return FileServers(
        tuple(
            (section, _entries(servers, "mcpServers", section))
            for section, servers in zip(sections, tables, strict=True)
        ),
        notes,
    )


class _Refused(Exception):
    """An entry mcp-manager cannot express; the message says what to do."""


class _Entry:
    """One client entry being read: typed fields, and notes on what is dropped."""

    def __init__(self, raw: Mapping[str, object], known: frozenset[str]) -> None:
        self.raw = raw
        self.notes: list[str] = [
            f"ignored {key!r} (mcp-manager has no such setting)"
            for key in raw
            if key not in known
        ]

    def text(self, key: str) -> str | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise _Refused(f"{key!r} must be a string, got {_kind(value)}")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.raw.get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            raise _Refused(f"{key!r} must be a list of strings, got {_kind(value)}")
        return tuple(_scalar_text(key, item) for item in value)

    def string_map(self, key: str) -> dict[str, str]:
        value = self.raw.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise _Refused(f"{key!r} must be an object of strings, got {_kind(value)}")
        out: dict[str, str] = {}
        for name, item in value.items():
            if item is None:
                self.notes.append(f"ignored {key}.{name} (null: unset in the client)")
                continue
            out[str(name)] = _scalar_text(f"{key}.{name}", item)
        return out

    def seconds(self, key: str, scale: float = 1.0) -> float | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.notes.append(f"ignored {key!r}: not a number")
            return None
        seconds = value * scale
        if not 0 < seconds <= _MAX_SECONDS:
            self.notes.append(f"ignored {key!r}: outside 0 to 24 hours")
            return None
        return float(seconds)

    def tool_globs(self, key: str) -> tuple[str, ...] | None:
        if self.raw.get(key) is None:
            return None
        # The client lists tool names; mcp-manager reads globs: quote *, ? and [.
        return tuple(re.sub(r"([*?\[])", r"[\1]", n) for n in self.strings(key) if n)


def _scalar_text(key: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(int(value)) if float(value).is_integer() else str(value)
    raise _Refused(f"{key!r} must be a string, got {_kind(value)}")


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


_TYPES: dict[str, Transport] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamableHttp": "http",
    "sse": "sse",
}
"""Transport names clients write -> mcp-manager's."""


def _transport_of(kind: object, has_command: bool) -> Transport | None:
    if kind is None:
        return None
    if not isinstance(kind, str) or kind not in _TYPES:
        raise _Refused(
            f"type {kind!r} is no transport mcp-manager speaks (stdio, http, sse); "
            "declare it by hand if it has another way in"
        )
    transport = _TYPES[kind]
    if transport == "stdio" and not has_command:
        raise _Refused('a stdio entry needs "command": give the program to run')
    if has_command != (transport == "stdio"):
        what = "a command" if has_command else "no command"
        raise _Refused(
            f"type {kind!r} with {what}: give a command for stdio, a URL "
            "for http and sse"
        )
    return transport


def _guess(url: str) -> Transport:
    """Streamable HTTP, unless the URL's path ends in /sse (the usual SSE path)."""
    path = url.split("?", 1)[0].split("#", 1)[0].rstrip("/")
    return "sse" if path.endswith("/sse") else "http"


_MCP_SERVERS_KEYS = frozenset(
    {
        "command", "args", "env", "cwd", "type", "transport", "url", "serverUrl",
        "httpUrl", "headers", "disabled", "enabled", "timeout", "includeTools",
        "excludeTools", "envFile", "headersHelper", "oauth", "authProviderType",
        "disabledTools",
        # the client's own behaviour, nothing for the daemon to do:
        "alwaysAllow", "autoApprove", "trust", "description",
        "extensionName", "name",
    }
)  # fmt: skip


class _Options(TypedDict):
    """The settings every transport has (see `ClientServer`)."""

    enabled: bool
    connect_timeout: float | None
    call_timeout: float | None
    allow_tools: tuple[str, ...] | None
    deny_tools: tuple[str, ...]


def _remote(entry: _Entry, url_keys: Sequence[str]) -> tuple[str, str]:
    if len(url_keys) > 1:
        raise _Refused(f"has {' and '.join(url_keys)}: keep one URL")
    url = (entry.text(url_keys[0]) or "").strip()
    if url.startswith(("${", "$")):
        written = re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*:-([^}]*)\}", r"\1", url)
        example = f" (with its default: {written})" if "$" not in written else ""
        raise _Refused(
            f"{url_keys[0]!r} starts with a variable ({url}): mcp-manager needs "
            f"the scheme and host written out; write the URL{example}, with "
            "${env:NAME} only after the host"
        )
    if not url.lower().startswith(("http://", "https://")):
        raise _Refused(
            f"{url_keys[0]!r} must be an http:// or https:// URL (mcp-manager "
            "reaches remote servers over TCP only)"
        )
    return url_keys[0], url


def _mcp_servers_entry(name: str, entry: _Entry, section: Section) -> ClientServer:
    """An entry of `mcpServers` (Claude, Cursor, Windsurf, Gemini)."""
    raw = entry.raw
    if raw.get("envFile") is not None:
        raise _Refused(_ENV_FILE)
    if raw.get("headersHelper") is not None:
        raise _Refused(
            "headersHelper runs a program to make the headers, which mcp-manager "
            'does not; put the header in "headers" with a ${env:NAME} value'
        )
    provider = raw.get("authProviderType")
    if provider not in (None, "dynamic_discovery"):
        raise _Refused(
            f"authProviderType {provider!r} is Gemini's own login; mcp-manager "
            "logs in with OAuth discovery only (`mcp-manager login NAME`)"
        )
    if raw.get("oauth") is not None:
        entry.notes.append(_OAUTH_NOTE)
    url_keys = [k for k in ("url", "serverUrl", "httpUrl") if raw.get(k) is not None]
    has_command = raw.get("command") is not None
    if has_command and url_keys:
        raise _Refused(f"has both a command and {url_keys[0]!r}: keep one")
    transport = _transport_of(raw.get("type", raw.get("transport")), has_command)
    gemini = section.client == "gemini"
    timeout = entry.seconds("timeout", 0.001) if gemini else None
    if not gemini and raw.get("timeout") is not None:
        entry.notes.append("ignored 'timeout' (its unit differs between clients)")
    common = _Options(
        enabled=not (raw.get("disabled") is True or raw.get("enabled") is False),
        connect_timeout=None,
        call_timeout=timeout,
        allow_tools=entry.tool_globs("includeTools"),
        # Windsurf's and Cline's switched-off tools stay off.
        deny_tools=(entry.tool_globs("excludeTools") or ())
        + (entry.tool_globs("disabledTools") or ()),
    )
    if has_command:
        command = entry.text("command") or ""
        if not command.strip():
            raise _Refused('"command" is empty: give the program to run')
        if raw.get("headers"):
            entry.notes.append("ignored 'headers' (a stdio server gets no headers)")
        return ClientServer(
            name=name,
            transport="stdio",
            command=command.strip(),
            args=entry.strings("args"),
            env=tuple(entry.string_map("env").items()),
            cwd=entry.text("cwd"),
            notes=tuple(entry.notes),
            **common,
        )
    if not url_keys:
        raise _Refused(
            'a stdio entry needs "command"'
            if transport == "stdio"
            else 'no "command" to run and no "url" to connect to'
        )
    key, url = _remote(entry, url_keys)
    if transport is None:
        transport = "http" if key == "httpUrl" else "sse" if gemini else _guess(url)
    for dropped in ("args", "env", "cwd"):
        if raw.get(dropped):
            entry.notes.append(f"ignored {dropped!r} (a remote server runs no program)")
    return ClientServer(
        name=name,
        transport=transport,
        url=url,
        headers=tuple(entry.string_map("headers").items()),
        notes=tuple(entry.notes),
        **common,
    )


_ENV_FILE = (
    "envFile loads variables from a file, which mcp-manager does not; copy the "
    'variables into "env" (secrets as ${env:NAME}) and import again'
)
_OAUTH_NOTE = (
    "its OAuth settings were not imported: mcp-manager logs in by itself "
    "(`mcp-manager login NAME`; see the README for a registered client)"
)

_VSCODE_KEYS = frozenset(
    {
        "type", "command", "args", "env", "envFile", "cwd", "url", "headers",
        "oauth",
        # VS Code's own: its debugger, gallery and sandbox settings
        "dev", "gallery", "version", "sandbox", "sandboxEnabled",
    }
)  # fmt: skip


def _vscode_sandbox(raw: Mapping[str, object], entry: _Entry) -> str | None:
    """VS Code's confinement of a stdio server, as ours: `sandboxEnabled`
    alone becomes `sandbox = "strict"`; rules of its own are refused, never
    dropped (a server the user confined must not run unconfined behind us).
    """
    rules = raw.get("sandbox")
    enabled = raw.get("sandboxEnabled") is True or bool(rules)
    if not enabled:
        return None
    if rules:
        keys = ", ".join(sorted(map(str, rules))) if isinstance(rules, dict) else rules
        raise _Refused(
            f"VS Code confines it with rules of its own ({keys}), which mcp-manager "
            "cannot carry exactly: declare it by hand with sandbox = {read = {...}, "
            'write = {...}, network = {...}} (README: "Confining servers")'
        )
    entry.notes.append(
        'VS Code confined it: it gets sandbox = "strict"; add what it must read '
        'or write (sandbox = {read = {...}}) if it needs more (README: "Confining '
        'servers")'
    )
    return "strict"


def _vscode_entry(name: str, entry: _Entry, section: Section) -> ClientServer:
    """An entry of VS Code's `servers` (`.vscode/mcp.json`, settings.json)."""
    raw = entry.raw
    if raw.get("envFile") is not None:
        raise _Refused(_ENV_FILE)
    if raw.get("oauth") is not None:
        entry.notes.append(_OAUTH_NOTE)
    has_command = raw.get("command") is not None
    transport = _transport_of(raw.get("type"), has_command)
    if has_command:
        command = entry.text("command") or ""
        if not command.strip():
            raise _Refused('"command" is empty: give the program to run')
        return ClientServer(
            name=name,
            transport="stdio",
            command=command.strip(),
            args=entry.strings("args"),
            env=tuple(entry.string_map("env").items()),
            cwd=entry.text("cwd"),
            sandbox=_vscode_sandbox(raw, entry),
            notes=tuple(entry.notes),
        )
    if raw.get("url") is None:
        raise _Refused(
            'a stdio entry needs "command"'
            if transport == "stdio"
            else 'no "command" to run and no "url" to connect to'
        )
    _, url = _remote(entry, ["url"])
    return ClientServer(
        name=name,
        transport=transport or "http",
        url=url,
        headers=tuple(entry.string_map("headers").items()),
        notes=tuple(entry.notes),
    )


_CODEX_KEYS = frozenset(
    {
        "command", "args", "env", "env_vars", "cwd", "url", "type", "transport",
        "bearer_token_env_var", "bearer_token", "http_headers", "env_http_headers",
        "startup_timeout_sec", "startup_timeout_ms", "tool_timeout_sec", "enabled",
        "enabled_tools", "disabled_tools", "experimental_environment",
        "oauth_resource", "scopes",
        # Codex's own: approvals and whether Codex may start without it
        "required", "default_tools_approval_mode", "tools",
    }
)  # fmt: skip
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _codex_env_name(key: str, value: object) -> str:
    if not isinstance(value, str) or not _ENV_NAME.fullmatch(value):
        raise _Refused(f"{key} must name an environment variable, got {_kind(value)}")
    return value


def _codex_entry(name: str, entry: _Entry, section: Section) -> ClientServer:
    """A `[mcp_servers.NAME]` table of Codex's config.toml."""
    raw = entry.raw
    if raw.get("experimental_environment") not in (None, "local"):
        raise _Refused(
            "it runs in Codex's remote executor (experimental_environment), "
            "which mcp-manager cannot reach; declare it by hand"
        )
    if raw.get("oauth_resource") is not None or raw.get("scopes") is not None:
        entry.notes.append(_OAUTH_NOTE)
    has_command = raw.get("command") is not None
    if has_command and raw.get("url") is not None:
        raise _Refused("has both a command and a url: keep one")
    transport = _transport_of(raw.get("type", raw.get("transport")), has_command)
    common = _Options(
        enabled=raw.get("enabled") is not False,
        connect_timeout=entry.seconds("startup_timeout_sec")
        or entry.seconds("startup_timeout_ms", 0.001),
        call_timeout=entry.seconds("tool_timeout_sec"),
        allow_tools=entry.tool_globs("enabled_tools"),
        deny_tools=entry.tool_globs("disabled_tools") or (),
    )
    if has_command:
        command = entry.text("command") or ""
        if not command.strip():
            raise _Refused("command is empty: give the program to run")
        env = entry.string_map("env")
        passed = raw.get("env_vars", [])
        if not isinstance(passed, list):
            raise _Refused(f"env_vars must be a list of names, got {_kind(passed)}")
        for item in passed:
            # Codex passes these through from its own environment; so does
            # `${env:NAME}` from the daemon's.
            if isinstance(item, dict):
                if item.get("source", "local") != "local":
                    raise _Refused(
                        "env_vars reads a variable from Codex's remote executor, "
                        "which mcp-manager cannot reach; declare it by hand"
                    )
                item = item.get("name")
            var = _codex_env_name("env_vars", item)
            env.setdefault(var, f"${{env:{var}}}")
        return ClientServer(
            name=name,
            transport="stdio",
            command=command.strip(),
            args=entry.strings("args"),
            env=tuple(env.items()),
            cwd=entry.text("cwd"),
            notes=tuple(entry.notes),
            **common,
        )
    if raw.get("url") is None:
        raise _Refused(
            "a stdio server needs command"
            if transport == "stdio"
            else "no command to run and no url to connect to"
        )
    _, url = _remote(entry, ["url"])
    headers = entry.string_map("http_headers")
    for header, var in entry.string_map("env_http_headers").items():
        headers[header] = f"${{env:{_codex_env_name('env_http_headers', var)}}}"
    bearer = raw.get("bearer_token_env_var")
    if bearer is not None:
        var = _codex_env_name("bearer_token_env_var", bearer)
        headers["Authorization"] = f"Bearer ${{env:{var}}}"
    elif raw.get("bearer_token") is not None:
        headers["Authorization"] = "Bearer " + (entry.text("bearer_token") or "")
    return ClientServer(
        name=name,
        transport=transport or "http",
        url=url,
        headers=tuple(headers.items()),
        notes=tuple(entry.notes),
        **common,
    )


_Reader = Callable[[str, _Entry, Section], ClientServer]
_READERS: dict[str, tuple[_Reader, frozenset[str]]] = {
    "mcpServers": (_mcp_servers_entry, _MCP_SERVERS_KEYS),
    "vscode": (_vscode_entry, _VSCODE_KEYS),
    "codex": (_codex_entry, _CODEX_KEYS),
}
"""Shape of a file -> how to read one of its entries, and the keys it knows."""


def _entries(
    tables: Mapping[str, object], shape: str, section: Section
) -> tuple[ClientServer | Unusable, ...]:
    read, known = _READERS[shape]
    out: list[ClientServer | Unusable] = []
    for name, raw in tables.items():
        if not isinstance(raw, dict):
            reason = f"expected an object of settings, got {_kind(raw)}"
            out.append(Unusable(name, reason))
            continue
        try:
            out.append(read(name, _Entry(raw, known), section))
        except _Refused as exc:
            out.append(Unusable(name, str(exc)))
    return tuple(out)
