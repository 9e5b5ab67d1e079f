"""FastMCP's proxy in front of one upstream, served over streamable HTTP.

Run by `bench_gateway.py` with a Python that has `fastmcp` installed (a separate
venv: fastmcp is not a dependency of mcp-manager). Not imported by the project.

    python bench/fastmcp_proxy.py --port 8123 --url http://127.0.0.1:8000/mcp
    python bench/fastmcp_proxy.py --port 8123 -- python -m manager.demo_server

The proxy gets an already-connected `fastmcp.Client`, so every request reuses one
upstream session (FastMCP's fastest proxy mode; the default builds a fresh
client, and for stdio a fresh server process, per request). `create_proxy` is
the successor of `FastMCP.as_proxy`, which newer FastMCP releases removed; the
older name is used when it is there.
"""

from __future__ import annotations

import argparse
import logging
import sys

import anyio
import fastmcp
from fastmcp import Client
from fastmcp.client.transports import StdioTransport


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--url", help="streamable HTTP upstream")
    parser.add_argument("command", nargs="*", help="stdio upstream command")
    args = parser.parse_args()
    if bool(args.url) == bool(args.command):
        parser.error("give either --url or a stdio command")
    return args


async def _main(args: argparse.Namespace) -> None:
    target: object
    if args.url:
        target = args.url
    else:
        target = StdioTransport(args.command[0], args.command[1:])
    async with Client(target) as client:  # type: ignore[arg-type]
        as_proxy = getattr(fastmcp.FastMCP, "as_proxy", None)
        if as_proxy is not None:
            proxy = as_proxy(client, name="fastmcp-proxy")
        else:
            from fastmcp.server import create_proxy

            proxy = create_proxy(client, name="fastmcp-proxy")
        await proxy.run_http_async(
            show_banner=False,
            transport="http",
            host="127.0.0.1",
            port=args.port,
            log_level="warning",
        )


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    anyio.run(_main, _parse())
