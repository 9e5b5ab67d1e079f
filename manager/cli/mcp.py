"""The MCP commands of the CLI: `call`, `read`, `prompt` make a request
through the daemon and print its JSON result; `tools`, `prompts` and
`resources` list what each connection has and the names the endpoint exposes;
`tools --changed` shows the definitions that differ from their pins and
`approve` accepts them (`engine.pins`).

Exit codes as everywhere in the CLI: 0 success; 1 the answer is a failure
(`call` returned `isError: true`); 2 the request could not be made.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..control.client import ControlClient
from ..control.paths import find_socket
from ..core.errors import CallError, ControlError
from ..core.text import first_line
from .arguments import positive_float
from .exits import fail

TYPE_CHECKING = False  # as `typing` says; importing it costs a CLI command ~4 ms
if TYPE_CHECKING:  # a type only: the replies load where a command reads one
    from ..core.replies import UpdateReply

__all__ = ["add_parsers"]


def _json_object(text: str, what: str) -> dict[str, object] | str:
    try:
        value = json.loads(text)
    except ValueError as exc:
        return f"{what} is not valid JSON: {exc}"
    if not isinstance(value, dict):
        kind = type(value).__name__
        return f"{what} must be a JSON object like '{{\"x\": 1}}', got {kind}"
    return value


_USAGE = {
    "tools": ("call", "TOOL", "tool"),
    "prompts": ("prompt", "NAME", "prompt"),
    "resources": ("read", "URI", "resource"),
}
"""What each listing's items are called by the command that uses them."""


def _own_names(
    args: argparse.Namespace, client: ControlClient, kind: str
) -> str | None:
    """Read `SERVER TARGET [JSON_ARGS]`, or `NAME [JSON_ARGS]` with NAME as
    `mcp-manager KIND` lists it (`web__echo`): leave `args.server` and
    `args.target` the server's own names and `args.json_args` the JSON (if
    the command takes one); or say why that cannot be done."""
    command, item, noun = _USAGE[kind]
    takes_json = hasattr(args, "json_args")
    json_first = takes_json and str(args.target or "").lstrip().startswith("{")
    usage = f"SERVER {item}" + (" [JSON_ARGS]" if takes_json else "")
    if args.target is not None and not json_first:
        if takes_json and args.json_args is None:
            args.json_args = "{}"
        return None
    if takes_json:
        if args.json_args is not None:
            return f"give {usage}, or one exposed name and JSON_ARGS"
        args.json_args = args.target or "{}"
    try:
        rows = client.catalog(kind)
    except CallError as exc:
        return first_line(exc)
    found = [
        row
        for row in rows
        if row.exposed == args.server and not row.hidden and not row.template
    ]
    declared = sorted({row.server for row in rows})
    if not found and args.server in declared:
        return (
            f"{args.server}: which {noun}? `mcp-manager {command} {args.server} "
            f"{usage.split(' ', 1)[1]}` (`mcp-manager {kind} {args.server}` lists them)"
        )
    if not found:
        return (
            f"no connection or exposed {noun} named {args.server!r}: give {usage} "
            f"(connections: {', '.join(declared) or 'none'}), or a name that "
            f"`mcp-manager {kind}` lists"
        )
    args.server, args.target = found[0].server, found[0].name
    return None


def _cmd_call(args: argparse.Namespace) -> int:
    client = ControlClient(find_socket(args.socket))
    refused = _own_names(args, client, "tools")
    if refused is not None:
        return fail(refused)
    tool_args = _json_object(args.json_args, "JSON_ARGS")
    if isinstance(tool_args, str):
        return fail(tool_args)
    answer: dict[str, object] | None = None
    if args.answer is not None:
        given = _json_object(args.answer, "--answer")
        if isinstance(given, str):
            return fail(given)
        answer = given
    try:
        result = client.call(
            args.server, args.target, tool_args, args.timeout, answer=answer
        )
    except CallError as exc:
        kind = type(exc).__name__
        return fail(f"call {args.server} {args.target} failed ({kind}): {exc}")
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 1 if result.get("isError") else 0


