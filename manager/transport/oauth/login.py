"""Logging a user in: the login desk and its one-shot loopback callback.

The daemon never opens a browser by itself. `mcp-manager login NAME` asks it
to begin a `Login` (`LoginDesk.begin`): a listener on 127.0.0.1 (an ephemeral
port unless `oauth.callback_port` says otherwise) whose `/callback` is the
redirect URI. The connection then tries again; the SDK's OAuth flow reaches
`redirect` with the authorization URL (handed to the `login` command, which
prints it and maybe opens a browser) and then `callback`, which waits for the
browser's redirect: a request whose `state` is not this login's is answered
400 and ignored, the first that matches ends the listener. A login ends after
`timeout` at the latest; its listener never outlives it.

Without a login under way, `redirect` raises `LoginRequired`: the connection
waits in `needs_login` and nothing is sent to the authorization server.
For a daemon on another machine, `feed(url)` takes the final redirect URL the
user pasted (`login --manual`), checked the same way.

A device login (`login --device`, RFC 8628, `device`) has no listener: the
flow shows the address and the user code (`show_device`) and polls the
authorization server, pausing between polls on the login (`pause`), so its end
or its deadline stops the polling too.
"""

from __future__ import annotations

import logging
from html import escape
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
from mcp.client.auth import AuthorizationCodeResult

from ...core.errors import LoginRequired

__all__ = ["CALLBACK_PATH", "LOGIN_TIMEOUT", "NO_LOGIN", "Login", "LoginDesk"]

logger = logging.getLogger(__name__)

CALLBACK_PATH = "/callback"
"""The path of the loopback redirect URI."""

LOGIN_TIMEOUT = 300.0
"""Seconds a login waits for the browser's redirect by default."""

NO_LOGIN = "the server wants a login"
"""Why a connection waits in `needs_login` when nobody logged in yet (each
surface that shows the state adds the command to run)."""

_REQUEST_LIMIT = 16 * 1024
"""Bytes of a callback request's head read at most."""

_READ_TIMEOUT = 5.0
"""Seconds a client of the callback listener has to send its request."""

_PAGE = (
    "<!doctype html><meta charset=utf-8><title>mcp-manager</title>"
    "<body style='font-family:sans-serif'><h2>{title}</h2><p>{text}</p>"
)


