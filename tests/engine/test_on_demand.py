"""Servers started on demand (`start = "on_demand"`, `idle_stop`).

Real stdio servers (the stdlib `raw_legacy` one, and the SDK demo server for a
call that outlasts `idle_stop`), real processes checked by pid.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import psutil
import pytest
from fakes import Recorder
from servers import raw_command

from manager.core.errors import ConfigError
from manager.core.events import Idle
from manager.core.spec import ConnectionSpec, parse_spec
from manager.engine.bus import EventBus
from manager.engine.lists import ListMemory
from manager.engine.manager import Manager

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]


def on_demand(name: str, idle_stop: float, *flags: str) -> ConnectionSpec:
    command, args = raw_command(*flags)
    return parse_spec(
        name,
        {"command": command, "args": args},
        {"start": "on_demand", "idle_stop": idle_stop, "ping_interval": 0},
    )


def gone_within(pid: int, seconds: float) -> None:
    """Return once `pid` exited (polled on a thread, never reaped here: the
    manager's own wait does that)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} still runs {seconds} s after going idle")


async def test_a_new_server_is_started_once_to_learn_its_lists_then_idles(
    tmp_path: Path,
) -> None:
    bus = EventBus()
    rec = Recorder(bus)
    async with Manager(bus, lists=ListMemory(tmp_path)) as manager:
        manager.add(on_demand("od", 0.3))
        connected = await rec.wait_for("connected", "od")
        pid = connected.pid  # type: ignore[attr-defined]
        idle = await rec.wait_for("idle", "od")
        assert isinstance(idle, Idle) and idle.uptime > 0
        assert "no request for 0.3 s" in idle.reason
        conn = manager.connection("od")
        assert conn is not None and conn.phase == "idle"
        # The teardown after the event stops the process.
        await anyio.to_thread.run_sync(gone_within, pid, 10.0)
        assert {t.name for t in conn.tools} >= {"echo"}  # still listed
        assert manager.status("od").state == "idle"  # type: ignore[union-attr]
    assert (tmp_path / "od.json").is_file()


async def test_a_request_starts_an_idle_server_and_a_restart_remembers_its_tools(
    tmp_path: Path,
) -> None:
    lists = ListMemory(tmp_path)
    bus = EventBus()
    rec = Recorder(bus)
    async with Manager(bus, lists=lists) as manager:
        manager.add(on_demand("od", 0.2))
        await rec.wait_for("idle", "od")
        result = await manager.call("od", "echo", {"text": "wake"})
        assert not result.is_error and "wake" in str(result.data)
        assert len(rec.of("connected", "od")) == 2
        await rec.wait_for("idle", "od", after=rec.of("connected", "od")[-1].seq)

    # A new daemon: listed from what was kept, and nothing started for it.
    bus = EventBus()
    rec = Recorder(bus)
    async with Manager(bus, lists=lists) as manager:
        manager.add(on_demand("od", 0.2))
        idle = await rec.wait_for("idle", "od")
        assert isinstance(idle, Idle) and idle.reason == "starts at the first request"
        conn = manager.connection("od")
        assert conn is not None and {t.name for t in conn.tools} >= {"echo", "pid"}
        status = manager.status("od")  # what `status` and the HUD show
        assert status is not None and status.tools == len(conn.tools)
        assert not rec.of("connecting", "od")
        result = await manager.call("od", "echo", {"text": "cold"})
        assert not result.is_error


async def test_a_call_longer_than_idle_stop_is_not_cut(tmp_path: Path) -> None:
    bus = EventBus()
    rec = Recorder(bus)
    async with Manager(bus, lists=ListMemory(tmp_path)) as manager:
        manager.add(on_demand("od", 0.2, "--sleep-tool"))
        await rec.wait_for("idle", "od")
        result = await manager.call("od", "sleep", {"seconds": 0.8})
        assert not result.is_error
        assert len(rec.of("idle", "od")) == 1  # not stopped under the call
        await rec.wait_for("idle", "od", after=rec.of("call_finished", "od")[-1].seq)


@pytest.mark.parametrize(
    ("opts", "expected"),
    [
        ({"idle_stop": 30}, 'idle_stop applies to start = "on_demand"'),
        ({"start": "lazy"}, "start must be one of 'always', 'on_demand'"),
        ({"start": "on_demand", "idle_stop": 0}, "idle_stop must be > 0"),
    ],
)
def test_bad_on_demand_options_say_what_to_write(
    opts: dict[str, object], expected: str
) -> None:
    with pytest.raises(ConfigError, match=expected):
        parse_spec("od", {"command": "x"}, opts)


async def test_a_new_on_demand_server_is_trusted_on_its_first_listing(
    tmp_path: Path,
) -> None:
    """`pin = "strict"`: what a new on-demand server lists at its first start
    is pinned as first seen, not held back as new (nothing was pinned before
    it started)."""
    bus = EventBus()
    rec = Recorder(bus)
    command, args = raw_command()
    spec = parse_spec(
        "od",
        {"command": command, "args": args},
        {"start": "on_demand", "idle_stop": 0.2, "ping_interval": 0, "pin": "strict"},
    )
    async with Manager(bus, lists=ListMemory(tmp_path)) as manager:
        manager.add(spec)
        await rec.wait_for("idle", "od")
        result = await manager.call("od", "echo", {"text": "trusted"})
        assert not result.is_error and "trusted" in str(result.data)
        assert not rec.of("tool_changed", "od")
