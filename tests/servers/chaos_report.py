"""The chaos campaign's record, and the checks made on it afterwards, without I/O.

`ChaosReport` holds `Check` rows (a row whose `ok` is None only informs) and
renders them as one table. The `check_*` functions turn what the campaign
recorded (the faults it did, its SIGKILLs, the daemon's event stream as
`mcp-manager events --json` dicts, the clients' call outcomes, the daemon's log)
into rows; they take plain data, so they can be tried on made-up records.
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "ACCEPTABLE_FAILURES",
    "FAULT_KINDS",
    "CallStats",
    "ChaosReport",
    "Check",
    "Fault",
    "Kill",
    "check_calls",
    "check_config",
    "check_faults",
    "check_kills",
    "check_recoveries",
    "check_log",
    "check_sequence",
    "classify_tool_error",
]

Event = Mapping[str, object]

FAULT_KINDS = (
    "kill",  # SIGKILL sent to a stdio server
    "kill-gone",  # its pid had gone before the SIGKILL or SIGSTOP
    "stop",  # SIGSTOP sent to a stdio server
    "cont",  # SIGCONT sent to it
    "cont-gone",  # it had gone before the SIGCONT
    "http-term",  # an HTTP upstream stopped with SIGTERM
    "http-kill",  # an HTTP upstream killed with SIGKILL
    "http-up",  # an HTTP upstream started again on its port
    "http-up-failed",  # a try to start it again failed
    "reload-add",  # startup.lua saved with one more server
    "reload-remove",  # startup.lua saved with one server less
    "skipped",  # no target for the fault drawn
    "status-failed",  # `status` failed, so no fault this time
    "restored",  # chaos over: every server continued, every HTTP server up
)
"""Every `Fault.kind`, with what it records."""

ACCEPTABLE_FAILURES = frozenset({"unavailable", "disconnected"})
"""Failed-call kinds that are the daemon doing its job: a call to a server that
stayed down for `hold` fails with its state, a call in flight when its server
died fails with "disconnected during the call". Anything else fails the check."""

SAMPLES_PER_KIND = 3
"""Example messages kept per failed-call kind."""

LOG_CONTEXT = 3
"""Lines kept after each ERROR or Traceback line of the daemon log."""

MAX_LOG_LINES = 60
"""Lines of the daemon log kept in the report at most."""

_SIGKILL_EXIT = -int(signal.SIGKILL)


@dataclass(frozen=True)
class Check:
    """One row of the report: `ok` is None for a row that only informs."""

    name: str
    value: str
    ok: bool | None = None


@dataclass(frozen=True)
class Fault:
    """One thing the campaign did, `at` seconds after chaos started.

    `wall` is the same moment in `time.time()` seconds, the clock of the
    events' `time`.
    """

    at: float
    kind: str
    target: str
    detail: str = ""
    wall: float = 0.0


@dataclass(frozen=True)
class Kill:
    """A SIGKILL sent to stdio server `pid` of `name` once event `after_seq` was in."""

    name: str
    pid: int
    after_seq: int


@dataclass
class CallStats:
    """Outcomes of the clients' calls: ok latencies, failures by kind."""

    ok: int = 0
    latencies: list[float] = field(default_factory=list)
    failed: Counter[str] = field(default_factory=Counter)
    samples: dict[str, list[str]] = field(default_factory=dict)

    def record_ok(self, seconds: float) -> None:
        """Count an ok call that took `seconds`."""
        self.ok += 1
        self.latencies.append(seconds)

    def record_failure(self, kind: str, message: str) -> None:
        """Count a failed call of `kind`, keeping a few example messages."""
        self.failed[kind] += 1
        kept = self.samples.setdefault(kind, [])
        if len(kept) < SAMPLES_PER_KIND:
            kept.append(message[:300])


@dataclass
class ChaosReport:
    """What the campaign did and found.

    Attributes:
        seed: The seed of every random choice (rerun with it).
        title: The first line of `table()`.
        checks: The rows, in order.
        faults: Everything the campaign did.
        calls: The clients' call outcomes.
        log_lines: ERROR and Traceback lines of the daemon log, with context.
    """

    seed: int
    title: str = ""
    checks: list[Check] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    calls: CallStats = field(default_factory=CallStats)
    log_lines: list[str] = field(default_factory=list)

    def add(self, name: str, value: str, ok: bool | None = None) -> Check:
        """Append a row."""
        check = Check(name, value, ok)
        self.checks.append(check)
        return check

    def extend(self, checks: Iterable[Check]) -> None:
        """Append rows."""
        self.checks.extend(checks)

    def failures(self) -> list[Check]:
        """The rows whose check failed."""
        return [c for c in self.checks if c.ok is False]

    def table(self) -> str:
        """Every row as a plain-text table under the title."""
        width = max((len(c.name) for c in self.checks), default=10)
        lines = [self.title, "-" * len(self.title)]
        for check in self.checks:
            mark = {True: "ok", False: "FAIL", None: ""}[check.ok]
            lines.append(f"{check.name:<{width}}  {mark:<4}  {check.value}")
        return "\n".join(lines)


