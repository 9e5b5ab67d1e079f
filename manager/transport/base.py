"""The seam between a connection and its upstream: data types and protocols.

`connection.py` and the test fakes know only these: `Transport.open(spec, hooks)`
yields an `Upstream`. Nothing here imports the `mcp` SDK.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..core.launch import LaunchNote
from ..core.spec import ConnectionSpec

if TYPE_CHECKING:
    from .stdio.locks import LaunchLocks

__all__ = [
    "CATALOG_KINDS",
    "HANDSHAKE",
    "LINK_META_KEY",
    "MODERN",
    "OAuthLogins",
    "Launching",
    "StartCounts",
    "TASKS_EXTENSION",
    "UI_EXTENSION",
    "APP_MIME_TYPE",
    "Refusal",
    "Relay",
    "RequestLinks",
    "CallResult",
    "Catalog",
    "ListHint",
    "EXIT_CODE_WAIT",
    "Hooks",
    "ServerRequestHandler",
    "LossReport",
    "ProgressCallback",
    "ServerInfo",
    "Streams",
    "ToolInfo",
    "Transport",
    "Upstream",
    "take_link",
    "unlinked",
]

EXIT_CODE_WAIT = 0.5
"""Seconds to wait for an exit code after a stdio server closed its stdout."""


class ProgressCallback(Protocol):
    """Receives a call's `notifications/progress` from the server."""

    async def __call__(
        self, progress: float, total: float | None, message: str | None
    ) -> None: ...


class Relay(Protocol):
    """A transport's one sender of a client's requests (`relay.StdioRelay`,
    `http.relay.HttpRelay`, `relay.DispatcherRelay`): one request straight to
    the server, its result as the server sent it."""

    async def request(
        self,
        method: str,
        params: dict[str, Any],
        limit: float,
        progress: ProgressCallback | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        cancel: bool = True,
    ) -> dict[str, Any]: ...


def _no_session() -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class Streams:
    """One open attempt's streams, as every opener gives them.

    Attributes:
        read: The SDK session's read stream.
        write: Its write stream.
        pid: The server's process id (stdio), else None.
        relay: The transport's own sender of client requests, if it has one
            (a process's pipe, streamable HTTP); None: the session's
            dispatcher sends them (legacy SSE, in-memory streams).
        session_id: The HTTP session id the server gave so far (handshake
            era over streamable HTTP), else None.
    """

    read: Any
    write: Any
    pid: int | None = None
    relay: Relay | None = None
    session_id: Callable[[], str | None] = _no_session


# ----------------------------------------------------------------- data


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """One upstream tool as listed.

    Attributes:
        name: The tool's name on its server.
        description: Its description, or "".
        raw: The full tool definition as a JSON-ready dict (camelCase keys).
    """

    name: str
    description: str
    raw: Mapping[str, object]


CATALOG_KINDS = ("prompts", "resources", "templates")
"""What an upstream lists besides tools. `templates` are resource templates;
they change with `resources` (there is no list_changed of their own)."""


@dataclass(frozen=True, slots=True)
class ListHint:
    """How long a client may keep a list (`ttlMs`) and whether it may share
    it with other users (`cacheScope`), as a server said (2026-07-28)."""

    ttl_ms: int = 0
    private: bool = True

    def merged(self, other: ListHint) -> ListHint:
        """Pages of one list: the shortest non-zero life, private if any is."""
        lives = [t for t in (self.ttl_ms, other.ttl_ms) if t > 0]
        return ListHint(min(lives, default=0), self.private or other.private)


@dataclass(frozen=True, slots=True)
class Catalog:
    """An upstream's prompts, resources and resource templates, as listed.

    Each item is its JSON-ready definition (camelCase keys, as on the wire): the
    gateway re-validates what it exposes, and nothing below it reads more than
    `name`, `uri` or `uriTemplate`. A kind the server does not offer is empty.
    """

    prompts: tuple[Mapping[str, object], ...] = ()
    resources: tuple[Mapping[str, object], ...] = ()
    templates: tuple[Mapping[str, object], ...] = ()
    hints: Mapping[str, ListHint] = field(default_factory=dict)
    """A 2026-07-28 server's freshness hints per list (`tools` too), by kind;
    none for a kind it gave none (the handshake era has none)."""

    def names(self, kind: str) -> tuple[str, ...]:
        """The names (prompts) or URIs (resources, templates) of one kind, sorted."""
        key = {"prompts": "name", "resources": "uri", "templates": "uriTemplate"}[kind]
        items: tuple[Mapping[str, object], ...] = getattr(self, kind)
        return tuple(sorted(str(item.get(key, "")) for item in items))


