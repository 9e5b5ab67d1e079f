"""What the HUD's keys ask of the daemon, and how each answer is told.

`DaemonAsks` sends a request through the HUD's backend (the daemon itself,
or its control socket for an attached HUD) and says the answer in a toast:
`r` reload, `c` reconnect, Enter details, `a`/`A`/`d` an approval. A failure
is a toast too, never the end of the HUD. The app runs each in a worker
(`HudApp._spawn`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..core.describe import describe
from ..core.errors import ManagerError
from ..core.text import first_line
from .details import DetailsScreen, details_text
from .feed import HudBackend
from .state import HudState

if TYPE_CHECKING:
    from rich.text import Text

__all__ = ["DaemonAsks"]


class Notify(Protocol):
    """Textual's `App.notify`, as the asks use it."""

    def __call__(
        self,
        message: str,
        *,
        title: str = "",
        severity: Any = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None: ...


class DaemonAsks:
    """The daemon requests behind the HUD's keys.

    Args:
        backend: Where requests go.
        hud: The HUD's state (an answered approval leaves it at once).
        notify: Shows a toast.
        show: Opens a screen (the details of a connection).
        reconnect: What the details screen's `c` does.
        clock: Wall clock.
    """

    def __init__(
        self,
        backend: HudBackend,
        hud: HudState,
        *,
        notify: Notify,
        show: Callable[[DetailsScreen], Awaitable[object]],
        reconnect: Callable[[str], None],
        clock: Callable[[], float],
    ) -> None:
        self._backend = backend
        self._hud = hud
        self._notify = notify
        self._show = show
        self._reconnect = reconnect
        self._clock = clock

    async def reload(self) -> None:
        """Run startup.lua again; say what changed, or where it failed."""
        try:
            result = await self._backend.reload()
        except ManagerError as exc:  # ConfigError reads `FILE:LINE: message`
            self._failed(exc, "reload failed")
            return
        # The reply carries the `config_loaded` event's fields: say it the same way.
        self._notify(
            describe(result.as_event()), title="reloaded", timeout=4, markup=False
        )

    async def reconnect(self, name: str) -> None:
        """Ask the daemon to try `name` now instead of after its backoff."""
        try:
            result = await self._backend.reconnect(name)
        except ManagerError as exc:
            self._failed(exc, f"reconnect {name}")
            return
        if result.retrying:
            self._notify(
                f"{name}: trying now", title="reconnect", timeout=3, markup=False
            )
        else:
            self._notify(
                f"{name} is not waiting for a retry (connected, or a try is "
                "already under way)",
                title="reconnect",
                timeout=4,
                markup=False,
            )

    async def details(self, name: str) -> None:
        """Fetch `name`'s details and open them in their own screen."""
        try:
            details = await self._backend.details(name)
        except ManagerError as exc:
            self._failed(exc, f"details of {name}")
            return

        def body() -> Text:
            return details_text(self._hud.rows.get(name), details, self._clock())

        await self._show(DetailsScreen(name, body, self._reconnect))

    async def decide(self, approval: str, tool: str, verdict: str, scope: str) -> None:
        """Answer a call waiting for approval."""
        try:
            await self._backend.decide(approval, verdict, scope)
        except ManagerError as exc:
            self._failed(exc, tool)
            return
        self._hud.approvals.pop(approval, None)  # its event follows

    def _failed(self, exc: ManagerError, title: str) -> None:
        """Say why a request failed: its first line, under `title`."""
        self._notify(first_line(exc), title=title, severity="error", markup=False)
