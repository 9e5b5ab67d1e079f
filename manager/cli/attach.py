"""`mcp-manager attach`: an editor's stdio MCP server that is the running daemon.

Clients that spawn their servers as commands spawn this instead; it pumps
their stdin/stdout to the daemon's attach socket (`gateway.attached`) and
holds nothing of its own, so N clients attached share one process per
upstream, not N. The standard library only, one thread, no event loop
library: it answers its first message in a few milliseconds.

**The daemon restarting under it.** When the socket closes, `attach`
connects again (every 50 ms at first, doubling to 1 s) and, on the new
daemon, replays the client's `initialize` (its answer swallowed) and
`notifications/initialized`, and tells a handshake-era client
`notifications/tools/list_changed`. A request is never sent twice where it
may have run (`core.once`): the daemon acknowledges each request it reads
before serving it, and answers those in flight when it stops; after a crash,
the new daemon gets only what the old one never acknowledged, plus requests
that only read. Any other request in flight gets `core.once.stopped_error`.
While requests wait for a daemon, stderr says so once (`HOLDING`). A request
still waiting `hold` seconds after the daemon went away gets a JSON-RPC error
naming the socket and what to do.

**Which daemon**: the one at `control.paths.find_socket` (the default places
are looked at even when the client that spawned us dropped
`$XDG_RUNTIME_DIR`). **No daemon at start**: one line on stderr and exit 2;
with `--start`, a daemon is started in the background (`mcp-manager run
CONFIG`, its output in `daemon.log` beside the socket) and waited for; a lock
beside the socket makes `attach --start`s started together start one.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import json
import os
import select
import selectors
import socket
import stat
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ..control.paths import (
    KEY_FIELD,
    attach_socket_path,
    find_socket,
    read_attach_key,
)
from ..core.once import may_repeat, stopped_error
from .arguments import Parser, non_negative_float
from .exits import PROG, fail

TYPE_CHECKING = False  # as `typing` says; importing it costs a CLI command ~4 ms
if TYPE_CHECKING:
    import subprocess

__all__ = [
    "ATTACH_VERSION",
    "DEFAULT_HOLD",
    "START_WAIT",
    "Bridge",
    "add_parsers",
    "default_config",
    "main_attach",
]

ATTACH_VERSION = 1
"""The greeting's `attach` value (`gateway.attached.ATTACH_VERSION`)."""

DEFAULT_HOLD = 5.0
"""Seconds a request waits for a daemon that went away (mcp_add's `hold`)."""
HOLDING = "the daemon is not there; requests wait for it"
"""What stderr says, once per absence, when a request waits for the daemon."""

START_WAIT = 30.0
"""Seconds `--start` waits for the daemon it started to listen."""

GREETING_WAIT = 5.0
"""Seconds the daemon has to answer the greeting."""

RETRY_FIRST, RETRY_CAP = 0.05, 1.0
"""Reconnect schedule: seconds before the first retry, and the most between."""

REPLAY_ID = "mcp-manager-attach-replay"
"""The id of a replayed `initialize`, whose answer the client never sees."""

DRAIN_LIMIT = 2.0
"""Seconds a blocking flush (at the end, or stdin closed) may take."""

INTERNAL_ERROR = -32603

_CHUNK = 256 * 1024


def default_config() -> Path | None:
    """The startup.lua `--start` runs: `$MCP_MANAGER_CONFIG`, else
    `$XDG_CONFIG_HOME/mcp-manager/startup.lua` (`~/.config/...`), else
    `./startup.lua`; None if none of them is a file."""
    env = os.environ.get("MCP_MANAGER_CONFIG")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    for candidate in (Path(base) / "mcp-manager" / "startup.lua", Path("startup.lua")):
        if candidate.is_file():
            return candidate.resolve()
    return None


def _client_name() -> str:
    """The program that spawned us (`/proc/PPID/comm`), for status and the HUD."""
    try:
        with open(f"/proc/{os.getppid()}/comm", encoding="utf-8") as comm:
            return comm.read().strip() or "?"
    except OSError:
        return "?"


class Refused(Exception):
    """The daemon answered the greeting with an error (an unknown profile)."""


