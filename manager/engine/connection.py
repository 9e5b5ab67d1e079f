"""One connection's record: what the rest of the daemon reads and tells it.

`Connection` holds the spec, the state (fed to the pure `state.transition()`,
whose events it publishes), the live upstream, its tools and catalog, captured
stderr, and the hooks a transport calls (stderr, logs, requests from the
server). Its `supervisor` (`engine/supervisor.py`) is the connection's only
task: the attempt → watch → retry loop, with its own state.

Removal is `conn.scope.cancel()` from anywhere; teardown below it is shielded
and bounded by the transport.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import anyio

from ..core.events import (
    AuthStep,
    CatalogChanged,
    LaunchLock,
    ResourceUpdated,
    ServerLog,
    ServerStderr,
)
from ..core.launch import LaunchNote
from ..core.redact import SecretRegistry, redact
from ..core.spec import ConnectionSpec
from ..core.state import (
    AttemptBegan,
    ConnectionState,
    HandshakeDone,
    Phase,
    ProcessSpawned,
    RefusalsCleared,
    Signal,
    StopRequested,
    transition,
)
from ..transport.base import (
    Catalog,
    Hooks,
    ServerRequestHandler,
    ToolInfo,
    Upstream,
)
from .bus import EventBus
from .lists import ListMemory
from .output import LOG_DATA_LIMIT, STDERR_LINE_LIMIT, StderrTail, log_text
from .pins import PinBook
from .supervisor import Supervisor
from .tracing import NO_TRACING, Tracing

__all__ = [
    "Connection",
    "ServerRequests",
]

logger = logging.getLogger(__name__)


class ServerRequests:
    """Where requests from upstreams go (`sampling`, `elicitation`): the gateway
    sets `handler`; until then they are refused. Log messages go to `on_log`
    too, in the order they came (it returns whether a client request being
    served took the message). Shared by every connection."""

    def __init__(self) -> None:
        self.handler: (
            Callable[[str, str, object, str | None, str | None, bool], object] | None
        ) = None
        self.on_log: Callable[[str, str, str | None, object], bool] | None = None
        self.answers: dict[str, Mapping[str, object]] = {}
        """What a call made without a client (`call --answer`) answers the
        server's questions with, by the link token the call carries."""


