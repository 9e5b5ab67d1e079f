"""Where log lines go and how they look: one root handler, redacted, text or JSON.

`setup_logging()` installs one handler on the root logger: text (time, level,
logger, message) or JSON (one object per line, with the event's fields when the
line came from an event). Its filter passes every message, argument, exception
traceback and stack through `core.redact.redact`, so a registered secret never
reaches a log line, whoever logged it. Chatty third-party loggers are held at
WARNING unless the level is DEBUG; the SDK's teardown tracebacks become one
DEBUG line (`TeardownNoiseFilter`), and so do the tracebacks of its OAuth flow
(`OAUTH_FLOW_NOISE`): the connection says what failed in a sentence.
"""

from __future__ import annotations

import json
import logging
import sys
from collections import deque
from datetime import UTC, datetime
from typing import TextIO

import anyio

from ..core.events import (
    Event,
    event_to_dict,
)
from ..core.redact import SecretRegistry, redact

__all__ = [
    "EVENT_ATTR",
    "NOISY_LOGGERS",
    "OAUTH_FLOW_NOISE",
    "RECENT_RECORDS",
    "RecentStreamHandler",
    "RedactingFilter",
    "TEARDOWN_NOISE",
    "TEARDOWN_NOISE_LOGGERS",
    "TeardownNoiseFilter",
    "setup_logging",
]

NOISY_LOGGERS = (
    "client",
    "mcp.client.sse",
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "httpx",
    "httpx2",
    "httpcore",
    "opentelemetry",
    "uvicorn.error",
    "uvicorn.access",
    "watchfiles",
)
"""Loggers held at WARNING unless the level is DEBUG (their warnings still show)."""


EVENT_ATTR = "mcp_event"
"""LogRecord attribute carrying the event a line was made from."""


# --------------------------------------------------------------------- handlers


class RedactingFilter(logging.Filter):
    """Mask secrets in a record's message, arguments, traceback and stack.

    The message is rendered once (`msg % args`), redacted, and stored back with
    no arguments, so no formatter can re-insert a secret.

    Args:
        secrets: The values to mask (the daemon's registry).
    """

    def __init__(self, secrets: SecretRegistry) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # boundary: a bad format string must not lose the line
            message = f"{record.msg!r} (unformattable arguments {record.args!r})"
        record.msg = redact(message, self.secrets)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, self.secrets)
        if record.stack_info:
            record.stack_info = redact(record.stack_info, self.secrets)
        return True


TERMINATION_FAILED = "Session termination failed"
"""How the SDK's streamable HTTP client says its `DELETE` of a session failed."""


class TeardownNoiseFilter(logging.Filter):
    """Turns the SDK's ERROR tracebacks about closed streams into one DEBUG
    line, and its warning that a session could not be ended (the server is
    down) into a DEBUG line too.

    When an HTTP session ends (a server restart, our own teardown, a cancelled
    call), the SDK's SSE readers log `ERROR ... Error parsing SSE message` or
    `Error in sse_reader` with a 10-line traceback of a `BrokenResourceError` or
    a dropped connection: nothing an operator can act on, and the loss itself is
    reported by the connection. Such records become one DEBUG line (shown only
    at `--log-level debug`) and are counted in `suppressed`.
    """

    QUIET = (
        anyio.BrokenResourceError,
        anyio.ClosedResourceError,
        anyio.EndOfStream,
    )
    QUIET_MODULES = ("httpx2", "httpcore2")
    """Network errors of the HTTP stack (a dropped or refused connection)."""

    def __init__(self) -> None:
        super().__init__()
        self.suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and str(record.msg).startswith(
            TERMINATION_FAILED
        ):
            # The goodbye (DELETE) to a server that is down: the connection
            # already says the server is down; at every attempt, noise.
            self.suppressed += 1
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        if record.levelno < logging.ERROR or not record.exc_info:
            return True
        exc = record.exc_info[1]
        if exc is None or not all(self._quiet(e) for e in _leaves(exc)):
            return True
        self.suppressed += 1
        record.msg = f"{record.getMessage()}: {type(exc).__name__} (session teardown)"
        record.args = None
        record.exc_info = None
        record.exc_text = None
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)

    def _quiet(self, exc: BaseException) -> bool:
        if isinstance(exc, self.QUIET):
            return True
        module = type(exc).__module__.partition(".")[0]
        return module in self.QUIET_MODULES and "Error" in type(exc).__name__


