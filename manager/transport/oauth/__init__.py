"""The OAuth 2.1 client of a remote server, and the facade the engine uses.

Modules: `door` (which connections use OAuth, `oauth_auth`: the `httpx2.Auth`
each gets), `auth` (`ConnectionAuth`, the flow over the SDK's providers),
`answers` (what the flow reads in servers' answers: challenges, steps, whose
metadata it is), `keys` (a `private_key_jwt` client's signing key), `login`
(the one-shot loopback callback), `tokens` (one 0600 token file per
connection), `device` (RFC 8628).

The facade: what the engine needs of OAuth, importable from here.
"""

from .door import uses_oauth
from .login import LOGIN_TIMEOUT, NO_LOGIN, Login, LoginDesk

__all__ = ["LOGIN_TIMEOUT", "NO_LOGIN", "Login", "LoginDesk", "uses_oauth"]