def connect(path: Path, profile: str | None) -> tuple[socket.socket, bool]:
    """A connection to the attach socket, greeted and accepted, and whether
    the daemon acknowledges the requests it takes (`gateway.attached`).

    Raises:
        OSError: Nobody listens there (FileNotFoundError, ConnectionRefusedError).
        Refused: The daemon refused the greeting; the message says why.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(GREETING_WAIT)
        sock.connect(str(path))
        greeting = {
            "attach": ATTACH_VERSION,
            "profile": profile,
            "client": _client_name(),
            "pid": os.getpid(),
            "ack": True,
        }
        key = read_attach_key(path)  # the daemon's of now: new at each start
        if key:
            greeting[KEY_FIELD] = key
        sock.sendall(json.dumps(greeting).encode() + b"\n")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionResetError(errno.ECONNRESET, "the daemon hung up")
            reply += chunk
        answer = json.loads(reply)
        if not isinstance(answer, dict) or answer.get("ok") is not True:
            message = answer.get("error") if isinstance(answer, dict) else None
            raise Refused(str(message or f"unexpected greeting answer {reply!r}"))
        sock.setblocking(False)
        return sock, answer.get("ack") is True
    except BaseException:
        sock.close()
        raise


QUEUED, SENT, TAKEN = "queued", "sent", "taken"
"""Where a request of the client stands: waiting for a daemon, handed to the
socket, acknowledged by the daemon (it may run)."""


class _Request:
    """A request of the client not answered yet: its line as the client
    wrote it, its id and method, since when it waits, where it stands."""

    __slots__ = ("id", "line", "method", "since", "state")

    def __init__(
        self, line: bytes, message: dict[str, object], since: float, state: str
    ) -> None:
        self.line = line
        self.id = message["id"]
        self.method = message["method"]
        self.since = since
        self.state = state


class Bridge:
    """The pump between the client's pipes and the daemon's socket.

    Args:
        path: The attach socket.
        profile: The profile to attach to (None: everything).
        hold: Seconds a request waits for a daemon that went away.
        sock: A connection already made (`connect`).
        stdin_fd: Where the client's messages come from.
        stdout_fd: Where the daemon's go.
        acks: Whether the daemon behind `sock` acknowledges what it takes.
    """

    def __init__(
        self,
        path: Path,
        profile: str | None,
        hold: float,
        sock: socket.socket,
        stdin_fd: int = 0,
        stdout_fd: int = 1,
        *,
        acks: bool = True,
    ) -> None:
        self.path = path
        self.profile = profile
        self.hold = hold
        self.sock: socket.socket | None = sock
        self.stdin_fd = stdin_fd
        self.stdout_fd = stdout_fd
        self.to_client = bytearray()
        self.to_daemon = bytearray()
        self.acks = acks
        self.pending: dict[str, _Request] = {}  # by `_key(id)`
        self.initialize: dict[str, object] | None = None
        self.initialized: bytes | None = None
        self.down_since: float | None = None
        self.retry_at = 0.0
        self.retry_wait = RETRY_FIRST
        self.replays = 0
        self.stdin_open = True
        self.from_client = b""
        self.from_daemon = b""
        self.refused: str | None = None
        self.told_holding = False
        self.watch_stdout = stdout_fd != stdin_fd and _is_pipe(stdout_fd)

    # --- the loop ---------------------------------------------------------------

    def run(self) -> int:
        """Pump until the client closes stdin (0) or the daemon refuses us (2)."""
        os.set_blocking(self.stdin_fd, False)
        os.set_blocking(self.stdout_fd, False)
        selector = selectors.DefaultSelector()
        try:
            while self.stdin_open or self.to_client or self.pending:
                if self.refused is not None:
                    self._flush_client(blocking=True)
                    print(f"{PROG} attach: {self.refused}", file=sys.stderr)
                    return 2
                self._register(selector)
                ready = selector.select(self._timeout())
                for key, mask in ready:
                    if key.fd == self.stdin_fd:
                        self._read_client()
                    elif key.fd == self.stdout_fd:
                        if not self.to_client and _reader_gone(self.stdout_fd):
                            return 0  # the client exited: nobody waits for answers
                        self._flush_client()
                    elif self.sock is not None and key.fd == self.sock.fileno():
                        if mask & selectors.EVENT_READ:
                            self._read_daemon()
                        if mask & selectors.EVENT_WRITE and self.sock is not None:
                            self._flush_daemon()
                self._tick()
                if not self.stdin_open and not self.pending:
                    break
            self._flush_client(blocking=True)
            return 0
        except BrokenPipeError:  # the client is gone
            return 0
        finally:
            selector.close()
            if self.sock is not None:
                self.sock.close()

    def _register(self, selector: selectors.BaseSelector) -> None:
        for key in list(selector.get_map().values()):
            selector.unregister(key.fileobj)
        if self.stdin_open:
            selector.register(self.stdin_fd, selectors.EVENT_READ)
        if self.to_client:
            selector.register(self.stdout_fd, selectors.EVENT_WRITE)
        elif not self.stdin_open and self.watch_stdout:
            # Its stdin ended: a client that only closed it still reads the
            # answers; one that exited has no reader left on the pipe, which
            # epoll reports as an error on our end (never as readable).
            selector.register(self.stdout_fd, selectors.EVENT_READ)
        if self.sock is not None:
            events = selectors.EVENT_READ
            if self.to_daemon:
                events |= selectors.EVENT_WRITE
            selector.register(self.sock, events)

    def _timeout(self) -> float | None:
        if self.sock is not None:
            return None
        now = time.monotonic()
        deadlines = [self.retry_at]
        if self.down_since is not None:
            deadlines += [
                max(request.since, self.down_since) + self.hold
                for request in self.pending.values()
            ]
        return max(0.0, min(deadlines) - now)

    def _tick(self) -> None:
        if self.sock is not None:
            return
        now = time.monotonic()
        if self.down_since is not None:
            for key, request in list(self.pending.items()):
                if now - max(request.since, self.down_since) >= self.hold:
                    del self.pending[key]
                    self._answer_error(request, now - self.down_since)
        if now >= self.retry_at:
            self._reconnect()

    # --- client side ------------------------------------------------------------

    def _read_client(self) -> None:
        try:
            chunk = os.read(self.stdin_fd, _CHUNK)
        except BlockingIOError:
            return
        if not chunk:
            self.stdin_open = False
            if self.from_client.strip():
                self._from_client(self.from_client)
            self.from_client = b""
            self._flush_daemon(blocking=True)
            return
        *lines, self.from_client = (self.from_client + chunk).split(b"\n")
        for line in lines:
            if line.strip():
                self._from_client(line)

    def _from_client(self, line: bytes) -> None:
        message = _parsed(line)
        if isinstance(message, dict) and "method" in message:
            method = message["method"]
            if "id" in message:
                state = SENT if self.sock is not None else QUEUED
                self.pending[_key(message["id"])] = _Request(
                    line, message, time.monotonic(), state
                )
                if state == QUEUED:
                    self._holding()
                if method == "initialize":
                    self.initialize = message
            elif method == "notifications/initialized":
                self.initialized = line
        if self.sock is not None:
            self.to_daemon += line + b"\n"
            self._flush_daemon()
        # else: requests wait in `pending` for the next daemon; a notification
        # or an answer to the old daemon's question has nobody to go to.

    def _flush_client(self, *, blocking: bool = False) -> None:
        _send(lambda data: os.write(self.stdout_fd, data), self.to_client, blocking)

    def _answer_error(self, request: _Request, down: float) -> None:
        error = {
            "jsonrpc": "2.0",
            "id": request.id,
            "error": {
                "code": INTERNAL_ERROR,
                "message": (
                    f"mcp-manager: the daemon has not been reachable for {down:.1f} s "
                    f"(no answer on {self.path}); start it with `mcp-manager run "
                    "startup.lua`, or check `mcp-manager status`"
                ),
            },
        }
        self.to_client += json.dumps(error).encode() + b"\n"
        self._flush_client()

    # --- daemon side ------------------------------------------------------------

    def _read_daemon(self) -> None:
        assert self.sock is not None
        try:
            chunk = self.sock.recv(_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._lost()
            return
        self._from_daemon(chunk)
        self._flush_client()

    def _from_daemon(self, chunk: bytes) -> None:
        *lines, self.from_daemon = (self.from_daemon + chunk).split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            message = _parsed(line)
            if isinstance(message, dict) and "method" not in message:
                if "ack" in message and "jsonrpc" not in message:
                    self._taken(message["ack"])
                    continue  # ours, not the client's
                if "id" in message:
                    if str(message["id"]).startswith(REPLAY_ID):
                        continue  # the replayed initialize's answer
                    self.pending.pop(_key(message["id"]), None)
            self.to_client += line + b"\n"

    def _taken(self, ids: object) -> None:
        for request_id in ids if isinstance(ids, list) else ():
            request = self.pending.get(_key(request_id))
            if request is not None:
                request.state = TAKEN

    def _drain_daemon(self) -> None:
        """What the daemon wrote before it went away: answers and
        acknowledgements decide what may be sent again."""
        assert self.sock is not None
        while True:
            try:
                chunk = self.sock.recv(_CHUNK)
            except OSError:  # drained (BlockingIOError), or reset
                return
            if not chunk:
                return
            self._from_daemon(chunk)

    def _flush_daemon(self, *, blocking: bool = False) -> None:
        if self.sock is None:
            return
        try:
            _send(self.sock.send, self.to_daemon, blocking)
        except OSError:  # the daemon went away: reconnect, send again
            self._lost()

    def _lost(self) -> None:
        if self.sock is not None:
            self._drain_daemon()
            self.sock.close()
        self.sock = None
        self._settle()
        self.to_daemon.clear()
        self.from_daemon = b""
        now = time.monotonic()
        self.down_since = now
        self.retry_wait = RETRY_FIRST
        self.retry_at = now + self.retry_wait
        self._flush_client()

    def _settle(self) -> None:
        """After the daemon went away: a request it may have run gets
        `stopped_error` now; the others wait for the next daemon."""
        for key, request in list(self.pending.items()):
            taken = request.state == TAKEN or (request.state == SENT and not self.acks)
            if taken and not may_repeat(request.method):
                del self.pending[key]
                answer = stopped_error(
                    request.id, request.method, where="the mcp-manager daemon went away"
                )
                self.to_client += json.dumps(answer).encode() + b"\n"
            else:
                request.state = QUEUED
                self._holding()

    def _holding(self) -> None:
        """Say once per absence of the daemon that requests wait for it: the
        line an editor's MCP log shows while a request seems to hang."""
        if not self.told_holding:
            self.told_holding = True
            print(
                f"{PROG} attach: {HOLDING} (up to {self.hold:g} s) at {self.path}",
                file=sys.stderr,
                flush=True,
            )

    def _reconnect(self) -> None:
        try:
            sock, self.acks = connect(self.path, self.profile)
        except Refused as exc:
            self.refused = str(exc)
            return
        except OSError:
            self.retry_wait = min(self.retry_wait * 2, RETRY_CAP)
            self.retry_at = time.monotonic() + self.retry_wait
            return
        self.sock = sock
        self.down_since = None
        self.told_holding = False
        if self.initialize is not None:
            self.replays += 1
            replay = {**self.initialize, "id": f"{REPLAY_ID}-{self.replays}"}
            self.to_daemon += json.dumps(replay).encode() + b"\n"
            if self.initialized is not None:
                self.to_daemon += self.initialized + b"\n"
        for request in self.pending.values():
            request.state = SENT
            self.to_daemon += request.line + b"\n"
        if self.initialize is not None:
            # What the new daemon lists may differ: a handshake-era client
            # lists again when told.
            changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
            self.to_client += json.dumps(changed).encode() + b"\n"
        self._flush_daemon()


