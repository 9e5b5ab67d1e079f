"""The `mcp-manager` command line: `main(argv) -> int`.

`run` starts the daemon (the only caller of `anyio.run`); `status`, `events`,
`call` and `reload` talk to a running daemon over the control socket; `check`
validates a startup.lua without connecting anything; `hud` attaches the live
HUD to a running daemon; `import` writes other MCP clients' servers as
`mcp_add` lines. Client commands import neither anyio, mcp, lupa,
textual nor opentelemetry, so they answer fast (`status` loads rich for its
table; `hud` and `run` on a terminal load textual).

Exit codes (picked here and in the commands' modules, through `exits.fail`):

* 0: success.
* 1: the answer is a failure: `call` returned `isError: true`; `reload` or
  `check` found a bad script (`FILE:LINE: message` on stderr).
* 2: the command could not be carried out: usage error, daemon unreachable,
  the call could not be made, unreadable file (one line on stderr).
* 130: interrupted (Ctrl-C), except `events`, which exits 0.

Modules: this one (`main`, and the short way to `attach`), `commands` (`run`,
`stdio`, `check`, the parser), `control` (the
commands that talk to a running daemon: `status`, `events`, `hud`, `reload`,
...), `mcp` (`call`, `read`, `prompt`, `tools`, `prompts`, `resources`),
`login` (`login`, `logout`), `attach` (`attach`: an editor's stdio server
that is the running daemon), `config_commands` (the parsers of `import`,
`client-config` and `add`, whose modules load only when one runs),
`importing` (`import`: clients' servers as
`mcp_add` lines; `client-config`), with `clients` (where each client keeps
its servers, and reading them) and `translate` (one server as one `mcp_add`,
secrets as `${env:NAME}`), `registry` (`add`: a server from the MCP
registry's `server.json`, pinned and sandboxed), `exits` (`fail`: one line
on stderr and the exit code), `arguments` (the number types of the flags).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    `attach` takes a short way: an editor spawns it for every window and
    waits for its first answer, so it loads neither the whole parser nor
    anything the other commands need (`attach.main_attach`).

    Args:
        argv: Arguments without the program name (default: `sys.argv[1:]`).

    Returns:
        The process exit code.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments == ["--version"]:  # the short way: no parser, no client
        from .. import __version__
        from .exits import PROG

        print(f"{PROG} {__version__}")
        return 0
    if arguments[:1] == ["attach"]:
        from .attach import main_attach

        return main_attach(arguments[1:])
    from .commands import main as run_command

    return run_command(arguments)
