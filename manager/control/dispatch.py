"""The control API's commands: what the daemon must offer (`ControlBackend`),
and how one request line becomes a call on it (`parse_request`, `dispatch`).

`server` owns the sockets; this module owns the meaning of each command and the
checks of its arguments (a malformed request is a `BadRequest`, answered with
`ControlError`, never a crash).
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from ..core.errors import ManagerError
from ..core.events import ApprovalAsked, ToolChanged, event_to_dict
from ..core.info import DaemonInfo
from ..core.login import CallbackReply, LoginResult, LoginStart, LogoutReply
from ..core.replies import (
    ApproveReply,
    CallLogReply,
    CatalogRow,
    ConnectionDetails,
    Pong,
    ReconnectReply,
    ReloadSummary,
    TokenReply,
    UpdateReply,
)
from .protocol import LOGIN_DEFAULT_TIMEOUT, error_body

if TYPE_CHECKING:
    from ..core.status import ConnectionStatus
    from ..engine.bus import Subscription

__all__ = ["BadRequest", "ControlBackend", "dispatch", "parse_request"]

logger = logging.getLogger("manager.control")


class ControlBackend(Protocol):
    """What the control server needs from the daemon.

    Each command answers with its typed reply (`manager.core.replies`);
    `dispatch` turns it into its wire form. Only `call` and `request` answer
    with a JSON object: the MCP result itself.
    """

    def status(self) -> list[ConnectionStatus]:
        """A snapshot: one status per connection."""
        ...

    def subscribe(self, name: str, since: int | None = None) -> Subscription:
        """A new bus subscription; the server closes it when the client leaves.

        `since`: the daemon's kept events after that `seq` come first.
        """
        ...

    def info(self) -> DaemonInfo:
        """Daemon-wide facts: config file, last reload result, drops, exporters."""
        ...

    def reconnect(self, server: str) -> ReconnectReply:
        """Make `server` try to connect now, skipping its backoff wait.

        Raises:
            UnknownServer: No such connection.
        """
        ...

    def details(self, server: str) -> ConnectionDetails:
        """`server`'s spec (secrets masked), last stderr lines and tool names.

        Raises:
            UnknownServer: No such connection.
        """
        ...

    async def reload(self) -> ReloadSummary:
        """Run startup.lua again and apply it.

        Raises:
            ConfigError: The script failed; nothing was changed.
        """
        ...

    async def call(
        self,
        server: str,
        tool: str,
        args: dict[str, object],
        timeout: float | None,  # noqa: ASYNC109  (the per-call MCP timeout, not ours)
        answer: dict[str, object] | None = None,
    ) -> dict[str, object]:
        """Call a tool; returns the JSON-ready `CallToolResult` dict.

        Raises:
            CallError: The call could not be made or did not finish.
        """
        ...

    async def request(
        self,
        server: str,
        op: str,
        target: str,
        args: dict[str, object],
        timeout: float | None,  # noqa: ASYNC109  (the per-request MCP timeout)
    ) -> dict[str, object]:
        """`read` a resource or get a `prompt`; returns the JSON-ready result.

        Raises:
            CallError: The request could not be made or did not finish.
        """
        ...

    def catalog(self, kind: str, server: str | None) -> list[CatalogRow]:
        """What `tools`, `prompts` or `resources` each connection has, with the
        name the endpoint exposes and whether its filter hides it."""
        ...

    async def login(
        self,
        server: str,
        timeout: float,  # noqa: ASYNC109
        device: bool = False,
    ) -> LoginStart:
        """Begin an OAuth login (`device`: RFC 8628): the authorization URL (or
        the device login's address and user code) once known, or the end."""
        ...

    async def login_wait(self, server: str, timeout: float) -> LoginResult:  # noqa: ASYNC109
        """Wait for the login of `server` to end: connected, or why not."""
        ...

    def login_callback(self, server: str, url: str) -> CallbackReply:
        """Take the redirect URL a user pasted (`login --manual`)."""
        ...

    def changes(self, server: str | None) -> list[ToolChanged]:
        """Definitions that differ from their pins, not approved yet.

        Raises:
            UnknownServer: No such connection.
        """
        ...

    def approve(self, server: str, items: list[str]) -> ApproveReply:
        """Pin what `server` lists now (every item, or `items`).

        Raises:
            UnknownServer: No such connection, or no such item.
        """
        ...

    async def update(self, server: str, take: bool, version: str) -> UpdateReply:
        """A launch lock and the newer release it could take; `take`: take
        `version` (what was shown) and restart the server on it.

        Raises:
            UnknownServer: No such connection.
            ControlError: Nothing to take, or the offer changed since shown.
        """
        ...

    def logout(self, server: str) -> LogoutReply:
        """Forget the tokens and client registration of `server`."""
        ...

    def pending(self) -> list[ApprovalAsked]:
        """The calls waiting for the user's approval (`mcp_policy` `ask`)."""
        ...

    def decide(
        self, approval: str, verdict: str, scope: str, by: str = "cli"
    ) -> ApprovalAsked:
        """The user's answer to a waiting call: `allow` or `deny`, for
        `once`, `session` or `always`, given at the CLI or an attached HUD.

        Raises:
            ControlError: No call waits under that id, or a bad verdict/scope.
        """
        ...

    def grants(self) -> list[dict[str, str]]:
        """The standing approvals (`always`, `session`): scope, server, tool,
        client."""
        ...

    def revoke(self, server: str, tool: str | None) -> list[dict[str, str]]:
        """Take back the standing approvals of `server`'s `tool` (all of its
        tools with None); what went."""
        ...

    def result(self, result_id: str) -> dict[str, object]:
        """A whole tool result that `max_output` cut, while it is kept.

        Raises:
            CallError: No such result (or no longer kept).
        """
        ...

    def token(self, rotate: bool) -> TokenReply:
        """Where the HTTP endpoint's bearer token is; with `rotate`, a new
        one replaces it first.

        Raises:
            EndpointError: No HTTP endpoint, or a token the daemon does not own.
        """
        ...

    async def call_log(self) -> CallLogReply:
        """Write the call log's queued rows now; where the log is."""
        ...


class BadRequest(Exception):
    """The request line is not a valid request; answered with ControlError."""


def parse_request(line: bytes) -> tuple[str, dict[str, object]]:
    try:
        req = json.loads(line)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest(f"request is not valid JSON: {exc}") from None
    if not isinstance(req, dict):
        raise BadRequest(f"request must be a JSON object, got {type(req).__name__}")
    req.pop("key", None)  # checked by the server (`control.keys`), never passed on
    cmd = req.pop("cmd", None)
    if not isinstance(cmd, str):
        raise BadRequest('request needs "cmd" (a string)')
    allowed = _ARGUMENTS.get(cmd)
    if allowed is None:
        known = ", ".join(sorted(_ARGUMENTS))
        raise BadRequest(f"unknown command {cmd!r}; known: {known}")
    extra = sorted(set(req) - allowed)
    if extra:
        raise BadRequest(f"{cmd}: unknown argument(s) {', '.join(extra)}")
    return cmd, req


_ARGUMENTS: dict[str, frozenset[str]] = {
    "ping": frozenset(),
    "status": frozenset(),
    "info": frozenset(),
    "reload": frozenset(),
    "reconnect": frozenset({"server"}),
    "details": frozenset({"server"}),
    "events": frozenset({"json", "since"}),
    "call": frozenset({"server", "tool", "args", "timeout", "answer"}),
    "request": frozenset({"server", "op", "target", "args", "timeout"}),
    "catalog": frozenset({"kind", "server"}),
    "login": frozenset({"server", "timeout", "device"}),
    "login_wait": frozenset({"server", "timeout"}),
    "login_callback": frozenset({"server", "url"}),
    "logout": frozenset({"server"}),
    "changes": frozenset({"server"}),
    "approve": frozenset({"server", "items"}),
    "pending": frozenset(),
    "decide": frozenset({"id", "verdict", "scope", "by"}),
    "grants": frozenset(),
    "revoke": frozenset({"server", "tool"}),
    "token": frozenset({"rotate"}),
    "call_log": frozenset(),
    "result": frozenset({"id"}),
    "update": frozenset({"server", "take", "version"}),
}

CATALOG_KINDS = ("tools", "prompts", "resources")
REQUEST_OPS = ("read", "prompt")


def _call_arguments(
    req: Mapping[str, object],
) -> tuple[str, str, dict[str, object], float | None, dict[str, object] | None]:
    server, tool = req.get("server"), req.get("tool")
    answer = req.get("answer")
    if answer is not None and not isinstance(answer, dict):
        raise BadRequest('call: "answer" must be a JSON object or absent')
    args = req.get("args", {})
    timeout = req.get("timeout")
    if not isinstance(server, str) or not server:
        raise BadRequest('call: "server" must be a non-empty string')
    if not isinstance(tool, str) or not tool:
        raise BadRequest('call: "tool" must be a non-empty string')
    if not isinstance(args, dict):
        raise BadRequest('call: "args" must be a JSON object')
    if timeout is not None:
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise BadRequest('call: "timeout" must be a positive number or null')
        timeout = float(timeout)
    return server, tool, args, timeout, answer


async def _login_command(
    backend: ControlBackend, cmd: str, req: Mapping[str, object]
) -> dict[str, object]:
    server = req.get("server")
    if not isinstance(server, str) or not server:
        raise BadRequest(f'{cmd}: "server" must be a non-empty string')
    if cmd == "logout":
        return backend.logout(server).to_dict()
    if cmd == "login_callback":
        url = req.get("url")
        if not isinstance(url, str) or not url:
            raise BadRequest('login_callback: "url" must be a non-empty string')
        return backend.login_callback(server, url).to_dict()
    timeout = req.get("timeout", LOGIN_DEFAULT_TIMEOUT)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise BadRequest(f'{cmd}: "timeout" must be a positive number')
    if cmd == "login":
        device = req.get("device", False)
        if not isinstance(device, bool):
            raise BadRequest('login: "device" must be true or false')
        return (await backend.login(server, float(timeout), device)).to_dict()
    return (await backend.login_wait(server, float(timeout))).to_dict()


async def dispatch(
    backend: ControlBackend, cmd: str, req: Mapping[str, object]
) -> object:
    """Run one non-streaming command; returns the response object (the
    backend's typed reply in its wire form)."""
    try:
        if cmd == "ping":
            result: object = Pong(pid=os.getpid()).to_dict()
        elif cmd == "status":
            result = [status.to_dict() for status in backend.status()]
        elif cmd == "info":
            result = backend.info().to_dict()
        elif cmd == "reload":
            result = (await backend.reload()).to_dict()
        elif cmd in ("reconnect", "details"):
            server = req.get("server")
            if not isinstance(server, str) or not server:
                raise BadRequest(f'{cmd}: "server" must be a non-empty string')
            if cmd == "reconnect":
                result = backend.reconnect(server).to_dict()
            else:
                result = backend.details(server).to_dict()
        elif cmd == "catalog":
            kind, server = req.get("kind"), req.get("server")
            if kind not in CATALOG_KINDS:
                raise BadRequest(f'catalog: "kind" must be one of {CATALOG_KINDS}')
            if server is not None and not isinstance(server, str):
                raise BadRequest('catalog: "server" must be a string or null')
            result = [row.to_dict() for row in backend.catalog(str(kind), server)]
        elif cmd == "changes":
            server = req.get("server")
            if server is not None and not isinstance(server, str):
                raise BadRequest('changes: "server" must be a string or null')
            result = [event_to_dict(change) for change in backend.changes(server)]
        elif cmd == "approve":
            server, items = req.get("server"), req.get("items", [])
            if not isinstance(server, str) or not server:
                raise BadRequest('approve: "server" must be a non-empty string')
            if not isinstance(items, list) or not all(
                isinstance(i, str) for i in items
            ):
                raise BadRequest('approve: "items" must be a list of names')
            result = backend.approve(server, list(items)).to_dict()
        elif cmd == "pending":
            result = [event_to_dict(asked) for asked in backend.pending()]
        elif cmd == "decide":
            approval, verdict = req.get("id"), req.get("verdict")
            scope = req.get("scope", "once")
            if not isinstance(approval, str) or not approval:
                raise BadRequest('decide: "id" must be a non-empty string')
            if verdict not in ("allow", "deny"):
                raise BadRequest('decide: "verdict" must be "allow" or "deny"')
            if scope not in ("once", "session", "always"):
                raise BadRequest(
                    'decide: "scope" must be "once", "session" or "always"'
                )
            by = req.get("by", "cli")
            if by not in ("cli", "hud"):
                raise BadRequest('decide: "by" must be "cli" or "hud"')
            result = event_to_dict(
                backend.decide(approval, str(verdict), str(scope), str(by))
            )
        elif cmd == "grants":
            result = backend.grants()
        elif cmd == "revoke":
            server, tool = req.get("server"), req.get("tool")
            if not isinstance(server, str) or not server:
                raise BadRequest('revoke: "server" must be a non-empty string')
            if tool is not None and (not isinstance(tool, str) or not tool):
                raise BadRequest('revoke: "tool" must be a non-empty string or null')
            result = backend.revoke(server, tool)
        elif cmd == "update":
            server, take = req.get("server"), req.get("take", False)
            version = req.get("version", "")
            if not isinstance(server, str) or not server:
                raise BadRequest('update: "server" must be a non-empty string')
            if not isinstance(take, bool):
                raise BadRequest('update: "take" must be true or false')
            if not isinstance(version, str):
                raise BadRequest('update: "version" must be a string')
            result = (await backend.update(server, take, version)).to_dict()
        elif cmd == "result":
            result_id = req.get("id")
            if not isinstance(result_id, str) or not result_id:
                raise BadRequest('result: "id" must be a non-empty string')
            result = backend.result(result_id)
        elif cmd == "token":
            rotate = req.get("rotate", False)
            if not isinstance(rotate, bool):
                raise BadRequest('token: "rotate" must be true or false')
            result = backend.token(rotate).to_dict()
        elif cmd == "call_log":
            result = (await backend.call_log()).to_dict()
        elif cmd in ("login", "login_wait", "login_callback", "logout"):
            result = await _login_command(backend, cmd, req)
        elif cmd == "request":
            op = req.get("op")
            if op not in REQUEST_OPS:
                raise BadRequest(f'request: "op" must be one of {REQUEST_OPS}')
            server, target, args, timeout, _ = _call_arguments(
                {**req, "tool": req.get("target")}
            )
            result = await backend.request(server, str(op), target, args, timeout)
        else:  # call
            server, tool, args, timeout, answer = _call_arguments(req)
            result = await backend.call(server, tool, args, timeout, answer)
    except BadRequest as exc:
        return {"ok": False, "error": {"type": "ControlError", "message": str(exc)}}
    except ManagerError as exc:
        return {"ok": False, "error": error_body(exc)}
    except Exception as exc:  # boundary: a backend bug must not kill the server
        logger.exception("control: %s failed", cmd)
        message = f"internal error ({type(exc).__name__}); see the daemon's log"
        return {"ok": False, "error": {"type": "InternalError", "message": message}}
    return {"ok": True, "result": result}