def classify_tool_error(text: str) -> str:
    """The kind of a tool error (`isError: true`) the gateway answered."""
    if "disconnected during the call" in text:
        return "disconnected"
    if " is reconnecting (" in text or " is connecting (" in text:
        return "unavailable"
    if "no result within" in text:
        return "daemon timeout"
    return "other tool error"


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile `q` (0..1) of a sorted, non-empty sequence."""
    index = min(len(sorted_values) - 1, max(0, round(q * len(sorted_values)) - 1))
    return sorted_values[index]


def check_faults(faults: Sequence[Fault]) -> list[Check]:
    """What was done (a row that informs), and whether every HTTP upstream came back."""
    n = Counter(f.kind for f in faults)
    downs = n["http-term"] + n["http-kill"]
    done = Check(
        "faults done",
        f"kill {n['kill']}, stop {n['stop']} (cont {n['cont']}), "
        f"http {downs} (SIGTERM {n['http-term']}, SIGKILL {n['http-kill']}), "
        f"reload {n['reload-add'] + n['reload-remove']} (add {n['reload-add']}, "
        f"remove {n['reload-remove']}), skipped {n['skipped']}, "
        f"gone before the signal {n['kill-gone'] + n['cont-gone']}",
    )
    value = f"{n['http-up']}/{downs} started again"
    if n["http-up-failed"]:
        value += f" ({n['http-up-failed']} failed tries)"
    return [done, Check("http upstreams back", value, n["http-up"] == downs)]


_DOWN = ("http-term", "http-kill")


def _times(events: Sequence[Event], kind: str) -> dict[str, list[float]]:
    """`time` of every event of `kind`, per connection name, in order."""
    out: dict[str, list[float]] = {}
    for event in events:
        when = event.get("time")
        if event.get("kind") == kind and isinstance(when, int | float):
            out.setdefault(str(event.get("name")), []).append(float(when))
    return out


def _first(times: Sequence[float], start: float, end: float) -> float | None:
    return next((t for t in times if start <= t < end), None)


def _timing_row(title: str, took: list[float], notes: list[str]) -> Check:
    xs = sorted(took)
    value = f"{len(xs)} times"
    if xs:
        value += f": p50 {_ms(_percentile(xs, 0.5))}, max {_ms(xs[-1])}"
    notes = [n for n in notes if not n.startswith("0 ")]
    return Check(title, value + (f" ({'; '.join(notes)})" if notes else ""))


def check_recoveries(faults: Sequence[Fault], events: Sequence[Event]) -> list[Check]:
    """Rows that inform: how long until a connection was `connected` again.

    For a SIGKILLed stdio server, from the kill. For an HTTP upstream, from the
    moment it accepted connections again, counted only when the daemon noticed
    the outage (a `disconnected` event between its stop and its next stop): a
    server that was back before anyone talked to it was never lost.
    """
    connected, lost = _times(events, "connected"), _times(events, "disconnected")
    kills, never = [], 0
    for fault in (f for f in faults if f.kind == "kill"):
        back = _first(connected.get(fault.target, []), fault.wall, float("inf"))
        if back is None:
            never += 1
        else:
            kills.append(back - fault.wall)
    rows = [
        _timing_row(
            "stdio SIGKILL -> connected",
            kills,
            [f"{never} never: removed or the run ended first"],
        )
    ]
    took: list[float] = []
    again = unnoticed = never = 0
    for target in sorted({f.target for f in faults if f.kind in _DOWN}):
        mine = [f for f in faults if f.target == target]
        downs = [f for f in mine if f.kind in _DOWN]
        ups = connected.get(target, [])
        for i, down in enumerate(downs):
            if i and _first(ups, downs[i - 1].wall, down.wall) is None:
                again += 1  # still reconnecting from the last one: one outage
                continue
            until = downs[i + 1].wall if i + 1 < len(downs) else float("inf")
            up = next(
                (f for f in mine if f.kind == "http-up" and f.wall > down.wall), None
            )
            seen = _first(lost.get(target, []), down.wall, until)
            if up is None or seen is None:
                unnoticed += seen is None
                continue
            back = _first(ups, max(seen, up.wall), until)
            if back is None:
                never += 1
            else:
                took.append(back - up.wall)
    rows.append(
        _timing_row(
            "http back -> connected",
            took,
            [
                f"{again} down again before it reconnected",
                f"{unnoticed} outages without a disconnected event",
                f"{never} never: down again or the run ended first",
            ],
        )
    )
    return rows


def check_kills(kills: Sequence[Kill], events: Sequence[Event]) -> Check:
    """Every SIGKILL seen: the next `disconnected` of that name, exit -9, that pid.

    The pid is matched through the `connected` event just before the loss (when
    the stream has one: the first connects may come before it was followed).
    """
    by_name: dict[str, list[Event]] = {}
    for event in events:
        by_name.setdefault(str(event.get("name")), []).append(event)
    seen = exit_ok = pid_ok = 0
    unmatched: list[str] = []
    for kill in kills:
        history = by_name.get(kill.name, [])
        lost = next(
            (
                e
                for e in history
                if e.get("kind") == "disconnected"
                and (_int(e.get("seq")) or 0) > kill.after_seq
            ),
            None,
        )
        if lost is None:
            unmatched.append(f"{kill.name} pid {kill.pid}: no disconnected event")
            continue
        seen += 1
        if lost.get("exit_code") == _SIGKILL_EXIT:
            exit_ok += 1
        else:
            unmatched.append(
                f"{kill.name} pid {kill.pid}: exit {lost.get('exit_code')}"
            )
        lost_seq = _int(lost.get("seq")) or 0
        up = [
            e
            for e in history
            if e.get("kind") == "connected" and (_int(e.get("seq")) or 0) < lost_seq
        ]
        if not up or up[-1].get("pid") == kill.pid:
            pid_ok += 1
        else:
            unmatched.append(
                f"{kill.name} pid {kill.pid}: the loss followed a connect of pid "
                f"{up[-1].get('pid')}"
            )
    done = len(kills)
    value = f"{seen}/{done} seen as disconnected, {exit_ok} with exit -9"
    if unmatched:
        value += f"; {', '.join(unmatched[:5])}"
    return Check("SIGKILLs seen", value, seen == exit_ok == pid_ok == done)


def check_sequence(events: Sequence[Event]) -> Check:
    """Event `seq` numbers contiguous, except where a `lagged` event says why."""
    prev: int | None = None
    first: int | None = None
    pending = lagged = dropped = count = 0
    gaps: list[str] = []
    for event in events:
        if event.get("kind") == "lagged":
            lost = _int(event.get("dropped")) or 0
            pending += lost
            dropped += lost
            lagged += 1
            continue
        seq = _int(event.get("seq"))
        if seq is None:
            gaps.append(f"no seq in {dict(event)}")
            continue
        count += 1
        first = seq if first is None else first
        if prev is not None and seq - prev - 1 != pending:
            gaps.append(f"{prev}->{seq} (lagged said {pending})")
        prev, pending = seq, 0
    value = (
        f"{count} events, seq {first}..{prev}, {len(gaps)} unexplained gaps, "
        f"{lagged} lagged ({dropped} dropped)"
    )
    if gaps:
        value += f": {', '.join(gaps[:5])}"
    return Check("event seq contiguous", value, count > 0 and not gaps)


def check_calls(calls: CallStats) -> list[Check]:
    """Calls ok and failed by kind (only acceptable kinds), an example of each
    kind, and the latency of ok calls."""
    failed = calls.failed
    bad = sorted(k for k in failed if k not in ACCEPTABLE_FAILURES)
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(failed.items())) or "none"
    value = (
        f"ok {calls.ok}; failed: {kinds} (WRONG {failed['WRONG']}, "
        f"hung {failed['hung']})"
    )
    if bad:
        value += f"; not acceptable: {', '.join(bad)}"
    rows = [Check("calls", value, calls.ok > 0 and not bad)]
    rows += [
        Check(f"  e.g. {kind}", samples[0][:160])
        for kind, samples in sorted(calls.samples.items())
    ]
    if calls.latencies:
        xs = sorted(calls.latencies)
        rows.append(
            Check(
                "ok call latency",
                f"p50 {_ms(_percentile(xs, 0.5))}, p99 {_ms(_percentile(xs, 0.99))}, "
                f"max {_ms(xs[-1])}",
            )
        )
    return rows


def check_config(events: Sequence[Event]) -> Check:
    """No reload failed and no hook failed."""
    kinds = Counter(str(e.get("kind")) for e in events)
    return Check(
        "config errors / hook errors",
        f"{kinds['config_error']} / {kinds['hook_error']} "
        f"({kinds['config_loaded']} config_loaded events)",
        kinds["config_error"] == 0 and kinds["hook_error"] == 0,
    )


def check_log(text: str) -> tuple[Check, list[str]]:
    """No ERROR and no Traceback in the daemon log; those lines with context."""
    lines = text.splitlines()
    hits = [i for i, line in enumerate(lines) if "ERROR" in line or "Traceback" in line]
    keep = sorted(
        {j for i in hits for j in range(i, min(len(lines), i + 1 + LOG_CONTEXT))}
    )
    errors = sum("ERROR" in line for line in lines)
    tracebacks = sum("Traceback" in line for line in lines)
    check = Check(
        "daemon log",
        f"{errors} ERROR, {tracebacks} Traceback in {len(lines)} lines",
        not hits,
    )
    return check, [lines[j] for j in keep[:MAX_LOG_LINES]]