def _cmd_request(args: argparse.Namespace) -> int:
    client = ControlClient(find_socket(args.socket))
    refused = _own_names(
        args, client, "prompts" if args.op == "prompt" else "resources"
    )
    if refused is not None:
        return fail(refused)
    op, target = args.op, args.target
    arguments = _json_object(getattr(args, "json_args", "{}"), "JSON_ARGS")
    if isinstance(arguments, str):
        return fail(arguments)
    try:
        result = client.mcp_request(args.server, op, target, arguments, args.timeout)
    except CallError as exc:
        kind = type(exc).__name__
        return fail(f"{op} {args.server} {target} failed ({kind}): {exc}")
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


def _cmd_result(args: argparse.Namespace) -> int:
    """`result ID`: a whole tool result that `max_output` cut, as JSON."""
    result_id = args.id.removeprefix("mcp-manager://results/")
    try:
        result = ControlClient(find_socket(args.socket)).result(result_id)
    except CallError as exc:
        return fail(first_line(exc))
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


def _cmd_changes(args: argparse.Namespace) -> int:
    """`tools --changed`: definitions that differ from their pins, as diffs."""
    from ..core.describe import describe
    from ..core.events import event_to_dict

    client = ControlClient(find_socket(args.socket))
    try:
        changes = client.changes(args.server)
    except CallError as exc:  # no such connection
        return fail(first_line(exc))
    if args.json:
        rows = [event_to_dict(change) for change in changes]
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 1 if changes else 0
    if not changes:
        print("no changed definitions: everything listed matches what was approved")
        return 0
    for change in changes:
        print(describe(change))  # with what was found suspicious, if anything
        for line in change.diff.splitlines():
            print(f"  {line}")
        print()
    return 1  # as `pins` and `diff`: something differs from what was approved


def _cmd_approve(args: argparse.Namespace) -> int:
    """`approve SERVER [ITEM...]`: pin what the server lists now."""
    client = ControlClient(find_socket(args.socket))
    try:
        reply = client.approve(args.server, list(args.items))
    except CallError as exc:  # no such connection or item: the names it knows
        return fail(first_line(exc))
    if reply.approved:
        print(f"{reply.server}: approved {', '.join(reply.approved)}")
    else:
        print(
            f"{reply.server}: nothing to approve: what it lists is as approved "
            "(see tools --changed)"
        )
    return 0


