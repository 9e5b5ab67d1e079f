"""A desktop notification when a call waits for the user's approval.

An `mcp_policy` `ask` holds a call until the user answers (the HUD, or
`mcp-manager allow ID`). A user who is not looking at the HUD learns of it
here, where the desktop has a notifier: `notify-send` (freedesktop, with a
display or a session bus) or `osascript` (macOS). The notification names the
server, the tool, the client, the rule and the command that answers; never
the arguments (they may hold secrets). `MCP_MANAGER_NOTIFY=off` turns it off.
Each notifier run is bounded (`NOTIFY_TIMEOUT`) and one at a time; a notifier
that fails is said once in the log, and the question still waits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys

import anyio

from ..core.events import ApprovalAsked, Event
from ..engine.bus import EventBus

__all__ = ["NOTIFY_ENV", "NOTIFY_TIMEOUT", "notifier", "run_notifications"]

logger = logging.getLogger("manager")

NOTIFY_ENV = "MCP_MANAGER_NOTIFY"
"""`off` turns desktop notifications off."""

NOTIFY_TIMEOUT = 5.0
"""Seconds one notifier run may take."""

QUEUED = 20
"""Questions that may wait for their notification; more are not shown."""


def notifier() -> list[str] | None:
    """The notifier command of this desktop (its arguments follow), or None."""
    if os.environ.get(NOTIFY_ENV, "").lower() in ("off", "0", "false", "no"):
        return None
    if sys.platform == "darwin":
        tool = shutil.which("osascript")
        return [tool, "-e"] if tool else None
    tool = shutil.which("notify-send")
    desktop = any(
        os.environ.get(name)
        for name in ("DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS")
    )
    return [tool, "--app-name=mcp-manager"] if tool and desktop else None


def _argv(command: list[str], asked: ApprovalAsked) -> list[str]:
    who = f" by {asked.client}" if asked.client else ""
    title = f"mcp-manager: approve {asked.name}.{asked.tool}?"
    body = (
        f"{asked.name}.{asked.tool}{who} waits for your approval ({asked.rule}). "
        f"mcp-manager allow {asked.approval} / deny {asked.approval}, or the HUD"
    )
    if command[-1] == "-e":  # osascript
        quoted = body.replace("\\", "\\\\").replace('"', '\\"')
        heading = title.replace("\\", "\\\\").replace('"', '\\"')
        return [*command, f'display notification "{quoted}" with title "{heading}"']
    return [*command, title, body]


async def run_notifications(bus: EventBus) -> None:
    """Notify the desktop of each call that waits for approval, until cancelled.

    A listener on the bus takes only `approval_asked` events (a subscription
    would queue every event, and report drops while a notifier runs); at most
    `QUEUED` wait their turn, more are not shown (they still wait in the HUD
    and `mcp-manager pending`)."""
    command = notifier()
    if command is None:
        return
    send, receive = anyio.create_memory_object_stream[ApprovalAsked](QUEUED)

    def take(event: Event) -> None:
        if isinstance(event, ApprovalAsked):
            with contextlib.suppress(anyio.WouldBlock):
                send.send_nowait(event)

    stop = bus.add_listener(take)
    failed = False
    try:
        async with receive:
            async for asked in receive:
                with anyio.move_on_after(NOTIFY_TIMEOUT):
                    try:
                        done = await anyio.run_process(
                            _argv(command, asked),
                            check=False,
                            # Never the daemon's terminal (the HUD's).
                            stdin=subprocess.DEVNULL,
                            start_new_session=True,
                        )
                        ok = done.returncode == 0
                    except OSError:
                        ok = False
                    if not ok and not failed:
                        failed = True
                        logger.warning(
                            "desktop notification failed (%s); approvals still "
                            "wait in the HUD and mcp-manager pending (%s=off "
                            "stops trying)",
                            command[0],
                            NOTIFY_ENV,
                        )
    finally:
        stop()
        send.close()
