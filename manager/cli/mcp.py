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

from ..control.client import ControlClient
from ..control.paths import find_socket
from ..core.errors import CallError
from ..core.status import MODERN_ERA
from .arguments import positive_float
from .exits import fail, first_line

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


def _cmd_call(args: argparse.Namespace) -> int:
    tool_args = _json_object(args.json_args, "JSON_ARGS")
    if isinstance(tool_args, str):
        return fail(tool_args)
    answer: dict[str, object] | None = None
    if args.answer is not None:
        given = _json_object(args.answer, "--answer")
        if isinstance(given, str):
            return fail(given)
        answer = given
    client = ControlClient(find_socket(args.socket))
    try:
        result = client.call(
            args.server, args.tool, tool_args, args.timeout, answer=answer
        )
    except CallError as exc:
        kind = type(exc).__name__
        return fail(f"call {args.server} {args.tool} failed ({kind}): {exc}")
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 1 if result.get("isError") else 0


def _cmd_request(args: argparse.Namespace) -> int:
    op, target = args.op, args.target
    arguments = _json_object(getattr(args, "json_args", "{}"), "JSON_ARGS")
    if isinstance(arguments, str):
        return fail(arguments)
    client = ControlClient(find_socket(args.socket))
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
        return 0
    if not changes:
        print("no changed definitions: everything listed matches what was approved")
        return 0
    for change in changes:
        print(describe(change))
        if change.suspicious:
            print(f"  suspicious: {change.suspicious}")
        for line in change.diff.splitlines():
            print(f"  {line}")
        print()
    return 0


def _cmd_approve(args: argparse.Namespace) -> int:
    """`approve SERVER [ITEM...]`: pin what the server lists now."""
    client = ControlClient(find_socket(args.socket))
    try:
        reply = client.approve(args.server, list(args.items))
    except CallError as exc:  # no such connection or item: the names it knows
        return fail(first_line(exc))
    approved = ", ".join(reply.approved) or "nothing (it lists nothing)"
    print(f"{reply.server}: approved {approved}")
    return 0


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
    call = sub.add_parser("call", parents=[common], help="call a tool, print JSON")
    call.add_argument("server", metavar="SERVER")
    call.add_argument("tool", metavar="TOOL")
    call.add_argument("json_args", nargs="?", default="{}", metavar="JSON_ARGS")
    call.add_argument("--timeout", **timeout)  # type: ignore[arg-type]
    call.add_argument(
        "--answer",
        metavar="JSON",
        help="what to answer when the server asks for input during the call "
        '(elicitation), e.g. \'{"action": "accept", "content": {"ok": true}}\'; '
        "without it such a question is refused",
    )
    call.set_defaults(handler=_cmd_call)

    read = sub.add_parser("read", parents=[common], help="read a resource, print JSON")
    read.add_argument("server", metavar="SERVER")
    read.add_argument("target", metavar="URI")
    read.add_argument("--timeout", **timeout)  # type: ignore[arg-type]
    read.set_defaults(handler=_cmd_request, op="read")

    prompt = sub.add_parser("prompt", parents=[common], help="get a prompt, print JSON")
    prompt.add_argument("server", metavar="SERVER")
    prompt.add_argument("target", metavar="NAME")
    prompt.add_argument("json_args", nargs="?", default="{}", metavar="JSON_ARGS")
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
