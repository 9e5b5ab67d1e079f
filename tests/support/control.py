"""Speaking the control socket's wire by hand, as a client of the daemon's
own would: every connection proves the daemon's key (`control.keys`) with
its first request."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from manager.control.paths import KEY_FIELD, read_key

__all__ = ["keyed", "keyed_line"]


def keyed(path: Path, request: Mapping[str, object]) -> dict[str, object]:
    """`request` carrying the key of the daemon listening on `path`."""
    key = read_key(path)
    assert key, f"no key beside {path}"
    return {**request, KEY_FIELD: key}


def keyed_line(path: Path, request: Mapping[str, object]) -> bytes:
    """`keyed` as the line the wire carries."""
    return json.dumps(keyed(path, request)).encode() + b"\n"
