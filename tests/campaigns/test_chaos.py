"""The chaos campaign (`servers.chaos`) against the real daemon, CI-sized.

`pytest -m slow tests/test_chaos.py`: about 40 s of random faults (stdio servers
killed and stopped, HTTP upstreams stopped and killed, reloads adding and
removing servers) while four SDK sessions call through the aggregated endpoint;
then every check of the campaign must pass. `bench/chaos.py` runs it longer.
The fast tests here pin the checks themselves on made-up records, so a check
that cannot fail is noticed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from servers.chaos import ChaosCampaign, ChaosConfig
from servers.chaos_report import (
    CallStats,
    Fault,
    Kill,
    check_calls,
    check_faults,
    check_kills,
    check_log,
    check_recoveries,
    check_sequence,
    classify_tool_error,
)

CHAOS_SECONDS = 40.0

Event = dict[str, object]


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.anyio
@pytest.mark.usefixtures("no_leaked_children")
async def test_the_daemon_rides_out_random_faults_with_every_check_passing(
    tmp_path: Path,
) -> None:
    config = ChaosConfig(workdir=tmp_path, seconds=CHAOS_SECONDS)
    report = await ChaosCampaign(config).run()
    table = report.table()
    print(table)  # noqa: T201 - shown by pytest with -s or on failure
    failed = report.failures()
    details = "\n".join(["", table, "", "daemon log:", *report.log_lines])
    assert not failed, (
        f"{len(failed)} checks failed (seed {report.seed}, rerun with "
        f"ChaosConfig(seed={report.seed})); workdir {tmp_path}" + details
    )


# ------------------------------------------------------------ the checks


def seqs(*numbers: int) -> list[Event]:
    return [{"seq": n, "kind": "connecting", "name": "a"} for n in numbers]


def lagged(dropped: int) -> Event:
    return {"seq": 0, "kind": "lagged", "name": "control", "dropped": dropped}


@pytest.mark.parametrize(
    ("events", "ok"),
    [
        (seqs(1, 2, 3), True),
        (seqs(7, 8), True),  # the stream may start late
        (seqs(1, 2, 4), False),
        ([*seqs(1, 2), lagged(2), *seqs(5)], True),
        ([*seqs(1, 2), lagged(1), *seqs(5)], False),
        (seqs(2, 1), False),
        ([], False),
    ],
)
def test_event_seq_check_accepts_only_gaps_a_lagged_event_explains(
    events: list[Event], ok: bool
) -> None:
    assert check_sequence(events).ok is ok


def history(pid: int, exit_code: int | None) -> list[Event]:
    return [
        {"seq": 1, "kind": "connected", "name": "s", "pid": pid},
        {"seq": 2, "kind": "disconnected", "name": "s", "exit_code": exit_code},
    ]


@pytest.mark.parametrize(
    ("events", "ok"),
    [
        (history(10, -9), True),
        (history(10, None), False),  # seen, but not as that SIGKILL
        (history(11, -9), False),  # the loss of another process
        (history(10, -9)[:1], False),  # never seen
        (history(10, -9)[1:], True),  # its connect came before the stream
    ],
)
def test_kill_check_wants_the_next_disconnect_of_that_pid_with_exit_minus_9(
    events: list[Event], ok: bool
) -> None:
    assert check_kills([Kill("s", 10, after_seq=1)], events).ok is ok


def test_a_disconnect_from_before_the_kill_does_not_count() -> None:
    assert check_kills([Kill("s", 10, after_seq=2)], history(10, -9)).ok is False


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (
            "w__echo: w is reconnecting (attempt 3, next retry in 0.2 s); x",
            "unavailable",
        ),
        ("w__echo: w is connecting (attempt 1)", "unavailable"),
        ("w__echo: w disconnected during the call (EOF); not retried", "disconnected"),
        ("w__echo: w/echo: no result within 15 s", "daemon timeout"),
        ("boom", "other tool error"),
    ],
)
def test_gateway_tool_errors_are_classified_by_what_happened(
    text: str, kind: str
) -> None:
    assert classify_tool_error(text) == kind


@pytest.mark.parametrize(
    ("failures", "ok"),
    [
        ({}, True),
        ({"unavailable": 3, "disconnected": 1}, True),
        ({"WRONG": 1}, False),
        ({"hung": 1}, False),
        ({"session error": 1}, False),
    ],
)
def test_call_check_accepts_held_and_disconnected_failures_only(
    failures: dict[str, int], ok: bool
) -> None:
    calls = CallStats()
    calls.record_ok(0.01)
    for kind, n in failures.items():
        for _ in range(n):
            calls.record_failure(kind, kind)
    assert check_calls(calls)[0].ok is ok


def test_every_http_upstream_taken_down_must_be_started_again() -> None:
    down = [Fault(1.0, "http-kill", "web0"), Fault(2.0, "http-term", "web1")]
    up = [Fault(3.0, "http-up", "web0")]
    assert check_faults(down + up)[1].ok is False
    assert check_faults([*down, *up, Fault(4.0, "http-up", "web1")])[1].ok is True


def test_log_check_keeps_error_and_traceback_lines_with_context() -> None:
    text = "a INFO fine\nb ERROR bad\nTraceback (most recent call last):\n  x\ny\nz\n"
    check, lines = check_log(text)
    assert check.ok is False
    assert lines == [
        "b ERROR bad",
        "Traceback (most recent call last):",
        "  x",
        "y",
        "z",
    ]
    assert check_log("a INFO fine\n")[0].ok is True


def test_recovery_rows_time_each_fault_to_the_next_connect_of_its_target() -> None:
    faults = [
        Fault(0.0, "kill", "s", wall=100.0),
        Fault(1.0, "kill", "s", wall=200.0),
        Fault(2.0, "http-kill", "w", wall=300.0),
        Fault(3.0, "http-up", "w", wall=301.0),
        Fault(4.0, "http-term", "w", wall=400.0),  # never noticed
        Fault(5.0, "http-up", "w", wall=401.0),
        Fault(6.0, "http-kill", "w", wall=410.0),  # still reconnecting
        Fault(7.0, "http-up", "w", wall=411.0),
    ]
    events: list[Event] = [
        {"seq": 1, "kind": "connected", "name": "s", "time": 100.25},
        {"seq": 2, "kind": "connected", "name": "t", "time": 200.1},
        {"seq": 3, "kind": "disconnected", "name": "w", "time": 300.5},
        {"seq": 4, "kind": "connected", "name": "w", "time": 302.0},
        {"seq": 5, "kind": "connected", "name": "w", "time": 420.0},
    ]
    kills, http = check_recoveries(faults, events)
    assert kills.value.startswith("1 times: p50 250.0 ms, max 250.0 ms (1 never")
    assert http.value == (
        "1 times: p50 1000.0 ms, max 1000.0 ms (1 down again before it "
        "reconnected; 1 outages without a disconnected event)"
    )
