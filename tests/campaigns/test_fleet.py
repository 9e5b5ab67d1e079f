"""Fleets that converge: many stdio servers declared at once all come up.

Real SDK demo servers (each ~0.5–0.7 s of CPU to start) on this small machine:
started all at once, their handshakes would take many times that, so these tests
pick a `connect_timeout` that only bounded, paced starts can meet.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import anyio.lowlevel
import psutil
import pytest
from fakes import Recorder
from servers import HttpServerFactory, raw_command, stdio_command

from manager.core.events import Event
from manager.core.spec import ConnectionSpec, parse_spec
from manager.engine.bus import EventBus
from manager.engine.manager import Manager
from manager.transport.stdio.starts import StartSlots, cpu_ticks

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]

FLEET_WAIT = 120.0
"""Seconds a whole fleet gets to connect (far above what it needs)."""


def demo(name: str, **opts: object) -> ConnectionSpec:
    command, args = stdio_command()
    return parse_spec(name, {"command": command, "args": args}, opts)


def hanging(name: str, **opts: object) -> ConnectionSpec:
    command, args = raw_command("--hang-on-initialize")
    return parse_spec(name, {"command": command, "args": args}, opts)


@pytest.fixture
async def fleet() -> AsyncIterator[tuple[Manager, Recorder]]:
    bus = EventBus()
    rec = Recorder(bus)
    async with Manager(bus, start_slots=2) as mgr:
        yield mgr, rec


async def all_connected(rec: Recorder, names: list[str]) -> None:
    with anyio.fail_after(FLEET_WAIT):
        for name in names:
            await rec.wait_for("connected", name, within=FLEET_WAIT)


async def test_a_fleet_declared_at_once_connects_without_a_single_timeout(
    fleet: tuple[Manager, Recorder],
) -> None:
    mgr, rec = fleet
    names = [f"s{i:02}" for i in range(14)]
    # 14 SDK servers started together on 2 cores need several seconds each;
    # one at a time (two slots) each needs well under 3 s.
    starting: list[int] = []  # servers spawned but not yet connected, per connect

    def count_starting(event: Event) -> None:
        if event.kind == "connected":
            spawned = len(psutil.Process().children())
            starting.append(spawned - len(rec.of("connected")))

    rec_close = mgr.bus.add_listener(count_starting)
    for name in names:
        mgr.add(demo(name, connect_timeout=3))
    await all_connected(rec, names)
    rec_close()
    assert rec.of("connect_failed") == []
    # Two slots: at most two servers start at once (one more may be spawning
    # in the instant a slot changes hands), never the whole fleet.
    assert max(starting) <= 3, starting
    starts = mgr.starts
    assert starts is not None
    assert starts.in_use == 0 and starts.waiting == 0


async def test_hung_servers_give_their_start_slot_back(
    fleet: tuple[Manager, Recorder],
) -> None:
    mgr, rec = fleet
    for i in range(4):  # more hung servers than slots, declared first
        mgr.add(hanging(f"hung{i}", connect_timeout=20))
    names = [f"ok{i}" for i in range(4)]
    for name in names:
        mgr.add(demo(name))
    await all_connected(rec, names)
    # Nobody waited for a hung server's connect_timeout to free a slot.
    assert rec.of("connect_failed") == []


async def test_http_upstreams_never_wait_behind_stdio_starts(
    fleet: tuple[Manager, Recorder], make_http_server: HttpServerFactory
) -> None:
    mgr, rec = fleet
    server = make_http_server("http", raw=True)
    for i in range(6):
        mgr.add(hanging(f"hung{i}", connect_timeout=20))
    mgr.add(parse_spec("web", server.url))
    await rec.wait_for("connected", "web")
    starts = mgr.starts
    assert starts is not None
    assert starts.waiting > 0  # stdio starts are still queued behind slots
    assert rec.of("connect_failed") == []


async def test_start_slots_are_served_in_order_and_bounded() -> None:
    slots = StartSlots(2)
    order: list[int] = []

    async def start(i: int) -> None:
        slot = await slots.acquire()
        order.append(i)
        assert slots.in_use <= 2
        await anyio.lowlevel.checkpoint()
        slot.release()
        slot.release()  # idempotent

    async with anyio.create_task_group() as tg:
        for i in range(6):
            tg.start_soon(start, i)
    assert order == list(range(6))
    assert slots.in_use == 0
    with pytest.raises(ValueError, match="at least 1"):
        StartSlots(0)


def test_cpu_ticks_reads_this_process_and_nothing_for_a_missing_one() -> None:
    import os

    before = cpu_ticks(os.getpid())
    assert before is not None
    sum(i * i for i in range(2_000_000))  # burn a little CPU
    after = cpu_ticks(os.getpid())
    assert after is not None and after > before
    assert cpu_ticks(2**22 + 12345) is None


async def test_a_busy_start_gets_more_time_and_an_idle_one_does_not(
    fleet: tuple[Manager, Recorder],
) -> None:
    mgr, rec = fleet
    # The busy one needs 1.2 s of CPU (more wall time on a loaded machine, up
    # to the 3 s hard bound); the idle one sleeps past its 1 s.
    for name, flag, seconds in (
        ("busy", "--busy-start", "1.2"),
        ("idle", "--slow-start", "1.5"),
    ):
        command, args = raw_command(flag, seconds)
        spec = {"command": command, "args": args}
        mgr.add(parse_spec(name, spec, {"connect_timeout": 1}))
    connected = await rec.wait_for("connected", "busy")
    assert connected.attempt == 1  # type: ignore[attr-defined]
    failed = await rec.wait_for("connect_failed", "idle")
    assert "within connect_timeout 1 s" in failed.error  # type: ignore[attr-defined]
    assert rec.of("connect_failed", "busy") == []
