"""While the HUD owns the terminal: what textual draws on, and where everything
else that would print goes.

`TerminalOutput` gives textual a terminal file that can neither raise nor, in
the end, block the daemon's event loop (textual's writer thread and bounded
queue would otherwise do both when a terminal hangs up or stalls).

`OutputCapture` keeps every other writer off the screen: the root logger's
handlers are swapped for one that feeds the HUD's log (with the same redaction
filter), Python warnings go through logging, and file descriptor 2 becomes a
pipe whose lines land in the log too (native libraries write there directly).
Everything is put back on exit, and what the HUD never showed is then written
where it would have gone without it.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import select
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from types import TracebackType

from .compat_textual import writer_queue
from .feed import Note

__all__ = [
    "CAPTURED_LINES",
    "CLOSE_GRACE",
    "OutputCapture",
    "TerminalFile",
    "TerminalOutput",
    "open_terminal",
]

CAPTURED_LINES = 5000
"""Log records / stderr lines held between two frames; beyond, the oldest go."""

_EVENT_RECORD_ATTR = "mcp_event"
"""Set by `manager.logs.LogSink` on records it made from an event: the HUD shows
the event itself, so those records would only repeat it."""


class _HudLogHandler(logging.Handler):
    """Puts log records into the capture instead of onto the terminal."""

    def __init__(self, capture: OutputCapture, template: logging.Handler | None):
        super().__init__(template.level if template is not None else logging.NOTSET)
        self._capture = capture
        # The daemon's handler carries the redaction filter: keep applying it.
        for flt in template.filters if template is not None else ():
            self.addFilter(flt)

    def emit(self, record: logging.LogRecord) -> None:
        if self._capture.shown_as_event(record) and not self._capture.holding:
            return  # the HUD shows the event itself
        self._capture.add(("record", record))


def _note_of(record: logging.LogRecord) -> Note:
    level = (
        "error"
        if record.levelno >= logging.ERROR
        else "warn"
        if record.levelno >= logging.WARNING
        else "info"
        if record.levelno >= logging.INFO
        else "debug"
    )
    text = f"{record.levelname} {record.name}: {record.getMessage()}"
    exc = record.exc_text or ""
    if not exc and record.exc_info and record.exc_info[0] is not None:
        exc = logging.Formatter().formatException(record.exc_info)
    if exc.strip():
        text += f" [{exc.strip().splitlines()[-1]}]"  # the exception, not the trace
    return Note(record.created, level, text)


class TerminalOutput:
    """The file textual draws on, made safe for a daemon.

    textual writes every frame to `sys.__stderr__` from a writer thread fed by
    a bounded queue; the event loop blocks when that queue is full. Inside the
    daemon that must never happen, so while this is entered:

    * `sys.__stderr__` is a `TerminalFile` opened afresh on the terminal (the
      one on fd 2, else fd 1), non-blocking: a terminal that hung up (EIO)
      makes writes vanish and sets `lost`, instead of killing the writer
      thread and, with it, the event loop; once `closing` is set, a write
      waits for a stalled terminal at most `CLOSE_GRACE` seconds, so the
      daemon's shutdown never hangs on textual flushing its last frames;
    * `unbind(app)` makes textual's queue unbounded once the app runs, and
      `state(app)` reports `busy` while it backs up (a stalled terminal: the
      app then skips drawing) and `lost` after a hangup (the app then exits).
    """

    BUSY_BACKLOG = 5
    """Frames waiting for the terminal beyond which the app stops drawing."""

    def __init__(self) -> None:
        self.file: TerminalFile | None = None
        self._saved: object = None

    def __enter__(self) -> TerminalOutput:
        for fd in (2, 1):
            if os.isatty(fd):
                self.file = TerminalFile(open_terminal(fd))
                self._saved = sys.__stderr__
                # typeshed marks it Final; textual reads it when it starts.
                sys.__dict__["__stderr__"] = self.file
                break
        return self

    def close_soon(self) -> None:
        """The app is about to exit: never wait long for the terminal again."""
        if self.file is not None:
            self.file.closing = True

    def __exit__(self, *exc_info: object) -> None:
        if self.file is not None:
            sys.__dict__["__stderr__"] = self._saved
            self.file.close()
            self.file = None

    def unbind(self, app: object) -> None:
        """Let textual queue frames without ever blocking the event loop."""
        pending = writer_queue(app)
        if pending is not None:
            pending.maxsize = 0

    def state(self, app: object) -> str:
        """`ok`, `busy` (frames are backing up) or `lost` (hung up)."""
        if self.file is not None and self.file.lost:
            return "lost"
        pending = writer_queue(app)
        if pending is not None and pending.qsize() > self.BUSY_BACKLOG:
            return "busy"
        return "ok"


CLOSE_GRACE = 0.5
"""Seconds a closing HUD waits for a stalled terminal before dropping output."""


def open_terminal(fd: int) -> int:
    """A non-blocking descriptor of the terminal on `fd`, with its own flags.

    Opened by name, not `dup`ed: O_NONBLOCK on a duplicate would also change
    the shell's descriptors that share its open file description.
    """
    try:
        return os.open(os.ttyname(fd), os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError:
        return os.dup(fd)  # blocking, but still ours to close


class TerminalFile(io.TextIOBase):
    """A text file on a terminal descriptor whose writes never raise.

    Written only from textual's writer thread, where waiting for a slow
    terminal is harmless.
    """

    def __init__(self, fd: int, *, close_grace: float = CLOSE_GRACE) -> None:
        super().__init__()
        self._fd = fd
        self._close_grace = close_grace
        self.lost = False
        self.closing = False

    def write(self, text: str) -> int:
        view = memoryview(text.encode("utf-8", "replace"))
        give_up: float | None = None
        while view and not self.lost:
            try:
                view = view[os.write(self._fd, view) :]
            except BlockingIOError:  # a stalled terminal: wait for it
                if self.closing:
                    give_up = give_up or time.monotonic() + self._close_grace
                    if time.monotonic() > give_up:
                        self.lost = True  # closing anyway: drop the rest
                        break
                select.select([], [self._fd], [], 0.1)
            except OSError:  # EIO/EPIPE: the terminal is gone; keep running
                self.lost = True
        return len(text)

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return True

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        super().close()


class OutputCapture:
    """While the HUD owns the terminal, logging and fd 2 feed the HUD's log.

    textual draws on `sys.__stderr__`, so enter `TerminalOutput` first: the
    screen then goes to its own copy of the terminal, never into the pipe.

    Args:
        exclusive: Take logging and fd 2 over (stderr is the HUD's terminal).
            Otherwise (stderr is a file or a pipe) leave them alone and only
            copy log records into the HUD too.
        events_from: The `seq` of the first event the HUD's subscription
            delivers: the log lines of earlier events are shown as lines
            (the HUD never sees those events), later ones only as events.
    """

    def __init__(self, *, exclusive: bool, events_from: int = 0) -> None:
        self.exclusive = exclusive
        self.events_from = events_from
        self.lost = 0
        self._pending: deque[tuple[str, object]] = deque()
        self._saved_handlers: list[logging.Handler] = []
        self._handler: _HudLogHandler | None = None
        self._saved_fd: int | None = None
        self._reader: threading.Thread | None = None
        self._closing = False

    def add(self, item: tuple[str, object]) -> None:
        """Queue a record or a stderr line (any thread)."""
        if len(self._pending) >= CAPTURED_LINES:
            with contextlib.suppress(IndexError):
                self._pending.popleft()
                self.lost += 1
        self._pending.append(item)

    @property
    def holding(self) -> bool:
        """The HUD is closing: keep everything for the terminal."""
        return self._closing

    def hold(self) -> None:
        """Stop feeding the HUD: what arrives from now on (event lines too) is
        written to the terminal once the HUD has closed."""
        self._closing = True

    def shown_as_event(self, record: logging.LogRecord) -> bool:
        """Whether `record` was made from an event the HUD's subscription
        delivers (so the HUD shows that event, and the line would repeat it)."""
        event = getattr(record, _EVENT_RECORD_ATTR, None)
        seq = getattr(event, "seq", None)
        return event is not None and (
            not isinstance(seq, int) or seq >= self.events_from
        )

    def poll(self, limit: int) -> Iterator[Note]:
        """Up to `limit` captured lines as notes (none once holding)."""
        if self._closing:
            return
        for _ in range(limit):
            try:
                kind, value = self._pending.popleft()
            except IndexError:
                return
            if kind in ("record", "earlier"):
                assert isinstance(value, logging.LogRecord)
                yield _note_of(value)
            else:
                yield Note(time.time(), "stderr", f"stderr ▏ {value}")

    def __enter__(self) -> OutputCapture:
        root = logging.getLogger()
        self._saved_handlers = list(root.handlers)
        template = next(iter(self._saved_handlers), None)
        self._handler = _HudLogHandler(self, template)
        if self.exclusive:
            for handler in self._saved_handlers:
                root.removeHandler(handler)
            # What was logged before the HUD took the terminal (on it already:
            # shown in the HUD's log too, never replayed), the lines of events
            # its subscription missed included. The daemon's handler keeps it
            # (`logs.RecentStreamHandler`; hud may not import logs).
            for record in getattr(template, "recent", ()):
                if not self.shown_as_event(record):
                    self.add(("earlier", record))
            logging.captureWarnings(True)
            self._redirect_fd2()
        root.addHandler(self._handler)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing = True
        root = logging.getLogger()
        if self._handler is not None:
            root.removeHandler(self._handler)
        if self.exclusive:
            self._restore_fd2()
            logging.captureWarnings(False)
            for handler in self._saved_handlers:
                root.addHandler(handler)
        self._replay()

    def _redirect_fd2(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        read_fd, write_fd = os.pipe()
        self._saved_fd = os.dup(2)
        os.dup2(write_fd, 2)
        os.close(write_fd)
        self._reader = threading.Thread(
            target=self._read_pipe, args=(read_fd,), name="hud-stderr", daemon=True
        )
        self._reader.start()

    def _read_pipe(self, fd: int) -> None:
        buffer = b""
        try:
            while chunk := os.read(fd, 65536):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    self.add(("stderr", line.decode("utf-8", "replace").rstrip()))
            if buffer:
                self.add(("stderr", buffer.decode("utf-8", "replace").rstrip()))
        finally:
            os.close(fd)

    def _restore_fd2(self) -> None:
        if self._saved_fd is None:
            return
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        os.dup2(self._saved_fd, 2)  # drops the pipe's last write end: EOF
        os.close(self._saved_fd)
        self._saved_fd = None
        if self._reader is not None:
            self._reader.join(timeout=1.0)

    def _replay(self) -> None:
        """Write what the HUD never showed where it would have gone without it."""
        pending, self._pending = self._pending, deque()
        for kind, value in pending:
            if kind == "earlier":
                continue  # on the terminal already
            if kind == "record":
                assert isinstance(value, logging.LogRecord)
                if self.exclusive:
                    for handler in self._saved_handlers:
                        if value.levelno >= handler.level:
                            handler.handle(value)
            else:
                with contextlib.suppress(OSError):
                    os.write(2, f"{value}\n".encode())
