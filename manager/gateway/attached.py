"""The endpoint on a Unix socket, for `mcp-manager attach` (one per client).

`mcp-manager attach` is what an editor spawns instead of its servers: a small
process that pumps its stdin/stdout to this socket, so every client on the
machine shares the daemon's one set of upstream connections. The socket lives
beside the control socket (`control.paths.attach_socket_path`), mode 0600 in
the same 0700 directory: whoever may talk to the control socket may attach,
nobody else.

Each connection starts with one greeting line, answered before any MCP:

    -> {"attach": 1, "profile": "coding", "client": "code", "pid": 4242, "ack": true,
        "key": "..."}
    <- {"ok": true, "ack": true}          (or {"error": "no profile named ..."})

`key` is the control socket's (`control.keys`): a process that cannot read
it (a confined server) is refused.

then carries MCP messages, one JSON text per line as on stdio, both eras: the
connection is one downstream session of the `Gateway`, so what an upstream
asks mid-call (sampling, elicitation, roots) goes to this client and no other.
The profile holds for the whole connection (`views.PROFILE`).

**At most once** (`core.once`). With `"ack": true` in the greeting, every
request read is acknowledged on a line of its own, `{"ack": [ids]}`, written
before the request goes anywhere: after a crash, `attach` sends again only
what was never acknowledged (or only reads). When the daemon stops, every
request still in flight is answered with `core.once.stopped_error` before the
socket closes (`stdio.fd_streams`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from ..control.keys import matches, peer
from ..control.paths import KEY_FIELD
from ..core.info import AttachedClient
from ..mcpserver.peers import STREAM_KEY
from .stdio import Wires, fd_streams
from .views import PROFILE

__all__ = [
    "ATTACH_VERSION",
    "GREETING_LIMIT",
    "GREETING_TIMEOUT",
    "Attached",
]

logger = logging.getLogger("manager.gateway")

ATTACH_VERSION = 1
"""The greeting's `attach` value this daemon speaks."""

GREETING_TIMEOUT = 5.0
"""Seconds a new connection has to send its greeting line."""

GREETING_LIMIT = 64 * 1024
"""Bytes a greeting line may take."""

_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
"""Where a 2026-07-28 request's envelope says who the client is."""


