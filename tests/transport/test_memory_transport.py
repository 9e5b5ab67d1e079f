"""The real transport code against the demo server in memory: no process, no socket.

`McpTransport(open_streams=MemoryServers.open)` keeps everything of ours (the
handshake under its deadline, paging, list_changed, pings, loss reports, holding
calls, error mapping) and swaps only the bytes' path, so these tests are exact
and fast. Process and socket behaviour is tested with the real thing elsewhere.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from fakes import Recorder
from memory import MEMORY_REASON, MemoryServers, memory_spec

from manager.core.errors import CallTimeout, ServerUnavailable
from manager.demo_server import BUILTIN_TOOLS, SERVER_NAME
from manager.engine.bus import EventBus
from manager.engine.manager import Manager
from manager.transport.connect import McpTransport
from manager.transport.session import McpSession

pytestmark = pytest.mark.anyio

FAST = {"backoff": {"initial": 0.01, "cap": 0.05}}


class Env:
    def __init__(self, mgr: Manager, rec: Recorder, servers: MemoryServers) -> None:
        self.mgr, self.rec, self.servers = mgr, rec, servers


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    servers = MemoryServers(page_size=2)  # every list takes several pages
    bus = EventBus()
    rec = Recorder(bus)
    transport = McpTransport(open_streams=servers.open)
    async with Manager(bus, transport) as mgr:
        yield Env(mgr, rec, servers)


async def test_the_handshake_lists_every_page_of_tools(env: Env) -> None:
    env.mgr.add(memory_spec("mem", **FAST))
    connected = await env.rec.wait_for("connected", "mem")
    assert connected.server_name == SERVER_NAME  # type: ignore[attr-defined]
    names = sorted(t.name for t in env.mgr.tools("mem"))
    assert names == sorted(tool.name for tool in BUILTIN_TOOLS)
    assert len(names) > 2 * env.servers.page_size


async def test_calls_return_results_and_tool_errors(env: Env) -> None:
    env.mgr.add(memory_spec("mem", **FAST))
    await env.rec.wait_for("connected", "mem")
    ok = await env.mgr.call("mem", "echo", {"text": "hi"})
    assert ok.is_error is False and ok.data["content"] == [
        {"type": "text", "text": "hi"}
    ]
    failed = await env.mgr.call("mem", "fail", {"message": "nope"})
    assert failed.is_error is True and "nope" in str(failed.data)
    missing = await env.mgr.call("mem", "echo", {})  # a required argument missing
    assert missing.is_error is True


async def test_a_call_past_its_timeout_is_a_call_timeout(env: Env) -> None:
    env.mgr.add(memory_spec("mem", **FAST))
    await env.rec.wait_for("connected", "mem")
    with pytest.raises(CallTimeout, match="no result within 0.2 s"):
        await env.mgr.call("mem", "sleep", {"seconds": 30}, call_timeout=0.2)


async def test_progress_of_a_call_reaches_the_caller(env: Env) -> None:
    env.mgr.add(memory_spec("mem", **FAST))
    await env.rec.wait_for("connected", "mem")
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(
        progress: float, total: float | None, message: str | None
    ) -> None:
        seen.append((progress, total, message))

    await env.mgr.call("mem", "sleep", {"seconds": 0.01}, progress=progress)
    assert [message for _, _, message in seen] == ["sleeping", "awake"]


async def test_list_changed_relists_every_page_and_reports_the_difference(
    env: Env,
) -> None:
    env.mgr.add(memory_spec("mem", **FAST))
    await env.rec.wait_for("connected", "mem")
    await env.mgr.call("mem", "add_tool", {"name": "fresh"})
    changed = await env.rec.wait_for("tools_changed", "mem")
    assert changed.added == ("fresh",)  # type: ignore[attr-defined]
    assert "fresh" in {t.name for t in env.mgr.tools("mem")}
    await env.mgr.call("mem", "remove_tool", {"name": "fresh"})
    gone = await env.rec.wait_for("tools_changed", "mem", after=changed.seq)
    assert gone.removed == ("fresh",)  # type: ignore[attr-defined]


async def test_a_server_that_dies_is_reported_held_for_and_reconnected(
    env: Env,
) -> None:
    env.mgr.add(memory_spec("mem", hold=0.1, backoff={"initial": 5, "cap": 5}))
    first = await env.rec.wait_for("connected", "mem")
    env.servers.kill("mem")
    lost = await env.rec.wait_for("disconnected", "mem", after=first.seq)
    assert MEMORY_REASON in lost.reason  # type: ignore[attr-defined]
    # Down and waiting 5 s for its next try: a call is held `hold`, then fails.
    with pytest.raises(ServerUnavailable, match="mem is reconnecting"):
        await env.mgr.call("mem", "echo", {"text": "x"})
    assert env.mgr.reconnect("mem") is True  # skip the wait
    await env.rec.wait_for("connected", "mem", after=lost.seq)
    assert env.servers.starts["mem"] == 2
    assert (await env.mgr.call("mem", "echo", {"text": "back"})).is_error is False


async def test_a_server_that_refuses_to_start_is_retried_with_its_reason(
    env: Env,
) -> None:
    env.servers.down.add("mem")
    env.mgr.add(memory_spec("mem", **FAST))
    failed = await env.rec.wait_for("connect_failed", "mem")
    assert "refused to start" in failed.error  # type: ignore[attr-defined]
    retried = await env.rec.wait_for("connect_failed", "mem", after=failed.seq)
    assert retried.attempt == failed.attempt + 1  # type: ignore[attr-defined]
    env.servers.down.clear()
    await env.rec.wait_for("connected", "mem", after=retried.seq)


async def test_an_unknown_tool_is_a_tool_error_from_the_server(env: Env) -> None:
    env.mgr.add(memory_spec("mem", **FAST))
    await env.rec.wait_for("connected", "mem")
    result = await env.mgr.call("mem", "no_such_tool", {})
    assert result.is_error is True
    assert result.data["content"] == [
        {"type": "text", "text": "unknown tool 'no_such_tool'"}
    ]


async def test_a_listen_stream_the_server_closes_is_opened_again(env: Env) -> None:
    """2026-07-28 clarification: a server ends a `subscriptions/listen` stream
    it closes with its result. That is no loss of the session: the stream is
    opened again (after a pause), and later changes are still heard."""
    env.mgr.add(memory_spec("mem", protocol="2026-07-28", **FAST))
    connected = await env.rec.wait_for("connected", "mem")
    # Who the server is, read from the discover result's `_meta` (#3002).
    assert connected.server_name == SERVER_NAME  # type: ignore[attr-defined]
    conn = env.mgr.connection("mem")
    assert conn is not None and isinstance(conn.upstream, McpSession)
    with anyio.fail_after(10):
        await conn.upstream.followed.wait()  # its listen stream is open
    env.servers.servers["mem"].close_listens()
    # A change made before the stream is open again is not heard (no replay):
    # add tools until one is, which takes one pause (RELISTEN_PAUSE).
    with anyio.fail_after(20):
        for n in range(100):
            seen = env.rec.last_seq
            await env.mgr.call("mem", "add_tool", {"name": f"fresh{n}"})
            with anyio.move_on_after(0.5):
                await env.rec.wait_for("tools_changed", "mem", after=seen)
                break
    assert len(env.rec.of("connected", "mem")) == 1  # never reconnected