@dataclass(frozen=True, slots=True)
class CallResult:
    """A tool call's result.

    Attributes:
        is_error: The tool reported an error (`isError`).
        data: The result as a JSON-ready dict (camelCase keys, as on the wire).
    """

    is_error: bool
    data: Mapping[str, object]


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What the server told us in `initialize`.

    `capabilities` is its `ServerCapabilities` in wire form (`{"prompts":
    {"listChanged": true}, "logging": {}, ...}`).
    """

    name: str
    version: str
    protocol: str
    session_id: str | None = None
    capabilities: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Refusal:
    """An HTTP 401/403 from the server: status, its `WWW-Authenticate` and
    whether we had sent an `Authorization` header."""

    status: int
    challenge: str
    had_authorization: bool


@dataclass(frozen=True, slots=True)
class LossReport:
    """Why an established session ended."""

    reason: str
    exit_code: int | None = None
    error_type: str = "Disconnected"


class ServerRequestHandler(Protocol):
    """Answers a request the server sends us (`sampling/createMessage`,
    `elicitation/create`).

    `params` and the return value are the SDK's objects (opaque below the
    gateway); return the SDK's `ErrorData` to refuse. `link` is the
    `LINK_META_KEY` value of our request it arrived with, when the transport
    can tell (streamable HTTP: on that request's response stream), else None.
    `key` is the server's own name for the request (the key of a 2026-07-28
    input request, or the JSON-RPC id), kept where the request is passed on.
    `beside` says the session of the other era beside the connection's own
    asks (`side.EraSide`): it serves other requests than the connection's.
    """

    async def __call__(
        self,
        method: str,
        params: Any,
        link: str | None,
        key: str | None = None,
        beside: bool = False,
    ) -> Any: ...


async def _refuse(
    method: str,
    params: Any,
    link: str | None,
    key: str | None = None,
    beside: bool = False,
) -> Any:
    raise NotImplementedError(method)


TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The tasks extension (SEP-2663): routed by the gateway, claimed by the
session (`transport/tasks.py`)."""

UI_EXTENSION = "io.modelcontextprotocol/ui"
"""MCP Apps: views (`ui://` resources) a host shows for a server's tools. The
daemon declares it to every server (it carries views to the clients that
host them: `gateway/apps.py`), and a calling client's declaration passes on."""

APP_MIME_TYPE = "text/html;profile=mcp-app"
"""The MIME type of an MCP Apps view, the one kind the daemon declares."""

HANDSHAKE = "handshake"
"""`call_tool`'s `era` for a client of the handshake era (2024-11-05 to 2025-11-25)."""

MODERN = "2026-07-28"
"""`call_tool`'s `era` for a client of the 2026-07-28 revision, and the era a
server that refuses the handshake is met in."""

LINK_META_KEY = "mcp-manager/request"
"""`_meta` key we put on a request to an upstream that may ask the client
something mid-request: a token naming the downstream request it serves."""

_LINK_BYTES = LINK_META_KEY.encode()


def take_link(message: bytes) -> tuple[str | None, bytes]:
    """Our `LINK_META_KEY` token in `message` (one JSON-RPC message, maybe
    with its line end), and the message without it: the token is for us (it
    names a downstream request to the transport that sends it), never for
    the server. (None, `message`) when it carries none."""
    if _LINK_BYTES not in message:
        return None, message
    try:
        parsed = json.loads(message)
        meta = parsed["params"]["_meta"]
        token = meta.pop(LINK_META_KEY)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None, message  # the words in an argument, not our token
    if not meta:
        del parsed["params"]["_meta"]
    end = b"\n" if message.endswith(b"\n") else b""
    body = json.dumps(parsed, separators=(",", ":"), ensure_ascii=False).encode()
    return (token if isinstance(token, str) else None), body + end


def unlinked(message: bytes) -> bytes:
    """`message` without our link token (`take_link`)."""
    return take_link(message)[1]


LINKS_KEPT = 1000
"""Server request ids remembered per session until their callback asks."""


