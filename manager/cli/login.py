"""`mcp-manager login NAME` and `logout NAME`: OAuth for a running daemon.

`login` asks the daemon to begin the flow and prints the authorization URL on a
line of its own (and opens a browser when there is one, unless `--no-browser`).
The daemon takes the browser's redirect on its one-shot loopback callback;
`login` exits 0 once the connection is connected, 1 with the reason otherwise.
For a daemon on another machine: forward the callback port (`ssh -L`), or
`--manual` and paste the address the browser ends on, or `--device` (RFC 8628,
where the authorization server offers it): open the address it prints on any
device and enter the code; the daemon polls until it is approved. A server
without device login: exit 2 with the sentence saying what to use instead.

`mcp-manager secret set SERVICE/NAME` stores a secret in the OS keychain for
`${keyring:SERVICE/NAME}` in startup.lua (`engine.vault`); the value is read
from the terminal without echo, or from stdin when it is piped.
"""

from __future__ import annotations

import argparse
import sys

from ..control.client import ControlClient
from ..control.paths import find_socket
from ..control.protocol import LOGIN_DEFAULT_TIMEOUT
from ..core.errors import CallError
from ..core.text import first_line
from .exits import fail

TYPE_CHECKING = False  # as `typing` says; importing it costs a CLI command ~4 ms
if TYPE_CHECKING:  # a type only: the replies load where a command reads one
    from ..core.login import LoginResult

__all__ = ["add_parsers"]


def _open_browser(url: str) -> bool:
    """Open `url` in a browser if this machine has one that can show it."""
    import webbrowser

    try:
        browser = webbrowser.get()
    except webbrowser.Error:
        return False
    if type(browser).__name__ in ("GenericBrowser", "BackgroundBrowser"):
        # A text-mode fallback (lynx, w3m...) would take over this terminal.
        names = ("lynx", "w3m", "links", "elinks", "www-browser")
        if getattr(browser, "name", "") in names:
            return False
    try:
        return bool(browser.open(url, new=2))
    except Exception:
        return False


def _ended(result: LoginResult, name: str) -> int:
    if result.connected:
        print(f"{name}: connected", flush=True)
        return 0
    error = result.error or f"the connection is {result.state}"
    if result.unsupported:
        return fail(f"{name}: {error}")
    print(f"mcp-manager: login of {name} failed: {error}", file=sys.stderr)
    return 1


def _device_login(client: ControlClient, name: str, timeout: float) -> int:
    """`login --device`: print the address and the code, wait for the end."""
    started = client.login(name, timeout, device=True)
    if started.url is None or started.user_code is None:
        if started.connected:
            print(f"{name}: connected (no login needed)", flush=True)
            return 0
        return _ended(started, name)
    print(f"To log {name} in, open this address on any device:", file=sys.stderr)
    print(started.url, flush=True)
    print(f"and enter the code: {started.user_code}", flush=True)
    if started.url_complete:
        print("or open this address, which carries the code:", file=sys.stderr)
        print(started.url_complete, flush=True)
    print(f"waiting for the approval (at most {timeout:g} s)...", file=sys.stderr)
    return _ended(client.login_wait(name, timeout + 30.0), name)


def _cmd_login(args: argparse.Namespace) -> int:
    client = ControlClient(find_socket(args.socket))
    name = args.server
    if args.timeout <= 0:
        return fail("--timeout must be a positive number of seconds")
    if args.device:
        if args.manual:
            return fail("--device and --manual are two ways of one login: pick one")
        return _device_login(client, name, args.timeout)
    started = client.login(name, args.timeout)  # an unknown name: main says it
    url = started.url
    if url is None:
        if started.connected:
            print(f"{name}: connected (no login needed)", flush=True)
            return 0
        return _ended(started, name)
    print(f"Open this address to log {name} in:", file=sys.stderr)
    print(url, flush=True)
    if args.manual:
        print(
            "After approving, paste the address your browser ended on "
            f"(it starts with {started.redirect_uri}):",
            file=sys.stderr,
        )
        pasted = sys.stdin.readline().strip()
        if not pasted:
            return fail("no address pasted; the login is abandoned", 1)
        try:
            client.login_callback(name, pasted)
        except CallError as exc:  # not the callback, or another login's
            return fail(f"login of {name} failed: {first_line(exc)}", 1)
    elif not args.no_browser and _open_browser(url):
        print("(opened in your browser)", file=sys.stderr)
    print(f"waiting for the login (at most {args.timeout:g} s)...", file=sys.stderr)
    return _ended(client.login_wait(name, args.timeout + 30.0), name)


def _cmd_logout(args: argparse.Namespace) -> int:
    result = ControlClient(find_socket(args.socket)).logout(args.server)
    what = "forgot its tokens" if result.forgot else "no tokens were stored"
    print(f"{args.server}: logged out ({what}); it now waits for a login")
    return 0


def _cmd_secret(args: argparse.Namespace) -> int:
    from ..core.errors import ConfigError
    from ..engine.vault import in_clear, store

    if sys.stdin.isatty():
        import getpass

        value = getpass.getpass(f"value for {args.reference} (not shown): ")
    else:
        value = sys.stdin.read().rstrip("\r\n")
    if not value:
        return fail("no value given: nothing stored")
    try:
        backend = store(args.reference, value)
    except ConfigError as exc:
        return fail(str(exc))
    print(
        f"stored {args.reference} in the keychain ({backend}); use "
        f"${{keyring:{args.reference}}} in startup.lua"
    )
    warning = in_clear(backend)
    if warning is not None:
        print(f"mcp-manager: {warning}", file=sys.stderr)
    return 0


def add_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    """Add `login`, `logout` and `secret`."""
    secret = sub.add_parser(
        "secret",
        parents=[common],
        help="store a secret in the OS keychain for ${keyring:SERVICE/NAME}",
    )
    verbs = secret.add_subparsers(dest="verb", required=True, metavar="set")
    put = verbs.add_parser(
        "set", help="store SERVICE/NAME (the value: typed unseen, or piped)"
    )
    put.add_argument("reference", metavar="SERVICE/NAME")
    put.set_defaults(handler=_cmd_secret)
    login = sub.add_parser(
        "login",
        parents=[common],
        help="log a connection in with OAuth (prints the address to open)",
    )
    login.add_argument("server", metavar="SERVER")
    login.add_argument(
        "--no-browser", action="store_true", help="print the address, open nothing"
    )
    login.add_argument(
        "--manual",
        action="store_true",
        help="for a daemon on another machine: paste the address the browser "
        "ends on instead of reaching the daemon's loopback callback",
    )
    login.add_argument(
        "--device",
        action="store_true",
        help="no browser here: print an address and a code to enter on any "
        "device (RFC 8628, where the authorization server offers it)",
    )
    login.add_argument(
        "--timeout",
        type=float,
        default=LOGIN_DEFAULT_TIMEOUT,
        metavar="S",
        help="seconds to wait for the browser or the device approval "
        f"(default {LOGIN_DEFAULT_TIMEOUT:g})",
    )
    login.set_defaults(handler=_cmd_login)

    logout = sub.add_parser(
        "logout",
        parents=[common],
        help="forget a connection's OAuth tokens and client registration",
    )
    logout.add_argument("server", metavar="SERVER")
    logout.set_defaults(handler=_cmd_logout)
