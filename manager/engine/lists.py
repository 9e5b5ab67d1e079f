"""What an on-demand server listed, remembered between its sessions.

An on-demand connection (`start = "on_demand"`) has no session while it is
idle, yet its tools, prompts and resources must stay listed (a client picks a
tool before anything starts it). Each time such a connection connects, what
it listed is written to `lists/NAME.json` in the state directory (0600 in a
0700 folder); when it is declared again (a daemon restart), that is what it
shows until its first session. A listing of another endpoint (the command
line or URL changed) is not used.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path

from ..core.spec import ConnectionSpec, endpoint_key
from ..files import write_private_json
from ..transport.base import CATALOG_KINDS, Catalog, ToolInfo

__all__ = ["ListMemory"]

logger = logging.getLogger(__name__)


class ListMemory:
    """The last listings of on-demand connections, one file each.

    Args:
        directory: Where the files go (created on the first write).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, name: str) -> Path:
        return self.directory / f"{name}.json"

    def recall(self, spec: ConnectionSpec) -> tuple[tuple[ToolInfo, ...], Catalog]:
        """`spec`'s last listing; nothing if none was kept for its endpoint."""
        data: object = None
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(self._path(spec.name).read_text())
        if not isinstance(data, dict) or data.get("endpoint") != endpoint_key(spec):
            return (), Catalog()
        tools = tuple(
            ToolInfo(
                name=str(raw["name"]),
                description=str(raw.get("description") or ""),
                raw=raw,
            )
            for raw in _items(data.get("tools"))
            if isinstance(raw.get("name"), str)
        )
        return tools, Catalog(
            prompts=tuple(_items(data.get("prompts"))),
            resources=tuple(_items(data.get("resources"))),
            templates=tuple(_items(data.get("templates"))),
        )

    def keep(
        self, spec: ConnectionSpec, tools: tuple[ToolInfo, ...], catalog: Catalog
    ) -> None:
        """Write `spec`'s listing (at once; a failure is logged, not raised)."""
        data = {
            "endpoint": endpoint_key(spec),
            "tools": [dict(tool.raw) for tool in tools],
            **{
                kind: [dict(i) for i in getattr(catalog, kind)]
                for kind in CATALOG_KINDS
            },
        }
        path = self._path(spec.name)
        try:
            write_private_json(path, data)
        except (OSError, TypeError, ValueError) as exc:  # boundary: costs a listing
            logger.warning(
                "%s: cannot remember its lists in %s: %s", spec.name, path, exc
            )


def _items(value: object) -> list[Mapping[str, object]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict)]