class RequestLinks:
    """Which of our requests a server's request came with (streamable HTTP).

    The HTTP transport records, for each server request seen on the response
    stream of one of ours, that request's `LINK_META_KEY` token; the callback
    answering it takes the token back out. Bounded: old entries go first.
    """

    def __init__(self) -> None:
        self._links: dict[object, str] = {}

    def record(self, server_request_id: object, token: str) -> None:
        self._links[server_request_id] = token
        while len(self._links) > LINKS_KEPT:
            del self._links[next(iter(self._links))]

    def pop(self, server_request_id: object) -> str | None:
        return self._links.pop(server_request_id, None)


@dataclass(slots=True)
class Hooks:
    """Callbacks from the transport to its connection.

    Attributes:
        on_spawn: A stdio server process started (pid).
        on_stderr: A line the server wrote to stderr (or a note about bad stdout).
        on_tools_changed: The server sent `notifications/tools/list_changed`.
        on_list_changed: The server sent `notifications/prompts/list_changed`
            (`"prompts"`) or `notifications/resources/list_changed`
            (`"resources"`).
        on_resource_updated: `notifications/resources/updated` for a URI.
        on_log: `notifications/message`: level, logger (or None) and data.
        on_request: Answers the server's sampling and elicitation requests
            (async; the others are synchronous).
        roots: The connection's declared roots, read when `roots/list` comes
            (None: we do not offer roots).
        links: Filled by the HTTP transport, read by `on_request`'s caller.
        on_auth: An OAuth step ended: step, outcome (`ok`/`failed`), HTTP
            status (0: none), seconds it took, error (never a secret).
        on_launch: The launch lock of a stdio server locked, updated, saw a
            newer release, or could not lock (`stdio.locks`).
    """

    on_spawn: Callable[[int], None] = lambda pid: None
    on_stderr: Callable[[str], None] = lambda line: None
    on_tools_changed: Callable[[], None] = lambda: None
    on_list_changed: Callable[[str], None] = lambda kind: None
    on_resource_updated: Callable[[str], None] = lambda uri: None
    on_log: Callable[[str, str | None, object], None] = lambda level, log, data: None
    on_request: ServerRequestHandler = _refuse
    roots: Callable[[], tuple[str, ...]] | None = None
    links: RequestLinks = field(default_factory=RequestLinks)
    on_auth: Callable[[str, str, int, float, str], None] = (
        lambda step, outcome, status, elapsed, error: None
    )
    on_launch: Callable[[LaunchNote], None] = lambda note: None