def _is_pipe(fd: int) -> bool:
    """Whether `fd` is a pipe (a client's stdout: its reader's exit shows)."""
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False


def _reader_gone(fd: int) -> bool:
    """Whether the pipe `fd` writes to has no reader left (POLLERR)."""
    poll = select.poll()
    poll.register(fd, 0)  # errors and hang-ups are always reported
    return any(events & select.POLLERR for _, events in poll.poll(0))


def _send(write: Callable[[bytes], int], buffer: bytearray, blocking: bool) -> None:
    """Write what `buffer` holds; what was written leaves it. Blocking, keep
    trying for at most `DRAIN_LIMIT` seconds: a peer that stopped reading
    never holds `attach` forever."""
    deadline = time.monotonic() + DRAIN_LIMIT
    while buffer:
        try:
            sent = write(bytes(buffer))
        except BlockingIOError:
            if not blocking or time.monotonic() > deadline:
                return
            time.sleep(0.001)
            continue
        del buffer[:sent]


def _parsed(line: bytes) -> object:
    try:
        return json.loads(line)
    except ValueError:
        return None


def _key(request_id: object) -> str:
    return json.dumps(request_id)


# ---------------------------------------------------------------- the command


def _start_daemon(control: Path, config: Path) -> subprocess.Popen[bytes]:
    """`mcp-manager run CONFIG` in the background, its own session, its
    output in `daemon.log` beside the socket."""
    import subprocess  # only for --start: ten milliseconds of every start

    control.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    log = control.parent / "daemon.log"
    with open(log, "ab") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "manager",
                "run",
                str(config),
                "--socket",
                str(control),
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            cwd=config.parent,
        )


