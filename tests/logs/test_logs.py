"""The logging sink: levels per event, the noise bound, formats and redaction."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import anyio
import pytest

from manager.core.events import (
    Added,
    AttemptFailed,
    CallFailed,
    CallFinished,
    CallStarted,
    ConfigLoaded,
    ConfigRejected,
    Connected,
    Connecting,
    Event,
    Lagged,
    Lost,
    Reconnecting,
    Removed,
    ServerStderr,
    ToolsChanged,
    Updated,
)
from manager.core.redact import SecretRegistry
from manager.engine.bus import EventBus
from manager.logs import (
    NOISY_LOGGERS,
    TEARDOWN_NOISE,
    LogSink,
    run_summaries,
    setup_logging,
)

DEBUG, INFO, WARNING, ERROR = (
    logging.DEBUG,
    logging.INFO,
    logging.WARNING,
    logging.ERROR,
)


class Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.arrived = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.arrived.set()

    @property
    def lines(self) -> list[tuple[int, str]]:
        return [(r.levelno, r.getMessage()) for r in self.records]

    def count(self, level: int) -> int:
        return sum(1 for r in self.records if r.levelno == level)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def bus(clock: Clock) -> EventBus:
    return EventBus(clock=clock)


@pytest.fixture
def logger(request: pytest.FixtureRequest) -> Iterator[logging.Logger]:
    log = logging.getLogger(f"test.logs.{request.node.name}")
    log.setLevel(logging.DEBUG)
    log.propagate = False
    yield log
    log.handlers.clear()


@pytest.fixture
def recorder(logger: logging.Logger) -> Recorder:
    rec = Recorder()
    logger.addHandler(rec)
    return rec


@pytest.fixture
def sink(bus: EventBus, logger: logging.Logger) -> Iterator[LogSink]:
    s = LogSink(bus, logger=logger)
    yield s
    s.close()


@pytest.fixture
def root_logging() -> Iterator[None]:
    """Restore the root logger and the tamed loggers after `setup_logging`."""
    root = logging.getLogger()
    level = root.level
    noisy = {name: logging.getLogger(name).level for name in NOISY_LOGGERS}
    yield
    for handler in [h for h in root.handlers if h.get_name() == "mcp-manager"]:
        root.removeHandler(handler)
    root.setLevel(level)
    for name, lvl in noisy.items():
        logging.getLogger(name).setLevel(lvl)


def fail(bus: EventBus, name: str, attempt: int, error: str, delay: float) -> None:
    bus.publish(Connecting(name=name, attempt=attempt))
    bus.publish(AttemptFailed(name=name, attempt=attempt, error=error))
    bus.publish(Reconnecting(name=name, attempt=attempt + 1, delay=delay))


REFUSED = "connection refused to 127.0.0.1:8931"


# --------------------------------------------------------------------- levels


@pytest.mark.parametrize(
    ("event", "level", "text"),
    [
        (
            Added(name="fs", transport="stdio", endpoint="npx fs"),
            INFO,
            "fs: added (stdio npx fs)",
        ),
        (
            Updated(name="fs", changed=("args", "env")),
            INFO,
            "fs: args, env changed; restarting",
        ),
        (Removed(name="fs"), INFO, "fs: removed"),
        (
            Connected(
                name="fs",
                attempt=3,
                tools=12,
                server_name="demo",
                server_version="1.0",
                protocol="2025-11-25",
                elapsed=0.523,
            ),
            INFO,
            "fs: connected in 0.52 s (attempt 3, 12 tools, server demo 1.0, "
            "protocol 2025-11-25)",
        ),
        (
            Reconnecting(name="fs", attempt=2, delay=0.2),
            DEBUG,
            "fs: retry 2 in 0.20 s",
        ),
        (
            ToolsChanged(name="fs", added=("a",), removed=("b",), tools=3),
            INFO,
            "fs: tools added a; removed b (now 3)",
        ),
        (
            ConfigLoaded(file="startup.lua", added=("a", "b"), unchanged=4),
            INFO,
            "config loaded from startup.lua: 2 added (a, b), 0 removed, 0 changed, "
            "4 unchanged",
        ),
        (
            ConfigRejected(file="startup.lua", line=7, message="unknown option"),
            ERROR,
            "startup.lua:7: unknown option (config not applied; nothing changed)",
        ),
        (CallStarted(name="fs", tool="read"), DEBUG, "fs: call read started"),
        (
            CallFinished(name="fs", tool="read", duration=0.0123),
            DEBUG,
            "fs: call read finished in 0.012 s",
        ),
        (
            CallFinished(name="fs", tool="read", duration=0.5, is_error=True),
            DEBUG,
            "fs: call read returned a tool error in 0.500 s",
        ),
        (
            CallFailed(name="fs", tool="read", duration=5.0, error="timed out"),
            WARNING,
            "fs: call read failed after 5.00 s: timed out",
        ),
        (
            ServerStderr(name="fs", line="listening on stdio"),
            DEBUG,
            "fs: stderr: listening on stdio",
        ),
        (
            Lagged(name="hud", dropped=12),
            WARNING,
            "subscriber 'hud' fell behind and lost 12 events",
        ),
    ],
)
def test_each_event_kind_logs_at_its_level(
    bus: EventBus,
    sink: LogSink,
    recorder: Recorder,
    event: Event,
    level: int,
    text: str,
) -> None:
    bus.publish(event)
    assert recorder.lines == [(level, text)]


def test_first_failure_warns_with_the_retry_delay(
    bus: EventBus, sink: LogSink, recorder: Recorder
) -> None:
    fail(bus, "web", 1, REFUSED, 0.1)
    assert recorder.lines == [
        (INFO, "web: connecting (attempt 1)"),
        (
            WARNING,
            "web: connect failed (attempt 1): connection refused to "
            "127.0.0.1:8931; retrying in 0.10 s",
        ),
    ]


def test_later_attempts_with_the_same_error_are_debug(
    bus: EventBus, sink: LogSink, recorder: Recorder
) -> None:
    fail(bus, "web", 1, REFUSED, 0.1)
    fail(bus, "web", 2, REFUSED, 0.2)
    fail(bus, "web", 3, REFUSED, 0.4)
    assert [level for level, _ in recorder.lines[2:]] == [DEBUG] * 4


def test_a_changed_error_warns_again(
    bus: EventBus, sink: LogSink, recorder: Recorder
) -> None:
    fail(bus, "web", 1, REFUSED, 0.1)
    fail(bus, "web", 2, "HTTP 503 from the server\ntraceback...", 0.2)
    assert recorder.lines[-1] == (
        WARNING,
        "web: connect failed (attempt 2): HTTP 503 from the server; retrying in 0.20 s",
    )


def test_a_failure_without_a_following_retry_is_still_logged(
    bus: EventBus, sink: LogSink, recorder: Recorder
) -> None:
    bus.publish(AttemptFailed(name="web", attempt=1, error=REFUSED, exit_code=3))
    bus.publish(Removed(name="web"))
    assert recorder.lines == [
        (WARNING, f"web: connect failed (attempt 1, exit code 3): {REFUSED}"),
        (INFO, "web: removed"),
    ]


def test_a_lost_session_warns_and_its_first_retry_is_info(
    bus: EventBus, sink: LogSink, recorder: Recorder
) -> None:
    bus.publish(Connecting(name="fs", attempt=1))
    bus.publish(Connected(name="fs", attempt=1, tools=2, elapsed=0.1))
    bus.publish(Lost(name="fs", reason="server exited", exit_code=1, uptime=42.0))
    bus.publish(Reconnecting(name="fs", attempt=1, delay=0.1))
    bus.publish(Connecting(name="fs", attempt=1))
    bus.publish(Connected(name="fs", attempt=1, tools=2, elapsed=0.1))
    assert recorder.lines[2:] == [
        (
            WARNING,
            "fs: disconnected after 42 s, exit code 1: server exited; "
            "retrying in 0.10 s",
        ),
        (INFO, "fs: connecting (attempt 1)"),
        (INFO, "fs: connected in 0.10 s (attempt 1, 2 tools)"),
    ]


def test_a_crash_looping_server_stays_quiet_after_its_first_warning(
    bus: EventBus, sink: LogSink, recorder: Recorder
) -> None:
    for attempt in range(1, 30):
        bus.publish(Connecting(name="fs", attempt=attempt))
        bus.publish(Connected(name="fs", attempt=attempt, tools=1))
        bus.publish(Lost(name="fs", reason="server exited", exit_code=1, uptime=0.2))
        bus.publish(Reconnecting(name="fs", attempt=attempt + 1, delay=3.0))
    assert recorder.count(WARNING) == 1
    # connecting, connected; after the first loss: connecting, connected again.
    assert recorder.count(INFO) == 4
    summary = sink.summary(2000.0)
    assert summary is not None
    assert summary.startswith("1 connection still failing: fs (attempt 29")


# ---------------------------------------------------------------- noise bound


def test_200_dead_upstreams_warn_once_each_then_only_summaries(
    bus: EventBus, sink: LogSink, recorder: Recorder, clock: Clock
) -> None:
    names = [f"c{i:03d}" for i in range(200)]
    for attempt in range(1, 41):
        clock.now += 3.0
        for name in names:
            fail(bus, name, attempt, f"connection refused to {name}:80", 3.0)
    assert recorder.count(WARNING) == 200
    assert recorder.count(INFO) == 200  # the first attempt of each
    summary = sink.summary(clock.now)
    assert summary is not None
    assert summary.startswith(
        "200 connections still failing: c000 (attempt 40, 1m57s, "
        "connection refused to c000:80), c001 ("
    )
    assert summary.endswith(", and 190 more")
    assert "c009 (" in summary
    assert "c010 (" not in summary


def test_quiet_logger_skips_formatting_but_keeps_counting(
    bus: EventBus, sink: LogSink, recorder: Recorder, logger: logging.Logger
) -> None:
    logger.setLevel(logging.ERROR)
    for attempt in range(1, 5):
        fail(bus, "web", attempt, REFUSED, 0.1)
    assert recorder.records == []
    assert sink.summary(1000.0) == (
        f"1 connection still failing: web (attempt 4, 0.00 s, {REFUSED})"
    )


def test_summary_is_none_when_nothing_fails(
    bus: EventBus, sink: LogSink, recorder: Recorder
) -> None:
    assert sink.summary(0.0) is None
    fail(bus, "a", 1, REFUSED, 0.1)
    fail(bus, "b", 1, REFUSED, 0.1)
    bus.publish(Connected(name="a", attempt=2, tools=1))
    bus.publish(Removed(name="b"))
    assert sink.summary(0.0) is None


def test_summary_truncates_long_errors(bus: EventBus, sink: LogSink) -> None:
    fail(bus, "a", 1, "x" * 500, 0.1)
    summary = sink.summary(1000.0)
    assert summary is not None
    assert len(summary) < 150
    assert summary.endswith("x…)")


@pytest.mark.anyio
async def test_run_summaries_logs_the_summary_periodically(
    bus: EventBus, sink: LogSink, recorder: Recorder
) -> None:
    fail(bus, "web", 1, REFUSED, 0.1)
    recorder.arrived = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_summaries, sink, 0.01)
        with anyio.fail_after(5):
            await recorder.arrived.wait()
        tg.cancel_scope.cancel()
    level, message = recorder.lines[-1]
    assert level == WARNING
    assert message.startswith("1 connection still failing: web (attempt 1")


def test_close_stops_listening(
    bus: EventBus, sink: LogSink, recorder: Recorder
) -> None:
    sink.close()
    bus.publish(Removed(name="fs"))
    assert recorder.records == []


# ------------------------------------------------------------- setup_logging


def test_text_format_has_time_level_logger_and_message(root_logging: None) -> None:
    out = io.StringIO()
    setup_logging("INFO", "text", out, secrets=SecretRegistry())
    logging.getLogger("manager.test").info("hello %s", "world")
    logging.getLogger("manager.test").debug("not shown")
    line = out.getvalue()
    assert line.count("\n") == 1
    assert line.rstrip().endswith(" INFO    manager.test: hello world")
    assert line[:4].isdigit()


def test_json_format_carries_the_event_fields(
    root_logging: None, bus: EventBus
) -> None:
    out = io.StringIO()
    setup_logging("DEBUG", "json", out, secrets=SecretRegistry())
    sink = LogSink(bus)  # the default "manager" logger, through the root handler
    try:
        bus.publish(Connecting(name="fs", attempt=1))
    finally:
        sink.close()
    record = json.loads(out.getvalue())
    assert record["level"] == "INFO"
    assert record["logger"] == "manager"
    assert record["message"] == "fs: connecting (attempt 1)"
    assert record["event"] == {
        "seq": 1,
        "time": 1000.0,
        "kind": "connecting",
        "name": "fs",
        "attempt": 1,
    }
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", record["time"])


def test_setup_logging_replaces_its_own_handler(root_logging: None) -> None:
    first, second = io.StringIO(), io.StringIO()
    setup_logging("INFO", "text", first, secrets=SecretRegistry())
    setup_logging("INFO", "text", second, secrets=SecretRegistry())
    logging.getLogger("manager.test").warning("once")
    assert first.getvalue() == ""
    assert second.getvalue().count("once") == 1


def test_noisy_libraries_are_held_at_warning_unless_debug(root_logging: None) -> None:
    setup_logging("INFO", "text", io.StringIO(), secrets=SecretRegistry())
    assert logging.getLogger("mcp.client.stdio").getEffectiveLevel() == WARNING
    assert logging.getLogger("opentelemetry.sdk.trace").getEffectiveLevel() == WARNING
    setup_logging("DEBUG", "text", io.StringIO(), secrets=SecretRegistry())
    assert logging.getLogger("mcp.client.stdio").getEffectiveLevel() == DEBUG


def test_setup_logging_rejects_unknown_level_and_format(root_logging: None) -> None:
    with pytest.raises(ValueError, match="log level"):
        setup_logging("LOUD", secrets=SecretRegistry())
    with pytest.raises(ValueError, match="log format"):
        setup_logging("INFO", "xml", secrets=SecretRegistry())


def registry_of(*values: str) -> SecretRegistry:
    secrets = SecretRegistry()
    secrets.add(values)
    return secrets


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_registered_secrets_never_reach_a_log_line(
    root_logging: None, fmt: str
) -> None:
    secret = "tok-9f8e7d6c5b4a"
    out = io.StringIO()
    setup_logging("DEBUG", fmt, out, secrets=registry_of(secret))
    log = logging.getLogger("mcp.client.streamable_http")
    log.warning(f"message with {secret}")
    log.warning("args with %s and %r", secret, {"auth": secret})
    try:
        raise RuntimeError(f"exception text with {secret}")
    except RuntimeError:
        log.exception("failed")
    log.warning("stack", stack_info=True, extra={"x": secret})
    text = out.getvalue()
    assert secret not in text
    assert text.count("***") >= 4
    assert "RuntimeError: exception text with ***" in text.replace("\\n", "\n")


def test_a_bad_format_string_does_not_lose_the_line(root_logging: None) -> None:
    out = io.StringIO()
    setup_logging("INFO", "text", out, secrets=SecretRegistry())
    root = logging.getLogger()
    others = [h for h in root.handlers if h.get_name() != "mcp-manager"]
    for handler in others:  # pytest's capture handler would choke on it first
        root.removeHandler(handler)
    try:
        logging.getLogger("manager.test").warning("%d items", "many")
    finally:
        for handler in others:
            root.addHandler(handler)
    assert "'%d items' (unformattable arguments ('many',))" in out.getvalue()


def _sdk_error(exc: BaseException, name: str = "mcp.client.streamable_http") -> None:
    try:
        raise exc
    except BaseException:
        logging.getLogger(name).exception("Error parsing SSE message")


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
def test_the_sdk_failing_to_end_a_session_of_a_server_that_is_down_is_debug(
    root_logging: None, level: str
) -> None:
    """37 such WARNINGs in a 5-minute fault run, for servers known to be down."""
    out = io.StringIO()
    setup_logging(level, "text", out, secrets=SecretRegistry())
    sdk = logging.getLogger("mcp.client.streamable_http")
    sdk.warning("Session termination failed: %s", "All connection attempts failed")
    lines = out.getvalue().splitlines()
    if level == "INFO":
        assert lines == []
    else:
        (line,) = lines
        assert " DEBUG " in line and "Session termination failed" in line


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
def test_sdk_teardown_tracebacks_become_one_debug_line(
    root_logging: None, level: str
) -> None:
    out = io.StringIO()
    setup_logging(level, "text", out, secrets=SecretRegistry())
    before = TEARDOWN_NOISE.suppressed
    _sdk_error(anyio.BrokenResourceError())
    _sdk_error(ExceptionGroup("g", [anyio.ClosedResourceError()]), "mcp.client.sse")
    assert TEARDOWN_NOISE.suppressed == before + 2
    lines = out.getvalue().splitlines()
    if level == "INFO":
        assert lines == []
    else:
        assert len(lines) == 2
        assert " DEBUG " in lines[0] and "Traceback" not in out.getvalue()
        assert lines[0].endswith(
            "Error parsing SSE message: BrokenResourceError (session teardown)"
        )


def test_other_sdk_errors_keep_their_level_and_traceback(root_logging: None) -> None:
    out = io.StringIO()
    setup_logging("INFO", "text", out, secrets=SecretRegistry())
    _sdk_error(ValueError("a real parse error"))
    text = out.getvalue()
    assert " ERROR " in text and "Traceback" in text and "a real parse error" in text


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
def test_the_sdks_oauth_flow_tracebacks_become_one_debug_line(
    root_logging: None, level: str
) -> None:
    """The connection says why a login failed; the SDK's own ERROR traceback
    of the same failure is detail."""
    out = io.StringIO()
    setup_logging(level, "text", out, secrets=SecretRegistry())
    try:
        raise RuntimeError("Authorization response iss mismatch: a != b")
    except RuntimeError:
        logging.getLogger("mcp.client.auth.oauth2").exception("OAuth flow error")
    lines = out.getvalue().splitlines()
    if level == "INFO":
        assert lines == []
    else:
        (line,) = lines
        assert " DEBUG " in line and line.endswith(
            "OAuth flow error: RuntimeError: "
            "Authorization response iss mismatch: a != b"
        )
