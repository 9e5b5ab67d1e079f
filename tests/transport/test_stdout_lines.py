"""`StdoutLines`: a stdio server's stdout cut into lines in the loop's callback,
the relay's taken at once, the rest queued in the server's order; and the
start of `stdio_streams` around it."""

from __future__ import annotations

import asyncio

import anyio
import psutil
import pytest
from servers import own_children, raw_command

from manager.core.spec import parse_spec
from manager.transport.base import Hooks
from manager.transport.signals import LostSignal
from manager.transport.stdio.process import MAX_LINE, StdoutLines, stdio_streams

pytestmark = pytest.mark.anyio


class Pipe:
    """What the protocol uses of a read pipe's transport."""

    def __init__(self) -> None:
        self.paused = False

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


def lines_taking(ours: set[bytes]) -> tuple[StdoutLines, list[bytes], list[str]]:
    taken: list[bytes] = []
    notes: list[str] = []

    def take(line: bytes) -> bool:
        if line in ours:
            taken.append(line)
            return True
        return False

    return StdoutLines(take, notes.append), taken, notes


async def test_the_relays_lines_are_taken_at_once_and_split_lines_are_joined() -> None:
    lines, taken, _ = lines_taking({b"answer-1", b"answer-2"})
    lines.connection_made(Pipe())  # type: ignore[arg-type]
    lines.data_received(b"answ")
    assert taken == []
    lines.data_received(b"er-1\nansw")
    assert taken == [b"answer-1"]  # in the callback: no task ran
    lines.data_received(b"er-2\n")
    assert taken == [b"answer-1", b"answer-2"]
    lines.eof_received()
    assert await lines.next() is None


async def test_a_line_of_megabytes_in_many_chunks_arrives_whole() -> None:
    """An 8 MiB answer (a screenshot, a file) in pipe-sized chunks: one
    line, as the SDK's own client would take it (4 MiB was the limit)."""
    big = b"a" * (8 * 1024 * 1024)
    lines, taken, notes = lines_taking({big})
    lines.connection_made(Pipe())  # type: ignore[arg-type]
    chunk = 64 * 1024
    for start in range(0, len(big), chunk):
        lines.data_received(big[start : start + chunk])
    lines.data_received(b"\nnext")
    assert taken == [big] and notes == []
    lines.data_received(b"\n")
    assert await lines.next() == b"next"


async def test_a_line_for_the_sdk_keeps_the_relays_later_lines_behind_it() -> None:
    lines, taken, _ = lines_taking({b"answer"})
    lines.connection_made(Pipe())  # type: ignore[arg-type]
    lines.data_received(b"list_changed\nanswer\n")
    assert taken == []  # not before the line the server wrote first
    assert await lines.next() == b"list_changed"
    assert await lines.next() == b"answer"  # the reader offers it to the relay
    lines.data_received(b"answer\n")
    assert taken == [b"answer"]  # the queue is empty again: taken at once


async def test_reading_pauses_while_the_sdk_falls_behind_and_resumes() -> None:
    lines, _, _ = lines_taking(set())
    pipe = Pipe()
    lines.connection_made(pipe)  # type: ignore[arg-type]
    lines.data_received(b"x\n" * (StdoutLines.HIGH_WATER + 1))
    assert pipe.paused
    for _ in range(StdoutLines.HIGH_WATER // 2):
        assert await lines.next() == b"x"
        assert pipe.paused
    assert await lines.next() == b"x"
    assert not pipe.paused


async def test_a_waiting_reader_wakes_for_a_line_and_for_the_end() -> None:
    lines, _, notes = lines_taking(set())
    lines.connection_made(Pipe())  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    waiting = loop.create_task(lines.next())
    await asyncio.sleep(0)
    loop.call_soon(lines.data_received, b"hello\n")
    assert await waiting == b"hello"
    waiting = loop.create_task(lines.next())
    await asyncio.sleep(0)
    loop.call_soon(lines.data_received, b"x" * (MAX_LINE + 1))
    loop.call_soon(lines.connection_lost, None)
    assert await waiting is None
    assert notes == [f"[stdout] line longer than {MAX_LINE} bytes dropped"]


async def test_a_start_cancelled_right_after_the_spawn_leaves_no_process() -> None:
    """Removed mid-connect: cancelled at the first wait after the spawn (the
    stdout pipe's set-up), the server is still stopped and reaped, its pipes
    closed (the churn campaign once found one left running)."""
    command, args = raw_command()
    spec = parse_spec("s", {"command": command, "args": args})
    spawned: list[int] = []
    with anyio.CancelScope() as scope:

        def cancel_at_once(pid: int) -> None:
            spawned.append(pid)
            scope.cancel()

        async with stdio_streams(spec, Hooks(on_spawn=cancel_at_once), LostSignal()):
            pytest.fail("never reached: cancelled before the streams were ready")
    assert scope.cancelled_caught
    (pid,) = spawned
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
    assert own_children() == []
