"""Logs: the stdlib logging setup and the sink that turns events into lines.

- `setup`: the root handler (text or JSON), redaction, tamed third-party loggers.
- `sink`: `LogSink` (events to lines, with the noise bound) and `run_summaries`.
"""

from __future__ import annotations

from .setup import (
    NOISY_LOGGERS,
    TEARDOWN_NOISE,
    TEARDOWN_NOISE_LOGGERS,
    RedactingFilter,
    TeardownNoiseFilter,
    setup_logging,
)
from .sink import SUMMARY_INTERVAL, LogSink, run_summaries

__all__ = [
    "NOISY_LOGGERS",
    "SUMMARY_INTERVAL",
    "TEARDOWN_NOISE",
    "TEARDOWN_NOISE_LOGGERS",
    "LogSink",
    "RedactingFilter",
    "TeardownNoiseFilter",
    "run_summaries",
    "setup_logging",
]
