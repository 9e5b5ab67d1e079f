"""Which protocol era each upstream speaks, learned once and remembered.

MCP has two living eras: the handshake era (`initialize`, sessions, `ping`,
requests from the server mid-call) and the stateless 2026-07-28 revision
(`server/discover`, `_meta` per request, `input_required` results). With
`protocol = "auto"` (the default):

- over streamable HTTP, `server/discover` goes first (a probe costs a round
  trip, no more); any other answer, or none within `PROBE_TIMEOUT`, and the
  handshake follows on the same try;
- over stdio (and SSE) the handshake goes first: every server of that era
  expects it, so no old server ever sees a request it does not know (some
  exit on one, some never answer it). A server that refuses it as a
  2026-07-28 server does (`-32022` unsupported version, method not found, or
  an answer naming a modern revision) is started again and met with
  `server/discover`.

Either way the era found is remembered, so the next connect (and the next
daemon) goes there at once; so is whether the server also opens a session
of the other era beside it (`side.EraSide`).

Remembered in `eras.json` in the state directory (0600 in a 0700 folder),
keyed on the connection's name and endpoint: a changed endpoint learns anew.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from pathlib import Path

from ..core.spec import ConnectionSpec
from .state_files import write_private_json

__all__ = ["EraMemory", "endpoint_key"]

logger = logging.getLogger(__name__)


def endpoint_key(spec: ConnectionSpec) -> str:
    """What the remembered era belongs to: the endpoint, not its secrets
    (a digest of the transport, URL or command line)."""
    parts = [spec.transport, spec.url, spec.command, *spec.args]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


class EraMemory:
    """The era each connection's server was found to speak.

    Args:
        path: The JSON file (created on the first write).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._eras: dict[str, dict[str, str]] | None = None

    def recall(self, spec: ConnectionSpec) -> str | None:
        """The era learned for `spec`'s endpoint, if any."""
        entry = self._load().get(spec.name)
        if entry is None or entry.get("endpoint") != endpoint_key(spec):
            return None
        return entry.get("era")

    def learn(self, spec: ConnectionSpec, era: str) -> None:
        """Remember that `spec`'s server speaks `era` (written at once)."""
        entry = self._load().get(spec.name)
        if entry is not None and entry.get("endpoint") == endpoint_key(spec):
            if entry.get("era") == era:
                return
        self._write(spec, {"endpoint": endpoint_key(spec), "era": era})

    def recall_beside(self, spec: ConnectionSpec) -> bool | None:
        """Whether `spec`'s server opened a session of the other era beside
        its own (None: never tried)."""
        entry = self._load().get(spec.name)
        if entry is None or entry.get("endpoint") != endpoint_key(spec):
            return None
        beside = entry.get("beside")
        return None if beside is None else beside == "yes"

    def learn_beside(self, spec: ConnectionSpec, opened: bool) -> None:
        """Remember whether `spec`'s server opened a session of the other era."""
        entry = self._load().get(spec.name)
        if entry is None or entry.get("endpoint") != endpoint_key(spec):
            return  # its own era is learned first
        beside = "yes" if opened else "no"
        if entry.get("beside") != beside:
            self._write(spec, {**entry, "beside": beside})

    def _write(self, spec: ConnectionSpec, entry: dict[str, str]) -> None:
        eras = self._load()
        eras[spec.name] = entry
        try:
            write_private_json(self.path, eras, indent=1)
        except OSError as exc:  # boundary: a read-only home costs a probe, no more
            logger.warning("cannot remember protocol eras in %s: %s", self.path, exc)

    def _load(self) -> dict[str, dict[str, str]]:
        if self._eras is None:
            self._eras = {}
            with contextlib.suppress(OSError, ValueError):
                data = json.loads(self.path.read_text())
                if isinstance(data, dict):
                    self._eras = {
                        str(name): {str(k): str(v) for k, v in entry.items()}
                        for name, entry in data.items()
                        if isinstance(entry, dict)
                    }
        return self._eras
