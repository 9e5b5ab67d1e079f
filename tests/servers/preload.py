"""Python processes for tests, forked from an interpreter that already imported the SDK.

A daemon (`python -m manager run`) or a demo server (`python -m
manager.demo_server`) spends 1.4 to 1.9 s of CPU importing `mcp`, `mcp_types`
and pydantic before it runs a line of ours: about a third of the suite's CPU
went there. A `Preloader` (one per pytest worker, started on first use) imports
those libraries once and forks a child per start. The child sets up what exec
would (stdio, environment, working directory, `sys.argv`, `sys.path[0]`) and
runs the module as `python -m` does, then leaves the interpreter the normal way
(atexit, thread joins, exit status). Nothing of `manager` is imported before
the fork: the code under test starts as fresh as after an exec.

Two doors:
- `popen(argv, ...)`, for processes a test starts itself: a
  `subprocess.Popen`-like handle (`pid`, `poll`, `wait`, `send_signal`,
  `kill`, `terminate`, `returncode`). It forks only for `sys.executable -m
  MODULE ...` whose `PYTHON*` environment starts an interpreter as the
  preloader's did (`_starts_alike`: those variables shape the
  interpreter's start); anything else gets a real `subprocess.Popen`.
- `launch_command(module, *args)`, for stdio servers a daemon starts: the
  command runs `launch.py`, a 20 ms stand-in process that has the preloader
  fork the server with its stdio (see there for what it stands for).
`MM_TESTS_FORK=0` in the environment turns both off: every process is exec'd.

What differs from an exec, on purpose:
- the process's parent is the preloader, not the test (its descendants are the
  test's all the same; `preloader_pid()` is skipped by leak checks, its
  children are not);
- signals go through a pidfd, so a PID reused after the exit is never hit;
- the exit status comes from the preloader, which reaps the child.

The command line stays the preloader's. The CLI tests and everything the
daemon starts itself still exec a fresh interpreter.

Run as a script, this file is the preloader: fd 3 is its control socket.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

__all__ = ["ForkedProcess", "launch_command", "popen", "preloader_pid"]

LAUNCH_SCRIPT = Path(__file__).with_name("launch.py")
SPAWN_TIMEOUT = 30.0
"""Seconds a fork may take, the first one's imports included (a test's own
60 s timeout would otherwise be the only bound)."""
PRELOAD = (
    "mcp",
    "mcp.client.session",
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "mcp.client.sse",
    "mcp.server.lowlevel",
    "mcp.server.mcpserver",
    "mcp.server.streamable_http_manager",
    "mcp.server.sse",
    "mcp.server.stdio",
    "pydantic",
    "anyio",
    "httpx2",
    "httptools",
    "uvicorn",
    "starlette.applications",
    "sse_starlette",
    "lupa",
    "watchfiles",
    "cryptography",
    "jwt",
    "psutil",
)
"""Imported before the first fork: third-party only (no import-time reads of
the environment; checked for each when added). A name missing here costs only
time in the child."""


Forked = tuple[dict[str, object], list[int]]
"""In a child: its request (module, argv, env, cwd) and its stdio fds."""


MAY_LACK = frozenset({"PYTHONPATH", "PYTHONDONTWRITEBYTECODE"})
"""Variables a request may lack that the preloader has: one adds search paths
(`make test`'s plugin directory), the other stops writing bytecode; neither
changes what the code run does. A daemon starts its stdio servers with the
SDK's short default environment, which has neither."""
MAY_DIFFER = frozenset({"PYTHONUNBUFFERED"})
"""Variables a request may set otherwise: the child builds its standard
streams again as the interpreter's start would (`_standard_streams`)."""


def _python_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith("PYTHON")}


def _starts_alike(env: Mapping[str, str], own: Mapping[str, str]) -> bool:
    """Whether an interpreter started with `env` starts as one with `own`
    did: the same `PYTHON*` variables, but for what may be missing."""
    theirs, ours = _python_env(env), _python_env(own)
    missing = ours.keys() - theirs.keys() - MAY_DIFFER
    return missing <= MAY_LACK and all(
        ours.get(k) == v for k, v in theirs.items() if k not in MAY_DIFFER
    )


