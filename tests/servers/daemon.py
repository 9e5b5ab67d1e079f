"""Run the real daemon (`python -m manager run`) in a child process for tests.

The process is forked from the worker's preloader (`preload`): the daemon's
own code runs from its first line, without 1.9 s of SDK imports first.

`DaemonProcess` starts it on a script and a private socket, follows its event
stream on a thread (so tests wait on events, not sleeps), and always stops and
reaps it. Only the process started here is signalled, by PID.

`DaemonThread` is the same daemon embedded (`serve_embedded`) on a thread of
the test's own process, behind the same interface: for tests of what the
daemon does (reloads, the control API, the endpoint) rather than of its
process (signals, restarts, its environment, what it writes to stderr).

With `--listen` the daemon requires its bearer token, as it does for users:
`DaemonProcess.token` reads it from where the daemon made it, and `bearer(url,
token)` is an SDK transport that carries it (`Client(bearer(url, token))`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import anyio
from anyio.from_thread import start_blocking_portal
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from support.control import keyed_line

from manager.control.client import ControlClient
from manager.control.paths import attach_socket_path, key_path
from manager.core.errors import ManagerError

from . import preload

__all__ = ["DaemonProcess", "DaemonThread", "bearer"]

START_TIMEOUT = 20.0
"""Seconds for the daemon to answer on its control socket."""

Event = dict[str, object]


class DaemonProcess:
    """`mcp-manager run SCRIPT` in a child process, with its events recorded.

    Args:
        script: The startup.lua to run.
        args: Extra command-line arguments for `run`.
        env: Extra environment variables (telemetry is off unless they set
            `OTEL_SDK_DISABLED=false`).
        control_socket: The control socket (in a private directory the caller owns);
            by default one of its own, in a directory removed at the end.
    """

    def __init__(
        self,
        script: Path,
        *args: str,
        env: Mapping[str, str] | None = None,
        control_socket: Path | None = None,
    ) -> None:
        self._place(control_socket)
        self._log = open(self.log_path, "wb")  # closed in close()
        command = [sys.executable, "-m", "manager", "run", str(script)]
        command += ["--socket", str(self.socket), *args]
        try:
            self.process = preload.popen(
                command,
                stdout=self._log,
                # No telemetry unless a test asks for it: nothing listens on 4317.
                env={**os.environ, "OTEL_SDK_DISABLED": "true", **(env or {})},
            )
        except BaseException:  # not started: nothing of it may outlive this
            self._log.close()
            self.log_path.unlink(missing_ok=True)
            os.rmdir(self._dir)
            raise
        self._follower()

    def _place(self, control_socket: Path | None) -> None:
        """A private directory for the socket (unless given) and the log."""
        self._dir = tempfile.mkdtemp(prefix="mm-", dir="/tmp")
        os.chmod(self._dir, 0o700)
        self.socket = control_socket or Path(self._dir) / "control.sock"
        self.log_path = Path(self._dir) / "daemon.log"

    def _follower(self) -> None:
        """The control client and the event record `start` fills."""
        self.client = ControlClient(self.socket)
        self.events: list[Event] = []
        self._cond = threading.Condition()
        self._stream: socket.socket | None = None
        self._reader: threading.Thread | None = None
        self._final_log: str | None = None

    def _release(self) -> None:
        """After the daemon ended: the event stream, the socket files and the
        private directory."""
        if self._stream is not None:
            self._stream.close()
        if self._reader is not None:
            self._reader.join(timeout=5)
        # The attach socket and the key too: a SIGKILLed daemon removes none.
        owned = (attach_socket_path(self.socket), key_path(self.socket))
        for path in (self.socket, *owned, self.log_path):
            if path.parent == Path(self._dir):
                path.unlink(missing_ok=True)
        os.rmdir(self._dir)

    @property
    def token(self) -> str:
        """The bearer token the daemon's HTTP endpoint requires (the daemon's
        own, made in the test's private state directory)."""
        path = self.client.token().path
        assert path is not None, "the daemon's token is not in a file"
        return Path(path).read_text().strip()

    def headers(self) -> dict[str, str]:
        """The `Authorization` header the HTTP endpoint wants."""
        return {"Authorization": f"Bearer {self.token}"}

    # --- lifecycle -----------------------------------------------------------

    def start(self) -> DaemonProcess:
        """Wait until the control socket answers, then follow events."""
        deadline = time.monotonic() + START_TIMEOUT
        while not self.socket.exists():
            if self.process.poll() is not None:
                raise RuntimeError(f"daemon exited early:\n{self.log()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"daemon did not start:\n{self.log()}")
            time.sleep(0.02)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        while True:  # the file exists a moment before the listener listens
            try:
                sock.connect(str(self.socket))
                break
            # Refused: not listening yet, or a killed daemon's file; not
            # found: that file removed, the new one not bound yet.
            except (ConnectionRefusedError, FileNotFoundError):
                if time.monotonic() > deadline or self.process.poll() is not None:
                    sock.close()
                    raise
                time.sleep(0.02)
        # Everything since the daemon started: an event published before this
        # subscription (a fast connect) is replayed, not missed.
        sock.sendall(keyed_line(self.socket, {"cmd": "events", "since": 0}))
        self._stream = sock
        self._reader = threading.Thread(target=self._follow, daemon=True)
        self._reader.start()
        while not self._ready():  # events followed; now wait for the file watcher
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise TimeoutError(f"daemon never became ready:\n{self.log()}")
            time.sleep(0.02)
        return self

    def _ready(self) -> bool:
        try:
            return self.client.info().watching
        except ManagerError:
            return False

    def _follow(self) -> None:
        assert self._stream is not None
        with self._stream.makefile("rb") as reader:
            reader.readline()  # {"ok": true, "result": "streaming"}
            for line in reader:
                with self._cond:
                    self.events.append(json.loads(line))
                    self._cond.notify_all()

    def wait_event(
        self,
        kind: str,
        name: str | None = None,
        *,
        where: Callable[[Event], bool] = lambda e: True,
        after: int = 0,
        within: float = 20.0,
    ) -> Event:
        """The first recorded event of `kind` (for `name`) after seq `after`."""

        def find() -> Event | None:
            for event in self.events:
                if (
                    int(str(event["seq"])) > after
                    and event["kind"] == kind
                    and (name is None or event["name"] == name)
                    and where(event)
                ):
                    return event
            return None

        with self._cond:
            if not self._cond.wait_for(lambda: find() is not None, within):
                raise TimeoutError(
                    f"no {kind} event for {name} within {within} s; log:\n{self.log()}"
                )
            found = find()
            assert found is not None
            return found

    def wait_log(self, text: str, within: float = 20.0) -> None:
        """Wait until the daemon's output contains `text` (print from Lua, say)."""
        deadline = time.monotonic() + within
        while text not in self.log():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{text!r} never appeared in the log:\n{self.log()}")
            time.sleep(0.02)

    def signal(self, sig: int) -> None:
        """Send `sig` to the daemon (only to it, by PID)."""
        if self.process.poll() is None:
            os.kill(self.process.pid, sig)

    def wait(self, within: float) -> int:
        """The daemon's exit code once it exited."""
        return self.process.wait(timeout=within)

    def log(self) -> str:
        """Everything the daemon wrote to stdout and stderr so far."""
        if self._final_log is not None:
            return self._final_log
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def close(self) -> None:
        """Stop the daemon (SIGTERM, then SIGKILL) and release everything."""
        if self.process.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._final_log = self.log()
        self._log.close()
        self._release()

    def __enter__(self) -> DaemonProcess:
        try:
            return self.start()
        except BaseException:
            self.close()  # a daemon that started too slowly is stopped too
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@contextlib.asynccontextmanager
async def bearer(url: str, token: str) -> AsyncIterator[Any]:
    """Streamable HTTP to `url` carrying `Authorization: Bearer TOKEN`: an
    SDK transport, `Client(bearer(url, token))`."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


class _Embedded:
    """What `DaemonProcess` asks of its process, for a daemon in this one."""

    def __init__(self, future: Future[int]) -> None:
        self.future = future
        self.pid = os.getpid()

    def poll(self) -> int | None:
        return self.future.result() if self.future.done() else None


class DaemonThread(DaemonProcess):
    """The daemon in this process, on an event loop of its own thread
    (`serve_embedded`): the same control socket, endpoint, startup.lua and
    events as `DaemonProcess`, without a process start (its SDK imports are
    the worker's). For tests of what the daemon does, not of its process:
    it takes no signals, its log is the `manager` logger's, and `run`'s
    flags it understands are `--listen`, `--no-token` and `--token-file`.

    Args:
        script: The startup.lua to run.
        args: Those of `run`'s flags.
        control_socket: As `DaemonProcess`'s.
    """

    def __init__(
        self, script: Path, *args: str, control_socket: Path | None = None
    ) -> None:
        from manager.daemon.serve import DaemonOptions, serve_embedded

        flags = argparse.ArgumentParser(prog="DaemonThread", add_help=False)
        flags.add_argument("--listen")
        flags.add_argument("--no-token", action="store_true")
        flags.add_argument("--token-file")
        parsed = flags.parse_args(args)
        endpoint = None
        if parsed.listen is not None:
            from manager.gateway.options import endpoint_options

            endpoint = endpoint_options(
                parsed.listen, token_file=parsed.token_file, no_token=parsed.no_token
            )
        self._place(control_socket)
        self._handler = logging.FileHandler(self.log_path, encoding="utf-8")
        self._handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
        self._logger = logging.getLogger("manager")
        self._level = self._logger.level
        self._logger.addHandler(self._handler)
        self._logger.setLevel(logging.INFO)
        options = DaemonOptions(
            config=script, socket=self.socket, endpoint=endpoint, telemetry=False
        )
        self._portal_cm = start_blocking_portal()
        portal = self._portal_cm.__enter__()
        self._stop = portal.call(anyio.Event)
        self._portal = portal
        self._future = portal.start_task_soon(serve_embedded, options, self._stop)
        # `start` and `__exit__` read `process` as they would a child's
        self.process = cast(Any, _Embedded(self._future))
        self._follower()

    def signal(self, sig: int) -> None:
        raise TypeError("a daemon in this process takes no signals: DaemonProcess")

    def log(self) -> str:
        """What the daemon logged so far (the `manager` logger, INFO and up)."""
        if self._final_log is not None:
            return self._final_log
        self._handler.flush()
        return self.log_path.read_text(errors="replace")

    def wait(self, within: float) -> int:
        return self._future.result(timeout=within)

    def close(self) -> None:
        """Stop the daemon (as SIGTERM would) and release everything."""
        if not self._future.done():
            self._portal.call(self._stop.set)
        try:
            self._future.result(timeout=30)
        finally:
            self._portal_cm.__exit__(None, None, None)
            self._logger.removeHandler(self._handler)
            self._logger.setLevel(self._level)
            self._handler.close()
            self._final_log = self.log_path.read_text(errors="replace")
            self._release()