TEARDOWN_NOISE = TeardownNoiseFilter()
"""The filter on the SDK's HTTP/SSE client loggers (see `setup_logging`)."""

TEARDOWN_NOISE_LOGGERS = ("mcp.client.streamable_http", "mcp.client.sse")


class _OAuthFlowNoise(logging.Filter):
    """The SDK logs `OAuth flow error` with a traceback for every login that
    fails (a refused code, a mismatched issuer...), then raises: the
    connection reports the failure itself (its error, `needs_login` or
    `refused`), so the record becomes one DEBUG line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR or not record.exc_info:
            return True
        exc = record.exc_info[1]
        record.msg = f"{record.getMessage()}: {type(exc).__name__}: {exc}"
        record.args = None
        record.exc_info = None
        record.exc_text = None
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


OAUTH_FLOW_NOISE = _OAuthFlowNoise()
"""The filter on the SDK's OAuth logger (`mcp.client.auth.oauth2`)."""


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


class _TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(
            "%(asctime)s.%(msecs)03d %(levelname)-7s %(name)s: %(message)s",
            datefmt="%Y-%m-%d %H:%M:%S",
        )


class _JsonFormatter(logging.Formatter):
    def __init__(self, secrets: SecretRegistry) -> None:
        super().__init__()
        self.secrets = secrets

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        event = getattr(record, EVENT_ATTR, None)
        if isinstance(event, Event):
            out["event"] = {
                k: _redact_value(v, self.secrets)
                for k, v in event_to_dict(event).items()
            }
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(
                self.formatException(record.exc_info), self.secrets
            )
        if record.exc_text:
            out["exc"] = record.exc_text
        if record.stack_info:
            out["stack"] = record.stack_info
        return json.dumps(out, ensure_ascii=False, default=str)


def _redact_value(value: object, secrets: SecretRegistry) -> object:
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, list):
        return [redact(v, secrets) if isinstance(v, str) else v for v in value]
    return value


RECENT_RECORDS = 200
"""Records the daemon's handler keeps once written: a HUD that takes the
terminal later shows them in its log pane."""


class RecentStreamHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler that keeps its last `RECENT_RECORDS` records (those
    its filters let through, redacted) for a HUD started after them."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.recent: deque[logging.LogRecord] = deque(maxlen=RECENT_RECORDS)

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        self.recent.append(record)


def setup_logging(
    level: str = "INFO",
    fmt: str = "text",
    stream: TextIO = sys.stderr,
    *,
    secrets: SecretRegistry,
) -> None:
    """Send all logging to `stream` in the chosen format, with secrets redacted.

    Replaces a handler installed by an earlier call; leaves other handlers alone.

    Args:
        level: A logging level name (DEBUG, INFO, WARNING, ERROR).
        fmt: `text` or `json`.
        stream: Where lines go.
        secrets: The values masked in every line (the daemon's registry).

    Raises:
        ValueError: Unknown level or format.
    """
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    if fmt not in ("text", "json"):
        raise ValueError(f"unknown log format {fmt!r}; use text or json")
    handler = RecentStreamHandler(stream)
    handler.set_name("mcp-manager")
    handler.setFormatter(_JsonFormatter(secrets) if fmt == "json" else _TextFormatter())
    handler.addFilter(RedactingFilter(secrets))
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "mcp-manager"]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(
            logging.NOTSET if numeric <= logging.DEBUG else logging.WARNING
        )
    for name in TEARDOWN_NOISE_LOGGERS:
        sdk_logger = logging.getLogger(name)
        if TEARDOWN_NOISE not in sdk_logger.filters:
            sdk_logger.addFilter(TEARDOWN_NOISE)
    oauth_logger = logging.getLogger("mcp.client.auth.oauth2")
    if OAUTH_FLOW_NOISE not in oauth_logger.filters:
        oauth_logger.addFilter(OAUTH_FLOW_NOISE)
