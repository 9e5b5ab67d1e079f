"""How a command ends: one line on stderr and the exit code it picks.

The commands of `cli/` fail through `fail`, so the exit codes listed in
`cli/__init__.py` are picked only here and there.
"""

from __future__ import annotations

import sys

__all__ = ["PROG", "fail"]

PROG = "mcp-manager"


def fail(message: str, code: int = 2) -> int:
    """Say `message` on stderr (`mcp-manager: message`); return `code`."""
    print(f"{PROG}: {message}", file=sys.stderr)
    return code
