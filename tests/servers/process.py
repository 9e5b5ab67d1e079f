"""Start, stop and inspect real server processes for tests.

- `stdio_command(*flags)` / `raw_command(*flags)`: `(command, args)` for the
  demo server and the hand-written legacy server, ready for
  `StdioServerParameters` or a `ConnectionSpec`.
- `HttpServerProcess`: the demo server over streamable HTTP or SSE in a child
  process on a fixed loopback port that survives restarts, so a client can be
  made to lose and regain its server. `program=raw_http_program()` runs the
  hand-written `raw_http.py` instead (streamable HTTP only; a start costs
  about 0.1 CPU-second, the demo server's over 1.3).
- `children_of(pid)` / `free_port()`: small helpers for assertions and setup.

Only processes started here are signalled, always by PID, and always reaped.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import IO, Literal, Protocol

import anyio.to_thread
import psutil

from . import preload

__all__ = [
    "CLOSING_HTTP_SCRIPT",
    "DEMO_MODULE",
    "RAW_HTTP_SCRIPT",
    "RAW_LEGACY_SCRIPT",
    "HttpServerFactory",
    "HttpServerProcess",
    "children_of",
    "free_port",
    "live_server_pids",
    "own_children",
    "live_servers",
    "shared_children",
    "sharing_children",
    "start_beside",
    "raw_command",
    "raw_http_program",
    "lua_stdio",
    "stdio_command",
]

DEMO_MODULE = "manager.demo_server"
RAW_LEGACY_SCRIPT = Path(__file__).with_name("raw_legacy.py")
RAW_HTTP_SCRIPT = Path(__file__).with_name("raw_http.py")
CLOSING_HTTP_SCRIPT = Path(__file__).with_name("closing_http.py")
START_TIMEOUT = 15.0
"""Seconds to wait for a started HTTP server to accept TCP connections."""
STOP_TIMEOUT = 5.0
"""Seconds `stop()` waits after SIGTERM before it sends SIGKILL."""
REAP_TIMEOUT = 5.0
"""Seconds to wait for a SIGKILLed process to be reaped."""
POLL_INTERVAL = 0.02

_live: dict[int, HttpServerProcess] = {}
_shared: set[int] = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def stdio_command(*flags: str, fork: bool = True) -> tuple[str, list[str]]:
    """The command and arguments that run the demo server over stdio.

    Forked from the worker's preloader (`preload.launch_command`) unless
    `fork=False`: the plain `python -m manager.demo_server`, for tests about
    the process itself (exit statuses, process groups, its own start-up).
    """
    if fork:
        return preload.launch_command(DEMO_MODULE, *flags)
    return sys.executable, ["-m", DEMO_MODULE, *flags]


def lua_stdio(name: str, command: str, args: Sequence[str], options: str = "") -> str:
    """One startup.lua line declaring a stdio server: `mcp_add(NAME,
    {command = ..., args = {...}}, OPTIONS)` (`options`: a Lua table, or "")."""
    listed = ", ".join(json.dumps(str(a)) for a in args)
    extra = f", {options}" if options else ""
    return (
        f"mcp_add({json.dumps(name)}, {{command = {json.dumps(command)}, "
        f"args = {{{listed}}}}}{extra})\n"
    )


def raw_command(*flags: str) -> tuple[str, list[str]]:
    """The command and arguments that run `raw_legacy.py` over stdio."""
    # -S skips site-packages (stdlib only here): 25 ms to ready instead of 40.
    return sys.executable, ["-S", str(RAW_LEGACY_SCRIPT), *flags]


def raw_http_program() -> tuple[str, ...]:
    """The `HttpServerProcess` program that runs `raw_http.py` (stdlib only)."""
    return sys.executable, "-S", str(RAW_HTTP_SCRIPT)


def children_of(pid: int) -> list[psutil.Process]:
    """All live descendants of `pid` (empty if `pid` itself is gone)."""
    try:
        return list(psutil.Process(pid).children(recursive=True))
    except psutil.NoSuchProcess:
        return []


def own_children() -> list[psutil.Process]:
    """All live descendants of this process but the worker's preloader (what
    it forked is counted)."""
    return [p for p in children_of(os.getpid()) if p.pid != preload.preloader_pid()]


def live_servers() -> dict[int, HttpServerProcess]:
    """Every started server process not yet reaped, by PID."""
    return dict(_live)


def live_server_pids() -> set[int]:
    """PIDs of the `HttpServerProcess`es that are running right now."""
    return {pid for pid, server in _live.items() if server.running}


def shared_children() -> set[int]:
    """PIDs marked by `sharing_children` right now."""
    return set(_shared)


async def start_beside(url: str, *tools: str) -> None:
    """Call each tool once (no arguments' worth of harm: `echo`-like) as a
    2026-07-28 client through the endpoint at `url`, so each dual-era stdio
    upstream starts its process beside the handshake one now (`EraSide`),
    before `sharing_children` marks a module fixture's processes."""
    from mcp import Client

    async with Client(url) as client:
        for tool in tools:
            await client.call_tool(tool, {"text": "beside"})


@contextmanager
def sharing_children() -> Iterator[None]:
    """Mark the child processes running now as a module-scoped fixture's for
    the block: e.g. the upstream servers of a gateway that several tests share.
    Per-test leak checks skip them (and their children); the module's own
    `no_leaked_children_after_module` does not, once the block is over."""
    mine = {p.pid for p in children_of(os.getpid())} - _shared
    _shared.update(mine)
    try:
        yield
    finally:
        _shared.difference_update(mine)


def _listens(pid: int, port: int) -> bool:
    """Whether process `pid` itself listens on `port`.

    Not "the port accepts": `free_port()` closes its socket before the server
    binds, and under xdist another test's daemon was once handed that very
    port first; the test then talked to the daemon, not its server.
    """
    try:
        connections = psutil.Process(pid).net_connections(kind="tcp")
    except psutil.Error:
        return False
    return any(
        c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
        for c in connections
    )


class HttpServerProcess:
    """The demo server over streamable HTTP or SSE, in a child process.

    The port is picked once and kept across `start()` calls, so the same URL
    comes back after a `kill()` or `stop()`. The blocking methods suit sync
    tests and fixtures; async tests use the `a*` variants, which run them in a
    worker thread so the event loop (and the daemon under test) keeps going.

    Args:
        transport: `"http"` (URL ends in `/mcp`) or `"sse"` (`/sse`).
        flags: Extra command-line flags for the demo server.
        env: Extra environment variables, e.g. `{"DEMO_PAGE_SIZE": "2"}`.
        port: The port to use; a free one by default.
        log_path: Where the server's stdout and stderr go (appended to, across
            restarts); a file in a new temporary directory by default.
        program: The command before `--transport ... --port ...`: the demo
            server by default; e.g. `raw_http_program()` or
            `(sys.executable, CLOSING_HTTP_SCRIPT)`.
    """

    def __init__(
        self,
        transport: Literal["http", "sse"] = "http",
        flags: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        port: int | None = None,
        log_path: Path | None = None,
        program: Sequence[str | Path] = (sys.executable, "-m", DEMO_MODULE),
    ) -> None:
        self.transport = transport
        self.program = [str(part) for part in program]
        self.flags = list(flags)
        self.env = dict(env or {})
        self.port = port if port is not None else free_port()
        self._port_chosen = port is None
        """The port was picked here (not asked for): free to pick another."""
        self._started_once = False
        self._own_dir = (
            None if log_path else Path(tempfile.mkdtemp(prefix="demo-server-"))
        )
        """The folder made for the log when none was given; `close()` removes it."""
        self.log_path = log_path or Path(self._own_dir or ".") / "server.log"
        self.process: subprocess.Popen[bytes] | preload.ForkedProcess | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT/mcp` for HTTP, `.../sse` for SSE."""
        path = "/mcp" if self.transport == "http" else "/sse"
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def pid(self) -> int:
        """The PID of the current process.

        Raises:
            RuntimeError: The server was never started.
        """
        if self.process is None:
            raise RuntimeError("server not started")
        return self.process.pid

    @property
    def running(self) -> bool:
        """Whether the current process exists and has not exited."""
        return self.process is not None and self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        """The exit status of the last process, `None` while it runs."""
        return None if self.process is None else self.process.poll()

    def log_text(self) -> str:
        """Everything the server processes wrote to stdout and stderr so far."""
        if not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")

    def start(self, within: float = START_TIMEOUT) -> None:
        """Start the server and wait until its port accepts connections.

        Args:
            within: Seconds to wait for the port.

        Raises:
            RuntimeError: Already running, exited early, or never listened (the
                process is killed first).
        """
        if self.running:
            raise RuntimeError(f"server already running as pid {self.pid}")
        self._log = self.log_path.open("ab")
        argv, env, cwd = self._launch()
        self.process = preload.popen(
            argv, cwd=cwd, stdout=self._log, env={**os.environ, **env}
        )
        _live[self.process.pid] = self
        deadline = time.monotonic() + within
        while not _listens(self.process.pid, self.port):
            if not self.running:
                code = self.returncode
                self._reap()
                said = self.log_text()
                # Python's "Address already in use", Node's EADDRINUSE, and the
                # reference server's own "Port N is already in use"
                in_use = "already in use" in said.lower() or "EADDRINUSE" in said
                if self._port_chosen and not self._started_once and in_use:
                    self.port = free_port()  # taken since: another one, once
                    self._port_chosen = False
                    return self.start(within)
                raise RuntimeError(f"server exited with {code}:\n{self.log_text()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(
                    f"server did not listen in {within}s:\n{self.log_text()}"
                )
            time.sleep(POLL_INTERVAL)
        self._started_once = True

    def _launch(self) -> tuple[list[str], dict[str, str], Path | None]:
        """The command, extra environment and working directory of a start."""
        argv = [*self.program, "--transport", self.transport]
        argv += ["--host", "127.0.0.1", "--port", str(self.port), *self.flags]
        return argv, self.env, None

    def kill(self) -> int | None:
        """SIGKILL the server and reap it; a no-op when it is not running.

        Returns:
            The exit status (`-9` after a kill), or `None` if never started.
        """
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        return self._reap()

    def stop(self, grace: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM the server, SIGKILL it after `grace` seconds, reap it.

        Returns:
            The exit status, or `None` if never started. A clean stop gives
            `-15`: uvicorn re-raises SIGTERM once its graceful shutdown is done
            (`raw_http.py` does the same).
        """
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.send_signal(signal.SIGKILL)
        return self._reap()

    def wait(self, within: float) -> int:
        """Wait for the server to exit by itself and reap it.

        Returns:
            The exit status.

        Raises:
            subprocess.TimeoutExpired: Still running after `within` seconds.
        """
        if self.process is None:
            raise RuntimeError("server not started")
        code = self.process.wait(within)
        self._reap()
        return code

    def _reap(self) -> int | None:
        if self.process is None:
            return None
        code = self.process.wait(REAP_TIMEOUT)
        _live.pop(self.process.pid, None)
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    async def astart(self, within: float = START_TIMEOUT) -> None:
        """`start()` in a worker thread."""
        await anyio.to_thread.run_sync(self.start, within)

    async def akill(self) -> int | None:
        """`kill()` in a worker thread."""
        return await anyio.to_thread.run_sync(self.kill)

    async def astop(self, grace: float = STOP_TIMEOUT) -> int | None:
        """`stop()` in a worker thread."""
        return await anyio.to_thread.run_sync(self.stop, grace)

    async def await_exit(self, within: float) -> int:
        """`wait()` in a worker thread; cancelling the caller abandons the wait."""
        return await anyio.to_thread.run_sync(self.wait, within, abandon_on_cancel=True)

    def close(self) -> None:
        """Kill the server and remove the log folder made for it, if any."""
        self.kill()
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)
            self._own_dir = None

    def __enter__(self) -> HttpServerProcess:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class HttpServerFactory(Protocol):
    """The `make_http_server` fixture: build (and by default start) a server."""

    def __call__(
        self,
        transport: Literal["http", "sse"] = "http",
        *flags: str,
        env: Mapping[str, str] | None = None,
        start: bool = True,
        raw: bool = False,
    ) -> HttpServerProcess: ...