# --- the worker's side -------------------------------------------------------


class ForkedProcess:
    """A child forked by the preloader: the parts of `subprocess.Popen` tests use."""

    def __init__(self, args: list[str], pid: int, status: socket.socket, pidfd: int):
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self._status = status
        self._pidfd = pidfd
        self._lock = threading.Lock()
        # Both stay open as long as this handle: no thread waiting or
        # signalling ever meets a closed (or reused) descriptor.
        weakref.finalize(self, _close_both, status, pidfd)

    def _collect(self, timeout: float | None) -> int | None:
        if self.returncode is None:
            ready, _, _ = select.select([self._status], [], [], timeout)
            with self._lock:
                if ready and self.returncode is None:
                    said = self._status.recv(64)
                    # Nothing said: the preloader died before it reaped the child.
                    self.returncode = int(said) if said else -signal.SIGKILL
        return self.returncode

    def poll(self) -> int | None:
        return self._collect(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._collect(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                signal.pidfd_send_signal(self._pidfd, sig)
            except ProcessLookupError:
                pass  # exited already: as Popen

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def _close_both(status: socket.socket, pidfd: int) -> None:
    status.close()
    os.close(pidfd)


class _Preloader:
    """The preloading process of this pytest worker, and the way to it."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.dir = tempfile.mkdtemp(prefix="mm-preload-", dir="/tmp")
        self.socket_path = os.path.join(self.dir, "launch.sock")
        """Where `launch.py` asks for a fork (`launch_command`)."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(self.socket_path)
        listener.listen(64)
        with theirs, listener:
            fds = [theirs.fileno(), listener.fileno()]
            self.process = subprocess.Popen(
                [sys.executable, __file__],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=fds,
                env={**os.environ, "MM_PRELOAD_FDS": ",".join(map(str, fds))},
            )
        ours.settimeout(SPAWN_TIMEOUT)
        self.control = ours
        self.lock = threading.Lock()
        self.broken = False

    def spawn(
        self, argv: list[str], env: Mapping[str, str], cwd: str, stdio: Sequence[int]
    ) -> ForkedProcess:
        request = json.dumps(
            {"module": argv[2], "argv": argv[2:], "env": dict(env), "cwd": cwd}
        ).encode()
        with self.lock:
            if self.broken:
                raise RuntimeError("the preloader stopped answering earlier")
            socket.send_fds(self.control, [request], list(stdio))
            try:
                reply, fds, _flags, _addr = socket.recv_fds(self.control, 4096, 2)
            except TimeoutError:
                self.broken = True  # a late reply would answer the next request
                raise RuntimeError(
                    f"the preloader (pid {self.process.pid}) did not fork "
                    f"{argv[2]} within {SPAWN_TIMEOUT} s"
                ) from None
        if not reply:
            raise RuntimeError("the preloader exited")
        pid = int(json.loads(reply)["pid"])
        return ForkedProcess(argv, pid, socket.socket(fileno=fds[0]), fds[1])

    def close(self) -> None:
        self.control.close()  # the preloader's cue to exit
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


_preloader: _Preloader | None = None
_start_lock = threading.Lock()


def _the_preloader() -> _Preloader:
    global _preloader
    with _start_lock:
        if _preloader is None:
            _preloader = _Preloader()
            import atexit

            atexit.register(_preloader.close)
        return _preloader


def preloader_pid() -> int | None:
    """The preloader's PID once started (leak checks skip it, not its children)."""
    return None if _preloader is None else _preloader.process.pid


def launch_command(module: str, *args: str) -> tuple[str, list[str]]:
    """The `(command, args)` that runs `python -m MODULE ARGS` forked from the
    preloader, through `launch.py`, for a daemon to start over stdio (the
    plain command with `MM_TESTS_FORK=0`)."""
    if os.environ.get("MM_TESTS_FORK", "1") == "0":
        return sys.executable, ["-m", module, *args]
    path = _the_preloader().socket_path
    return sys.executable, ["-S", str(LAUNCH_SCRIPT), path, "-m", module, *args]


def popen(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    stdout: IO[bytes],
    cwd: Path | str | None = None,
) -> ForkedProcess | subprocess.Popen[bytes]:
    """Start `argv` with stdin from /dev/null and stdout and stderr to `stdout`.

    Forked from the preloader when `argv` is `sys.executable -m MODULE ...`
    and the `PYTHON*` variables of `env` are this process's; a real
    `subprocess.Popen` otherwise.
    """
    argv = [str(part) for part in argv]
    forkable = (
        len(argv) >= 3
        and argv[0] == sys.executable
        and argv[1] == "-m"
        and os.environ.get("MM_TESTS_FORK", "1") != "0"
        and _starts_alike(env, os.environ)
    )
    if not forkable:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            env=dict(env),
        )
    with open(os.devnull, "rb") as devnull:
        return _the_preloader().spawn(
            argv,
            env,
            str(cwd or os.getcwd()),
            [devnull.fileno(), stdout.fileno(), stdout.fileno()],
        )


# --- the preloader's side ----------------------------------------------------


_EXIT: Forked = ({}, [])  # _Forker.run's answer when the worker is gone


class _Forker:
    """The preloader's loop: a fork per request, each child's exit reported.

    Requests come from the worker (its control socket: a status socket and a
    pidfd go back) and from `launch.py` clients (the listening socket: the
    status goes back on the client's connection, and the child is SIGKILLed if
    the client dies first). Every descriptor it holds is closed in each child.
    """

    def __init__(self, control: socket.socket, listener: socket.socket) -> None:
        self.control = control
        self.listener = listener
        self.poller = select.epoll()
        self.handlers: dict[int, Callable[[], Forked | None]] = {}
        self.held: dict[int, socket.socket | None] = {}
        """Descriptors held (a socket, or None for a bare fd such as a pidfd)."""
        self.hold(control)
        self.hold(listener)
        self.watch(control.fileno(), self.from_worker)
        self.watch(listener.fileno(), self.accept)

    def hold(self, held: socket.socket | int) -> int:
        if isinstance(held, int):
            self.held[held] = None
            return held
        self.held[held.fileno()] = held
        return held.fileno()

    def release(self, fd: int) -> None:
        if fd in self.handlers:
            del self.handlers[fd]
            self.poller.unregister(fd)
        held = self.held.pop(fd)
        if held is not None:
            held.close()
        else:
            os.close(fd)

    def watch(self, fd: int, handler: Callable[[], Forked | None]) -> None:
        self.handlers[fd] = handler
        self.poller.register(fd, select.EPOLLIN)

    def run(self) -> Forked:
        """Serve until the worker goes (`_EXIT`); in a child, its request."""
        while True:
            for fd, _events in self.poller.poll():
                handler = self.handlers.get(fd)
                forked = handler() if handler is not None else None
                if forked is not None:
                    return forked

    def fork(self, message: bytes, stdio: list[int]) -> int | Forked:
        """Fork a child for `message`: its PID here, the request in the child."""
        pid = os.fork()
        if pid == 0:
            self.poller.close()
            for fd, held in self.held.items():
                if held is not None:
                    held.close()
                else:
                    os.close(fd)
            return json.loads(message), stdio
        for fd in stdio:
            os.close(fd)
        return pid

    def from_worker(self) -> Forked | None:
        message, stdio, _flags, _addr = socket.recv_fds(self.control, 1 << 20, 3)
        if not message:
            return _EXIT
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.hold(ours)
        self.hold(theirs)
        forked = self.fork(message, stdio)
        if not isinstance(forked, int):
            return forked
        pidfd = self.hold(os.pidfd_open(forked))
        reply = json.dumps({"pid": forked}).encode()
        socket.send_fds(self.control, [reply], [theirs.fileno(), pidfd])
        self.release(theirs.fileno())
        self.watch(pidfd, lambda: self.reap(forked, pidfd, ours))
        return None

    def accept(self) -> None:
        conn, _addr = self.listener.accept()
        self.watch(self.hold(conn), lambda: self.from_client(conn))

    def from_client(self, conn: socket.socket) -> Forked | None:
        message, stdio, _flags, _addr = socket.recv_fds(conn, 1 << 20, 3)
        request = json.loads(message) if message else None
        if request is None or not _starts_alike(request["env"], os.environ):
            for fd in stdio:
                os.close(fd)
            if request is not None:
                with contextlib.suppress(OSError):  # the launcher may be gone
                    conn.send(b"{}")  # exec it yourself
            self.release(conn.fileno())
            return None
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        client_pid = int.from_bytes(creds[:4], sys.byteorder)
        forked = self.fork(message, stdio)
        if not isinstance(forked, int):
            return forked
        # The connection now only carries the exit status: off the poller.
        del self.handlers[conn.fileno()]
        self.poller.unregister(conn.fileno())
        pidfd = self.hold(os.pidfd_open(forked))
        try:
            conn.send(json.dumps({"pid": forked}).encode())
        except OSError:  # the launcher went away meanwhile (killed): so does its child
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        client: int | None = None
        try:
            watched = self.hold(os.pidfd_open(client_pid))
        except ProcessLookupError:  # gone already: its child goes at once
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        else:
            client = watched
            self.watch(watched, lambda: self.client_gone(watched, pidfd))
        self.watch(pidfd, lambda: self.reap(forked, pidfd, conn, client))
        return None

    def client_gone(self, client: int, pidfd: int) -> None:
        """The launcher died (SIGKILL, say): its child goes with it."""
        self.release(client)
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def reap(
        self, pid: int, pidfd: int, status: socket.socket, client: int | None = None
    ) -> None:
        _, wait_status = os.waitpid(pid, 0)
        self.release(pidfd)
        if client is not None and client in self.held:
            self.release(client)
        try:
            status.send(str(os.waitstatus_to_exitcode(wait_status)).encode())
        except OSError:
            pass  # nobody waits any more
        self.release(status.fileno())


def _standard_streams(*, unbuffered: bool) -> None:
    """`sys.stdin`, `sys.stdout` and `sys.stderr` over fds 0-2 as CPython's
    start makes them (`create_stdio`): raw and write-through when unbuffered,
    line-buffered on a terminal and always for stderr, newline "\\n", the
    encoding and error handlers of the preloader's own."""
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        old = getattr(sys, name)
        reading = fd == 0
        raw = io.FileIO(fd, "rb" if reading else "wb", closefd=False)
        buffer: io.RawIOBase | io.BufferedIOBase
        if reading:
            buffer = io.BufferedReader(raw)
        elif unbuffered:
            buffer = raw
        else:
            buffer = io.BufferedWriter(raw)
        stream = io.TextIOWrapper(
            buffer,
            encoding=old.encoding,
            errors=old.errors,
            newline="\n",
            line_buffering=not unbuffered and (raw.isatty() or fd == 2),
            write_through=unbuffered,
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _become(request: dict[str, object], stdio: list[int]) -> str:
    """Set this child up as `python -m MODULE` would start; the module's name."""
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
    for fd in set(stdio):
        if fd > 2:
            os.close(fd)
    cwd = str(request["cwd"])
    os.chdir(cwd)
    env = request["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update(env)
    _standard_streams(unbuffered=bool(env.get("PYTHONUNBUFFERED")))
    argv = request["argv"]
    assert isinstance(argv, list)
    sys.argv = [str(a) for a in argv]
    sys.path[0] = cwd
    return str(request["module"])


def _main() -> None:
    import importlib

    control_fd, listener_fd = os.environ.pop("MM_PRELOAD_FDS").split(",")
    control = socket.socket(fileno=int(control_fd))
    listener = socket.socket(fileno=int(listener_fd))
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    forked = _Forker(control, listener).run()
    if forked is _EXIT:
        return
    module = _become(*forked)
    import runpy

    del forked
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _main()
