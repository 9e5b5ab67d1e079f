"""`Peers`: the handshake-era downstream sessions that get `list_changed`,
and `Sessions` (the gateway's), whose records hold all the endpoint keeps
about a session. In memory: the SDK's request context and session are
stand-ins with the attributes these read and the calls they make."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from manager.gateway.sessions import Downstream, Sessions
from manager.mcpserver.peers import STREAM_KEY, Peers

pytestmark = pytest.mark.anyio


class _Session:
    """What a downstream session is asked for: a list_changed notification."""

    def __init__(self, own_channel: bool = True, fails: bool = False) -> None:
        self.can_send_request = own_channel
        self.client_params: Any = None
        self.sent = 0
        self._fails = fails

    async def send_tool_list_changed(self) -> None:
        if self._fails:
            raise OSError("the client went away")
        self.sent += 1


def _ctx(
    session: _Session, method: str = "tools/list", version: str = "2025-11-25"
) -> Any:
    return SimpleNamespace(
        method=method, protocol_version=version, session=session, request=None
    )


async def _seen(peers: Peers, key: str, ctx: Any) -> None:
    """`ctx` passes `peers.track` on the stream named `key`."""

    async def call_next(ctx: Any) -> None:
        return None

    token = STREAM_KEY.set(key)
    try:
        await peers.track(ctx, call_next)
    finally:
        STREAM_KEY.reset(token)


async def test_handshake_sessions_are_tracked_and_each_told_once() -> None:
    peers = Peers()
    a, b, quiet = _Session(), _Session(), _Session(own_channel=False)
    await _seen(peers, "a", _ctx(a, method="initialize"))  # not yet a session
    assert peers.get("a") is None
    await _seen(peers, "a", _ctx(a))
    await _seen(peers, "a", _ctx(a))  # the same session, seen again
    await _seen(peers, "b", _ctx(b))
    await _seen(peers, "q", _ctx(quiet))  # kept, but it has no channel to tell
    await _seen(peers, "m", _ctx(_Session(), version="2026-07-28"))  # no session
    assert [p.key for p in peers.peers()] == ["a", "b", "q"] and len(peers) == 2
    await peers.notify_tools_changed()
    assert (a.sent, b.sent, quiet.sent) == (1, 1, 0)


async def test_a_session_that_fails_or_idles_is_forgotten_and_its_record_let_go() -> (
    None
):
    now = [0.0]
    released: list[Downstream] = []
    sessions = Sessions(
        idle_timeout=10.0, on_forget=released.append, clock=lambda: now[0]
    )
    gone, idle, alive = _Session(fails=True), _Session(), _Session()
    await _seen(sessions, "gone", _ctx(gone))
    await _seen(sessions, "idle", _ctx(idle))
    now[0] = 8.0
    await _seen(sessions, "alive", _ctx(alive))
    record = sessions.get("alive")
    assert record is not None
    record.uris.add("demo://readme")  # what it subscribed to
    now[0] = 15.0  # idle for 15 s, alive for 7 s
    with anyio.fail_after(5):
        await sessions.notify_tools_changed()
    assert sorted(r.key for r in released) == ["gone", "idle"]
    assert [r.key for r in sessions.records()] == ["alive"] and alive.sent == 1
    sessions.forget("alive")  # closed: the whole record goes, uris with it
    assert released[-1].uris == {"demo://readme"} and sessions.records() == []


async def test_a_record_learns_who_its_client_is_once_initialize_is_done() -> None:
    sessions = Sessions()
    session = _Session()
    await _seen(sessions, "s", _ctx(session))  # before initialize's answer
    record = sessions.get("s")
    assert record is not None and not record.ready
    caps = SimpleNamespace(
        sampling=None,
        elicitation=object(),
        roots=None,
        model_dump=lambda **kw: {"elicitation": {}},
    )
    session.client_params = SimpleNamespace(
        capabilities=caps,
        client_info=SimpleNamespace(model_dump=lambda **kw: {"name": "editor"}),
    )
    await _seen(sessions, "s", _ctx(session))
    assert record.ready and record.askable
    assert record.client_info == {"name": "editor"}
    assert record.capabilities == {"elicitation": {}}
