"""`python -m manager.demo_server`: the command line of the demo server."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Sequence

__all__ = ["main"]

GARBAGE_LINE = "this is not JSON-RPC\n"


def _serve_garbage() -> None:
    """`--garbage`: a non-JSON line at start and for every line read."""
    sys.stdout.write(GARBAGE_LINE)
    sys.stdout.flush()
    for _line in sys.stdin:
        sys.stdout.write(GARBAGE_LINE)
        sys.stdout.flush()


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m manager.demo_server",
        description="The demo MCP server bundled with mcp-manager.",
    )
    parser.add_argument(
        "--transport", choices=["stdio", "http", "sse"], default="stdio"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    faults = parser.add_argument_group("failure modes")
    flag = faults.add_argument
    flag(
        "--crash-after-handshake",
        action="store_true",
        help="exit with code 3 just after the first tools/list reply",
    )
    flag("--hang-on-initialize", action="store_true", help="never answer initialize")
    flag(
        "--garbage",
        action="store_true",
        help="stdio only: write non-JSON lines, never a reply",
    )
    flag("--exit-immediately", type=int, metavar="CODE", help="exit at once")
    flag(
        "--ignore-sigterm",
        action="store_true",
        help="stdio only: ignore SIGTERM and stdin EOF",
    )
    flag("--slow-start", type=float, default=0.0, metavar="SECONDS")
    flag("--stderr-spam", action="store_true", help="write 100 stderr lines/s")
    flag(
        "--exit-after",
        type=float,
        metavar="SECONDS",
        help="exit with code 1 after this many seconds (a server that crashes)",
    )
    flag(
        "--modern-only",
        action="store_true",
        help="speak only MCP 2026-07-28: refuse initialize (-32022)",
    )
    flag(
        "--legacy-only",
        action="store_true",
        help="speak only the handshake era, like a 1.x server: refuse "
        "server/discover and every 2026-07-28 request (-32601)",
    )
    args = parser.parse_args(argv)
    if args.modern_only and args.legacy_only:
        parser.error("--modern-only and --legacy-only exclude each other")
    if args.transport != "stdio" and (args.garbage or args.ignore_sigterm):
        parser.error("--garbage and --ignore-sigterm need --transport stdio")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo server from the command line.

    Args:
        argv: Arguments without the program name; `sys.argv[1:]` by default.

    Returns:
        The process exit code.
    """
    args = _parse_args(argv)
    # What needs no MCP is done before the SDK is imported (over a second).
    if args.exit_immediately is not None:
        return int(args.exit_immediately)
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(args.slow_start)
    if args.garbage:
        _serve_garbage()
        return 0

    import anyio

    from .faults import Faults, run_with_faults
    from .tools import DemoServer

    faults = Faults(
        crash_after_handshake=args.crash_after_handshake,
        hang_on_initialize=args.hang_on_initialize,
        garbage=args.garbage,
        exit_immediately=args.exit_immediately,
        ignore_sigterm=args.ignore_sigterm,
        slow_start=args.slow_start,
        stderr_spam=args.stderr_spam,
        exit_after=args.exit_after,
        modern_only=args.modern_only,
        legacy_only=args.legacy_only,
    )
    demo = DemoServer.from_env()
    anyio.run(run_with_faults, demo, faults, args.transport, args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