class Upstream(Protocol):
    """A connected, initialized session with all tools listed."""

    @property
    def info(self) -> ServerInfo:
        """Server identity and negotiated protocol."""
        ...

    @property
    def pid(self) -> int | None:
        """The stdio server process id, None for HTTP/SSE."""
        ...

    @property
    def tools(self) -> tuple[ToolInfo, ...]:
        """All tools, as listed at connect time or by the last `list_tools()`."""
        ...

    async def list_tools(self) -> tuple[ToolInfo, ...]:
        """List all pages again.

        Raises:
            TransportError: The session failed.
        """
        ...

    @property
    def catalog(self) -> Catalog:
        """Prompts, resources and templates, as listed at connect time or by
        the last `list_catalog()`."""
        ...

    async def list_catalog(self, kinds: tuple[str, ...] = CATALOG_KINDS) -> Catalog:
        """List `kinds` again (every page), as far as the server offers them.

        Raises:
            TransportError: The session failed.
        """
        ...

    async def send(
        self,
        request: Any,
        result_type: Any,
        limit: float,
        *,
        progress: ProgressCallback | None = None,
    ) -> Any:
        """Send any request (an SDK request object) and return its typed result.

        The gateway forwards what a downstream client asked (prompts/get,
        resources/read, completion/complete, ...) through this one door.

        Raises:
            UpstreamError: The server answered with a JSON-RPC error (its code
                and message are kept, to pass on).
            TransportError: The session failed, or no answer within `limit`
                (`ConnectTimeout`).
        """
        ...

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, object] | None,
        limit: float,
        *,
        meta: Mapping[str, object] | None = None,
        progress: ProgressCallback | None = None,
    ) -> CallResult:
        """Call a tool.

        Args:
            name: The tool's name on this server.
            arguments: Its arguments.
            limit: Seconds to wait for the result.
            meta: `_meta` to send with the request (e.g. W3C `traceparent`).
            progress: Receives the server's progress notifications for the call.

        Raises:
            TransportError: Disconnected (the session died) or ConnectTimeout-like
                failures; `MCPError`s from the server are mapped too.
        """
        ...

    async def for_era(self, era: str | None, limit: float) -> Upstream:
        """The session that serves a client of `era` (`HANDSHAKE`, `MODERN`, or
        None: any): this one, or, with a server that speaks both eras, the
        session of the client's era beside it (`side.EraSide`), so the client
        meets the server as it would straight. Waits at most `limit` seconds
        for that session to open; this one if it cannot."""
        ...

    def beside(self) -> str:
        """The session of the other era beside this one while it is open
        (`side.EraSide`): its era, and its process where it has one
        (`2026-07-28, pid 4242`); "" when none is open."""
        ...

    def apart(self, era: str | None) -> bool:
        """Whether a client of `era` is served by a session of its own era
        beside this one (`for_era`), not refused by the server lately."""
        ...

    def capabilities_for(self, era: str | None) -> Mapping[str, object] | None:
        """What the server offers a client of `era` (wire form, as `info`'s):
        what the session that serves it (`for_era`) said, without opening
        one; None while that is a session beside never opened yet (nor
        remembered from an earlier daemon): `for_era` opens it."""
        ...

    async def notify_roots_changed(self) -> None:
        """Send `notifications/roots/list_changed` (the declared roots changed)."""
        ...

    async def ping(self, limit: float) -> None:
        """Check the server answers (ping, or a cheap tools/list if ping is unknown).

        Raises:
            Disconnected: No answer within `timeout`, or the session failed.
        """
        ...

    async def wait_lost(self) -> LossReport:
        """Return when the transport itself reports the end (EOF, exit)."""
        ...

    async def wait_suspect(self) -> str:
        """Return when the server may have gone, saying why (its HTTP event
        stream ended, or an idle connection to it closed).

        Not a loss by itself (servers end that stream at will): the caller
        probes with a ping at once instead of at the next `ping_interval`.
        """
        ...


@runtime_checkable
class OAuthLogins(Protocol):
    """What a transport that is the OAuth client of its servers also does
    (`connect.McpTransport`); the engine asks for it by this protocol, never
    by probing attributes."""

    @property
    def logins(self) -> object:
        """The login desk (`oauth.login.LoginDesk`) of interactive logins."""
        ...

    def token_expiry(self, name: str) -> float | None:
        """When `name`'s access token expires (epoch seconds), if known."""
        ...

    def forget(self, name: str) -> bool:
        """Forget `name`'s tokens and client registration; whether any were kept."""
        ...


class StartCounts(Protocol):
    """How many stdio servers may start at once, are starting, wait to."""

    @property
    def size(self) -> int: ...

    @property
    def in_use(self) -> int: ...

    @property
    def waiting(self) -> int: ...


@runtime_checkable
class Launching(Protocol):
    """What a transport that launches server processes also does
    (`connect.McpTransport`): it locks registry launches (`stdio.locks`),
    confines servers (`stdio.process`) and paces their starts
    (`stdio.starts`). A transport without it (tests' fakes) has none of them."""

    @property
    def launches(self) -> LaunchLocks:
        """The launch locks of every connection."""
        ...

    async def resolved(self, spec: ConnectionSpec) -> ConnectionSpec:
        """`spec` with its `${...}` references read (what the server gets)."""
        ...

    def confinement(self, spec: ConnectionSpec) -> str:
        """How `spec`'s server runs, as status says it (`""` for no process,
        `off`, `landlock`, `refused`, `UNCONFINED: WHY`)."""
        ...

    @property
    def starts(self) -> StartCounts:
        """The start slots of stdio servers."""
        ...


class Transport(Protocol):
    """Opens upstream sessions. `connection.py` knows only this protocol."""

    def open(
        self, spec: ConnectionSpec, hooks: Hooks
    ) -> AbstractAsyncContextManager[Upstream]:
        """Connect, initialize and list all tools within `spec.connect_timeout`.

        Raises:
            TransportError: On any failure, already mapped and redacted.
            ConfigError: A `${env:NAME}` in the spec is not set.
        """
        ...
