"""The state directory and the private JSON files the daemon keeps in it.

`$XDG_STATE_HOME/mcp-manager` (else `~/.local/state/mcp-manager`) holds OAuth
tokens (`tokens/`), remembered protocol eras (`eras.json`), on-demand
servers' listings (`lists/`), pinned definitions (`pins/`), launch locks
(`locks/`), remembered approvals and the call log. Every file is
written the same way (`write_private_json`): its folders 0700, the file 0600,
replaced atomically so a crash never leaves half a file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["default_state_dir", "write_private_json"]


def default_state_dir() -> Path:
    """`$XDG_STATE_HOME/mcp-manager`, else `~/.local/state/mcp-manager`."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "mcp-manager"


def write_private_json(path: Path, data: object, *, indent: int | None = None) -> None:
    """Write `data` to `path` as JSON, 0600, atomically; its folder (and that
    folder's parent, the state directory) created 0700.

    Raises:
        OSError: It cannot be written (the caller says what it costs).
        TypeError, ValueError: `data` is not JSON.
    """
    path.parent.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)  # mkdir's mode is filtered by the umask
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(data, out, indent=indent, sort_keys=indent is not None)
    os.replace(tmp, path)
