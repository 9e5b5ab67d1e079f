"""The command line's parser class, and its argument types: numbers checked
as argparse reads them."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

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


class Parser(argparse.ArgumentParser):
    """The parser of every command (its subcommands' too)."""

    def __init__(self, *args: Any, **options: Any) -> None:
        options.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **options)


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
