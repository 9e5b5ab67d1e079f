"""Tests for manager.engine.bus: broadcast fan-out that never blocks publishers."""

from __future__ import annotations

import itertools
import time

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from manager.core.describe import describe
from manager.core.events import Connecting, Event, Lagged
from manager.engine.bus import DEFAULT_QUEUE_SIZE, HISTORY, EventBus, Subscription


def fake_clock() -> itertools.count[float]:
    return itertools.count(1000.0, 1.0)


def make_bus() -> EventBus:
    clock = fake_clock()
    return EventBus(clock=lambda: next(clock))


def ev(i: int) -> Connecting:
    return Connecting(name=f"c{i}", attempt=i)


def drain(sub: Subscription) -> list[Event]:
    out: list[Event] = []
    while (event := sub.receive_nowait()) is not None:
        out.append(event)
    return out


def test_publish_stamps_increasing_seq_and_the_clock_time() -> None:
    bus = make_bus()
    first = bus.publish(ev(1))
    second = bus.publish(ev(2))
    assert (first.seq, first.time) == (1, 1000.0)
    assert (second.seq, second.time) == (2, 1001.0)
    assert first.name == "c1"
    assert bus.last_seq == 2


def test_last_seq_is_zero_before_any_publish() -> None:
    assert EventBus().last_seq == 0


def test_publish_without_subscribers_still_counts_seq() -> None:
    bus = make_bus()
    for i in range(5):
        bus.publish(ev(i))
    assert bus.last_seq == 5
    assert bus.dropped() == {}


def test_every_subscriber_gets_every_event_in_order() -> None:
    bus = make_bus()
    subs = [bus.subscribe(f"s{i}") for i in range(4)]
    published = [bus.publish(ev(i)) for i in range(50)]
    for sub in subs:
        received = drain(sub)
        assert received == published
        assert [e.seq for e in received] == list(range(1, 51))


def test_a_subscriber_sees_only_events_published_after_it_subscribed() -> None:
    bus = make_bus()
    bus.publish(ev(1))
    sub = bus.subscribe("late")
    bus.publish(ev(2))
    assert [e.seq for e in drain(sub)] == [2]


def test_a_late_subscriber_can_have_what_it_missed_first_in_order() -> None:
    bus = make_bus()
    early = [bus.publish(ev(i)) for i in range(3)]
    everything = bus.subscribe("late", since=0)
    after_two = bus.subscribe("later", since=2)
    new = bus.publish(ev(9))
    assert drain(everything) == [*early, new]
    assert drain(after_two) == [early[2], new]


def test_the_kept_history_is_bounded_and_a_small_queue_reports_the_rest() -> None:
    bus = make_bus()
    for i in range(HISTORY + 5):
        bus.publish(ev(i))
    assert [e.seq for e in drain(bus.subscribe("all", since=0))] == list(
        range(6, HISTORY + 6)
    )
    small = bus.subscribe("small", maxlen=2, since=0)
    first = small.receive_nowait()
    assert isinstance(first, Lagged) and first.dropped == HISTORY - 2
    assert [e.seq for e in drain(small)] == [HISTORY + 4, HISTORY + 5]


def test_asking_for_events_older_than_kept_is_told_how_many_are_gone() -> None:
    """`events --since 3` once the history starts at seq 6: a notice says
    that 2 events asked for are no longer kept, before the kept ones, even
    when they fill the queue."""
    bus = make_bus()
    for i in range(HISTORY + 5):
        bus.publish(ev(i))
    late = bus.subscribe("control", maxlen=HISTORY, since=3)
    first = late.receive_nowait()
    assert isinstance(first, Lagged)
    assert (first.dropped, first.expired) == (2, 2)
    assert "2 of the events asked for are older than the daemon keeps" in describe(
        first
    )
    assert [e.seq for e in drain(late)] == list(range(6, HISTORY + 6))
    # a subscriber whose `since` is still kept gets no notice
    kept = bus.subscribe("kept", since=5)
    assert [e.seq for e in drain(kept)][:2] == [6, 7]


def test_subscribe_rejects_a_queue_bound_below_one() -> None:
    with pytest.raises(ValueError, match="maxlen"):
        EventBus().subscribe("x", maxlen=0)


def test_the_default_queue_bound_is_generous() -> None:
    assert EventBus().subscribe("x").maxlen == DEFAULT_QUEUE_SIZE >= 1000