class Attached:
    """Serves the endpoint's SDK server on a Unix socket, one session per
    connection.

    Args:
        run_session: Runs one MCP session on a (read, write) stream pair until
            the client leaves (`Server.run` with the gateway's options).
        profiles: The declared profiles' names, asked at each greeting.
        forget: Called with a connection's session key once it ended, so
            nothing kept for that session (log level, subscriptions,
            list_changed) outlives it (`Gateway.forget_session`).
    """

    def __init__(
        self,
        run_session: Callable[[Any, Any], Any],
        profiles: Callable[[], Collection[str]],
        forget: Callable[[str], None] = lambda key: None,
    ) -> None:
        self._run_session = run_session
        self._profiles = profiles
        self._forget = forget
        self._clients: dict[int, AttachedClient] = {}
        self._ids = itertools.count(1)
        self._key = ""
        self.wires = Wires()
        """The clients' streams, for a stop that lets their calls end first."""
        self.path: Path | None = None

    @property
    def clients(self) -> tuple[AttachedClient, ...]:
        """Who is attached now, oldest first."""
        return tuple(self._clients.values())

    async def serve(
        self,
        path: Path,
        *,
        key: str,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on `path` (its directory exists and is private: the control
        socket's) until cancelled; the socket file goes with it. A client
        whose greeting does not carry `key` (the control socket's,
        `control.keys`) is refused."""
        self._key = key
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # the control socket is ours: so is this place
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            old_umask = os.umask(0o177)
            try:
                listener.bind(str(path))
            finally:
                os.umask(old_umask)
            os.chmod(path, 0o600)
            listener.listen(128)
            listener.setblocking(False)
        except OSError:
            listener.close()
            raise
        inode = os.lstat(path).st_ino
        self.path = path
        try:
            async with anyio.create_task_group() as tg:
                task_status.started()
                logger.debug("attach: listening on %s", path)
                while True:
                    await anyio.wait_readable(listener)
                    try:
                        conn, _ = listener.accept()
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError as exc:  # EMFILE and friends: say, then go on
                        logger.warning("attach: cannot accept a client: %s", exc)
                        await anyio.sleep(0.1)
                        continue
                    tg.start_soon(self._serve_client, conn)
        finally:
            listener.close()
            with contextlib.suppress(OSError):
                if os.lstat(path).st_ino == inode:
                    os.unlink(path)
            self.path = None

    async def _serve_client(self, conn: socket.socket) -> None:
        key = next(self._ids)
        with conn:
            conn.setblocking(False)
            greeting, rest = await _greeting(conn)
            if greeting is None:
                return
            if not matches(self._key, greeting.get(KEY_FIELD)):
                logger.warning(
                    "attach: refused %s: its greeting did not carry the "
                    "daemon's key (a confined server cannot read it)",
                    peer(conn),
                )
                await _send_line(
                    conn,
                    {"error": "refused: the greeting does not carry the daemon's key"},
                )
                return
            problem = self._refusal(greeting)
            if problem is not None:
                await _send_line(conn, {"error": problem})
                return
            acks = greeting.get("ack") is True
            await _send_line(conn, {"ok": True, "ack": True} if acks else {"ok": True})
            profile = str(greeting.get("profile") or "")
            self._clients[key] = AttachedClient(
                profile=profile,
                client=str(greeting.get("client") or "?")[:40],
                pid=_int(greeting.get("pid")),
                since=time.time(),
            )
            token = PROFILE.set(profile or None)
            # Its own name: what is kept per session (questions' routing, log
            # level, subscriptions) is never shared with another attach.
            session = f"attach:{key}"
            stream = STREAM_KEY.set(session)
            try:
                async with fd_streams(
                    conn.fileno(),
                    conn.fileno(),
                    rest,
                    acks=acks,
                    introduced=lambda params: self._introduced(key, params),
                    wires=self.wires,
                ) as (read, write):
                    await self._run_session(read, write)
            except Exception as exc:  # boundary: one client's end is not ours
                logger.debug("attach: a client's session ended: %r", exc)
            finally:
                STREAM_KEY.reset(stream)
                PROFILE.reset(token)
                self._forget(session)
                self._clients.pop(key, None)

    def _introduced(self, key: int, params: object) -> bool:
        """Whether a request says who the client is (`clientInfo.name` of
        its `initialize`, or of a 2026-07-28 request's envelope); if so, that
        is its name from now on, better than its process's (a Node or
        Electron client's is `MainThread`)."""
        if not isinstance(params, dict):
            return False
        info = params.get("clientInfo")
        meta = params.get("_meta")
        if info is None and isinstance(meta, dict):
            info = meta.get(_CLIENT_INFO)
        name = info.get("name") if isinstance(info, dict) else None
        if not isinstance(name, str) or not name.strip():
            return False
        client = self._clients.get(key)
        if client is not None:
            self._clients[key] = dataclasses.replace(client, client=name[:40])
        return True

    def _refusal(self, greeting: dict[str, object]) -> str | None:
        if greeting.get("attach") != ATTACH_VERSION:
            return (
                f"this daemon speaks attach version {ATTACH_VERSION}, not "
                f"{greeting.get('attach')!r}: use the mcp-manager that runs it"
            )
        profile = greeting.get("profile")
        if profile is None or profile == "":
            return None
        declared = self._profiles()
        if not isinstance(profile, str) or profile not in declared:
            known = ", ".join(sorted(declared)) or "none declared"
            return (
                f"no profile named {profile!r} (profiles: {known}); declare it with "
                "mcp_profile in startup.lua, or attach without --profile"
            )
        return None


async def _greeting(conn: socket.socket) -> tuple[dict[str, object] | None, bytes]:
    """The first line, parsed, and what came after it; None if there was
    none in time, or it was no JSON object (the client is told why)."""
    buffer = b""
    with anyio.move_on_after(GREETING_TIMEOUT):
        while b"\n" not in buffer and len(buffer) < GREETING_LIMIT:
            try:
                chunk = conn.recv(GREETING_LIMIT)
            except BlockingIOError:
                await anyio.wait_readable(conn)
                continue
            except OSError:
                return None, b""
            if not chunk:
                return None, b""
            buffer += chunk
    line, newline, rest = buffer.partition(b"\n")
    if not newline:
        return None, b""
    try:
        greeting = json.loads(line)
    except ValueError:
        greeting = None
    if not isinstance(greeting, dict):
        await _send_line(
            conn, {"error": "expected a greeting line first: use mcp-manager attach"}
        )
        return None, b""
    return greeting, rest


async def _send_line(conn: socket.socket, message: dict[str, object]) -> None:
    data = (json.dumps(message) + "\n").encode()
    with anyio.move_on_after(GREETING_TIMEOUT):
        while data:
            try:
                data = data[conn.send(data) :]
            except BlockingIOError:
                await anyio.wait_writable(conn)
            except OSError:
                return


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
