"""Hand the SDK server the first stdin line that `early` already read (and
maybe answered): it reads it first, and its own answer to it is dropped."""

from __future__ import annotations

from typing import Any

import mcp.types as types
from mcp.shared.message import SessionMessage

from .early import EarlyStart

__all__ = ["replayed"]


class _ReplayRead:
    """The read stream, with the early line first."""

    def __init__(self, inner: Any, first: SessionMessage | Exception) -> None:
        self._inner = inner
        self._first: SessionMessage | Exception | None = first

    async def receive(self) -> Any:
        first, self._first = self._first, None
        if first is not None:
            return first
        return await self._inner.receive()

    def __aiter__(self) -> _ReplayRead:
        return self

    async def __anext__(self) -> Any:
        first, self._first = self._first, None
        if first is not None:
            return first
        return await self._inner.__anext__()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def __aenter__(self) -> _ReplayRead:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self._inner.__aexit__(*exc_info)


class _DropAnswer:
    """The write stream, without the SDK's answer to a request answered early."""

    def __init__(self, inner: Any, answered: str | int) -> None:
        self._inner = inner
        self._answered: str | int | None = answered

    async def send(self, item: Any) -> None:
        message = getattr(item, "message", None)
        if (
            self._answered is not None
            and isinstance(message, types.JSONRPCResponse | types.JSONRPCError)
            and message.id == self._answered
        ):
            self._answered = None  # answered already, by `early`
            return
        await self._inner.send(item)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def __aenter__(self) -> _DropAnswer:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self._inner.__aexit__(*exc_info)


def replayed(read: Any, write: Any, early: EarlyStart) -> tuple[Any, Any]:
    """`read` and `write` of the SDK's stdio server around the early line."""
    try:
        first: SessionMessage | Exception = SessionMessage(
            types.jsonrpc_message_adapter.validate_json(early.line, by_name=False)
        )
    except Exception as exc:  # as the SDK's own reader does: passed on as is
        first = exc
    if early.answered is not None:
        write = _DropAnswer(write, early.answered)
    return _ReplayRead(read, first), write
