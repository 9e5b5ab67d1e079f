"""Argument types of the command line: numbers checked as argparse reads them."""

from __future__ import annotations

import argparse

__all__ = ["non_negative_float", "positive_float", "positive_int"]


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
