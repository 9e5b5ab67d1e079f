"""The commands that write configuration, as the parser sees them: `import`,
`client-config` and `add`. Their work (reading clients' files, translating,
fetching a server.json) is in `importing` and `registry`, imported only when
one of them runs: every other command builds the same parser and should not
pay for what they import (`core.spec` and its rules, urllib).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

from .exits import PROG

__all__ = ["CLIENTS", "REGISTRY", "add_parsers"]

CLIENTS: tuple[str, ...] = (
    "claude-desktop",
    "claude-code",
    "cursor",
    "vscode",
    "windsurf",
    "gemini",
    "codex",
)
"""The clients whose files `mcp-manager import` reads, in the order it reads them."""

REGISTRY = "https://registry.modelcontextprotocol.io"
"""The official MCP registry (`--registry` changes it)."""


def _later(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """The handler `name` of `cli.<module>`, imported when it runs."""

    def run(args: argparse.Namespace) -> int:
        handler = getattr(importlib.import_module(f"{__package__}.{module}"), name)
        code: int = handler(args)
        return code

    return run


def add_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    """Add `import`, `client-config` and `add`."""
    _import_parsers(sub, common)
    _add_parser(sub, common)


def _import_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    """Add `import` and `client-config`."""
    clients = ", ".join(CLIENTS)
    imp = sub.add_parser(
        "import",
        parents=[common],
        help="print mcp_add lines for the MCP servers your clients declare "
        "(--write: append them to startup.lua)",
        description="Print one mcp_add(...) per MCP server a client declares. "
        "Secrets become ${env:NAME} references; stderr lists what to export.",
    )
    imp.add_argument(
        "source",
        nargs="?",
        metavar="CLIENT|FILE",
        help=f"a client ({clients}) or a config file; default: every client's "
        "files on this machine and this directory's project files",
    )
    imp.add_argument(
        "--keychain",
        action="store_true",
        help="store the secrets found in the OS keychain (as mcp-manager/NAME) "
        "and reference them as ${keyring:mcp-manager/NAME} instead of ${env:NAME}",
    )
    imp.add_argument(
        "--write",
        action="store_true",
        help="append to --config instead of printing, only if the result passes "
        "`check`; the old file is kept as FILE.bak",
    )
    imp.add_argument(
        "--yes",
        action="store_true",
        help="write a project file's servers without asking (their commands are "
        "still shown)",
    )
    imp.add_argument(
        "--config",
        default="startup.lua",
        metavar="FILE",
        help="the startup.lua --write appends to (default: ./startup.lua)",
    )
    imp.set_defaults(handler=_later("importing", "run_import"))

    config = sub.add_parser(
        "client-config",
        parents=[common],
        help="print the entry that makes a client use `mcp-manager attach`",
    )
    config.add_argument("client", choices=CLIENTS, metavar="CLIENT", help=clients)
    config.add_argument(
        "--profile", metavar="P", help="attach with --profile P (default: none)"
    )
    config.add_argument(
        "--http",
        nargs="?",
        const="",
        metavar="URL",
        help="use the daemon's HTTP endpoint (run --listen) instead of attach: "
        "its URL (default: the running daemon's) and its bearer token",
    )
    config.add_argument(
        "--name",
        default=PROG,
        help=f"the server's name in the client's file (default: {PROG})",
    )
    config.set_defaults(handler=_later("importing", "run_client_config"))


def _add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    """`add`."""
    add = sub.add_parser(
        "add",
        parents=[common],
        help="add a server from the MCP registry's server.json (a file, a URL or "
        "a name), pinned and sandboxed",
    )
    add.add_argument(
        "ref", metavar="REF", help="server.json file, its URL, or a server name"
    )
    add.add_argument(
        "--name", help="the connection name (default: from the server's name)"
    )
    add.add_argument(
        "--registry",
        default=REGISTRY,
        metavar="URL",
        help=f"where names are looked up (default {REGISTRY})",
    )
    add.add_argument(
        "--write", action="store_true", help="append to --config (it must pass `check`)"
    )
    add.add_argument(
        "--yes",
        action="store_true",
        help="write without asking (the command is still shown)",
    )
    add.add_argument(
        "--config",
        default="startup.lua",
        metavar="FILE",
        help="the startup.lua --write appends to",
    )
    add.set_defaults(handler=_later("registry", "run_add"))
