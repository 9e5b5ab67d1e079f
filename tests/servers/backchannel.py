"""A dual-era server that asks its questions only the handshake way.

Built on the SDK's high-level `MCPServer`, as most SDK 2.x servers are: its
`ask` tool and its `asking` prompt elicit an answer with `ctx.elicit`, its
`sample` tool asks the client's model with `ctx.session.create_message`. All
go on the session's back-channel, which a handshake-era session has and a
2026-07-28 request does not ("this transport context has no back-channel"):
a handshake client gets its question straight, and must get it through
mcp-manager too.

Run: `python tests/servers/backchannel.py --transport http --port PORT`
(streamable HTTP at `/mcp`; `HttpServerProcess` runs it so) or
`--transport stdio`. `tell` speaks on the call's own stream (progress and a
log line), for the isolation campaign.
"""

from __future__ import annotations

import argparse
import sys

import mcp.types as types
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

__all__ = ["main", "server"]


class Answer(BaseModel):
    answer: str


server = MCPServer("backchannel")


@server.tool()
async def ask(message: str, ctx: Context) -> str:
    """Ask the user `message`; returns what they answered."""
    result = await ctx.elicit(message, Answer)
    if result.action == "accept":
        return f"accept: {result.data.answer}"
    return result.action


@server.tool()
async def sample(prompt: str, ctx: Context) -> str:
    """Ask the client's model to answer `prompt`; returns its reply."""
    reply = await ctx.session.create_message(
        messages=[
            types.SamplingMessage(
                role="user", content=types.TextContent(type="text", text=prompt)
            )
        ],
        max_tokens=50,
    )
    content = reply.content
    return content.text if isinstance(content, types.TextContent) else "?"


@server.prompt()
async def asking(ctx: Context) -> str:
    """A prompt made of what the user answers when asked for a topic."""
    result = await ctx.elicit("topic?", Answer)
    topic = result.data.answer if result.action == "accept" else "nothing"
    return f"Write about {topic}"


@server.tool()
async def echo(text: str) -> str:
    """Return `text`."""
    return text


@server.tool()
async def tell(text: str, steps: int, ctx: Context) -> str:
    """Report progress `steps` times and log once, each saying `text`, on
    the call's own stream; then return `text` (isolation campaigns: a
    client must only ever hear its own text)."""
    for step in range(steps):
        await ctx.report_progress(step + 1, steps, text)
    await ctx.info(text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--transport", choices=["http", "stdio"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.transport == "stdio":
        server.run("stdio")
        return 0
    server.run("streamable-http", host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
