"""The CLI's commands for a running daemon (`status`, `hud`, `events`,
`reload`, `reconnect`, `token`), `check`, which validates a startup.lua
without one, and `log`, which reads the call log without one.

Light: the control client and the standard library (rich only to print the
status table, textual only for `hud`, Lua only for `check`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from ..control.client import ControlClient
from ..control.paths import find_socket
from ..core.errors import CallError, ConfigError, ControlError
from ..core.text import first_line, size_text
from .arguments import Parser
from .exits import fail

TYPE_CHECKING = False  # as `typing` says; importing it costs a CLI command ~4 ms
if TYPE_CHECKING:
    from typing import Any

    from ..core.events import Event
    from ..core.info import DaemonInfo
    from ..core.replies import ReloadSummary
    from ..core.spec import ConnectionSpec

__all__ = ["add_parsers"]


# ---------------------------------------------------------------------- status


def _cmd_status(args: argparse.Namespace) -> int:
    client = ControlClient(find_socket(args.socket))
    if args.json:
        rows = client.status_rows()
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    conns = client.status()
    now = time.time()
    try:
        info: DaemonInfo | None = client.info()
    except ControlError:
        info = None  # the table still says everything about the connections
    if not conns:
        print("no connections declared")
        return 0
    from ..hud.render import print_status  # rich: only for the table

    print_status(conns, now, info=info)
    return 0


# ------------------------------------------------------------------------- hud


def _cmd_hud(args: argparse.Namespace) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return fail("hud needs a terminal; use `status` or `events` in scripts")
    from ..hud.run import run_attached  # textual: only for the HUD

    return run_attached(ControlClient(find_socket(args.socket)))


# ---------------------------------------------------------------------- events


def _format_event(event: Event) -> str:
    """`HH:MM:SS.mmm` local time, then `describe(event)`."""
    from ..core.describe import describe  # `events` only: see ControlClient.events

    stamp = event.time
    if stamp:
        clock = time.strftime("%H:%M:%S", time.localtime(stamp))
        clock += f".{int(stamp * 1000) % 1000:03d}"
    else:
        clock = "--:--:--.---"
    return f"{clock} {describe(event)}"


def _cmd_events(args: argparse.Namespace) -> int:
    client = ControlClient(find_socket(args.socket))
    lines = (
        (json.dumps(e, ensure_ascii=False) for e in client.event_dicts(args.since))
        if args.json
        else (_format_event(e) for e in client.events(args.since))
    )
    try:
        for line in lines:
            print(line, flush=True)
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:
        # The reader (`| head`) went away: exit quietly, and keep Python from
        # complaining when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    # The daemon closed the stream: it stopped (or is restarting). Said, and
    # not 0, so that a pipeline following it can tell the end from a quiet hour.
    return fail("the daemon ended the event stream (it stopped)", code=1)


# ---------------------------------------------------------------------- reload


def _cmd_reconnect(args: argparse.Namespace) -> int:
    try:
        result = ControlClient(find_socket(args.socket)).reconnect(args.server)
    except CallError as exc:  # no such connection
        return fail(first_line(exc))
    if result.retrying:
        print(f"{args.server}: trying now (its backoff wait was cut short)")
    elif result.state == "connected":
        print(f"{args.server}: connected; nothing to do")
    elif result.state:
        print(f"{args.server}: {result.state}, a try already in flight; nothing to do")
    else:  # an older daemon's answer
        print(
            f"{args.server}: not waiting to retry (connected, or a try is already "
            "in flight); nothing to do"
        )
    return 0


def _cmd_reload(args: argparse.Namespace) -> int:
    try:
        result = ControlClient(find_socket(args.socket)).reload()
    except ConfigError as exc:
        print(first_line(exc), file=sys.stderr)
        return 1
    earlier = result.already_applied
    if earlier is not None:
        when = time.strftime("%H:%M:%S", time.localtime(earlier.time))
        print(
            f"{result.file or 'startup.lua'} is unchanged: already applied at "
            f"{when} by the {earlier.trigger}; "
            f"{result.connections} connection(s), nothing to do"
        )
        return 0
    print(_reload_sentence(result))
    return 0


def _reload_sentence(result: ReloadSummary) -> str:
    """The `config_loaded` sentence for a reload reply (its fields are the event's)."""
    from ..core.describe import describe

    return describe(result.as_event())


# ----------------------------------------------------------------------- check


def _cmd_check(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        return fail(f"cannot read {path}: {exc.strerror or exc}")
    from ..lua import load_file

    try:
        result = load_file(
            path, on_print=lambda line: print(f"{path}: print: {line}", file=sys.stderr)
        )
    except ConfigError as exc:
        print(first_line(exc), file=sys.stderr)
        return 1
    from ..core.exposure import prefix_clashes
    from ..core.sandbox import starved

    for clash in prefix_clashes({spec.name: spec.prefix for spec in result.specs}):
        print(f"{path}: warning: {clash}", file=sys.stderr)
    for spec in result.specs:
        where = _declared_at(path, result.where.get(spec.name, ""))
        missing = _missing_command(spec)
        if missing is not None:
            print(f"{where}: warning: {spec.name}: {missing}", file=sys.stderr)
        hungry = starved(spec.command or "", spec.args, spec.sandbox)
        if spec.transport == "stdio" and hungry is not None:
            print(f"{where}: warning: {spec.name}: {hungry}", file=sys.stderr)
    names = [spec.name for spec in result.specs]
    for rule in result.rules:
        unmatched = _unmatched_servers(rule.servers, names)
        if unmatched:
            print(
                f"{path}: warning: {rule.where}: mcp_policy({rule.verdict!r}) names "
                f"{unmatched}, which the script does not declare: it matches no "
                "call (a typo?)",
                file=sys.stderr,
            )
    shown = ", ".join(names[:20]) + (
        f", … ({len(names) - 20} more)" if len(names) > 20 else ""
    )
    noun = "connection" if len(names) == 1 else "connections"
    line = f"{path}: OK, {len(names)} {noun}" + (f" ({shown})" if names else "")
    if result.profiles:
        views = ", ".join(
            p.name + (" (search)" if p.discovery == "search" else "")
            for p in result.profiles
        )
        line += f"; profiles: {views}"
    print(line)
    return 0


def _declared_at(path: Path, where: str) -> str:
    """`PATH:LINE` of a connection's `mcp_add` (`where`: as the script run
    names it, `startup.lua:3`); another file's as it is; else `PATH`."""
    source, _, line = where.rpartition(":")
    if not line.isdigit():
        return str(path)
    return f"{path}:{line}" if source in (path.name, str(path)) else where


def _unmatched_servers(globs: tuple[str, ...], names: list[str]) -> str:
    """The server patterns of a rule that match no declared connection, said
    as a list ('' if every one matches)."""
    from fnmatch import fnmatchcase

    lost = [g for g in globs if not any(fnmatchcase(n, g) for n in names)]
    return ", ".join(repr(g) for g in lost)


def _missing_command(spec: ConnectionSpec) -> str | None:
    """Why a stdio server's command would not start here, if it would not:
    its `cwd` is no directory, or the command is not on the `PATH` it gets
    (the daemon's, or its own `env`), or not an executable file. A command
    still holding `${env:...}` is not judged."""
    command = spec.command
    if spec.transport != "stdio" or not command or "${" in command:
        return None
    if spec.cwd is not None and "${" not in spec.cwd and not Path(spec.cwd).is_dir():
        return f"its cwd {spec.cwd!r} is not a directory here; fix it or create it"
    search = dict(spec.env).get("PATH", os.environ.get("PATH", os.defpath))
    if os.sep in command:
        where = Path(command) if spec.cwd is None else Path(spec.cwd) / command
        if os.access(where, os.X_OK) and where.is_file():
            return None
        return f"command {command!r} is not an executable file; fix the path"
    import shutil  # `check` only: its compression imports cost every command

    if shutil.which(command, path=search) is not None:
        return None
    return (
        f"command {command!r} is not on PATH ({search}); install it, or give "
        "its full path (a client that started it may have had another PATH)"
    )


# ------------------------------------------------------------------------- log

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _since(text: str) -> float | str:
    """`--since 90s|15m|1h|2d`: the wall time that far back, or why not."""
    number, unit = text[:-1], text[-1:]
    if unit not in _UNITS or not number.replace(".", "", 1).isdigit():
        return f"--since {text!r}: use a number and s, m, h or d, e.g. 1h"
    return time.time() - float(number) * _UNITS[unit]


def _exposed_tool(client: ControlClient, name: str) -> tuple[str, str] | None:
    """The (server, tool) behind a tool's exposed name (`demo__pid`, as
    clients and `mcp-manager tools` show it); None: no such name, or no daemon."""
    try:
        rows = client.catalog("tools")
    except ControlError:
        return None
    for row in rows:
        if row.exposed == name:
            return row.server, row.name
    return None


def _cmd_log(args: argparse.Namespace) -> int:
    from ..engine.calllog import read

    since = _since(args.since) if args.since else None
    if isinstance(since, str):
        return fail(since)
    if args.tool is not None and args.server is None and "__" in args.tool:
        # `--tool demo__pid`: the exposed name, as a client shows it
        client = ControlClient(find_socket(args.socket))
        found = _exposed_tool(client, args.tool)
        if found is not None:
            args.server, args.tool = found
    policy = getattr(args, "policy", False)
    rows = read(
        _running_log(args.socket),
        server=args.server,
        tool=args.tool,
        failed=args.failed,
        since=since,
        limit=args.limit,
        policy=policy,
    )
    if args.json:
        for row in rows:
            print(json.dumps(row, ensure_ascii=False))
        return 0
    if not rows:
        if policy:
            print("no call was denied or held for approval (that the log keeps)")
        else:
            print("no calls logged (yet) that match")
        return 0
    table = [_LOG_COLUMNS, *(_log_cells(row) for row in rows)]
    widths = [max(len(cells[i]) for cells in table) for i in range(len(_LOG_COLUMNS))]
    for cells in table:
        print(
            "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
        )
    return 0


_LOG_COLUMNS = (
    "TIME",
    "CALL",
    "OUTCOME",
    "TOOK",
    "SIZE",
    "CLIENT",
    "ARGUMENTS",
    "ERROR",
)
"""`log`'s and `why`'s header row (the error last: it can be long)."""


def _log_cells(row: dict[str, Any]) -> tuple[str, ...]:
    """One row of `log`: what `_LOG_COLUMNS` names, as text."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row["time"]))
    what = row["outcome"] + (f" [{row['verdict']}]" if row.get("verdict") else "")
    via = row["client"] + (f" /{row['profile']}" if row["profile"] else "")
    return (
        when,
        f"{row['server']}.{row['tool']}",
        what,
        f"{row['duration'] * 1000:.0f} ms",
        size_text(row["bytes"]),
        via,
        row["shape"],
        row["error"] or "",
    )


def _running_log(socket: str | None) -> Path | None:
    """The state directory of the running daemon's call log, once it wrote
    the calls of its last second (it writes once a second); None, the
    default one, with no daemon to ask. Says so when the daemon dropped rows."""
    try:
        reply = ControlClient(find_socket(socket)).call_log()
    except ControlError:
        return None  # no daemon (the log is read without one), or an older one
    if reply.dropped:
        print(
            f"note: the daemon could not log {reply.dropped} calls (its queue "
            "was full or the disk failed: see its log)",
            file=sys.stderr,
        )
    return Path(reply.path).parent if reply.path else None


def _cmd_pending(args: argparse.Namespace) -> int:
    """`pending`: the calls waiting for your approval."""
    client = ControlClient(find_socket(args.socket))
    asked = client.pending()
    if args.json:
        from ..core.events import event_to_dict

        print(json.dumps([event_to_dict(a) for a in asked], indent=2))
        return 0
    if not asked:
        print("no call waits for approval")
        return 0
    now = time.time()
    for a in asked:
        left = max(0.0, a.deadline - now)
        who = f" by {a.client}" if a.client else ""
        print(f"{a.approval}  {a.name}.{a.tool}{who}  ({a.rule}; {left:.0f} s left)")
        print(f"    arguments: {a.arguments}")
    print("answer: mcp-manager allow ID [--session | --always], mcp-manager deny ID")
    return 0


def _cmd_decide(args: argparse.Namespace) -> int:
    """`allow ID [--session|--always]`, `deny ID`: answer a waiting call."""
    client = ControlClient(find_socket(args.socket))
    verdict = "allow" if args.command == "allow" else "deny"
    scope = "once"
    if verdict == "allow" and args.always:
        scope = "always"
    elif verdict == "allow" and args.session:
        scope = "session"
    try:
        asked = client.decide(args.id, verdict, scope)
    except ControlError as exc:
        return fail(first_line(exc))
    done = "allowed" if verdict == "allow" else "denied"
    reach = {"once": "", "session": " (for this client until the daemon stops)"}
    extra = reach.get(scope, " (always: kept in approvals.json)")
    print(f"{asked.name}.{asked.tool}: {done}{extra}")
    return 0


def _cmd_grants(args: argparse.Namespace) -> int:
    """`grants`: the standing approvals."""
    rows = ControlClient(find_socket(args.socket)).grants()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("nothing is allowed always or for a session")
        return 0
    for row in rows:
        who = (
            f" (client {row['client']}, until the daemon stops)"
            if row.get("client")
            else ""
        )
        print(f"{row['server']}.{row['tool']}  {row['scope']}{who}")
    print("take one back: mcp-manager revoke SERVER [TOOL]")
    return 0


def _cmd_revoke(args: argparse.Namespace) -> int:
    """`revoke SERVER [TOOL]` (or the tool's exposed name): its calls are
    asked again."""
    client = ControlClient(find_socket(args.socket))
    if args.tool is None and "__" in args.server:
        found = _exposed_tool(client, args.server)
        if found is not None:
            args.server, args.tool = found
    gone = client.revoke(args.server, args.tool)
    what = f"{args.server}.{args.tool}" if args.tool else f"{args.server}'s tools"
    if not gone:
        return fail(f"nothing was allowed for {what} (see mcp-manager grants)")
    for row in gone:
        print(f"{row['server']}.{row['tool']}: {row['scope']} approval taken back")
    return 0


# ----------------------------------------------------------------------- token


def endpoint_token(socket: Path, rotate: bool = False) -> tuple[str | None, str]:
    """The HTTP endpoint's bearer token and where it is, for `token` and
    `client-config --http`; with `rotate`, a new one first.

    The running daemon says where its token is (a file it reads, the
    environment, or none) and the token is read from there: it never crosses
    the control socket. With no daemon running, the daemon's own file (made
    if there is none yet) is the one a `run --listen` will use.

    Raises:
        ControlError: The daemon runs but cannot say, or cannot rotate.
    """
    from ..gateway.options import (
        TOKEN_ENV,
        EndpointError,
        own_token,
        own_token_path,
        write_token,
    )

    client = ControlClient(socket)
    try:
        client.ping()
    except ControlError:  # no daemon: its own file, for the next `run --listen`
        path = own_token_path()
        try:
            token = write_token(path) if rotate else own_token(path)
        except EndpointError as exc:
            raise ControlError(str(exc)) from None
        return token, str(path)
    reply = client.token(rotate)
    if reply.path is not None:
        try:
            token = Path(reply.path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ControlError(
                f"cannot read the endpoint's token file {reply.path}: "
                f"{exc.strerror or exc}"
            ) from None
        return token, reply.path
    if reply.source == f"${TOKEN_ENV}":
        return os.environ.get(TOKEN_ENV, "").strip() or None, reply.source
    return None, reply.source


def _cmd_token(args: argparse.Namespace) -> int:
    socket = find_socket(args.socket)
    token, where = endpoint_token(socket, args.rotate)
    if token is None:
        if where.startswith("$"):
            return fail(
                f"the daemon's token comes from {where} in its environment, "
                "which this shell does not have; it is not stored anywhere"
            )
        return fail(
            f"the daemon's HTTP endpoint takes no token ({where}): any process "
            "on this machine can call its tools; restart it without --no-token"
        )
    print(token)
    if args.rotate:
        print(
            f"a new token is in {where}; clients with the old one now get 401: "
            "give them this one (`mcp-manager client-config CLIENT --http`)",
            file=sys.stderr,
        )
    return 0


def add_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    """Add `status`, `hud`, `events`, `reload`, `reconnect`, `token`, `log`
    and `check`."""
    status = sub.add_parser("status", parents=[common], help="show every connection")
    status.add_argument("--json", action="store_true", help="a JSON array")
    status.set_defaults(handler=_cmd_status)

    hud = sub.add_parser(
        "hud", parents=[common], help="attach a live HUD to the running daemon"
    )
    hud.set_defaults(handler=_cmd_hud)

    events = sub.add_parser("events", parents=[common], help="follow the event stream")
    events.add_argument("--json", action="store_true", help="one JSON object a line")
    events.add_argument(
        "--since",
        type=int,
        metavar="SEQ",
        help="first the events the daemon kept (its last 10 000) after this seq; "
        "0 for all of them",
    )
    events.set_defaults(handler=_cmd_events)

    reload = sub.add_parser("reload", parents=[common], help="re-run startup.lua")
    reload.set_defaults(handler=_cmd_reload)

    reconnect = sub.add_parser(
        "reconnect",
        parents=[common],
        help="try a reconnecting server now instead of after its backoff wait",
    )
    reconnect.add_argument("server", metavar="SERVER")
    reconnect.set_defaults(handler=_cmd_reconnect)

    rows = Parser(add_help=False)  # what log and why filter on
    rows.add_argument("--server", metavar="S", help="only this connection's")
    rows.add_argument(
        "--tool",
        metavar="T",
        help="only this tool's: its own name, or its exposed one (demo__pid)",
    )
    rows.add_argument(
        "--since", metavar="AGE", help="only the last AGE: 90s, 15m, 1h, 2d"
    )
    rows.add_argument(
        "--limit", type=int, default=100, metavar="N", help="the last N (default 100)"
    )
    rows.add_argument("--json", action="store_true", help="one JSON object a line")

    log = sub.add_parser(
        "log",
        parents=[common, rows],
        help="the calls made through the daemon (kept 30 days; argument "
        "names and types, never values)",
    )
    log.add_argument(
        "--failed", action="store_true", help="only failures and tool errors"
    )
    log.set_defaults(handler=_cmd_log)

    why = sub.add_parser(
        "why",
        parents=[common, rows],
        help="the calls the call policy (mcp_policy) denied or held for "
        "approval, and by which rule or whom",
    )
    why.set_defaults(handler=_cmd_log, policy=True, failed=False)

    pending = sub.add_parser(
        "pending",
        parents=[common],
        help="the calls waiting for your approval (mcp_policy ask)",
    )
    pending.add_argument("--json", action="store_true", help="as JSON")
    pending.set_defaults(handler=_cmd_pending)

    allow = sub.add_parser(
        "allow",
        parents=[common],
        help="allow a call waiting for approval (see pending)",
    )
    allow.add_argument("id", metavar="ID")
    reach = allow.add_mutually_exclusive_group()
    reach.add_argument(
        "--session",
        action="store_true",
        help="also that client's later calls of the tool, until the daemon stops",
    )
    reach.add_argument(
        "--always",
        action="store_true",
        help="every later call of the tool, kept across restarts",
    )
    allow.set_defaults(handler=_cmd_decide)

    deny = sub.add_parser(
        "deny",
        parents=[common],
        help="deny a call waiting for approval (see pending)",
    )
    deny.add_argument("id", metavar="ID")
    deny.set_defaults(handler=_cmd_decide)

    grants = sub.add_parser(
        "grants",
        parents=[common],
        help="the tools allowed always or for a client's session (see allow)",
    )
    grants.add_argument("--json", action="store_true", help="as JSON")
    grants.set_defaults(handler=_cmd_grants)

    revoke = sub.add_parser(
        "revoke",
        parents=[common],
        help="take back what allow --always or --session allowed: the tool's "
        "calls are asked again",
    )
    revoke.add_argument(
        "server", metavar="SERVER", help="a connection, or a tool's exposed name"
    )
    revoke.add_argument("tool", metavar="TOOL", nargs="?", help="default: every tool")
    revoke.set_defaults(handler=_cmd_revoke)

    token = sub.add_parser(
        "token",
        parents=[common],
        help="print the HTTP endpoint's bearer token (--rotate: replace it)",
        description="Print the bearer token every request to the daemon's HTTP "
        "endpoint (run --listen) must carry, from where the running daemon reads "
        "it; with no daemon running, the one the next run --listen will use.",
    )
    token.add_argument(
        "--rotate",
        action="store_true",
        help="replace it with a new one; clients with the old one get 401",
    )
    token.set_defaults(handler=_cmd_token)

    check = sub.add_parser(
        "check", parents=[common], help="validate a startup.lua without running it"
    )
    check.add_argument("file", metavar="FILE")
    check.set_defaults(handler=_cmd_check)