def test_publish_never_blocks_on_a_subscriber_that_never_reads() -> None:
    bus = make_bus()
    stuck = bus.subscribe("stuck", maxlen=10)
    started = time.perf_counter()
    for i in range(100_000):
        bus.publish(ev(i))
    elapsed = time.perf_counter() - started
    assert elapsed < 10.0  # generous: it is ~0.2 s; a stall would hit the timeout
    assert bus.dropped() == {"stuck": 99_990}
    received = drain(stuck)
    assert received[0] == Lagged(name="stuck", dropped=99_990, time=received[0].time)
    assert [e.seq for e in received[1:]] == list(range(99_991, 100_001))


def test_a_lagging_subscriber_is_told_exactly_how_many_it_lost_then_gets_newest() -> (
    None
):
    bus = make_bus()
    slow = bus.subscribe("slow", maxlen=3)
    for i in range(10):
        bus.publish(ev(i))
    notice = slow.receive_nowait()
    assert isinstance(notice, Lagged)
    assert (notice.name, notice.dropped) == ("slow", 7)
    assert [e.seq for e in drain(slow)] == [8, 9, 10]
    assert slow.receive_nowait() is None


def test_lag_notices_are_stamped_with_the_bus_clock() -> None:
    bus = EventBus(clock=lambda: 42.0)
    slow = bus.subscribe("slow", maxlen=1)
    bus.publish(ev(1))
    bus.publish(ev(2))
    notice = slow.receive_nowait()
    assert isinstance(notice, Lagged)
    assert notice.time == 42.0


def test_lag_is_reported_again_for_each_new_run_of_drops() -> None:
    bus = make_bus()
    slow = bus.subscribe("slow", maxlen=2)
    for i in range(4):
        bus.publish(ev(i))
    assert [getattr(e, "dropped", e.seq) for e in drain(slow)] == [2, 3, 4]
    for i in range(5):
        bus.publish(ev(i))
    received = drain(slow)
    assert isinstance(received[0], Lagged)
    assert received[0].dropped == 3
    assert [e.seq for e in received[1:]] == [8, 9]


def test_a_slow_subscriber_does_not_affect_the_others() -> None:
    bus = make_bus()
    slow = bus.subscribe("slow", maxlen=2)
    fast = bus.subscribe("fast", maxlen=1000)
    published = [bus.publish(ev(i)) for i in range(100)]
    assert drain(fast) == published
    assert bus.dropped() == {"slow": 98, "fast": 0}
    assert len(drain(slow)) == 3


def test_dropped_counts_per_subscriber_and_keeps_closed_ones() -> None:
    bus = make_bus()
    a = bus.subscribe("a", maxlen=1)
    b = bus.subscribe("b", maxlen=5)
    for i in range(8):
        bus.publish(ev(i))
    assert bus.dropped() == {"a": 7, "b": 3}
    a.close()
    for i in range(8):
        bus.publish(ev(i))
    assert bus.dropped() == {"a": 7, "b": 11}
    drain(b)
    assert bus.dropped() == {"a": 7, "b": 11}


def test_dropped_sums_subscribers_that_share_a_name() -> None:
    bus = make_bus()
    first = bus.subscribe("hud", maxlen=1)
    bus.subscribe("hud", maxlen=2)
    for i in range(4):
        bus.publish(ev(i))
    assert bus.dropped() == {"hud": 3 + 2}
    first.close()
    first.close()  # closing twice counts once
    assert bus.dropped() == {"hud": 5}


def test_a_closed_subscription_gets_no_new_events() -> None:
    bus = make_bus()
    sub = bus.subscribe("s")
    bus.publish(ev(1))
    sub.close()
    bus.publish(ev(2))
    assert [e.seq for e in drain(sub)] == [1]


def test_leaving_the_with_block_closes_the_subscription() -> None:
    bus = make_bus()
    with bus.subscribe("s") as sub:
        bus.publish(ev(1))
    bus.publish(ev(2))
    assert [e.seq for e in drain(sub)] == [1]


def test_listeners_see_every_event_in_order_even_when_subscribers_lag() -> None:
    bus = make_bus()
    bus.subscribe("slow", maxlen=1)
    seen: list[Event] = []
    bus.add_listener(seen.append)
    published = [bus.publish(ev(i)) for i in range(20)]
    assert seen == published


def test_a_listener_that_raises_is_isolated_logged_once_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = make_bus()
    before: list[Event] = []
    after: list[Event] = []

    def broken(event: Event) -> None:
        raise RuntimeError(f"sink bug at seq {event.seq}")

    bus.add_listener(before.append)
    bus.add_listener(broken)
    bus.add_listener(after.append)
    with bus.subscribe("s") as sub:
        published = [bus.publish(ev(i)) for i in range(5)]
        assert [e.seq for e in drain(sub)] == [1, 2, 3, 4, 5]
    assert before == published
    assert after == published
    assert list(bus.listener_errors.values()) == [5]
    failures = [r for r in caplog.records if "event listener" in r.getMessage()]
    assert len(failures) == 1
    assert "broken" in failures[0].getMessage()
    assert failures[0].exc_info is not None


