"""Small pieces every demo module shares: tool results, argument checks, paging.

They live apart from `tools` so that `catalog` and `client_requests` can build
tool results without importing the server that imports them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import mcp.types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

__all__ = [
    "SERVER_NAME",
    "BadArguments",
    "ToolHandler",
    "arg_int",
    "arg_number",
    "arg_str",
    "make_tool",
    "page",
    "text_result",
]

SERVER_NAME = "mcp-manager-demo"
"""The server's name in `serverInfo`, and the logger name of its log messages."""

ToolHandler = Callable[
    [ServerRequestContext, dict[str, Any]], Awaitable[types.CallToolResult]
]
"""A tool's implementation: the request context and the call's arguments."""

_T = TypeVar("_T")


class BadArguments(Exception):
    """A tool was called with missing or mistyped arguments.

    Raised by the `arg_*` checks; the server turns it into an `isError` result
    so a client's mistake never looks like a protocol failure.
    """


def text_result(text: str, *, is_error: bool = False) -> types.CallToolResult:
    """A tool result holding one text block."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=is_error
    )


def make_tool(
    name: str,
    description: str,
    properties: Mapping[str, str] | None = None,
    output_schema: dict[str, Any] | None = None,
) -> types.Tool:
    """Build a tool whose arguments are all required and typed by JSON type name."""
    props = dict(properties or {})
    return types.Tool(
        name=name,
        description=description,
        input_schema={
            "type": "object",
            "properties": {key: {"type": kind} for key, kind in props.items()},
            "required": list(props),
        },
        output_schema=output_schema,
    )


def arg_str(args: Mapping[str, Any], key: str) -> str:
    """The string argument `key`; `BadArguments` if it is missing or not a string."""
    value = args.get(key)
    if not isinstance(value, str):
        raise BadArguments(f"argument {key!r} must be a string")
    return value


def arg_number(args: Mapping[str, Any], key: str) -> float | int:
    """The numeric argument `key` (booleans are not numbers here)."""
    value = args.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadArguments(f"argument {key!r} must be a number")
    return value


def arg_int(args: Mapping[str, Any], key: str) -> int:
    """The integer argument `key` (booleans are not integers here)."""
    value = args.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadArguments(f"argument {key!r} must be an integer")
    return value


def page(
    items: Sequence[_T], cursor: str | None, page_size: int
) -> tuple[list[_T], str | None]:
    """One page of `items` and the cursor of the next (None on the last page).

    Every list the demo serves pages the same way, so a client's paging loop
    is exercised on tools, prompts, resources and templates alike. The cursor
    is the index of the page's first item, as a string.

    Raises:
        MCPError: INVALID_PARAMS for a cursor that is not an index.
    """
    try:
        start = int(cursor) if cursor else 0
    except ValueError:
        raise MCPError(INVALID_PARAMS, f"invalid cursor {cursor!r}") from None
    end = start + page_size
    return list(items[start:end]), str(end) if end < len(items) else None
