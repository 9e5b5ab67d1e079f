"""The replies of `login`, `login_wait`, `login_callback` and `logout`, typed.

Each a `wire.Wire`, read back forgivingly like every reply (`replies.py` says
how). Pure: the CLI's light client imports it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .wire import Wire

__all__ = [
    "CallbackReply",
    "LoginResult",
    "LoginStart",
    "LogoutReply",
]


@dataclass(frozen=True, slots=True)
class LoginResult(Wire):
    """`login_wait`: how the login of a connection ended (or that it has not).

    Attributes:
        server: The connection.
        done: The login ended (else the wait timed out).
        connected: The connection is connected.
        state: Its state (`removed` if it is gone).
        error: Why the login failed, if it did.
        unsupported: The authorization server does not offer the kind of
            login asked for (`--device` without RFC 8628).
    """

    server: str = ""
    done: bool = False
    connected: bool = False
    state: str = ""
    error: str | None = None
    unsupported: bool = False


@dataclass(frozen=True, slots=True)
class LoginStart(LoginResult):
    """`login`: the authorization URL once the daemon has it, or how the login
    ended if it ended first.

    Attributes:
        url: The address the user opens; None if there is none (the login
            ended, or none was needed).
        redirect_uri: Where the browser is sent back (for `login --manual`).
        user_code: A device login's code, for the user to enter at `url`.
        url_complete: A device login's address with the code in it, if any.
    """

    url: str | None = None
    redirect_uri: str | None = None
    user_code: str | None = None
    url_complete: str | None = None

    @classmethod
    def of(
        cls,
        ended: LoginResult,
        url: str | None,
        redirect_uri: str | None,
        user_code: str | None = None,
        url_complete: str | None = None,
    ) -> LoginStart:
        """How the login stands (`ended`), with where the user goes."""
        return cls(
            server=ended.server,
            done=ended.done,
            connected=ended.connected,
            state=ended.state,
            error=ended.error,
            unsupported=ended.unsupported,
            url=url,
            redirect_uri=redirect_uri,
            user_code=user_code,
            url_complete=url_complete,
        )


@dataclass(frozen=True, slots=True)
class CallbackReply(Wire):
    """`login_callback`: what the daemon made of a pasted redirect URL.

    Attributes:
        server: The connection.
        message: What happened, for the user.
    """

    server: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class LogoutReply(Wire):
    """`logout`: whether there were tokens to forget.

    Attributes:
        server: The connection.
        forgot: Tokens or a client registration were stored and are gone.
    """

    server: str = ""
    forgot: bool = False
