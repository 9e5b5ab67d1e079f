"""A benchmark's own state directory, never the operator's.

The daemon keeps pins, the eras it learned, OAuth tokens and the call log in
`$XDG_STATE_HOME/mcp-manager` (`manager.files.default_state_dir`). A bench run
with the operator's environment would pin its own `demo` servers there, teach
the eras of its servers to the operator's daemon and add thousands of calls to
its log: `use_private_state` points this process, and every daemon and server
it starts, at a new folder, removed when the process ends.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["use_private_state"]


def use_private_state() -> Path:
    """Set `XDG_STATE_HOME` to a new private folder (0700) and return it."""
    folder = Path(tempfile.mkdtemp(prefix="mm-bench-state-"))
    os.environ["XDG_STATE_HOME"] = str(folder)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder
