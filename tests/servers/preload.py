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

`popen(argv, ...)` is the door: a `subprocess.Popen`-like handle (`pid`,
`poll`, `wait`, `send_signal`, `kill`, `terminate`, `returncode`). It forks
only for `sys.executable -m MODULE ...` whose `PYTHON*` environment is the
preloader's (those shape the interpreter's start); anything else, or
`MM_TESTS_FORK=0` in the environment, gets a real `subprocess.Popen`.

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

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

__all__ = ["ForkedProcess", "popen", "preloader_pid"]

CONTROL_FD = 3
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


def _python_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith("PYTHON")}


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
        with theirs:
            self.process = subprocess.Popen(
                [sys.executable, __file__],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=[theirs.fileno()],
                env={**os.environ, "MM_PRELOAD_FD": str(theirs.fileno())},
            )
        self.control = ours
        self.python_env = _python_env(os.environ)
        self.lock = threading.Lock()

    def spawn(
        self, argv: list[str], env: Mapping[str, str], cwd: str, stdio: Sequence[int]
    ) -> ForkedProcess:
        request = json.dumps(
            {"module": argv[2], "argv": argv[2:], "env": dict(env), "cwd": cwd}
        ).encode()
        with self.lock:
            socket.send_fds(self.control, [request], list(stdio))
            reply, fds, _flags, _addr = socket.recv_fds(self.control, 4096, 2)
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
        and _python_env(env) == _python_env(os.environ)
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


def _serve(control: socket.socket) -> tuple[dict[str, object], list[int]] | None:
    """Fork a child per request until the worker closes the socket.

    Returns in the child only: the request and its stdio fds.
    """
    poller = select.epoll()
    poller.register(control.fileno(), select.EPOLLIN)
    children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> pid, status
    while True:
        for fd, _events in poller.poll():
            if fd != control.fileno():
                pid, status = children.pop(fd)
                poller.unregister(fd)
                _, wait_status = os.waitpid(pid, 0)
                os.close(fd)
                with status:
                    status.send(str(os.waitstatus_to_exitcode(wait_status)).encode())
                continue
            message, stdio, _flags, _addr = socket.recv_fds(control, 1 << 20, 3)
            if not message:
                return None
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            pid = os.fork()
            if pid == 0:
                poller.close()
                control.close()
                ours.close()
                theirs.close()
                for pidfd, (_pid, status) in children.items():
                    os.close(pidfd)
                    status.close()
                return json.loads(message), stdio
            for fd_ in stdio:
                os.close(fd_)
            pidfd = os.pidfd_open(pid)
            with theirs:
                reply = json.dumps({"pid": pid}).encode()
                socket.send_fds(control, [reply], [theirs.fileno(), pidfd])
            children[pidfd] = (pid, ours)
            poller.register(pidfd, select.EPOLLIN)


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
    argv = request["argv"]
    assert isinstance(argv, list)
    sys.argv = [str(a) for a in argv]
    sys.path[0] = cwd
    return str(request["module"])


def _main() -> None:
    import importlib

    control = socket.socket(fileno=int(os.environ.pop("MM_PRELOAD_FD")))
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    forked = _serve(control)
    if forked is None:
        return
    module = _become(*forked)
    import runpy

    del forked
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _main()
