"""How a command ends: one line on stderr and the exit code it picks.

The commands of `cli/` fail through `fail`, so the exit codes listed in
`cli/__init__.py` are picked only here and there.
"""

from __future__ import annotations

import sys

__all__ = ["PROG", "fail", "first_line"]

PROG = "mcp-manager"


def first_line(text: object) -> str:
    """The first line of `text` (an error message for stderr)."""
    return str(text).strip().split("\n", 1)[0]


def fail(message: str, code: int = 2) -> int:
    """Say `message` on stderr (`mcp-manager: message`); return `code`."""
    print(f"{PROG}: {message}", file=sys.stderr)
    return code