@contextlib.contextmanager
def _start_lock(control: Path) -> Iterator[None]:
    """One `attach --start` at a time for a socket (a lock file beside it):
    the others wait, then find the daemon the first one started.

    Raises:
        OSError: The lock is not ours within `START_WAIT` seconds.
    """
    control.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = control.with_name(f"{control.name}.start.lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + START_WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise OSError(
                        f"another `attach --start` holds {lock} for more than "
                        f"{START_WAIT:g} s"
                    ) from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # the lock goes with it


def _start_and_connect(
    control: Path, config: Path, profile: str | None
) -> tuple[socket.socket, bool]:
    """A daemon started on `control` (unless one started meanwhile), connected.

    Raises:
        OSError: It did not start; the message says where its log is.
        Refused: It refused the greeting.
    """
    path = attach_socket_path(control)
    with _start_lock(control):
        with contextlib.suppress(OSError):
            return connect(path, profile)  # started by the one before us
        daemon = _start_daemon(control, config)
        deadline = time.monotonic() + START_WAIT
        while True:
            try:
                return connect(path, profile)
            except OSError:
                if daemon.poll() is not None or time.monotonic() > deadline:
                    log = control.parent / "daemon.log"
                    raise OSError(f"the daemon did not start (see {log})") from None
                time.sleep(0.05)