class Connection:
    """The live record of one declared connection.

    Args:
        spec: What to connect to.
        bus: Where state changes are published.
        clock: Wall clock (injectable).
        rand: Random source for jitter (injectable).
        tracing: Makes each connect attempt a current span (no-op by default).
    """

    def __init__(
        self,
        spec: ConnectionSpec,
        bus: EventBus,
        *,
        clock: Callable[[], float] = time.time,
        rand: Callable[[], float] = random.random,
        tracing: Tracing = NO_TRACING,
        secrets: SecretRegistry | None = None,
        requests: ServerRequests | None = None,
        lists: ListMemory | None = None,
        pins: PinBook | None = None,
    ) -> None:
        self.spec = spec
        self._pins = pins
        self.held: Mapping[str, frozenset[str]] = {}
        """Per kind (`tools`, `prompts`, `templates`), what is held back:
        changed since approved, under `pin = "strict"` (`engine.pins`)."""
        self._lists = lists if spec.on_demand else None
        self._secrets = secrets
        self._requests = requests if requests is not None else ServerRequests()
        self._tracing = tracing
        self.scope = anyio.CancelScope()
        self.state = ConnectionState(name=spec.name, since=clock())
        self.upstream: Upstream | None = None
        self.launch: LaunchNote | None = None
        """What its launch lock last said (`transport.stdio.locks`), if any."""
        self.tools: tuple[ToolInfo, ...] = ()
        self.catalog = Catalog()
        if self._lists is not None:  # shown while idle, before any session
            self.tools, self.catalog = self._lists.recall(spec)
            self.review_pins()  # what was held stays held while idle
        self.busy = 0
        """Requests to it under way (an on-demand connection stays up)."""
        self.last_used = time.monotonic()
        """When a request to it last ended (monotonic seconds)."""
        self.stderr = StderrTail()
        self.done = anyio.Event()
        self.publish_removed = True
        self._bus = bus
        self._clock = clock
        self._rand = rand
        self._connected = anyio.Event()
        self._settle_armed = False
        self.on_settled: Callable[[str | None], None] | None = None
        """Called once when the current (or next) try ends: None when it
        connected, else the error (a login waits for it)."""
        self.supervisor = Supervisor(
            self, clock=clock, rand=rand, tracing=tracing, secrets=secrets
        )
        """The connection's task: `await conn.supervisor.run(transport)`."""

    @property
    def name(self) -> str:
        """The connection name."""
        return self.spec.name

    @property
    def phase(self) -> Phase:
        """The current phase."""
        return self.state.phase

    def signal(self, sig: Signal) -> None:
        """Feed one signal to the state machine and publish what it decides."""
        self.state, events = transition(
            self.state, sig, self.spec.backoff, self.spec.stable_after
        )
        for event in events:
            self._bus.publish(event)

    async def wait_connected(self) -> bool:
        """Wait until the connection is connected (or removed). Returns connected."""
        # `upstream` goes first: a lost session is torn down (up to 2 s) before
        # the state machine hears of the loss, so the phase still says connected.
        while self.state.phase is not Phase.REMOVED and (
            self.upstream is None or self.state.phase is not Phase.CONNECTED
        ):
            await self._connected.wait()
        return self.state.phase is Phase.CONNECTED

    def retry_now(self) -> bool:
        """Cut the current backoff wait short. Returns whether one was cut."""
        return self.supervisor.retry_now()

    def forgive_refusals(self) -> None:
        """Count no earlier refused login (the user asks for another try)."""
        self.signal(RefusalsCleared(now=self._clock()))

    def try_for_login(self) -> None:
        """A login began: try now, or right after the try in flight (whose
        failure is not the login's: `on_settled` waits for a try that began
        after, or for any that connects)."""
        self._settle_armed = False
        self.supervisor.try_for_login()

    def attempt_began(self) -> None:
        """A try begins (the supervisor's): a login waiting is settled by it."""
        self._settle_armed = self.on_settled is not None
        self.signal(AttemptBegan(now=self._clock()))

    def settled(self, error: str | None) -> None:
        """The try a login waits for ended: None when it connected. A try
        that was in flight when the login began settles it too if it
        connected (it may have used the login's tokens: a login is for
        being connected); its failure is not the login's."""
        if not self._settle_armed and error is not None:
            return
        hook, self.on_settled = self.on_settled, None
        self._settle_armed = False
        if hook is not None:
            hook(error)

    def stop(self) -> None:
        """Request removal: cancel the supervisor; `done` is set once it closed."""
        self.scope.cancel()

    def disable(self) -> None:
        """Record that the connection is declared with `enabled = false`."""
        self.state = dataclasses.replace(
            self.state, phase=Phase.DISABLED, since=self._clock()
        )

    def mark_removed(self, *, publish: bool = True) -> None:
        """Record the terminal state (called once the supervisor has exited).

        Args:
            publish: Emit `removed`; False when a new spec replaced this one.
        """
        if publish:
            self.signal(StopRequested(now=self._clock()))
        else:
            self.state = dataclasses.replace(self.state, phase=Phase.REMOVED)
        self.upstream = None
        self._connected.set()
        self.done.set()
        self._settle_armed = True  # a login waiting for this one ends too
        self.settled("the connection was removed or replaced")

    # --- hooks from the transport (synchronous) -------------------------------

    def _on_spawn(self, pid: int) -> None:
        self.signal(ProcessSpawned(now=self._clock(), pid=pid))

    def _on_stderr(self, line: str) -> None:
        line = redact(line, self._secrets)[:STDERR_LINE_LIMIT]
        suppressed = self.stderr.add(line)
        if suppressed is None:
            return  # over this second's budget: counted, kept in the tail
        self._bus.publish(
            ServerStderr(name=self.name, line=line, suppressed=suppressed)
        )

    def _on_tools_changed(self) -> None:
        self._on_list_changed("tools")

    def _on_list_changed(self, kind: str) -> None:
        self.supervisor.relist(kind)

    def _on_resource_updated(self, uri: str) -> None:
        self._bus.publish(ResourceUpdated(name=self.name, uri=uri))

    def _on_log(self, level: str, logger_name: str | None, data: object) -> None:
        route = self._requests.on_log
        in_call = route is not None and route(self.name, level, logger_name, data)
        self._bus.publish(
            ServerLog(
                name=self.name,
                level=level,
                logger=logger_name or "",
                data=redact(log_text(data), self._secrets)[:LOG_DATA_LIMIT],
                in_call=in_call,
            )
        )

    async def _on_request(
        self,
        method: str,
        params: object,
        link: str | None,
        key: str | None = None,
        beside: bool = False,
    ) -> object:
        answer = self._requests.answers.get(link) if link is not None else None
        if answer is not None:
            return dict(answer)  # the transport reads it as that method's result
        handler = self._requests.handler
        if handler is None:
            raise NotImplementedError(method)
        result = handler(self.name, method, params, link, key, beside)
        return await result if inspect.isawaitable(result) else result

    def _on_auth(
        self, step: str, outcome: str, status: int, elapsed: float, error: str
    ) -> None:
        if step == "refresh" and outcome == "ok":
            # The server renews what a login got: those logins were not refused.
            self.signal(RefusalsCleared(now=self._clock()))
        self._bus.publish(
            AuthStep(
                name=self.name,
                step=step,
                outcome=outcome,
                status=status,
                elapsed=elapsed,
                error=redact(error, self._secrets),
            )
        )

    def _on_launch(self, note: LaunchNote) -> None:
        self.launch = note
        self._bus.publish(
            LaunchLock(
                name=self.name,
                change=note.change,
                package=note.package,
                version=note.version,
                available=note.available,
                reason=redact(note.reason, self._secrets),
            )
        )

    def _roots(self) -> tuple[str, ...]:
        return self.spec.roots

    def hooks(self) -> Hooks:
        """What the transport calls while this connection's session lives."""
        on_request: ServerRequestHandler = self._on_request
        return Hooks(
            on_spawn=self._on_spawn,
            on_stderr=self._on_stderr,
            on_tools_changed=self._on_tools_changed,
            on_list_changed=self._on_list_changed,
            on_resource_updated=self._on_resource_updated,
            on_log=self._on_log,
            on_request=on_request,
            roots=self._roots if self.spec.roots else None,
            on_auth=self._on_auth,
            on_launch=self._on_launch,
        )

    # --- what the supervisor records ----------------------------------------------

    def in_use(self) -> _InUse:
        """A request to it is under way (`with conn.in_use():`): an on-demand
        connection starts (if idle) and is not stopped before it ends."""
        return _InUse(self)

    def set_connected(self, upstream: Upstream, elapsed: float) -> None:
        """A try connected: the session, its lists, `connected`."""
        self.upstream = upstream
        self.tools = upstream.tools
        self.catalog = upstream.catalog
        if self._lists is not None:
            self._lists.keep(self.spec, self.tools, self.catalog)
        self.review_pins()
        info = upstream.info
        self.signal(
            HandshakeDone(
                now=self._clock(),
                tools=tuple(sorted(t.name for t in upstream.tools)),
                server_name=info.name,
                server_version=info.version,
                protocol=info.protocol,
                elapsed=elapsed,
            )
        )
        self._connected.set()
        self.settled(None)

    def review_pins(self) -> None:
        """Compare what the server lists with its pins (`engine.pins`): what
        changed is told, and under `strict` held back (`held`)."""
        if self._pins is None:
            return
        review = self._pins.review(
            self.spec,
            {
                "tools": [tool.raw for tool in self.tools],
                "prompts": self.catalog.prompts,
                "templates": self.catalog.templates,
            },
        )
        self.held = review.held

    def shown(self, kind: str, items: Sequence[T]) -> Sequence[T]:
        """`items` of `kind` (tools, prompts, templates) without those held."""
        held = self.held.get(kind)
        if not held:
            return items
        key = "uriTemplate" if kind == "templates" else "name"
        return [item for item in items if _item_name(item, key) not in held]

    def set_disconnected(self) -> None:
        """The session is gone (lost or never made)."""
        self.upstream = None
        if self._connected.is_set():
            self._connected = anyio.Event()

    def set_catalog(self, catalog: Catalog, kinds: tuple[str, ...]) -> None:
        """New lists of `kinds` (after `list_changed`): each is told as
        changed, as the server said, with what was added and removed."""
        old, self.catalog = self.catalog, catalog
        if kinds:
            self.review_pins()
        for kind in kinds:
            before, after = set(old.names(kind)), set(catalog.names(kind))
            if kind == "templates" and getattr(old, kind) == getattr(catalog, kind):
                continue  # listed with resources, not announced on their own
            self._bus.publish(
                CatalogChanged(
                    name=self.name,
                    items=kind,
                    added=tuple(sorted(after - before)),
                    removed=tuple(sorted(before - after)),
                    count=len(after),
                )
            )


T = TypeVar("T")


def _item_name(item: Any, key: str) -> object:
    """An item's name: a `ToolInfo`'s, or a definition's `name`/`uriTemplate`."""
    if isinstance(item, Mapping):
        return item.get(key)
    return getattr(item, "name", None)


class _InUse:
    """`Connection.in_use`: a class, not a generator, as it is on every call's
    path (a generator context manager costs several times more)."""

    __slots__ = ("_conn",)

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        conn = self._conn
        conn.busy += 1
        if conn.spec.on_demand:
            conn.supervisor.want()

    def __exit__(self, *exc_info: object) -> None:
        conn = self._conn
        conn.busy -= 1
        conn.last_used = time.monotonic()
