"""The watchdog's own rules, on a clock the test moves (its thread is real)."""

from __future__ import annotations

import threading

from manager.daemon.watchdog import Watchdog


def test_a_starting_daemon_holding_its_loop_is_no_stall_until_armed() -> None:
    """A daemon's imports and first load hold the loop by design; under load
    that took over 5 s and was reported as "a bug in mcp-manager: please
    report it" (found by an audit), and so did a stop (its heartbeat ends
    before its teardown does). Stalls count while the daemon runs, between
    `arm` and `disarm`."""
    now = [0.0]
    checked = threading.Event()

    def clock() -> float:
        checked.set()  # the watching thread looked
        return now[0]

    watchdog = Watchdog(0.2, clock=clock)
    watchdog.start(armed=False)
    try:
        now[0] = 10.0  # long past stall_after, and no heartbeat
        for _ in range(3):
            checked.clear()
            assert checked.wait(5)
        assert watchdog.stalls == 0
        watchdog.arm()
        now[0] = 20.0
        for _ in range(200):
            if watchdog.stalls:
                break
            checked.clear()
            assert checked.wait(5)
        assert watchdog.stalls == 1
        watchdog.disarm()  # stopping: the heartbeat ends before the teardown
        now[0] = 30.0
        for _ in range(3):
            checked.clear()
            assert checked.wait(5)
        assert watchdog.stalls == 1
    finally:
        watchdog.stop()