def test_a_removed_listener_sees_nothing_more() -> None:
    bus = make_bus()
    seen: list[Event] = []
    remove = bus.add_listener(seen.append)
    bus.publish(ev(1))
    remove()
    remove()  # removing twice is harmless
    bus.publish(ev(2))
    assert [e.seq for e in seen] == [1]


@pytest.mark.anyio
async def test_receive_waits_for_the_next_publish() -> None:
    bus = make_bus()
    got: list[Event] = []
    with bus.subscribe("s") as sub:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:

                async def receive_one() -> None:
                    got.append(await sub.receive())

                tg.start_soon(receive_one)
                await anyio.wait_all_tasks_blocked()
                assert got == []
                published = bus.publish(ev(1))
    assert got == [published]


@pytest.mark.anyio
async def test_async_iteration_yields_events_in_order_and_close_ends_it() -> None:
    bus = make_bus()
    sub = bus.subscribe("s")
    got: list[int] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def consume() -> None:
                got.extend([event.seq async for event in sub])

            tg.start_soon(consume)
            for i in range(3):
                bus.publish(ev(i))
                await anyio.wait_all_tasks_blocked()
            sub.close()
    assert got == [1, 2, 3]


@pytest.mark.anyio
async def test_close_delivers_what_was_queued_then_ends_iteration() -> None:
    bus = make_bus()
    sub = bus.subscribe("s")
    for i in range(3):
        bus.publish(ev(i))
    sub.close()
    with anyio.fail_after(5):
        assert [event.seq async for event in sub] == [1, 2, 3]
        with pytest.raises(anyio.EndOfStream):
            await sub.receive()


@pytest.mark.anyio
async def test_close_wakes_a_waiting_receiver_with_end_of_stream() -> None:
    bus = make_bus()
    sub = bus.subscribe("s")
    outcome: list[str] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def wait() -> None:
                try:
                    await sub.receive()
                except anyio.EndOfStream:
                    outcome.append("ended")

            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            sub.close()
    assert outcome == ["ended"]


@pytest.mark.anyio
async def test_an_async_lagging_subscriber_gets_lagged_then_the_newest() -> None:
    bus = make_bus()
    with bus.subscribe("slow", maxlen=2) as sub:
        for i in range(5):
            bus.publish(ev(i))
        with anyio.fail_after(5):
            first = await sub.receive()
            rest = [await sub.receive(), await sub.receive()]
    assert isinstance(first, Lagged)
    assert first.dropped == 3
    assert [e.seq for e in rest] == [4, 5]


operations = st.lists(
    st.one_of(
        st.tuples(st.just("publish"), st.integers(min_value=1, max_value=30)),
        st.tuples(st.just("receive"), st.integers(min_value=1, max_value=30)),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(ops=operations, maxlen=st.integers(min_value=1, max_value=8))
def test_random_interleavings_lose_only_what_lagged_reports(
    ops: list[tuple[str, int]], maxlen: int
) -> None:
    bus = make_bus()
    sub = bus.subscribe("slow", maxlen=maxlen)
    witness = bus.subscribe("witness", maxlen=10_000)
    received: list[Event] = []
    published: list[int] = []
    for op, count in ops:
        for _ in range(count):
            if op == "publish":
                published.append(bus.publish(ev(0)).seq)
            elif (event := sub.receive_nowait()) is not None:
                received.append(event)
    received += drain(sub)

    seqs = [e.seq for e in received if not isinstance(e, Lagged)]
    lagged = [e.dropped for e in received if isinstance(e, Lagged)]
    assert seqs == sorted(set(seqs))  # strictly increasing
    assert set(seqs) <= set(published)
    assert sum(lagged) + len(seqs) == len(published)
    assert all(n > 0 for n in lagged)
    assert bus.dropped()["slow"] == sum(lagged)

    # Each gap in what arrived is announced, exactly, just before the next event.
    previous, announced = 0, 0
    for event in received:
        if isinstance(event, Lagged):
            announced += event.dropped
        else:
            assert event.seq - previous - 1 == announced
            previous, announced = event.seq, 0
    assert announced == 0

    assert [e.seq for e in drain(witness)] == published
