"""No call runs twice: the daemon stopped or killed under a call in flight.

The upstream is `servers/ledger.py`, whose `record` tool appends a line to a
file and then takes 30 s: the line count says how often the call ran. A
client calls it through `mcp-manager attach` (SDK `Client` in both eras) or
through the HTTP endpoint; once the line is written the daemon gets SIGTERM
or SIGKILL and a new daemon starts on the same socket. Each call must run
once, and its client must be told it failed, in words that say it may have
run and was not sent again.
"""

from __future__ import annotations

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


async def _call_then_stop(
    client: Client, daemon: DaemonProcess, ledger: Path, sig: int
) -> Any:
    """Call `record`, signal the daemon once the line is written; what the
    call ended with (its result, or the exception it raised)."""
    outcome: list[Any] = []

    async def call() -> None:
        try:
            outcome.append(await client.call_tool("ledger__record", {"text": "first"}))
        except Exception as exc:  # what the client was told is the point
            outcome.append(exc)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await _until_recorded(ledger, "first")
            daemon.signal(sig)
            daemon.wait(within=20)
    return outcome[0] if outcome else None


async def _second_call_runs_once(
    script: Path, args: tuple[str, ...], url: str, mode: Any, ledger: Path
) -> None:
    """The next daemon on the same port: a call made now runs there, and the
    first one is not sent again by anyone."""
    with DaemonProcess(script, *args) as second:
        second.wait_event("connected", "ledger")
        async with Client(bearer(url, second.token), mode=mode) as client:
            done = await client.call_tool(
                "ledger__record", {"text": "second", "seconds": 0}
            )
            assert not done.is_error
    assert ledger_lines(ledger) == ["first", "second"]


def _says_it_may_have_run(outcome: object) -> None:
    assert isinstance(outcome, MCPError), outcome
    message = str(outcome)
    assert "may have run" in message and "not sent again" in message, message


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["term", "kill"])
async def test_a_call_through_attach_runs_once_when_the_daemon_stops_under_it(
    tmp_path: Path, control_socket: Path, mode: Any, sig: int
) -> None:
    ledger = tmp_path / "ledger.txt"
    script = ledger_startup(tmp_path, ledger)
    with DaemonProcess(script, control_socket=control_socket) as daemon:
        daemon.wait_event("connected", "ledger")
        async with Client(_attach(control_socket), mode=mode) as client:
            outcome = await _call_then_stop(client, daemon, ledger, sig)
            _says_it_may_have_run(outcome)
            # The next daemon on the same socket: attach reconnects; a call
            # made now runs there, and the first one is not sent again.
            with DaemonProcess(script, control_socket=control_socket) as second:
                second.wait_event("connected", "ledger")
                with anyio.fail_after(60):
                    done = await client.call_tool(
                        "ledger__record", {"text": "second", "seconds": 0}
                    )
                assert not done.is_error
    assert ledger_lines(ledger) == ["first", "second"]


@pytest.mark.parametrize(
    ("mode", "sig"),
    [
        ("auto", signal.SIGTERM),
        ("legacy", signal.SIGTERM),
        ("auto", signal.SIGKILL),  # legacy: the same HTTP client
    ],
    ids=["term-auto", "term-legacy", "kill-auto"],
)
async def test_a_call_over_http_runs_once_when_the_daemon_stops_under_it(
    tmp_path: Path, mode: Any, sig: int
) -> None:
    ledger = tmp_path / "ledger.txt"
    script = ledger_startup(tmp_path, ledger)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    args = ("--listen", f"127.0.0.1:{port}")
    with DaemonProcess(script, *args) as daemon:
        daemon.wait_event("connected", "ledger")
        # Killed, the daemon says nothing: the SDK's HTTP client fails the
        # call, or the whole client (its transport's task group) when the
        # POST got no answer at all, as straight at a server that was killed.
        told: list[object] = []
        try:
            async with Client(bearer(url, daemon.token), mode=mode) as client:
                told.append(await _call_then_stop(client, daemon, ledger, sig))
        except Exception as exc:  # the client's own end is what is checked
            told.append(exc)
        if sig == signal.SIGTERM:  # stopped, it answers in words
            _says_it_may_have_run(told[0])
            assert "Exception in ASGI application" not in daemon.log()
        assert told and isinstance(told[0], Exception), told
    await _second_call_runs_once(script, args, url, mode, ledger)


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