def _cmd_attach(args: argparse.Namespace) -> int:
    control = find_socket(args.socket)
    path = attach_socket_path(control)
    try:
        sock, acks = connect(path, args.profile)
    except Refused as exc:
        return fail(f"attach: {exc}")
    except OSError as exc:
        if not args.start:
            return fail(
                f"attach: no daemon is running (nothing listens on {path}: "
                f"{exc.strerror or exc}); start one with `mcp-manager run "
                "startup.lua`, or use `mcp-manager attach --start`"
            )
        config = Path(args.config) if args.config else default_config()
        if config is None or not config.is_file():
            return fail(
                "attach --start: no startup.lua to run (tried $MCP_MANAGER_CONFIG, "
                "~/.config/mcp-manager/startup.lua, ./startup.lua); give --config FILE"
            )
        try:
            sock, acks = _start_and_connect(control, config.resolve(), args.profile)
        except Refused as exc:
            return fail(f"attach: {exc}")
        except OSError as exc:
            return fail(f"attach --start: {exc}")
    bridge = Bridge(path, args.profile, args.hold, sock, acks=acks)
    with contextlib.suppress(KeyboardInterrupt):
        return bridge.run()
    return 0


_DESCRIPTION = (
    "An MCP server on stdin/stdout for clients that spawn commands: it is the "
    "running daemon's endpoint (every client shares one set of servers), and it "
    "outlives the daemon restarting."
)


def _add_arguments(attach: argparse.ArgumentParser) -> None:
    attach.add_argument(
        "--profile", help="the profile to see (mcp_profile in startup.lua)"
    )
    attach.add_argument(
        "--start",
        action="store_true",
        help="start a daemon in the background if none runs",
    )
    attach.add_argument(
        "--config",
        help="the startup.lua --start runs (default: $MCP_MANAGER_CONFIG, "
        "~/.config/mcp-manager/startup.lua, ./startup.lua)",
    )
    attach.add_argument(
        "--hold",
        type=non_negative_float,
        default=DEFAULT_HOLD,
        help="seconds a request waits for a restarting daemon "
        f"(default {DEFAULT_HOLD:g})",
    )


def main_attach(argv: list[str]) -> int:
    """`mcp-manager attach ARGS`, parsed without the whole command line (an
    editor spawns it for every window: its start is the client's wait)."""
    parser = Parser(prog=f"{PROG} attach", description=_DESCRIPTION)
    parser.add_argument("--socket", metavar="PATH", default=None, help="control socket")
    _add_arguments(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    return _cmd_attach(args)


def add_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    """Add `attach`."""
    attach = sub.add_parser(
        "attach",
        parents=[common],
        help="serve the running daemon's MCP endpoint on stdin/stdout (for editors)",
        description=_DESCRIPTION,
    )
    _add_arguments(attach)
    attach.set_defaults(handler=_cmd_attach)
