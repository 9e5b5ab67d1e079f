"""The script watcher, alone: what it does while the daemon stops."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from manager.daemon.config_runner import _watch_directory

pytestmark = pytest.mark.anyio


async def test_a_save_seen_after_the_reloader_stopped_ends_the_watcher_quietly(
    tmp_path: Path,
) -> None:
    # At shutdown the reloader can end first; a save the watcher sees then
    # once made the daemon exit 1 (BrokenResourceError) instead of 0.
    script = tmp_path / "startup.lua"
    script.write_text("-- first\n")
    send, receive = anyio.create_memory_object_stream[None](1)
    receive.close()
    with send, anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            await tg.start(_watch_directory, script, send, anyio.Event())
            script.write_text("-- saved\n")
        # the task group ends only because the watcher returned by itself
