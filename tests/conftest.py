"""Shared fixtures: the anyio backend, real server processes, leak checks.

The helpers behind these fixtures live in `tests/servers/` and are imported
from there (`from servers import stdio_command, ...`), never from this file.

- `anyio_backend`: `"asyncio"` for every `@pytest.mark.anyio` test.
- `make_http_server(transport="http", *flags, env=None, start=True, raw=False)`:
  a factory for demo servers over streamable HTTP or SSE; every server it made
  is killed and reaped at teardown. `raw=True` starts the hand-written
  `servers/raw_http.py` instead (streamable HTTP only; its own flags): a
  handshake-era server with `echo`, `pid`, `crash` (and `sleep` with
  `--sleep-tool`), sessions, an event stream and 404 "Session not found" for a
  session it does not know, at about a tenth of the demo server's start-up
  CPU. Use it where our transport is the point (kills, restarts, loss
  detection, reconnects); the demo server where the SDK's server is.
  `http_server` / `sse_server` are one started demo server.
- `blackhole`: a `Blackhole` TCP listener, closed at teardown.
- `control_socket`: a control socket path in a private directory of its own
  that outlives daemons (for tests that stop one and start another on it).
- `backchannel_http`: `servers/backchannel.py` over streamable HTTP, a
  dual-era server that asks only the handshake way.
- `everything_stdio` / `everything_sse` / `everything_http`: the official
  reference server `@modelcontextprotocol/server-everything` (npm, pinned in
  `tests/node`): a `(command, args)` pair for stdio, or the URL of a running
  server (stopped and reaped at teardown). They skip the test when node or the
  package is missing (`make test` installs it). See `servers/everything.py`.
- `private_state_dir` (autouse): each test's own `$XDG_STATE_HOME`; and
  `private_session_state` (session, autouse) one for module-scoped fixtures.
- `no_leaked_children`: fails the test if it leaves child processes behind
  (not counting those a module-scoped fixture shares, `sharing_children`);
  `no_leaked_children_after_module` the same once per module, for modules
  whose tests share servers started by a module-scoped fixture.

Tests under `campaigns/` are marked `campaign` (excluded by default) and
exec every process (`campaigns_exec_every_process`).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Literal

import psutil
import pytest
from servers import (
    Blackhole,
    HttpServerFactory,
    HttpServerProcess,
    children_of,
    live_server_pids,
    raw_http_program,
)
from servers.everything import (
    everything_stdio_command,
    live_everything_pids,
    require_everything,
    serve_everything,
)
from servers.process import own_children, shared_children

CAMPAIGNS = Path(__file__).parent / "campaigns"
"""Tests here are long campaigns: marked `campaign`, run by `.ci/run`'s second
step, not by `make test`."""

LEAK_GRACE = 3.0
"""Seconds `no_leaked_children` gives child processes to exit before failing."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark everything under `tests/campaigns/` `campaign`."""
    for item in items:
        if CAMPAIGNS in item.path.parents:
            item.add_marker(pytest.mark.campaign)


@pytest.fixture(scope="module", autouse=True)
def campaigns_exec_every_process(request: pytest.FixtureRequest) -> Iterator[None]:
    """Campaigns run against real processes only: every daemon and server is
    exec'd (`MM_TESTS_FORK=0`), none forked from the worker's preloader. They
    stop, kill and sweep processes and their groups and measure daemons over
    time; a forked stand-in would bend what they check
    (`tests/servers/launch.py`)."""
    if CAMPAIGNS not in request.node.path.parents:
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MM_TESTS_FORK", "0")
        yield


@pytest.fixture(scope="session", autouse=True)
def private_session_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A state directory for what outlives one test (module-scoped gateways
    and daemons): set before any of them is made, so nothing a test runs ever
    writes the user's own (pins, eras, the call log, tokens)."""
    state = tmp_path_factory.mktemp("session-state")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(state))
        yield state


