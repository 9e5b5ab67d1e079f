"""Logging a connection in and out, for the control surfaces (`login`, `logout`).

`begin` opens the login desk's loopback callback for the connection
(`transport.oauth.login`), makes the connection try again at once, and returns the
`Login`; the first thing the caller learns is the authorization URL to show the
user (`first_answer`), then whether the connection got connected (`Login.done`,
set when the try that used the login ended). A device login (`device`, RFC
8628) opens no callback: its first answer is the address and the user code.
`logout` forgets the stored tokens
and the client registration and restarts the connection, which then waits in
`needs_login`. A login of a `refused` connection (one that stopped asking)
starts the count of refused logins again.
"""

from __future__ import annotations

import anyio

from ..core.errors import CallError
from ..core.state import Phase
from ..transport.base import OAuthLogins
from ..transport.oauth import LOGIN_TIMEOUT, Login, LoginDesk, uses_oauth
from .connection import Connection
from .manager import Manager

__all__ = ["Logins"]


class Logins:
    """The logins begun through one manager (the last one per connection is kept,
    so `wait` can tell how it ended)."""

    def __init__(self, manager: Manager) -> None:
        self._manager = manager
        self._last: dict[str, Login] = {}

    def _desk(self) -> LoginDesk:
        transport = self._manager.transport
        desk = transport.logins if isinstance(transport, OAuthLogins) else None
        if not isinstance(desk, LoginDesk):
            raise CallError("this daemon's transport does not do OAuth logins")
        return desk

    def _interactive(self, name: str) -> Connection:
        conn = self._oauth(name)
        spec = conn.spec
        if spec.oauth is not None and not spec.oauth.interactive:
            raise CallError(
                f"{name} uses client credentials (grant = {spec.oauth.grant}): "
                "it gets its tokens by itself, no login needed"
            )
        if not spec.enabled:
            raise CallError(f"{name} is disabled (enabled = false in the config)")
        return conn

    def _oauth(self, name: str) -> Connection:
        conn = self._manager.connection(name)
        if conn is None:
            raise self._manager.unknown(name)
        spec = conn.spec
        if not uses_oauth(spec):
            why = (
                "it is a stdio server"
                if spec.transport == "stdio"
                else "it sends its own Authorization header"
                if spec.oauth is None
                else "its config says oauth = false"
            )
            raise CallError(f"{name} does not log in with OAuth: {why}")
        return conn

    async def begin(
        self,
        name: str,
        timeout: float = LOGIN_TIMEOUT,  # noqa: ASYNC109 - the login's own deadline
        *,
        device: bool = False,
    ) -> Login | None:
        """Start a login for `name` (a `device` login: RFC 8628, no browser
        on this machine); None when it is connected already.

        Raises:
            UnknownServer: No such connection.
            CallError: It does not log in interactively, or the callback port
                cannot be bound.
        """
        conn = self._interactive(name)
        if conn.phase is Phase.CONNECTED:
            return None
        if conn.phase is Phase.REFUSED:
            conn.forgive_refusals()  # the user asks again: LOGIN_LIMIT more
        desk = self._desk()
        port = conn.spec.oauth.callback_port if conn.spec.oauth is not None else None
        try:
            login = await desk.begin(name, port, timeout, device=device)
        except OSError as exc:
            raise CallError(
                f"{name}: cannot listen for the login's redirect on 127.0.0.1:"
                f"{port or 0} ({exc.strerror or exc})"
            ) from exc
        self._last[name] = login
        self._manager.spawn(login.serve)
        conn.on_settled = lambda error: desk.end(name, error)
        conn.try_for_login()
        return login

    async def first_answer(self, login: Login, limit: float) -> None:
        """Wait until the login has its authorization URL (a device login: its
        address and user code) or ended (at most `limit`)."""
        with anyio.move_on_after(limit):
            async with anyio.create_task_group() as tg:

                async def until(event: anyio.Event) -> None:
                    await event.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(until, login.url_ready)
                tg.start_soon(until, login.done)

    def last(self, name: str) -> Login | None:
        """The last login begun for `name`."""
        return self._last.get(name)

    def feed(self, name: str, url: str) -> str:
        """The redirect URL a user pasted (`login --manual`).

        Raises:
            CallError: No login is under way, or the URL is not its redirect.
        """
        login = self._last.get(name)
        if login is None or login.done.is_set():
            raise CallError(f"no login of {name} is under way; run login again")
        if login.device:
            raise CallError(f"{name}: a device login takes no pasted address")
        try:
            return login.feed(url)
        except ValueError as exc:
            raise CallError(f"{name}: {exc}") from None

    def logout(self, name: str) -> bool:
        """Forget `name`'s tokens and client registration, and restart it.

        Returns:
            Whether anything was stored.
        """
        conn = self._oauth(name)
        transport = self._manager.transport
        forgot = isinstance(transport, OAuthLogins) and transport.forget(name)
        login = self._last.pop(name, None)
        if login is not None:
            login.finish("logged out")
        self._manager.add(conn.spec, why="tokens")
        return forgot