class Login:
    """One login of one connection, from `begin` to its end.

    Attributes:
        name: The connection.
        redirect_uri: Where the authorization server sends the browser back
            (None for a device login).
        url: The authorization URL once the flow reached it (`url_ready`); for
            a device login, the verification URI.
        user_code: A device login's code for the user to enter at `url`.
        url_complete: A device login's verification URI with the code in it,
            if the server gave one.
        device: A device login (RFC 8628): no listener, no redirect.
        unsupported: The authorization server does not offer this kind of
            login (a device login where it has no device endpoint).
        error: Why the login failed, once `done` is set; None if it succeeded.
    """

    def __init__(
        self,
        name: str,
        listener: anyio.abc.Listener[anyio.abc.SocketStream] | None,
        port: int,
        timeout: float = LOGIN_TIMEOUT,
    ) -> None:
        self.name = name
        self.timeout = timeout
        self.deadline = anyio.current_time() + timeout
        """When the login gives up waiting for the browser (event-loop time)."""
        self.device = listener is None
        self.redirect_uri = (
            None if self.device else f"http://127.0.0.1:{port}{CALLBACK_PATH}"
        )
        self.url: str | None = None
        self.url_ready = anyio.Event()
        self.user_code: str | None = None
        self.url_complete: str | None = None
        self.unsupported = False
        self.error: str | None = None
        self.done = anyio.Event()
        self._listener = listener
        self._state: str | None = None
        self._result: AuthorizationCodeResult | None = None
        self._answered = anyio.Event()
        self._scope = anyio.CancelScope()

    # --- the SDK's handlers ------------------------------------------------------

    def show(self, url: str) -> None:
        """The flow reached the authorization URL: hand it to the user."""
        self._state = _first(parse_qs(urlsplit(url).query), "state")
        self.url = url
        self.url_ready.set()

    def show_device(self, url: str, user_code: str, complete: str | None) -> None:
        """A device login got its codes: hand the address and the user code to
        the user (the device code stays with the flow)."""
        self.url, self.user_code, self.url_complete = url, user_code, complete
        self.url_ready.set()

    def cannot(self, reason: str) -> None:
        """The authorization server does not offer this kind of login."""
        self.unsupported = True
        self.fail(reason)

    async def pause(self, seconds: float) -> bool:
        """Wait `seconds` between a device login's polls.

        Returns:
            False if the login ended meanwhile (or had ended): stop polling.
        """
        with anyio.move_on_after(seconds):
            await self._answered.wait()
        return not self._answered.is_set()

    async def code(self) -> AuthorizationCodeResult:
        """Wait for the browser's redirect (until the login's deadline).

        Raises:
            LoginRequired: The user refused, the login was ended, or it timed out.
        """
        await self._answered.wait()
        if self._result is None:
            raise LoginRequired(self.error or "the login ended without an answer")
        return self._result

    # --- the browser's side ------------------------------------------------------

    def feed(self, url: str) -> str:
        """Take a redirect (the callback's target, or a pasted URL).

        Returns:
            What to tell the browser (or the user).

        Raises:
            ValueError: Not this login's redirect (wrong path or `state`).
        """
        parts = urlsplit(url)
        if parts.path != CALLBACK_PATH:
            raise ValueError(f"not the login callback ({CALLBACK_PATH})")
        query = parse_qs(parts.query)
        state = _first(query, "state")
        if self._state is None or state != self._state:
            raise ValueError("the state does not match this login")
        if self._answered.is_set():
            raise ValueError("this login already got its answer")
        error = _first(query, "error")
        code = _first(query, "code")
        if error is not None or not code:
            described = _first(query, "error_description") or ""
            reason = error or "no authorization code"
            self.fail(f"the authorization server said {reason} {described}".strip())
            return f"Login refused: {reason}."
        self._result = AuthorizationCodeResult(
            code=code, state=state, iss=_first(query, "iss")
        )
        self._answered.set()
        # Not "logged in" yet: the code is still to be exchanged for tokens.
        return (
            f"Authorization received: mcp-manager is finishing the login of "
            f"{self.name}. The terminal that ran mcp-manager login says how it "
            f"ended (or: mcp-manager status {self.name}). You can close this tab."
        )

    def fail(self, reason: str) -> None:
        """End the wait for the browser with `reason` (the flow fails)."""
        if not self._answered.is_set():
            self.error = reason
            self._answered.set()

    def finish(self, error: str | None) -> None:
        """The connection's try that used this login ended (None: connected)."""
        if self.done.is_set():
            return
        if not self.unsupported:  # that sentence says it best
            self.error = error
        self._answered.set()  # a wait for the browser (or a poll) ends too
        self.done.set()
        self._scope.cancel()

    # --- the loopback listener --------------------------------------------------

    async def serve(self) -> None:
        """Answer the browser's redirect until the login ends or its deadline
        (a device login: only wait for either)."""
        timeout = self.timeout
        with self._scope:
            self._scope.deadline = self.deadline
            if self._listener is None:
                await anyio.sleep_forever()
            else:
                try:
                    await self._listener.serve(self._answer)
                finally:
                    with anyio.CancelScope(shield=True):
                        await self._listener.aclose()
        if not self._answered.is_set():
            self.fail(
                f"the device login was not approved within {timeout:g} s"
                if self.device
                else f"no answer from the browser within {timeout:g} s"
            )
        if not self.done.is_set() and self._result is None:
            self.finish(self.error)

    async def _answer(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            try:
                with anyio.fail_after(_READ_TIMEOUT):
                    head = await _read_head(stream)
                target = head.split(b" ", 2)[1].decode("ascii", "replace")
            except (TimeoutError, IndexError, OSError, anyio.EndOfStream):
                return
            except anyio.BrokenResourceError:
                return
            try:
                status, text = 200, self.feed(target)
            except ValueError as exc:
                status, text = 400, f"Not accepted: {exc}."
            title = f"mcp-manager: {self.name}"
            # escaped: the reason may quote what the authorization server said
            body = _PAGE.format(title=escape(title), text=escape(text)).encode()
            reason = "OK" if status == 200 else "Bad Request"
            response = (
                f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; "
                f"charset=utf-8\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\nCache-Control: no-store\r\n\r\n"
            ).encode() + body
            try:
                with anyio.fail_after(_READ_TIMEOUT):
                    await stream.send(response)
            except (TimeoutError, OSError, anyio.BrokenResourceError):
                return
            if status == 200:
                self._scope.cancel()  # one-shot: the listener closes now


class LoginDesk:
    """The logins under way, one per connection at most."""

    def __init__(self) -> None:
        self._logins: dict[str, Login] = {}
        self._step_ups: dict[str, tuple[str, str]] = {}

    def hold_step_up(self, name: str, url: str, challenge: str) -> None:
        """Keep the `insufficient_scope` challenge (`WWW-Authenticate`) a
        request of `name` to `url` was refused with, for the login the user
        runs next."""
        self._step_ups[name] = (url, challenge)

    def take_step_up(self, name: str, url: str) -> str | None:
        """The challenge held for `name`, once a login of it is under way (then
        it is handed out once, if `name` still points at `url`): that login
        asks for the scope it names, even if the old token still opens the
        session."""
        if name not in self._step_ups or self.pending(name) is None:
            return None
        held_url, challenge = self._step_ups.pop(name)
        return challenge if held_url == url else None

    async def begin(
        self,
        name: str,
        port: int | None = None,
        timeout: float = LOGIN_TIMEOUT,  # noqa: ASYNC109 - the login's own deadline
        *,
        device: bool = False,
    ) -> Login:
        """Open a login for `name` (ending one already under way) that waits
        `timeout` seconds for the browser (or the user's approval of a
        `device` login, which listens on no port); `serve()` it.

        Raises:
            OSError: The callback port cannot be bound.
        """
        old = self._logins.pop(name, None)
        if old is not None:
            old.finish("replaced by a new login")
        if device:
            login = Login(name, None, 0, timeout)
            self._logins[name] = login
            return login
        listener = await anyio.create_tcp_listener(
            local_host="127.0.0.1", local_port=port or 0
        )
        bound = listener.extra(anyio.abc.SocketAttribute.local_port)
        login = Login(name, listener, bound, timeout)
        self._logins[name] = login
        return login

    def pending(self, name: str) -> Login | None:
        """The login under way for `name`, if any."""
        login = self._logins.get(name)
        if login is not None and login.done.is_set():
            del self._logins[name]
            return None
        return login

    def end(self, name: str, error: str | None) -> None:
        """The try that used `name`'s login ended (None: connected)."""
        login = self._logins.pop(name, None)
        if login is not None:
            login.finish(error)

    async def redirect(self, name: str, url: str) -> None:
        """The SDK's `redirect_handler` for connection `name`.

        Raises:
            LoginRequired: No login is under way: the user must run `login`.
        """
        login = self.pending(name)
        if login is None:
            raise LoginRequired(NO_LOGIN)
        login.show(url)

    async def callback(self, name: str) -> AuthorizationCodeResult:
        """The SDK's `callback_handler` for connection `name`."""
        login = self.pending(name)
        if login is None:
            raise LoginRequired(NO_LOGIN)
        return await login.code()


def _first(query: dict[str, list[str]], key: str) -> str | None:
    values = query.get(key)
    return values[0] if values else None


async def _read_head(stream: anyio.abc.SocketStream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data and b"\n\n" not in data:
        data += await stream.receive(4096)
        if len(data) > _REQUEST_LIMIT:
            break
    return data
