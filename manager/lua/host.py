"""What a script talks to (`LuaHost`, `LiveHost`) and what a run yields.

The manager side implements the host protocols; the script never sees Python
objects, only the functions of the API that call them.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..core.policy import Rule
from ..core.profile import Profile
from ..core.spec import ConnectionSpec
from ..core.status import ConnectionStatus

__all__ = ["LiveHost", "LuaCall", "LuaHost", "ScriptResult"]


class LuaHost(Protocol):
    """What the script can see of the running daemon (read-only)."""

    def status(self, name: str) -> ConnectionStatus | None:
        """The status of one connection, or None if it is not running."""
        ...

    def list(self) -> builtins.list[ConnectionStatus]:
        """The status of every connection, sorted by name."""
        ...


@runtime_checkable
class LiveHost(LuaHost, Protocol):
    """The running daemon, as callbacks see it: they may change the running set."""

    def add(self, spec: ConnectionSpec) -> bool:
        """Declare (or restart with a changed spec) one connection now."""
        ...

    def remove(self, name: str) -> bool:
        """Remove one connection now; returns whether it existed."""
        ...


@dataclass(frozen=True, slots=True)
class LuaCall:
    """A request a script started; `fn(result, err)` gets the end.

    `op` says which: `call` (`mcp_call`: `tool` is the tool), `read`
    (`mcp_read`: `tool` is the URI) or `prompt` (`mcp_prompt`: `tool` is the
    prompt's name, `arguments` its arguments).
    """

    server: str
    tool: str
    arguments: dict[str, object]
    fn: Any = field(repr=False)
    op: str = "call"


@dataclass(frozen=True, slots=True)
class ScriptResult:
    """What one run of the script declared.

    Attributes:
        specs: Declared connections, in declaration order (after removes).
        removed: Names passed to `mcp_remove` and not declared again afterwards.
        duration: Seconds the run took.
        profiles: Declared profiles (`mcp_profile`), in declaration order.
        rules: Call policy rules (`mcp_policy`), in the order written.
        where: Each declared connection's `FILE:LINE` (its `mcp_add`), for
            messages about it (`mcp-manager check`'s warnings).
    """

    specs: tuple[ConnectionSpec, ...]
    removed: tuple[str, ...]
    duration: float
    profiles: tuple[Profile, ...] = ()
    rules: tuple[Rule, ...] = ()
    where: Mapping[str, str] = field(default_factory=dict)
