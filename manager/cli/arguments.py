"""The command line's parser class, and its argument types: numbers checked
as argparse reads them."""

from __future__ import annotations

import argparse
import os
import re
import sys

from ..core.text import meant

TYPE_CHECKING = False  # as `typing` says; importing it costs a CLI command ~4 ms
if TYPE_CHECKING:
    from typing import Any, NoReturn

__all__ = [
    "Parser",
    "non_negative_float",
    "positive_float",
    "positive_int",
    "terminal_columns",
]


def terminal_columns() -> int:
    """What `shutil.get_terminal_size().columns` says ($COLUMNS, else the
    terminal's width, else 80), without importing `shutil`: its compression
    modules cost every command about 4 ms, for a number."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        stdout = sys.__stdout__
        try:
            columns = os.get_terminal_size(stdout.fileno() if stdout else -1).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Formatter(argparse.HelpFormatter):
    """argparse's help, as wide as argparse makes it (`terminal_columns`)."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        if width is None:
            width = terminal_columns() - 2  # as HelpFormatter does
        super().__init__(prog, indent_increment, max_help_position, width)


_INVALID_CHOICE = re.compile(
    r"invalid choice: '(?P<word>[^']*)' \(choose from (?P<choices>.*)\)$"
)
"""argparse's words for a command or a value not among the choices (3.11 to
3.13 quote the choices or not: both are read)."""


class Parser(argparse.ArgumentParser):
    """The parser of every command (its subcommands' too)."""

    def __init__(self, *args: Any, **options: Any) -> None:
        options.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **options)

    def error(self, message: str) -> NoReturn:
        """argparse's usage error; a choice mistyped (`stauts`, `cursr`) also
        gets the one it is likely to be."""
        found = _INVALID_CHOICE.search(message)
        if found is not None:
            choices = [c.strip().strip("'") for c in found["choices"].split(",")]
            message += meant(found["word"], choices)
        super().error(message)


def positive_float(text: str) -> float:
    """A finite number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value


def positive_int(text: str) -> int:
    """A whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """0, or a positive number."""
    if text.strip() in ("0", "0.0"):
        return 0.0
    return positive_float(text)
