"""The reconnect loop and the manager, driven through a fake transport.

Fast and deterministic: no processes, no sockets. Real servers are in
test_transport.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from fakes import FakeTransport, Recorder

from manager.core.errors import ServerUnavailable, UnknownServer
from manager.core.events import AttemptFailed, Reconnecting
from manager.core.redact import SecretRegistry
from manager.core.spec import ConnectionSpec, parse_spec
from manager.engine.bus import EventBus
from manager.engine.manager import Manager

pytestmark = pytest.mark.anyio

FAST = {"backoff": {"initial": 0.01, "cap": 0.08}, "ping_interval": 0}


def assert_within_jitter(delays: list[float], nominal: list[float]) -> None:
    """Each delay is its nominal value less at most 10 % (jitter, wake alignment)."""
    assert len(delays) == len(nominal)
    for got, want in zip(delays, nominal, strict=True):
        assert 0.9 * want - 1e-9 <= got <= want + 1e-9, (delays, nominal)


def fake_spec(name: str = "s", **opts: object) -> ConnectionSpec:
    return parse_spec(name, "http://127.0.0.1:1/mcp", {**FAST, **opts})


async def test_connection_retries_until_the_server_answers() -> None:
    bus = EventBus()
    rec = Recorder(bus)
    transport = FakeTransport(failures=4)
    async with Manager(bus, transport) as mgr:
        mgr.add(fake_spec())
        connected = await rec.wait_for("connected", "s")
        assert connected.attempt == 5  # type: ignore[attr-defined]
        assert [e.attempt for e in rec.of("connecting", "s")] == [1, 2, 3, 4, 5]  # type: ignore[attr-defined]
        assert len(rec.of("connect_failed", "s")) == 4
        assert mgr.status("s") == mgr.statuses()[0]
        assert mgr.statuses()[0].state == "connected"


async def test_backoff_doubles_and_stays_at_the_cap() -> None:
    bus = EventBus()
    rec = Recorder(bus)
    async with Manager(bus, FakeTransport(failures=7), rand=lambda: 0.0) as mgr:
        mgr.add(fake_spec())
        await rec.wait_for("connected", "s")
    delays = [
        e.delay for e in rec.of("reconnecting", "s") if isinstance(e, Reconnecting)
    ]
    assert_within_jitter(delays, [0.01, 0.02, 0.04, 0.08, 0.08, 0.08, 0.08])


async def test_a_server_that_dies_after_each_handshake_climbs_to_the_cap() -> None:
    bus = EventBus()
    rec = Recorder(bus)
    transport = FakeTransport()
    async with Manager(bus, transport, rand=lambda: 0.0) as mgr:
        mgr.add(fake_spec(stable_after=60))
        after = 0
        for _ in range(6):
            ev = await rec.wait_for("connected", "s", after=after)
            after = ev.seq
            transport.upstreams[-1].die("crashed", exit_code=3)
        await rec.wait_for("connected", "s", after=after)
    delays = [
        e.delay for e in rec.of("reconnecting", "s") if isinstance(e, Reconnecting)
    ]
    assert_within_jitter(delays, [0.01, 0.02, 0.04, 0.08, 0.08, 0.08])
    lost = rec.of("disconnected", "s")
    assert [e.exit_code for e in lost] == [3] * 6  # type: ignore[attr-defined]


async def test_a_stable_connection_resets_the_attempt_counter() -> None:
    bus = EventBus()
    rec = Recorder(bus)
    transport = FakeTransport(failures=3)
    async with Manager(bus, transport, rand=lambda: 0.0) as mgr:
        mgr.add(fake_spec(stable_after=0))
        first = await rec.wait_for("connected", "s")
        assert first.attempt == 4  # type: ignore[attr-defined]
        transport.upstreams[-1].die()
        again = await rec.wait_for("connected", "s", after=first.seq)
        assert again.attempt == 1  # type: ignore[attr-defined]
    delays = [
        e.delay for e in rec.of("reconnecting", "s") if isinstance(e, Reconnecting)
    ]
    assert_within_jitter(delays[-1:], [0.01])


async def test_status_stops_counting_attempts_once_a_connection_is_stable() -> None:
    """The state resets the count only when a session ends; status and the
    HUD said "attempt 4" (in yellow: flapping) of a connection up for hours
    (found by an audit). Once connected for stable_after, they say none."""
    bus = EventBus()
    rec = Recorder(bus)
    async with Manager(bus, FakeTransport(failures=3)) as mgr:
        mgr.add(fake_spec("flapped", stable_after=0))
        mgr.add(fake_spec("recent", stable_after=3600))
        for name in ("flapped", "recent"):
            event = await rec.wait_for("connected", name)
            assert event.attempt > 1  # type: ignore[attr-defined]
        attempts = {s.name: s.attempt for s in mgr.statuses()}
        assert attempts["flapped"] == 0  # connected for stable_after (0 s)
        assert attempts["recent"] > 1  # not yet: still counts


async def test_adding_the_same_spec_twice_changes_nothing() -> None:
    bus = EventBus()
    rec = Recorder(bus)
    transport = FakeTransport()
    async with Manager(bus, transport) as mgr:
        assert mgr.add(fake_spec()) is True
        await rec.wait_for("connected", "s")
        assert mgr.add(fake_spec()) is False
        await anyio.wait_all_tasks_blocked()
        assert transport.opens == 1
        assert len(rec.of("added")) == 1


async def test_a_changed_spec_restarts_only_that_connection() -> None:
    bus = EventBus()
    rec = Recorder(bus)
    transport = FakeTransport()
    async with Manager(bus, transport) as mgr:
        mgr.reconcile([fake_spec("a"), fake_spec("b")])
        await rec.wait_for("connected", "a")
        await rec.wait_for("connected", "b")
        seq = rec.last_seq
        result = mgr.reconcile(
            [fake_spec("a"), fake_spec("b", hold=1.0), fake_spec("c")]
        )
        assert (result.added, result.changed, result.unchanged) == (
            ("c",),
            ("b",),
            ("a",),
        )
        await rec.wait_for("connected", "b", after=seq)
        await rec.wait_for("connected", "c", after=seq)
        touched = {e.name for e in rec.events if e.seq > seq}
        assert touched == {"b", "c"}
        updated = rec.of("updated", "b")
        assert updated and updated[0].changed == ("hold",)  # type: ignore[attr-defined]
        assert not rec.of("removed", "b")  # a restart is not a removal


async def test_remove_stops_retrying_and_emits_removed() -> None:
    bus = EventBus()
    rec = Recorder(bus)
    async with Manager(bus, FakeTransport(failures=10**9)) as mgr:
        mgr.add(fake_spec())
        await rec.wait_for("connect_failed", "s")
        assert mgr.remove("s") is True
        assert mgr.remove("s") is False
        await rec.wait_for("removed", "s")
        # `removed` is told as its task ends: nothing is left to try again.
        assert mgr.connections_and_closing() == []
        assert mgr.statuses() == []


async def test_a_call_to_a_connected_server_goes_through() -> None:
    bus = EventBus()
    rec = Recorder(bus)
    transport = FakeTransport()
    async with Manager(bus, transport) as mgr:
        mgr.add(fake_spec())
        await rec.wait_for("connected", "s")
        result = await mgr.call("s", "echo", {"text": "hi"})
        assert result.is_error is False
        assert transport.upstreams[0].calls == [("echo", {"text": "hi"})]
        assert rec.of("call_finished", "s")


async def test_a_call_waits_for_a_reconnecting_server_within_hold() -> None:
    bus = EventBus()
    rec = Recorder(bus)
    transport = FakeTransport(failures=3)
    async with Manager(bus, transport) as mgr:
        mgr.add(fake_spec(hold=5.0))
        result = await mgr.call("s", "echo", {})
        assert result.is_error is False
        assert rec.of("connect_failed", "s")


async def test_a_call_fails_after_hold_naming_state_attempt_and_error() -> None:
    bus = EventBus()
    rec = Recorder(bus)
    transport = FakeTransport(failures=10**9, error="connection refused (h:1)")
    async with Manager(bus, transport) as mgr:
        mgr.add(fake_spec(hold=0.2))
        await rec.wait_for("connect_failed", "s")
        with pytest.raises(ServerUnavailable) as info:
            await mgr.call("s", "echo", {})
        text = str(info.value)
        assert text.startswith("s is reconnecting (attempt ")
        assert "next retry in" in text
        assert "last error: connection refused (h:1)" in text
        assert rec.of("call_failed", "s")


async def test_an_old_outage_fails_calls_at_once() -> None:
    bus = EventBus()
    rec = Recorder(bus)
    clock = [1000.0]
    transport = FakeTransport(failures=10**9)
    async with Manager(bus, transport, clock=lambda: clock[0]) as mgr:
        mgr.add(fake_spec(hold=30.0))
        await rec.wait_for("connect_failed", "s")
        clock[0] += 1000  # the outage is now far older than 3 holds
        with anyio.fail_after(1.0):
            with pytest.raises(ServerUnavailable, match="down for"):
                await mgr.call("s", "echo", {})


async def test_a_call_to_an_unknown_server_names_the_known_ones() -> None:
    async with Manager(EventBus(), FakeTransport()) as mgr:
        mgr.add(fake_spec("alpha"))
        with pytest.raises(UnknownServer, match=r"'nope' \(declared: alpha\)"):
            await mgr.call("nope", "echo", {})
        # A typo gets the name it is likely to be.
        typo = r"'alhpa' \(did you mean 'alpha'\?\) \(declared: alpha\)"
        with pytest.raises(UnknownServer, match=typo):
            await mgr.call("alhpa", "echo", {})
        with pytest.raises(UnknownServer, match=typo):  # every verb says the same
            mgr.reconnect("alhpa")
        with pytest.raises(UnknownServer, match=typo):
            await mgr.launch_offer("alhpa")


async def test_a_disabled_connection_is_listed_but_never_started() -> None:
    bus = EventBus()
    transport = FakeTransport()
    async with Manager(bus, transport) as mgr:
        mgr.add(fake_spec(enabled=False))
        await anyio.wait_all_tasks_blocked()
        assert transport.opens == 0
        assert mgr.statuses()[0].state == "disabled"
        with pytest.raises(ServerUnavailable, match="disabled"):
            await mgr.call("s", "echo", {})


async def test_add_remove_churn_leaves_no_tasks_behind() -> None:
    bus = EventBus()
    rec = Recorder(bus)
    transport = FakeTransport(failures=5)
    async with Manager(bus, transport) as mgr:
        await anyio.wait_all_tasks_blocked()
        tasks_before = len(anyio.get_running_tasks())  # the manager's own (call log)
        for i in range(200):
            mgr.add(fake_spec(f"c{i % 7}", hold=float(i % 3 + 1)))
            if i % 3 == 0:
                mgr.remove(f"c{(i + 2) % 7}")
        mgr.reconcile([])
        with anyio.fail_after(5):
            while mgr.connections_and_closing():
                await rec.wait_for("removed", after=rec.last_seq)
        await anyio.wait_all_tasks_blocked()  # finished tasks are gone
        # Every connection task of the churn has ended, inside the manager too.
        assert len(anyio.get_running_tasks()) == tasks_before
    assert mgr.statuses() == []


async def test_reconnect_skips_the_backoff_wait() -> None:
    bus = EventBus()
    rec = Recorder(bus)
    transport = FakeTransport(failures=1)
    spec = parse_spec(
        "s", "http://127.0.0.1:1/mcp", {"backoff": {"initial": 60, "cap": 60}}
    )
    async with Manager(bus, transport) as mgr:
        mgr.add(spec)
        await rec.wait_for("reconnecting", "s")  # now waiting a whole minute
        assert mgr.reconnect("s") is True
        with anyio.fail_after(2):
            await rec.wait_for("connected", "s")
        assert mgr.reconnect("s") is False  # connected: nothing to cut short
        with pytest.raises(UnknownServer):
            mgr.reconnect("nope")
        off = parse_spec("off", "http://127.0.0.1:1/mcp", {"enabled": False})
        mgr.add(off)
        with pytest.raises(
            ServerUnavailable, match=r"off is disabled .*enabled = true"
        ):
            mgr.reconnect("off")  # not "a try is already in flight"


async def test_a_failing_teardown_does_not_report_the_loss_twice() -> None:
    bus = EventBus()
    rec = Recorder(bus)
    transport = FakeTransport(teardown_error=True)
    async with Manager(bus, transport) as mgr:
        mgr.add(fake_spec())
        first = await rec.wait_for("connected", "s")
        transport.upstreams[-1].die("gone")
        await rec.wait_for("connected", "s", after=first.seq)
    lost = rec.of("disconnected", "s")
    assert len(lost) == 1 and lost[0].reason == "gone"  # type: ignore[attr-defined]
    assert len(rec.of("reconnecting", "s")) == 1


@pytest.mark.anyio
async def test_a_secret_across_the_cut_of_a_long_log_or_stderr_line_is_masked() -> None:
    from manager.core.events import ServerLog, ServerStderr
    from manager.core.redact import SecretRegistry
    from manager.engine.connection import Connection
    from manager.engine.output import LOG_DATA_LIMIT, STDERR_LINE_LIMIT

    secret = "s3cret-log-value-91f2"
    secrets = SecretRegistry()
    secrets.add([secret])
    bus = EventBus()
    seen: list[object] = []
    bus.add_listener(seen.append)
    conn = Connection(parse_spec("x", "http://h/mcp", {}), bus, secrets=secrets)
    text = "a" * (LOG_DATA_LIMIT - 5) + secret  # the cut falls inside the secret
    conn.hooks().on_log("warning", "db", text)
    conn.hooks().on_stderr("b" * (STDERR_LINE_LIMIT - 5) + secret)
    log, stderr = seen
    assert isinstance(log, ServerLog) and isinstance(stderr, ServerStderr)
    assert len(log.data) <= LOG_DATA_LIMIT and len(stderr.line) <= STDERR_LINE_LIMIT
    assert secret[:5] not in log.data and secret[:5] not in stderr.line
    assert secret[:5] not in "".join(conn.stderr)


class BuggyTransport(FakeTransport):
    """Raises what no transport should (a bug: unmapped, in a group) `bugs`
    times, then connects."""

    def __init__(self, bugs: int, message: str) -> None:
        super().__init__()
        self.bugs = bugs
        self.message = message

    def open(self, spec: ConnectionSpec, hooks: Any) -> Any:
        if self.bugs > 0:
            self.bugs -= 1
            return self._bug()
        return super().open(spec, hooks)

    @asynccontextmanager
    async def _bug(self) -> AsyncIterator[Any]:
        await anyio.lowlevel.checkpoint()
        raise ExceptionGroup("attempt", [KeyError(self.message), ValueError("2nd")])
        yield  # pragma: no cover - an async generator


async def test_a_bug_in_an_attempt_is_one_masked_line_and_the_loop_goes_on() -> None:
    bus = EventBus()
    rec = Recorder(bus)
    secrets = SecretRegistry()
    secrets.add(["hunter2-secret-value"])
    transport = BuggyTransport(2, "no key 'hunter2-secret-value'\nsecond line")
    async with Manager(bus, transport, secrets=secrets) as mgr:
        mgr.add(fake_spec())
        await rec.wait_for("connected", "s")
    failed = rec.of("connect_failed", "s")
    assert len(failed) == 2
    for event in failed:
        assert isinstance(event, AttemptFailed)
        assert "hunter2" not in event.error
        assert event.error.startswith('"no key ')
        assert "\n" not in event.error and "2nd" not in event.error


@pytest.mark.parametrize("in_flight", ["connects", "fails"])
async def test_a_login_begun_mid_try_ends_with_the_first_try_that_connects(
    in_flight: str,
) -> None:
    """A login begun while a try is in flight: that try's failure is not the
    login's (the next try is), but if it connects, the login is over (it
    may have used the login's tokens); it waited for its own deadline."""
    bus = EventBus()
    rec = Recorder(bus)
    gate = anyio.Event()
    transport = FakeTransport(failures=1 if in_flight == "fails" else 0, gate=gate)
    async with Manager(bus, transport) as mgr:
        mgr.add(fake_spec())
        await rec.wait_for("connecting", "s")  # the try is in flight
        conn = mgr.connection("s")
        assert conn is not None
        told: list[str | None] = []
        conn.on_settled = told.append
        conn.try_for_login()
        gate.set()
        if in_flight == "fails":
            await rec.wait_for("connect_failed", "s")
            assert told == []  # not the login's try
        await rec.wait_for("connected", "s")
        assert told == [None]


async def test_a_call_cut_by_a_ping_that_went_unanswered_says_so() -> None:
    """The caller of a server that stopped answering (SIGSTOP, or busy) was
    told `disconnected during the call (... Connection closed)`, as if the
    server had gone, while the log said the ping went unanswered (found by
    an audit). This server answers nothing while its sleep runs."""
    from servers import raw_command

    command, args = raw_command("--sleep-tool")
    spec = parse_spec(
        "busy",
        {"command": command, "args": args},
        {"ping_interval": 0.2, "ping_timeout": 0.3},
    )
    bus = EventBus()
    rec = Recorder(bus)
    async with Manager(bus) as manager:
        manager.add(spec)
        await rec.wait_for("connected", "busy")
        with pytest.raises(ServerUnavailable) as caught:
            await manager.call("busy", "sleep", {"seconds": 30})
        manager.reconcile([])
    said = str(caught.value)
    assert "no answer to ping within 0.3 s" in said, said
    assert "the server may have run it" in said
