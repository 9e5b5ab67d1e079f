"""Launch locks as the daemon shows and changes them: the `launch` line of a
connection's status, and `mcp-manager update NAME` (what a newer release
would change, then taking it and restarting the server on it).

The locks themselves (resolving, recording, looking for newer releases) are
the transport's (`transport.stdio.locks`), reached through its
`Launching` seam; a transport without it (tests' fakes) has no locks.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import UnknownServer
from ..core.launch import Launch, lock_line, parse_launch
from ..core.replies import UpdateReply
from ..transport.base import Launching, Transport
from .connection import Connection

__all__ = ["LaunchUpdate", "launch_text", "offer", "take"]


@dataclass(frozen=True, slots=True)
class LaunchUpdate:
    """What `update` did: `package` went from `before` to `after`."""

    name: str
    package: str
    before: str
    after: str


def launch_text(conn: Connection, transport: Transport) -> str:
    """`conn`'s launch lock in a line (`ConnectionStatus.launch`), "" if it
    has none."""
    note = conn.launch
    if note is not None and note.change == "unlocked":
        return f"not locked: {note.reason}"
    spec = conn.spec
    if spec.transport != "stdio" or not spec.lock:
        return ""
    if not isinstance(transport, Launching):
        return ""
    launch = parse_launch(spec.command, spec.args)
    if not isinstance(launch, Launch) or launch.exact:
        return ""
    record = transport.launches.record(conn.name)
    if record is None or not record.fits(launch):
        return ""
    newer = ""
    if note is not None and note.change == "drift" and note.version == record.version:
        newer = note.available
    return lock_line(launch.display, record.version, newer)


def _locking(transport: Transport) -> Launching:
    if not isinstance(transport, Launching):
        raise UnknownServer("this daemon's transport locks no launches")
    return transport


async def offer(conn: Connection, transport: Transport) -> UpdateReply:
    """What `update NAME` would take (nothing is changed)."""
    locking = _locking(transport)
    return await locking.launches.offer(await locking.resolved(conn.spec))


async def take(conn: Connection, transport: Transport, version: str) -> LaunchUpdate:
    """Lock `conn`'s package to `version`, which `offer` showed (the caller
    restarts the server on it).

    Raises:
        ValueError: Nothing to lock, or `version` is not what the registry
            offers now (it changed since it was shown).
    """
    name = conn.name
    shown = await offer(conn, transport)
    if not shown.available:
        raise ValueError(
            f"{name}: nothing newer to take ({shown.note or 'the lock is the newest'})"
        )
    if version and version != shown.available:
        raise ValueError(
            f"{name}: the registry now offers {shown.available}, not {version}: "
            "run mcp-manager update again to see it"
        )
    locking = _locking(transport)
    before = locking.launches.take(conn.spec, shown.available, shown.published)
    return LaunchUpdate(name, shown.package, before, shown.available)