def _cmd_update(args: argparse.Namespace) -> int:
    """`update SERVER [--yes]`: show what a newer release of a locked launch
    would change, and take it (asked at a terminal; `--yes` takes it)."""
    client = ControlClient(find_socket(args.socket))
    try:
        shown = client.update(args.server)
    except CallError as exc:
        return fail(first_line(exc))
    print(_update_text(shown))
    if not shown.available:
        # nothing newer: all is well; a note: update can take nothing there
        # (no registry, an exact version, lock = false, the registry failed)
        return 2 if shown.note else 0
    if not args.yes:
        if not sys.stdin.isatty():
            print(f"to take it: mcp-manager update {shown.server} --yes")
            return 0
        answer = input(f"take {shown.available}? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            print("kept the lock as it is")
            return 0
    try:
        client.update(args.server, take=True, version=shown.available)
    except (CallError, ControlError) as exc:
        return fail(first_line(exc))
    print(
        f"{shown.server}: locked to {shown.package} {shown.available}; "
        "restarting on it (its tools are checked against the pins as always)"
    )
    return 0


def _update_text(shown: UpdateReply) -> str:
    head = f"{shown.server}: {shown.package}" if shown.package else shown.server
    if shown.note:
        locked = f" (starts {shown.locked})" if shown.locked else ""
        return f"{head}{locked}: {shown.note}"
    lines = [f"{head}: starts {shown.locked or 'as written (not locked yet)'}"]
    if shown.available:
        when = f", published {shown.published}" if shown.published else ""
        lines.append(f"  newer: {shown.available}{when}")
    else:
        lines.append("  nothing newer to take")
    if shown.newest:
        lines.append(f"  {shown.newest} is out too, younger than its min_age")
    return "\n".join(lines)


def _cmd_pins_check(args: argparse.Namespace) -> int:
    """`pins check [NAME...]`: each connection's listing against its pins,
    without a daemon; 0 all as approved, 1 anything changed or never pinned,
    2 a connection that could not be listed (or a bad config)."""
    import anyio

    from ..core.describe import describe
    from ..core.errors import ConfigError
    from ..daemon.pins_check import check_pins
    from ..lua import load_file

    path = Path(args.config)
    try:
        specs = load_file(path).specs
    except (ConfigError, OSError) as exc:
        return fail(first_line(exc))
    unknown = sorted(set(args.names) - {spec.name for spec in specs})
    if unknown:
        return fail(f"{path} declares no {', '.join(unknown)}")
    chosen = [spec for spec in specs if not args.names or spec.name in args.names]
    verdicts = anyio.run(check_pins, chosen)
    code = 0
    for verdict in verdicts:
        if verdict.verdict == "pinned":
            print(f"{verdict.name}: as approved ({verdict.items} items)")
        elif verdict.verdict == "unpinned":
            print(
                f"{verdict.name}: never pinned: run the daemon (it pins on first "
                f"use) or `mcp-manager approve {verdict.name}`, then check again"
            )
            code = max(code, 1)
        elif verdict.verdict == "changed":
            print(f"{verdict.name}: {len(verdict.changes)} not as approved")
            for change in verdict.changes:
                print(f"  {describe(change)}")
                for line in change.diff.splitlines():
                    print(f"    {line}")
            code = max(code, 1)
        else:
            print(f"{verdict.name}: cannot check: {first_line(verdict.error)}")
            code = 2
    if not verdicts:
        print("nothing to check (every connection is disabled or has pin = off)")
    return code


def _cmd_catalog(args: argparse.Namespace) -> int:
    if args.kind == "tools" and args.changed:
        return _cmd_changes(args)
    client = ControlClient(find_socket(args.socket))
    rows = client.catalog(args.kind, args.server)
    if args.json:
        print(json.dumps([row.to_dict() for row in rows], indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print(f"no {args.kind}")
        return 0
    width = max(len(row.name) for row in rows)
    # Which protocol each server speaks, above its tools.
    from ..core.status import MODERN_ERA  # dataclasses: not on every CLI start

    speaks = {s.name: s for s in client.status()} if args.kind == "tools" else {}
    server = None
    for row in rows:
        status = speaks.get(row.server)
        if status is not None and row.server != server and status.protocol:
            era = "stateless era" if status.era == MODERN_ERA else "handshake era"
            print(f"{row.server}: MCP {status.protocol} ({era})")
        server = row.server
        exposed = row.exposed
        shown = "(hidden)" if row.hidden else exposed or "(not exposed)"
        if row.held:
            shown = f"(held back: `mcp-manager approve {row.server}` to show it)"
        if args.kind == "resources" and exposed == row.name:
            shown = "" if not row.template else "(template)"
        print(f"{row.server:<12} {row.name:<{width}}  {shown}".rstrip())
    return 0


def add_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    """Add `call`, `read`, `prompt`, `tools`, `prompts` and `resources`."""
    timeout = {
        "type": positive_float,
        "default": None,
        "metavar": "S",
        "help": "seconds (default: the connection's call_timeout)",
    }
    call = sub.add_parser(
        "call",
        parents=[common],
        help="call a tool, print JSON",
        description="Call SERVER's tool TOOL (the server's own names), or a "
        "tool by the name the endpoint exposes (`mcp-manager tools` lists "
        'them): `call demo echo \'{"text": "hi"}\'` or `call demo__echo '
        '\'{"text": "hi"}\'`.',
    )
    call.add_argument("server", metavar="SERVER|NAME")
    call.add_argument("target", nargs="?", default=None, metavar="TOOL")
    call.add_argument("json_args", nargs="?", default=None, metavar="JSON_ARGS")
    call.add_argument("--timeout", **timeout)  # type: ignore[arg-type]
    call.add_argument(
        "--answer",
        metavar="JSON",
        help="what to answer when the server asks for input during the call "
        '(elicitation), e.g. \'{"action": "accept", "content": {"ok": true}}\'; '
        "without it such a question is refused",
    )
    call.set_defaults(handler=_cmd_call)

    read = sub.add_parser(
        "read",
        parents=[common],
        help="read a resource, print JSON",
        description="Read SERVER's resource URI, or a resource by the URI the "
        "endpoint exposes (`mcp-manager resources` lists them).",
    )
    read.add_argument("server", metavar="SERVER|URI")
    read.add_argument("target", nargs="?", default=None, metavar="URI")
    read.add_argument("--timeout", **timeout)  # type: ignore[arg-type]
    read.set_defaults(handler=_cmd_request, op="read")

    prompt = sub.add_parser(
        "prompt",
        parents=[common],
        help="get a prompt, print JSON",
        description="Get SERVER's prompt NAME, or a prompt by the name the "
        "endpoint exposes (`mcp-manager prompts` lists them).",
    )
    prompt.add_argument("server", metavar="SERVER|NAME")
    prompt.add_argument("target", nargs="?", default=None, metavar="NAME")
    prompt.add_argument("json_args", nargs="?", default=None, metavar="JSON_ARGS")
    prompt.add_argument("--timeout", **timeout)  # type: ignore[arg-type]
    prompt.set_defaults(handler=_cmd_request, op="prompt")

    whole = sub.add_parser(
        "result",
        parents=[common],
        help="print a whole tool result that max_output cut (its ID or link)",
    )
    whole.add_argument("id", metavar="ID")
    whole.set_defaults(handler=_cmd_result)

    for kind in ("tools", "prompts", "resources"):
        listing = sub.add_parser(
            kind,
            parents=[common],
            help=f"list the {kind} of every (or one) server and their exposed names",
        )
        listing.add_argument("server", nargs="?", default=None, metavar="SERVER")
        listing.add_argument("--json", action="store_true", help="print JSON")
        if kind == "tools":
            listing.add_argument(
                "--changed",
                action="store_true",
                help="show the definitions (tools, prompts, templates) that "
                "changed since they were approved, as diffs",
            )
        listing.set_defaults(handler=_cmd_catalog, kind=kind, changed=False)

    pins = sub.add_parser(
        "pins",
        parents=[common],
        help="check servers against their pins without a daemon (for CI)",
    )
    pin_verbs = pins.add_subparsers(dest="verb", required=True, metavar="check")
    check = pin_verbs.add_parser(
        "check",
        help="connect to each connection once and compare what it lists with "
        "what was approved; exit 1 on any change",
    )
    check.add_argument("names", nargs="*", metavar="NAME", help="default: all")
    check.add_argument(
        "--config",
        default="startup.lua",
        metavar="FILE",
        help="the startup.lua that declares them (default: ./startup.lua)",
    )
    check.set_defaults(handler=_cmd_pins_check)

    approve = sub.add_parser(
        "approve",
        parents=[common],
        help="accept a server's changed tool definitions (see tools --changed)",
    )
    approve.add_argument("server", metavar="SERVER")
    approve.add_argument(
        "items", nargs="*", metavar="TOOL", help="default: everything it lists"
    )
    approve.set_defaults(handler=_cmd_approve)

    update = sub.add_parser(
        "update",
        parents=[common],
        help="see a newer release of a locked launch (npx, uvx, docker run) "
        "and take it",
    )
    update.add_argument("server", metavar="SERVER")
    update.add_argument("--yes", action="store_true", help="take it without asking")
    update.set_defaults(handler=_cmd_update)
