"""Short texts the user reads wherever they look: the first line of an error,
a list of names, the command that logs a connection in.

Pure and light (nothing of ours, nothing heavy): the CLI's status table, the HUD, the
event sentences (`describe`) and the state machine share them.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "NAMES_SHOWN",
    "first_line",
    "list_names",
    "login_command",
    "meant",
    "size_text",
]

NAMES_SHOWN = 5
"""Names listed in one sentence before "+N more"."""


def first_line(text: object) -> str:
    """The first non-empty line of `text`, stripped ("" for None)."""
    if text is None:
        return ""
    for line in str(text).strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


def list_names(names: tuple[str, ...] | list[str], limit: int = NAMES_SHOWN) -> str:
    """`"a, b, c"`, or `"a, b, +3 more"` past `limit` names."""
    shown = ", ".join(names[:limit])
    return f"{shown}, +{len(names) - limit} more" if len(names) > limit else shown


def login_command(name: str) -> str:
    """What the user runs to log `name` in."""
    return f"mcp-manager login {name}"


def meant(word: str, names: Iterable[str]) -> str:
    """` (did you mean 'x'?)` when one of `names` is spelled close to `word`
    (a typo, a letter missing or swapped), else ""."""
    import difflib  # an error's path only: every status table would pay 1 ms

    close = difflib.get_close_matches(word, list(names), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def size_text(count: int) -> str:
    """A byte count for people: `812 B`, `4.9 kB`, `5.0 MB` (powers of 1000)."""
    if count < 1000:
        return f"{count} B"
    value = float(count)
    for unit in ("kB", "MB", "GB"):
        value /= 1000
        if round(value, 1) < 1000:
            return f"{value:.1f} {unit}"
    return f"{value:.1f} GB"
