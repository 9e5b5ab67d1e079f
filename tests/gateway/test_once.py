"""No call runs twice: the daemon stopped or killed under a call in flight.

The upstream is `servers/ledger.py`, whose `record` tool appends a line to a
file and then takes 30 s: the line count says how often the call ran. Two
clients, one of each era (SDK `Client`), call it at once through `mcp-manager
attach` or through the HTTP endpoint; once both lines are written the daemon
gets SIGTERM or SIGKILL and a new daemon starts on the same socket. Each call
must run once, and its client must be told it failed, in words that say it
may have run and was not sent again.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from servers import free_port
from servers.daemon import DaemonProcess, bearer
from servers.ledgers import ledger_lines, ledger_startup

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]


async def _until_recorded(ledger: Path, text: str) -> None:
    """Wait (bounded) until the server wrote `text`: the call is under way."""
    with anyio.fail_after(30):
        # The file is the one witness (another process writes it).
        while text not in ledger_lines(ledger):  # noqa: ASYNC110
            await anyio.sleep(0.01)


def _attach(control: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "manager", "attach", "--socket", str(control), "--hold", "60"],
    )


MODES: tuple[Any, ...] = ("auto", "legacy")
"""The SDK `Client`'s default (2026-07-28) and the handshake era: one client
of each calls at once, under one daemon."""


async def _calls_then_stop(
    clients: dict[str, Client], daemon: DaemonProcess, ledger: Path, sig: int
) -> dict[str, Any]:
    """Each client calls `record` (its text: `first-MODE`); once every line is
    written the daemon gets `sig`. What each call ended with (its result, or
    the exception it raised), by mode."""
    outcome: dict[str, Any] = {}

    async def call(mode: str, client: Client) -> None:
        try:
            outcome[mode] = await client.call_tool(
                "ledger__record", {"text": f"first-{mode}"}
            )
        except Exception as exc:  # what the client was told is the point
            outcome[mode] = exc

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for mode, client in clients.items():
                tg.start_soon(call, mode, client)
            for mode in clients:
                await _until_recorded(ledger, f"first-{mode}")
            daemon.signal(sig)
            daemon.wait(within=20)
    return outcome


def _ran_once_each(ledger: Path, modes: tuple[str, ...]) -> None:
    """Every first call ran once, every second call once, and nothing else."""
    lines = ledger_lines(ledger)
    firsts = sorted(f"first-{mode}" for mode in modes)
    seconds = sorted(f"second-{mode}" for mode in modes)
    assert sorted(lines[: len(modes)]) == firsts, lines
    assert sorted(lines[len(modes) :]) == seconds, lines


def _says_it_may_have_run(outcome: object, mode: str) -> None:
    assert isinstance(outcome, MCPError), (mode, outcome)
    message = str(outcome)
    assert "may have run" in message and "not sent again" in message, (mode, message)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["term", "kill"])
async def test_a_call_through_attach_runs_once_when_the_daemon_stops_under_it(
    tmp_path: Path, control_socket: Path, sig: int
) -> None:
    """A client of each era through its own `attach`, both in flight."""
    ledger = tmp_path / "ledger.txt"
    script = ledger_startup(tmp_path, ledger)
    with DaemonProcess(script, control_socket=control_socket) as daemon:
        daemon.wait_event("connected", "ledger")
        async with contextlib.AsyncExitStack() as stack:
            clients = {
                mode: await stack.enter_async_context(
                    Client(_attach(control_socket), mode=mode)
                )
                for mode in MODES
            }
            outcome = await _calls_then_stop(clients, daemon, ledger, sig)
            for mode in MODES:
                _says_it_may_have_run(outcome.get(mode), mode)
            # The next daemon on the same socket: attach reconnects; a call
            # made now runs there, and the first ones are not sent again.
            with DaemonProcess(script, control_socket=control_socket) as second:
                second.wait_event("connected", "ledger")
                with anyio.fail_after(60):
                    for mode, client in clients.items():
                        done = await client.call_tool(
                            "ledger__record", {"text": f"second-{mode}", "seconds": 0}
                        )
                        assert not done.is_error, mode
    _ran_once_each(ledger, MODES)


@pytest.mark.parametrize(
    ("sig", "modes"),
    [
        (signal.SIGTERM, MODES),
        # Killed, the SDK's HTTP client fails the call, or the whole client
        # (its transport's task group) when the POST got no answer at all,
        # as straight at a server that was killed: one client, so that its
        # end is its own (legacy: the same HTTP client).
        (signal.SIGKILL, ("auto",)),
    ],
    ids=["term", "kill"],
)
async def test_a_call_over_http_runs_once_when_the_daemon_stops_under_it(
    tmp_path: Path, sig: int, modes: tuple[str, ...]
) -> None:
    ledger = tmp_path / "ledger.txt"
    script = ledger_startup(tmp_path, ledger)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    args = ("--listen", f"127.0.0.1:{port}")
    with DaemonProcess(script, *args) as daemon:
        daemon.wait_event("connected", "ledger")
        told: dict[str, Any] = {}
        try:
            async with contextlib.AsyncExitStack() as stack:
                clients = {
                    mode: await stack.enter_async_context(
                        Client(bearer(url, daemon.token), mode=mode)
                    )
                    for mode in modes
                }
                told.update(await _calls_then_stop(clients, daemon, ledger, sig))
        except Exception as exc:  # the client's own end is what is checked
            told.setdefault("client", exc)
        if sig == signal.SIGTERM:  # stopped, it answers in words
            for mode in modes:
                _says_it_may_have_run(told.get(mode), mode)
            assert "Exception in ASGI application" not in daemon.log()
        assert told and all(isinstance(t, Exception) for t in told.values()), told
    # The next daemon on the same port: a call made now runs there, and the
    # first ones are not sent again by anyone.
    with DaemonProcess(script, *args) as second:
        second.wait_event("connected", "ledger")
        for mode in modes:
            async with Client(bearer(url, second.token), mode=mode) as client:
                done = await client.call_tool(
                    "ledger__record", {"text": f"second-{mode}", "seconds": 0}
                )
                assert not done.is_error, mode
    _ran_once_each(ledger, modes)


async def test_a_call_in_flight_when_a_reload_restarts_its_server_runs_once(
    tmp_path: Path, control_socket: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    script = ledger_startup(tmp_path, ledger)
    with DaemonProcess(script, control_socket=control_socket) as daemon:
        daemon.wait_event("connected", "ledger")
        async with Client(_attach(control_socket), mode="legacy") as client:
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    results: list[Any] = []

                    async def call() -> None:
                        results.append(
                            await client.call_tool("ledger__record", {"text": "first"})
                        )

                    tg.start_soon(call)
                    await _until_recorded(ledger, "first")
                    # A changed declaration restarts the server under the call.
                    ledger_startup(tmp_path, ledger, ", env = {RUN = '2'}")
                    daemon.client.reload()
                    updated = daemon.wait_event("updated", "ledger")
            (result,) = results
            assert result.is_error
            text = "".join(getattr(c, "text", "") for c in result.content)
            assert "may have run it, and it was not sent again" in text, text
            daemon.wait_event("connected", "ledger", after=int(str(updated["seq"])))
            done = await client.call_tool(
                "ledger__record", {"text": "second", "seconds": 0}
            )
            assert not done.is_error
    assert ledger_lines(ledger) == ["first", "second"]