@pytest.fixture(autouse=True)
def private_state_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Each test gets its own state directory (`$XDG_STATE_HOME`): pinned
    definitions, remembered eras and listings, tokens. What one test's servers
    listed never counts as a change in the next, and the user's own state is
    never touched. Daemons a test starts inherit it."""
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


@pytest.fixture
def anyio_backend() -> str:
    """Run anyio tests on asyncio only."""
    return "asyncio"


@pytest.fixture
def make_http_server(tmp_path: Path) -> Iterator[HttpServerFactory]:
    """Build demo (or `raw=True`: raw_http) servers over HTTP or SSE; all are
    killed at teardown."""
    made: list[HttpServerProcess] = []

    def make(
        transport: Literal["http", "sse"] = "http",
        *flags: str,
        env: Mapping[str, str] | None = None,
        start: bool = True,
        raw: bool = False,
    ) -> HttpServerProcess:
        if raw and transport != "http":
            raise ValueError("raw_http serves streamable HTTP only")
        log_path = tmp_path / f"server-{len(made)}.log"
        if raw:
            program = raw_http_program()
            server = HttpServerProcess(
                transport, flags, env=env, log_path=log_path, program=program
            )
        else:
            server = HttpServerProcess(transport, flags, env=env, log_path=log_path)
        made.append(server)
        if start:
            server.start()
        return server

    yield make
    for server in made:
        server.kill()


@pytest.fixture
def http_server(make_http_server: HttpServerFactory) -> HttpServerProcess:
    """A running demo server over streamable HTTP (`.url` ends in `/mcp`)."""
    return make_http_server("http")


@pytest.fixture
def sse_server(make_http_server: HttpServerFactory) -> HttpServerProcess:
    """A running demo server over legacy SSE (`.url` ends in `/sse`)."""
    return make_http_server("sse")


@pytest.fixture
def everything_stdio() -> tuple[str, list[str]]:
    """`(command, args)` running the reference server over stdio."""
    require_everything()
    return everything_stdio_command()


@pytest.fixture
def everything_sse(tmp_path: Path) -> Iterator[str]:
    """A running reference server over legacy SSE: its URL (ends in `/sse`)."""
    require_everything()
    with serve_everything("sse", log_path=tmp_path / "everything-sse.log") as url:
        yield url


@pytest.fixture
def everything_http(tmp_path: Path) -> Iterator[str]:
    """A running reference server over streamable HTTP: its URL (ends in `/mcp`)."""
    require_everything()
    with serve_everything("http", log_path=tmp_path / "everything-http.log") as url:
        yield url


@pytest.fixture
def control_socket() -> Iterator[Path]:
    """A control socket path in a private directory that outlives daemons."""
    directory = Path(tempfile.mkdtemp(prefix="mm-sock-", dir="/tmp"))
    os.chmod(directory, 0o700)
    try:
        yield directory / "control.sock"
    finally:
        for leftover in directory.iterdir():
            leftover.unlink()
        directory.rmdir()


@pytest.fixture
def backchannel_http() -> Iterator[HttpServerProcess]:
    """`servers/backchannel.py` over streamable HTTP, started and stopped."""
    script = Path(__file__).parent / "servers" / "backchannel.py"
    server = HttpServerProcess("http", program=(sys.executable, script))
    server.start()
    try:
        yield server
    finally:
        server.stop()
        server.close()


@pytest.fixture
def blackhole() -> Iterator[Blackhole]:
    """A TCP listener on 127.0.0.1 that accepts and never answers."""
    with Blackhole() as hole:
        yield hole


def _is_running(proc: psutil.Process) -> bool:
    try:
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _leftover_children() -> list[psutil.Process]:
    """Running descendants, minus fixture-owned HTTP servers and their trees.

    Fixture-owned: `HttpServerProcess`es and `EverythingServer`s, which their
    fixtures stop at teardown (possibly after this check runs), and the
    children of a module-scoped fixture marked with `sharing_children`.

    Zombies are not counted: they have exited, and reaping them is their
    owner's business (Python's `Popen` does it lazily).
    """
    servers = live_server_pids() | live_everything_pids() | shared_children()
    skip = set(servers)
    for pid in servers:
        skip.update(p.pid for p in children_of(pid))
    return [p for p in own_children() if p.pid not in skip and _is_running(p)]


def _describe(proc: psutil.Process) -> str:
    try:
        return f"pid {proc.pid}: {' '.join(proc.cmdline())}"
    except psutil.Error:
        return f"pid {proc.pid}: (exited)"


@pytest.fixture
def no_leaked_children() -> Iterator[None]:
    """Fail the test if child processes still run 3 s after it ends.

    Servers owned by `make_http_server` or the `everything_*` fixtures, and
    zombies, are not counted. Leftovers are SIGKILLed (by PID) after the failure
    is recorded, so they cannot leak into later tests.
    """
    yield
    fail_on_leftover_children()


@pytest.fixture(scope="module")
def no_leaked_children_after_module() -> Iterator[None]:
    """`no_leaked_children` for a module whose tests share servers (a
    module-scoped fixture that starts processes): checked once, after the
    module's shared fixtures (requested after this one) are torn down."""
    yield
    fail_on_leftover_children()


def fail_on_leftover_children() -> None:
    """Fail (and SIGKILL them) if child processes still run 3 s from now."""
    deadline = time.monotonic() + LEAK_GRACE
    leftovers = _leftover_children()
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.05)
        leftovers = _leftover_children()
    if not leftovers:
        return
    described = [_describe(p) for p in leftovers]
    for proc in leftovers:
        try:
            proc.kill()
        except psutil.Error:
            pass
    pytest.fail("leaked child processes:\n" + "\n".join(described))
