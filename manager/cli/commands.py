"""The command line's parser and its daemon commands: `run`, `stdio`, `check`.

`main` (re-exported lazily by the package) parses and dispatches; the client
commands live in their own modules (see the package docstring).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from .. import __version__
from ..control.paths import socket_path
from ..core.errors import CallError, ConfigError, ControlError, ManagerError
from ..core.text import first_line
from .arguments import Parser, non_negative_float, positive_int
from .exits import PROG, fail

TYPE_CHECKING = False  # as `typing` says; importing it costs a CLI command ~4 ms
if TYPE_CHECKING:  # the daemon (and mcp) load only for `run` and `stdio`
    from typing import Any

    from ..daemon.serve import DaemonOptions

__all__ = ["build_parser", "command_of", "hud_wanted", "main"]


_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


# ------------------------------------------------------------------------- run


def _cmd_run(args: argparse.Namespace) -> int:
    config = Path(args.file)
    if not config.is_file():
        reason = "not a file" if config.exists() else "no such file"
        return fail(f"cannot run {config}: {reason}")
    if args.listen is None and (
        args.token_file or args.no_token or args.allow_host or args.allow_origin
    ):
        return fail(
            "--token-file, --no-token, --allow-host and --allow-origin need --listen"
        )
    endpoint = None
    if args.listen is not None:
        from ..gateway.options import EndpointError, endpoint_options

        try:
            endpoint = endpoint_options(
                args.listen,
                token_file=args.token_file,
                no_token=args.no_token,
                allowed_hosts=args.allow_host,
                allowed_origins=args.allow_origin,
            )
        except EndpointError as exc:
            return fail(str(exc))
    return _serve(
        _daemon_options(args, config, hud=hud_wanted(args), endpoint=endpoint)
    )


def _daemon_options(
    args: argparse.Namespace, config: Path, **overrides: Any
) -> DaemonOptions:
    """The options `run` and `stdio` share (`_add_daemon_flags`), plus `overrides`."""
    from ..daemon.serve import DaemonOptions

    return DaemonOptions(
        config=config,
        socket=socket_path(args.socket),
        log_level=args.log_level,
        log_format=args.log_format,
        otlp_endpoint=args.otlp_endpoint,
        otlp_protocol=args.otlp_protocol,
        telemetry=not args.no_telemetry,
        start_slots=args.start_slots,
        watchdog=args.watchdog,
        **overrides,
    )


def _backend_options() -> dict[str, object]:
    """uvloop when it is installed (a dependency; fewer CPU cycles per message
    than asyncio's own loop), else asyncio's loop."""
    try:
        import uvloop  # noqa: F401
    except ImportError:  # a platform without uvloop's wheels: the plain loop
        return {}
    return {"use_uvloop": True}


def _serve(options: DaemonOptions) -> int:
    """Run the daemon; the exit code for how it ended."""
    import anyio

    from ..daemon.serve import serve

    try:
        return anyio.run(serve, options, backend_options=_backend_options())
    except KeyboardInterrupt:
        return 130
    except ConfigError as exc:
        return fail(first_line(exc), 1)
    except ManagerError as exc:
        return fail(first_line(exc))


# ----------------------------------------------------------------------- stdio


def _cmd_stdio(args: argparse.Namespace) -> int:
    config = Path(args.file)
    if not config.is_file():
        reason = "not a file" if config.exists() else "no such file"
        return fail(f"cannot run {config}: {reason}")
    if args.log_file is not None:
        # Everything written to fd 2 (our logs, library warnings, tracebacks)
        # goes to the file from here on; stdout stays the MCP stream.
        try:
            fd = os.open(args.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError as exc:
            return fail(f"cannot open log file {args.log_file}: {exc.strerror}")
        os.dup2(fd, 2)
        os.close(fd)

    # Answer the client's `initialize` now, before half a second of imports.
    from ..gateway.early import answer_initialize

    early = answer_initialize()
    if early is None:
        return 0  # the client closed stdin before saying anything
    options = _daemon_options(
        args,
        config,
        hud=False,
        stdio=True,
        stdio_early=early,
        control=args.socket is not None,
    )
    return _serve(options)


# ------------------------------------------------------------------------- hud


def hud_wanted(args: argparse.Namespace) -> bool:
    """`run` shows the HUD on a terminal, unless `--no-hud` (or TERM=dumb)."""
    return (
        not args.no_hud
        and sys.stdin.isatty()
        and sys.stdout.isatty()
        and os.environ.get("TERM", "") not in ("", "dumb")
    )


# ---------------------------------------------------------------------- parser


def _add_telemetry_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "telemetry (OpenTelemetry; the standard OTEL_* variables apply, these win)"
    )
    group.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="send traces and metrics over OTLP to URL, e.g. http://localhost:4317 "
        "(gRPC) or http://localhost:4318 (HTTP); default: $OTEL_EXPORTER_OTLP_"
        "ENDPOINT, else gRPC to localhost:4317",
    )
    group.add_argument(
        "--otlp-protocol",
        choices=("grpc", "http/protobuf"),
        help="default: $OTEL_EXPORTER_OTLP_PROTOCOL, else grpc",
    )
    group.add_argument(
        "--no-telemetry",
        action="store_true",
        help="export no traces or metrics (same as OTEL_SDK_DISABLED=true)",
    )


def _add_daemon_flags(parser: argparse.ArgumentParser) -> None:
    from ..daemon.watchdog import DEFAULT_WATCHDOG  # the daemon's commands only

    group = parser.add_argument_group("daemon")
    group.add_argument(
        "--start-slots",
        type=positive_int,
        metavar="N",
        help="how many stdio servers may start (spawn + handshake) at once; the "
        "rest wait their turn, and connect_timeout counts only once a server "
        "starts (default: the CPU count, at least 2)",
    )
    group.add_argument(
        "--watchdog",
        type=non_negative_float,
        default=DEFAULT_WATCHDOG,
        metavar="SECONDS",
        help="log the main thread's stack once when the event loop has not turned "
        f"for SECONDS, and let SIGTERM end a stuck daemon (default: "
        f"{DEFAULT_WATCHDOG:g}; 0 = off)",
    )


def _add_daemon_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    """`run` and `stdio`: the commands that run the daemon."""
    run = sub.add_parser("run", parents=[common], help="run the daemon (foreground)")
    run.add_argument("file", nargs="?", default="startup.lua", metavar="FILE")
    run.add_argument(
        "--log-level",
        type=str.upper,
        choices=_LOG_LEVELS,
        default="INFO",
        help="default: INFO",
    )
    run.add_argument("--log-format", choices=("text", "json"), default="text")
    run.add_argument(
        "--no-hud",
        action="store_true",
        help="no terminal HUD (default: shown when stdin and stdout are a terminal)",
    )
    endpoint = run.add_argument_group("MCP endpoint (streamable HTTP)")
    endpoint.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="serve every upstream's tools as SERVER__TOOL at http://HOST:PORT/mcp; "
        "every request needs the bearer token (`mcp-manager token` prints it)",
    )
    endpoint.add_argument(
        "--token-file",
        metavar="FILE",
        help="require the bearer token in FILE (default: $MCP_MANAGER_TOKEN if "
        "set, else the daemon's own, made once in its state directory)",
    )
    endpoint.add_argument(
        "--no-token",
        action="store_true",
        help="require no token (loopback only; any local process may then call "
        "every tool)",
    )
    endpoint.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also accept this Host header name (repeatable)",
    )
    endpoint.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="also accept this Origin, e.g. https://app.example (repeatable)",
    )
    _add_daemon_flags(run)
    _add_telemetry_flags(run)
    run.set_defaults(handler=_cmd_run)

    stdio = sub.add_parser(
        "stdio",
        parents=[common],
        help="run the daemon and serve MCP on stdin/stdout (for clients that spawn "
        "servers)",
    )
    stdio.add_argument("file", nargs="?", default="startup.lua", metavar="FILE")
    stdio.add_argument(
        "--log-level",
        type=str.upper,
        choices=_LOG_LEVELS,
        default="WARNING",
        help="default: WARNING",
    )
    stdio.add_argument("--log-format", choices=("text", "json"), default="text")
    stdio.add_argument(
        "--log-file", metavar="PATH", help="append logs here instead of stderr"
    )
    _add_daemon_flags(stdio)
    _add_telemetry_flags(stdio)
    stdio.set_defaults(handler=_cmd_stdio)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line (`mcp-manager --help`), or with the parser of
    command `only` alone: a command line names one command, and building the
    thirty others costs every run about 10 ms (`main` asks for one, and for the
    whole when the command is not one it knows)."""
    # `--socket` works before and after the command; SUPPRESS keeps the
    # subcommand's default from overwriting a value given before it.
    socket_help = (
        "control socket (default: $MCP_MANAGER_SOCKET, else "
        "$XDG_RUNTIME_DIR/mcp-manager/control.sock, else "
        "/tmp/mcp-manager-UID/control.sock)"
    )
    common = Parser(add_help=False)
    common.add_argument(
        "--socket", metavar="PATH", default=argparse.SUPPRESS, help=socket_help
    )
    parser = Parser(
        prog=PROG, description="Keep a declared set of MCP client connections alive."
    )
    parser.add_argument("--socket", metavar="PATH", default=None, help=socket_help)
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub: Any = _Only(
        parser.add_subparsers(dest="command", required=True, metavar="COMMAND"), only
    )

    if only in (None, "run", "stdio"):
        _add_daemon_parsers(sub, common)

    from . import (  # the client commands, in their own modules
        attach,
        config_commands,
        control,
        login,
        mcp,
    )

    control.add_parsers(sub, common)  # status, hud, events, reload, reconnect, check
    mcp.add_parsers(sub, common)  # call, read, prompt, tools, prompts, resources
    login.add_parsers(sub, common)  # login, logout
    attach.add_parsers(sub, common)  # attach
    config_commands.add_parsers(sub, common)  # import, client-config, add

    if not sub.built:  # a word that is no command: the error lists them all
        return build_parser()
    return parser


class _Only:
    """The subcommands, where only command `only`'s parser is built (all of
    them when None): the others get `_SKIPPED`, which takes what their
    modules declare and keeps none of it."""

    def __init__(self, sub: Any, only: str | None) -> None:
        self._sub = sub
        self._only = only

        self.built = False
        """Whether `only` was one of the commands declared."""

    def add_parser(self, name: str, **options: Any) -> Any:
        if self._only is None or name == self._only:
            self.built = True
            return self._sub.add_parser(name, **options)
        return _SKIPPED


class _Skipped:
    """A parser nobody parses with: every declaration is accepted, dropped."""

    def __getattr__(self, name: str) -> Callable[..., _Skipped]:
        return self._declare

    def _declare(self, *args: object, **options: object) -> _Skipped:
        return self


_SKIPPED = _Skipped()

_TAKES_A_VALUE = frozenset({"--socket"})
"""The options before the command that take a value."""


def command_of(argv: Sequence[str]) -> str | None:
    """The command `argv` names (its first word that is not an option), or
    None: none, or `-h`/`--version` first."""
    words = iter(argv)
    for word in words:
        if word in _TAKES_A_VALUE:
            next(words, None)
        elif not word.startswith("-"):
            return word
        elif word in ("-h", "--help", "--version", "--"):
            return None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Args:
        argv: Arguments without the program name (default: `sys.argv[1:]`).

    Returns:
        The process exit code.
    """
    try:
        arguments = list(sys.argv[1:] if argv is None else argv)
        args = build_parser(command_of(arguments)).parse_args(arguments)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        code = handler(args)
        sys.stdout.flush()  # here, where a closed pipe is caught below
        return code
    except (ControlError, CallError) as exc:
        # a command that did not expect it (each says its own): one line,
        # never a traceback
        return fail(first_line(exc))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `mcp-manager tools | head`: the reader has what it wanted. Point
        # stdout at /dev/null so the flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
