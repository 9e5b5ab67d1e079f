"""`mcp-manager import` and `client-config`: move a client's servers to the daemon.

`import [CLIENT|FILE]` reads the MCP servers one client declares (`clients`),
or one file, or (no argument) every client's files on this machine and this
directory's project files, and prints one `mcp_add(...)` statement per server
(`translate`), each file's servers under a `-- from FILE` comment. Secrets
become `${env:NAME}` references: stderr lists the variables to export, never
their values, and says which files were read and what was renamed, skipped or
not carried over.

`import --write` appends those statements to startup.lua, all or nothing: the
would-be file is written next to it and must pass `mcp-manager check` (run as
a subprocess: `check` loads Lua, which a client command must not) before the
old file is copied to `startup.lua.bak` and the new one moved into place.

A project file (`.mcp.json`, `.cursor/mcp.json`, `.vscode/mcp.json`,
`.gemini/settings.json` in the current directory: it came with the folder, a
cloned repository's say, not from the user) makes code run once written: its
servers are imported with `pin = "strict"` and (stdio) `sandbox = "strict"`
unless they say otherwise, and `--write` shows each one's exact command and
asks before writing (`--yes` answers for a run with no terminal).

`client-config CLIENT` prints the entry that makes a client spawn `mcp-manager
attach` instead of its own servers, and says where that client reads it.

Exit codes: 0 all imported; 1 some server could not be expressed (the others
were); 2 a file could not be read or parsed, there was nothing to read, or
`--write` wrote nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from ..control.paths import find_socket
from ..core.errors import ConfigError
from ..core.spec import manager_endpoint
from ..core.text import first_line
from .clients import (
    TITLES,
    ClientServer,
    FileServers,
    Section,
    UnreadableFile,
    Unusable,
    candidate_files,
    read_servers,
    workspace_of,
)
from .config_commands import CLIENTS
from .exits import PROG, fail
from .translate import (
    Declaration,
    Translator,
    Untranslatable,
    connection_name,
    lua_statement,
    what_it_runs,
)

__all__ = ["run_client_config", "run_import"]

CHECK_TIMEOUT = 60.0
"""Seconds `mcp-manager check` may take on the would-be startup.lua."""


# ---------------------------------------------------------------------- import


def _files_to_read(source: str | None) -> list[tuple[str | None, Path]] | str:
    """(client or None to tell by shape, path) pairs; or why there are none."""
    if source is not None and source not in CLIENTS:
        path = Path(source)
        if not path.exists():
            return f"{source} is neither a client ({', '.join(CLIENTS)}) nor a file"
        return [(None, path)]
    clients = CLIENTS if source is None else (source,)
    found: list[tuple[str | None, Path]] = []
    seen: set[Path] = set()
    looked: list[str] = []
    for client in clients:
        for path in candidate_files(client):
            looked.append(str(path))
            if path.is_file() and path.resolve() not in seen:
                seen.add(path.resolve())
                found.append((client, path))
    if not found:
        whose = "any client's" if source is None else f"{TITLES[source]}'s"
        return f"found no {whose} configuration; looked for {', '.join(looked)}"
    return found


def _declared_names(text: str) -> set[str]:
    """Connection names `text` passes to `mcp_add` as a literal string."""
    return {m[1] for m in re.findall(r"""mcp_add\s*\(\s*(["'])(.*?)\1""", text)}


def _comment(text: str) -> str:
    """`text` fit for a one-line Lua comment."""
    return "".join(c if c.isprintable() else "?" for c in text)


def _lua_text(groups: list[tuple[Section, list[Declaration]]]) -> str:
    blocks = [
        "\n".join(
            [f"-- from {_comment(section.label)}"] + [lua_statement(d) for d in decls]
        )
        for section, decls in groups
    ]
    return "\n\n".join(blocks) + "\n" if blocks else ""


def _is_manager(server: ClientServer) -> bool:
    """Whether a client's entry is mcp-manager's own endpoint (`attach`,
    `stdio`; `core.spec.manager_endpoint`)."""
    return server.transport == "stdio" and (
        manager_endpoint(server.command, server.args) is not None
    )


def run_import(args: argparse.Namespace) -> int:
    """`mcp-manager import` (parsed by `config_commands`)."""
    files = _files_to_read(args.source)
    if isinstance(files, str):
        return fail(files)
    config = Path(args.config)
    old_text = ""
    if args.write:
        try:
            old_text = config.read_bytes().decode("utf-8") if config.exists() else ""
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            return fail(f"cannot read {config}: {reason or exc}")
    already = _declared_names(old_text)

    read: list[FileServers] = []
    unreadable = 0
    for client, path in files:
        try:
            servers = read_servers(path, client)
        except UnreadableFile as exc:
            fail(str(exc))
            unreadable += 1
            continue
        count = servers.count
        noun = "server" if count == 1 else "servers"
        _say(f"read {path} ({TITLES[servers.client]}): {count} {noun}")
        for note in servers.notes:
            _say(note)
        read.append(servers)

    keychain: Callable[[str], str | None] | None = None
    if args.keychain:
        from ..engine.vault import held

        keychain = held
    translator = Translator(Path(os.path.expanduser("~")), keychain)
    for servers in read:
        for section, entries in servers.sections:
            for entry in entries:
                if not isinstance(entry, Unusable):
                    translator.reserve(entry, section)
    messages: list[str] = []
    taken: dict[str, str] = {}  # connection name -> where it was imported from
    originals: dict[str, str] = {}  # connection name -> the client's name for it
    groups: list[tuple[Section, list[Declaration]]] = []
    skipped = 0
    project: list[tuple[Section, Declaration]] = []
    for servers in read:
        for section, entries in servers.sections:
            declarations: list[Declaration] = []
            for server in entries:
                where = f"{section.label}: {server.name}"
                if isinstance(server, Unusable):
                    messages.append(f"{where}: not imported: {server.reason}")
                    skipped += 1
                    continue
                if _is_manager(server):
                    # What `client-config` wrote: the daemon itself. Declared,
                    # the daemon would attach to itself, without end.
                    messages.append(
                        f"{where}: skipped: it is mcp-manager itself "
                        "(`mcp-manager client-config`), not a server to run"
                    )
                    continue
                name = connection_name(server.name)
                if name in taken and originals[name] != server.name:
                    # Another server whose name reads the same once mended
                    # ("my server", "my-server"; every non-Latin name): its
                    # own name, numbered, not dropped as the same server.
                    base, n = name[:60], 2
                    while f"{base}-{n}" in taken or f"{base}-{n}" in already:
                        n += 1
                    messages.append(
                        f"{where}: renamed to '{base}-{n}' ({name!r} is "
                        f"{originals[name]!r}'s, imported from {taken[name]})"
                    )
                    name = f"{base}-{n}"
                    renamed = True
                else:
                    renamed = False
                if name in taken:
                    messages.append(
                        f"{where}: skipped: {name!r} was already imported from "
                        f"{taken[name]} (the first one wins)"
                    )
                    continue
                if name in already:
                    messages.append(
                        f"{where}: skipped: {config} already declares {name!r}"
                    )
                    continue
                try:
                    declaration = translator.declaration(name, server, section)
                except ConfigError as exc:  # --keychain: no keychain to store in
                    return fail(f"--keychain: {exc}; nothing was imported")
                except Untranslatable as exc:
                    messages.append(f"{where}: not imported: {exc}")
                    skipped += 1
                    continue
                if name != server.name and not renamed:
                    messages.append(
                        f"{where}: renamed to {name!r} (a connection name is 1-64 "
                        "letters, digits, '_', '.' or '-', without '__')"
                    )
                if _is_project_file(section.path):
                    declaration = _guarded(declaration)
                    messages.append(
                        f"{where}: from a project file: imported with pin = "
                        '"strict"'
                        + (
                            ' and sandbox = "strict"'
                            if "command" in declaration.fields
                            else ""
                        )
                        + " (loosen them in startup.lua once you trust it)"
                    )
                    project.append((section, declaration))
                messages.extend(f"{where}: {note}" for note in declaration.notes)
                taken[name] = section.label
                originals[name] = server.name
                declarations.append(declaration)
            if declarations:
                groups.append((section, declarations))
    for message in messages:
        _say(translator.secrets.redact(message))

    code = 2 if unreadable else 1 if skipped else 0
    text = _lua_text(groups)
    if not args.write:
        _say_exports(translator, None)
        if not text and not unreadable:
            _say("nothing to import")
        sys.stdout.write(text)
        return code
    if unreadable:
        return fail(f"nothing written to {config}: fix the file(s) above first")
    if not text:
        _say(f"nothing to add: {config} is unchanged")
        return code
    if project and not _consented(project, args.yes):
        return fail(
            f"nothing written to {config}: {len(project)} server(s) come from a "
            "project file and would run the commands above; review them, then "
            "run again with --yes (or answer y at a terminal)"
        )
    backends = _stored(translator)
    if backends is None:
        return 2
    _say_exports(translator, backends)
    names = [d.name for _, decls in groups for d in decls]
    return _write(config, old_text, text, names) or code


def _stored(translator: Translator) -> set[str] | None:
    """The secrets `--keychain` found, stored; the backends that took them
    (None: the keychain failed, said, nothing written)."""
    if not translator.to_store:
        return set()
    from ..engine.vault import store

    backends: set[str] = set()
    for reference, value in translator.to_store:
        try:
            backends.add(store(reference, value))
        except ConfigError as exc:
            fail(f"--keychain: {exc}; nothing was imported")
            return None
    return backends


def _is_project_file(path: Path) -> bool:
    """Whether `path` is a project's file (`.mcp.json`, `.vscode/mcp.json`,
    ...), wherever it is: what a cloned repository brings, not the user's own
    config (as `~/.cursor/mcp.json` is)."""
    return workspace_of(path) is not None


def _guarded(declaration: Declaration) -> Declaration:
    """A project file's server as imported: tool pins held to what it first
    lists, and (stdio) confined, unless it says otherwise."""
    fields = dict(declaration.fields)
    fields.setdefault("pin", "strict")
    if "command" in fields:
        fields.setdefault("sandbox", "strict")
    return dataclasses.replace(declaration, fields=fields)


def _consented(project: list[tuple[Section, Declaration]], yes: bool) -> bool:
    """Each project file's server shown with what it runs; True when the user
    agrees (`--yes`, or y at a terminal)."""
    _say("these servers come from a project file and would run:")
    for section, declaration in project:
        _say(f"  {declaration.name} ({section.path}): {what_it_runs(declaration)}")
    return _agreed(yes)


def _agreed(yes: bool) -> bool:
    """`--yes`, or y at a terminal: the user agrees to write what was shown."""
    if yes:
        return True
    if not sys.stdin.isatty():
        return False
    answer = input("write them to startup.lua? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def append_statements(config: Path, addition: str, names: list[str], yes: bool) -> int:
    """`addition` appended to `config` as `import --write` does (all or
    nothing, it must pass `check`), once the user agreed (`_agreed`) to what
    was shown; an exit code."""
    if not _agreed(yes):
        return fail(
            f"nothing written to {config}: review the command above, then run "
            "again with --yes (or answer y at a terminal)"
        )
    try:
        old_text = config.read_bytes().decode("utf-8") if config.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        return fail(f"cannot read {config}: {reason or exc}")
    declared = _declared_names(old_text) & set(names)
    if declared:
        return fail(
            f"{config} already declares {', '.join(sorted(declared))}; use --name"
        )
    return _write(config, old_text, addition, names)


def _say(text: str) -> None:
    print(text, file=sys.stderr)


def _say_exports(translator: Translator, backends: set[str] | None) -> None:
    """What the user must export, or what went to the keychain (`backends`:
    where; None for a preview, which stores nothing)."""
    stored = [e for e in translator.exports if e.stored]
    for reference in translator.kept:
        _say(
            f"{reference} already holds another secret in the keychain: kept "
            "(a server may read it); the one found here takes a name of its own"
        )
    if stored and backends is None:
        _say(
            f"{len(stored)} secret(s) would go to the OS keychain, read as "
            "${keyring:mcp-manager/NAME}: "
            + ", ".join(f"{e.name} ({e.where})" for e in stored)
            + "; nothing stored: this is a preview (--write stores them and "
            "appends the lines)"
        )
    elif stored:
        from ..engine.vault import in_clear

        kept = f" ({', '.join(sorted(backends))})" if backends else ""
        _say(
            f"{len(stored)} secret(s) in the OS keychain{kept}, read as "
            "${keyring:mcp-manager/NAME}: "
            + ", ".join(f"{e.name} ({e.where})" for e in stored)
        )
        for backend in sorted(backends or ()):
            warning = in_clear(backend)
            if warning is not None:
                _say(warning)
    secrets = [e for e in translator.exports if e.secret and not e.stored]
    if secrets:
        _say(
            "secrets were not copied: export these variables (with the values "
            "from the files above) before starting the daemon:"
        )
        width = max(len(e.name) for e in secrets)
        for export in secrets:
            _say(f"  {export.name:<{width}}  {export.where}")
    read = [e.name for e in translator.exports if not e.secret]
    if read:
        _say(f"the daemon's environment also needs: {', '.join(read)}")


# ----------------------------------------------------------------------- write


def _backup_path(config: Path) -> Path:
    backup = config.with_name(config.name + ".bak")
    n = 1
    while backup.exists():
        backup = config.with_name(f"{config.name}.bak.{n}")
        n += 1
    return backup


def _checked(candidate: Path, config: Path) -> bool:
    """Whether `mcp-manager check` accepts `candidate` (its messages shown as
    being about `config`)."""
    command = [sys.executable, "-m", "manager", "check", str(candidate)]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=CHECK_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        fail(f"`{PROG} check` did not answer within {CHECK_TIMEOUT:g} s")
        return False
    except OSError as exc:
        fail(f"cannot run `{PROG} check`: {exc.strerror or exc}")
        return False
    said = done.stderr.replace(str(candidate), str(config))
    for line in said.replace(candidate.name, config.name).splitlines():
        _say(line)
    return done.returncode == 0


def _write(config: Path, old_text: str, addition: str, names: list[str]) -> int:
    """Append `addition` to `config` if the result passes `check`; 0 if written."""
    text = old_text
    if text and not text.endswith("\n"):
        text += "\n"
    text += ("\n" if text else "") + addition
    tag = f"{os.getpid()}-{os.urandom(4).hex()}"
    candidate = config.with_name(f".{config.name}.import-{tag}.tmp")
    created = False
    backup: Path | None = None
    try:
        with open(candidate, "x", encoding="utf-8", newline="") as out:
            created = True
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        if config.exists():
            shutil.copymode(config, candidate)
        if not _checked(candidate, config):
            return fail(
                f"nothing written: {config} would not load with the imported "
                "lines (see above); it is unchanged"
            )
        if config.exists():
            backup = _backup_path(config)
            shutil.copy2(config, backup)
        os.replace(candidate, config)
    except OSError as exc:
        if backup is not None:
            backup.unlink(missing_ok=True)
        return fail(f"nothing written to {config}: {exc.strerror or exc}")
    finally:
        if created:
            candidate.unlink(missing_ok=True)  # gone already once moved in place
    noun = "connection" if len(names) == 1 else "connections"
    kept = f"; the previous file is {backup}" if backup else ""
    print(f"{config}: added {len(names)} {noun} ({', '.join(names)}){kept}")
    return 0


# --------------------------------------------------------------- client-config


def _executable() -> str:
    """The `mcp-manager` next to this Python (its venv), else on PATH."""
    here = Path(sys.executable).parent
    for name in (PROG, f"{PROG}.exe"):
        if (here / name).is_file():
            return str((here / name).absolute())
    found = shutil.which(PROG)
    return str(Path(found).absolute()) if found else PROG


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_TOML_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _toml_string(text: str) -> str:
    escaped = (
        _TOML_ESCAPES.get(c, c if c.isprintable() else f"\\u{ord(c):04x}") for c in text
    )
    return '"' + "".join(escaped) + '"'


def _client_entry(client: str, name: str, command: str, argv: list[str]) -> str:
    if client == "codex":
        key = name if _BARE_KEY.fullmatch(name) else _toml_string(name)
        args = ", ".join(_toml_string(a) for a in argv)
        return "\n".join(
            [
                f"[mcp_servers.{key}]",
                f"command = {_toml_string(command)}",
                f"args = [{args}]",
            ]
        )
    entry: dict[str, object] = {"command": command, "args": argv}
    if client in ("vscode", "claude-code"):
        entry = {"type": "stdio", **entry}
    top = "servers" if client == "vscode" else "mcpServers"
    return json.dumps({top: {name: entry}}, indent=2, ensure_ascii=False)


_HTTP_URL_KEY = {"windsurf": "serverUrl", "gemini": "httpUrl"}
"""The key a client reads a remote server's URL from, where it is not `url`."""


def _http_entry(client: str, name: str, url: str, token: str | None) -> str:
    """A client's entry for the daemon's HTTP endpoint, with the bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if client == "codex":
        key = name if _BARE_KEY.fullmatch(name) else _toml_string(name)
        lines = [f"[mcp_servers.{key}]", f"url = {_toml_string(url)}"]
        if headers:
            value = _toml_string(headers["Authorization"])
            lines.append(f"http_headers = {{ Authorization = {value} }}")
        return "\n".join(lines)
    entry: dict[str, object] = {_HTTP_URL_KEY.get(client, "url"): url}
    if client in ("vscode", "claude-code"):
        entry = {"type": "http", **entry}
    if headers:
        entry["headers"] = headers
    top = "servers" if client == "vscode" else "mcpServers"
    return json.dumps({top: {name: entry}}, indent=2, ensure_ascii=False)


def _http_config(args: argparse.Namespace, socket: Path) -> tuple[str, str, bool] | str:
    """The endpoint's URL (the profile's, with --profile), the client's entry
    for it and whether that holds a token; or why there is none."""
    from urllib.parse import urlsplit

    from ..control.client import ControlClient
    from ..core.errors import ControlError
    from .control import endpoint_token

    url = args.http
    if url:
        try:
            parts = urlsplit(url)
            good = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:
            good = False
        if not good:
            return (
                f"--http takes the daemon's endpoint URL, such as "
                f"http://127.0.0.1:8765/mcp; got {url!r}"
            )
    else:
        try:
            url = ControlClient(socket).info().endpoint
        except ControlError as exc:
            return f"{first_line(str(exc))}; or give the URL: --http URL"
        if not url:
            return (
                "the daemon serves no HTTP endpoint: run it with --listen "
                "127.0.0.1:PORT, or give the URL: --http URL"
            )
    if url.startswith("unix:"):
        return (
            f"the daemon's HTTP endpoint is a Unix socket ({url}), which clients "
            "do not take in their files; for a local program that speaks HTTP "
            f"over one: curl --unix-socket {url[5:]} http://localhost/mcp"
        )
    if args.profile and not _names_profile(url, args.profile):
        url = url.rstrip("/") + "/" + args.profile
    try:
        token, where = endpoint_token(socket)
    except ControlError as exc:
        return first_line(str(exc))
    if token is None and where.startswith("$"):
        return (
            f"the daemon's token comes from {where} in its environment, which "
            "this shell does not have: run this with it set, or the entry "
            "would have no token and get 401"
        )
    return url, _http_entry(args.client, args.name, url, token), token is not None


def _names_profile(url: str, profile: str) -> bool:
    """Whether `url` is already the endpoint's `profile` (`/mcp/coding`): its
    path has the endpoint's and the profile's segments."""
    from urllib.parse import urlsplit

    segments = [part for part in urlsplit(url).path.split("/") if part]
    return len(segments) >= 2 and segments[-1] == profile


def _unknown_profile(socket: Path, profile: str) -> str | None:
    """Why `profile` is not one the daemon at `socket` serves, if it is not;
    None when it is, or when no daemon answers (said on stderr)."""
    from ..control.client import ControlClient
    from ..core.errors import ControlError

    try:
        declared = ControlClient(socket).info().profiles
    except ControlError:
        _say(
            f"could not check that profile {profile!r} exists: no daemon answers "
            f"on {socket}; `mcp-manager check startup.lua` lists the profiles"
        )
        return None
    if profile in declared:
        return None
    known = ", ".join(sorted(declared)) or "none declared"
    return (
        f"no profile named {profile!r} (profiles: {known}); declare it with "
        "mcp_profile in startup.lua, or leave --profile out"
    )


def run_client_config(args: argparse.Namespace) -> int:
    """`mcp-manager client-config` (parsed by `config_commands`)."""
    if not args.name:
        return fail("--name must not be empty")
    if args.profile:
        problem = _unknown_profile(find_socket(args.socket), args.profile)
        if problem is not None:
            return fail(f"client-config: {problem}")
    socket = find_socket(args.socket)
    if args.http is not None:
        if args.client == "claude-desktop":
            return fail(
                "Claude Desktop starts local servers from its file and takes no "
                "URL there: leave --http out (it then runs `mcp-manager attach`)"
            )
        made = _http_config(args, socket)
        if isinstance(made, str):
            return fail(f"client-config: {made}")
        _, entry, has_token = made
        print(entry)
        if has_token:
            _say(
                "the entry holds the endpoint's bearer token: keep the file "
                "private; after `mcp-manager token --rotate`, run this again"
            )
        else:
            _say(
                "the daemon's HTTP endpoint takes no token (--no-token): any "
                "process on this machine can call its tools"
            )
    else:
        # The socket, named: a client passes only a few variables to what it
        # spawns, and `attach` must reach this daemon whatever they are.
        argv = ["attach", "--socket", str(socket)]
        argv += ["--profile", args.profile] if args.profile else []
        print(_client_entry(args.client, args.name, _executable(), argv))
    paths = [str(p) for p in candidate_files(args.client)]
    if args.client == "vscode":
        paths = [paths[0], paths[2]]  # settings.json holds it as "mcp": {"servers"}
    _say(
        f"{TITLES[args.client]} reads its servers from {' or '.join(paths)}: merge "
        "this in there, and remove the servers the daemon now runs for it"
    )
    return 0
