"""`ResumableEvents`: what is kept for a client that resumes, for whom, how long."""

from __future__ import annotations

import anyio
import mcp.types as types
import pytest
from mcp.server.streamable_http import EventMessage

from manager.gateway import resumable
from manager.gateway.resumable import ResumableEvents, for_session

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def no_session_after() -> object:
    """Tests share the runner's context: say "no session" after each."""
    yield
    for_session(None)


def note(text: str) -> types.JSONRPCMessage:
    return types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/message", params={"data": text}
    )


async def replayed(store: ResumableEvents, last: str) -> tuple[str | None, list[str]]:
    seen: list[EventMessage] = []

    async def collect(event: EventMessage) -> None:
        seen.append(event)

    stream = await store.replay_events_after(last, collect)
    return stream, [
        str(e.message.params["data"])  # type: ignore[union-attr, index]
        for e in seen
    ]


async def test_a_session_replays_its_own_stream_and_nobody_elses() -> None:
    store = ResumableEvents()
    for_session("A")
    priming = await store.store_event("1", None)
    await store.store_event("1", note("a1"))
    await store.store_event("2", note("other stream"))
    await store.store_event("1", note("a2"))
    for_session("B")
    await store.store_event("1", note("b1"))  # the same request id, elsewhere
    assert await replayed(store, priming) == (None, [])
    for_session("A")
    assert await replayed(store, priming) == ("1", ["a1", "a2"])
    assert await replayed(store, "1-forged") == (None, [])
    for_session(None)
    assert await replayed(store, priming) == (None, [])


async def test_what_is_kept_is_bounded_by_age_count_and_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [0.0]
    store = ResumableEvents(clock=lambda: now[0])
    for_session("A")
    old = await store.store_event("1", None)
    now[0] = resumable.KEEP_FOR + 1
    await store.store_event("1", note("new"))
    assert store.kept == 1 and await replayed(store, old) == (None, [])
    monkeypatch.setattr(resumable, "MAX_EVENTS", 3)
    for i in range(5):
        await store.store_event("1", note(str(i)))
    assert store.kept == 3
    monkeypatch.setattr(resumable, "MAX_BYTES", 1000)
    await store.store_event("1", note("x" * 600))
    await store.store_event("1", note("y" * 600))
    assert store.kept == 1 and store.kept_bytes < 1000


async def test_a_lean_stream_is_followed_to_its_end_by_its_session_only() -> None:
    store = ResumableEvents()
    stream = store.open_lean("A")
    priming = store.keep(stream, None)
    store.keep(stream, b"first")
    assert store.lean_stream(priming, "B") is None
    assert store.lean_stream(priming, "A") == stream
    got: list[bytes] = []

    async def follow() -> None:
        async for _, data in store.follow(stream, priming):
            got.append(data)

    async with anyio.create_task_group() as tg:
        tg.start_soon(follow)
        await anyio.wait_all_tasks_blocked()
        assert got == [b"first"]
        store.keep(stream, b"answer")
        store.end_lean(stream)
    assert got == [b"first", b"answer"]
