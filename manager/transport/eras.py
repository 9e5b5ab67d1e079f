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
import json
import logging
import math
from collections.abc import Callable, Mapping
from pathlib import Path

import anyio
import mcp.types as types
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS

from ..core.errors import ConnectFailed
from ..core.spec import ConnectionSpec, endpoint_key
from ..files import write_private_json
from .base import MODERN, ServerInfo
from .errors import describe_error

__all__ = ["PROBE_TIMEOUT", "EraMemory", "agree"]

logger = logging.getLogger(__name__)

PROBE_TIMEOUT = 5.0
"""Seconds an HTTP server may take to answer `server/discover` before the
handshake is offered instead (`auto`)."""


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
        entry = self._entry(spec)
        return entry.get("era") if entry is not None else None

    def learn(self, spec: ConnectionSpec, era: str) -> None:
        """Remember that `spec`'s server speaks `era` (written at once)."""
        entry = self._entry(spec)
        if entry is not None and entry.get("era") == era:
            return
        self._write(spec, {"endpoint": endpoint_key(spec), "era": era})

    def recall_beside(self, spec: ConnectionSpec) -> bool | None:
        """Whether `spec`'s server opened a session of the other era beside
        its own (None: never tried)."""
        beside = (self._entry(spec) or {}).get("beside")
        return None if beside is None else beside == "yes"

    def recall_beside_capabilities(
        self, spec: ConnectionSpec
    ) -> Mapping[str, object] | None:
        """What `spec`'s server offered in the session of the other era when
        it last opened one (None: never opened, or not remembered)."""
        entry = self._entry(spec) or {}
        with contextlib.suppress(ValueError):
            capabilities = json.loads(entry.get("beside_capabilities", ""))
            if isinstance(capabilities, dict):
                return capabilities
        return None

    def learn_beside(
        self, spec: ConnectionSpec, capabilities: Mapping[str, object] | None
    ) -> None:
        """Remember whether `spec`'s server opened a session of the other
        era, and what it offered there (`capabilities`; None: it refused)."""
        entry = self._entry(spec)
        if entry is None:
            return  # its own era is learned first
        learned = {**entry, "beside": "no" if capabilities is None else "yes"}
        learned.pop("beside_capabilities", None)
        if capabilities is not None:
            learned["beside_capabilities"] = json.dumps(capabilities, sort_keys=True)
        if learned != entry:
            self._write(spec, learned)

    def _entry(self, spec: ConnectionSpec) -> dict[str, str] | None:
        """What is remembered of `spec`'s endpoint (None: nothing, or of
        another endpoint under the same name)."""
        entry = self._load().get(spec.name)
        if entry is None or entry.get("endpoint") != endpoint_key(spec):
            return None
        return entry

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


# ------------------------------------------------------------ negotiation


def _modern_evidence(exc: BaseException) -> bool:
    """Whether `initialize` failed as a 2026-07-28-only server fails it: the
    version refused (-32022), the method unknown, or an answer naming a
    revision the handshake does not know."""
    if isinstance(exc, MCPError):
        return exc.code in (UNSUPPORTED_PROTOCOL_VERSION, METHOD_NOT_FOUND)
    return isinstance(exc, RuntimeError) and "Unsupported protocol version" in str(exc)


async def agree(
    spec: ConnectionSpec,
    session: ClientSession,
    session_id: Callable[[], str | None],
    eras: EraMemory | None,
    probe_timeout: float | None = None,
) -> ServerInfo:
    """Agree on the protocol (`eras` says how: the rules of this module's
    docstring) and say who the server is (`session_id`: the HTTP session id
    the server gave, once it answered `initialize`)."""
    mode = spec.protocol
    known = eras.recall(spec) if eras is not None else None
    if mode == "auto" and known == MODERN:
        mode = MODERN
    if mode == "auto" and spec.transport == "http" and known is None:
        # Over HTTP a probe costs nothing but a round trip: server/discover
        # first, the handshake on any other answer (or none in time).
        found = await _probe(spec, session, probe_timeout)
        if found is not None:
            if eras is not None:
                eras.learn(spec, MODERN)
            return _modern_info(session, found)
    if mode != MODERN:
        try:
            init = await session.initialize()
        except (MCPError, RuntimeError) as exc:
            if mode == "legacy" or not _modern_evidence(exc):
                raise
            if eras is not None:
                eras.learn(spec, MODERN)
            if spec.transport != "http":
                # A process (or SSE session) that saw `initialize` may be held
                # to that era: the next start is met with server/discover.
                raise ConnectFailed(
                    f"the server refused the handshake as a {MODERN} server "
                    f"does ({describe_error(exc)}); starting it again in {MODERN}"
                ) from exc
            logger.debug(
                "%s: initialize refused (%s); trying %s", spec.name, exc, MODERN
            )
        else:
            if mode == "auto" and eras is not None:
                eras.learn(spec, "legacy")  # the probe is not sent again
            return ServerInfo(
                name=init.server_info.name,
                version=init.server_info.version,
                protocol=str(init.protocol_version),
                session_id=session_id(),
                capabilities=init.capabilities.model_dump(
                    by_alias=True, mode="json", exclude_none=True
                ),
            )
    raw = await session.send_discover(LATEST_MODERN_VERSION)
    try:
        found = types.DiscoverResult.model_validate(raw, by_name=False)
        session.adopt(found)
    except (ValueError, RuntimeError) as exc:
        raise ConnectFailed(
            f"server/discover answered, but not as a {MODERN} server does: "
            f"{describe_error(exc)}"
        ) from exc
    if eras is not None and spec.protocol == "auto":
        eras.learn(spec, MODERN)
    return _modern_info(session, found)


async def _probe(
    spec: ConnectionSpec, session: ClientSession, limit: float | None
) -> types.DiscoverResult | None:
    """`server/discover`, adopted if the server answers as a 2026-07-28 server
    does; None on any other answer or none within `limit` seconds (None: the
    handshake's own deadline, while a user logs in)."""
    if limit is None:
        limit = math.inf
    version = LATEST_MODERN_VERSION
    with anyio.move_on_after(limit):
        for _ in range(2):  # once more at a version the server names (-32022)
            try:
                raw = await session.send_discover(version)
                found = types.DiscoverResult.model_validate(raw, by_name=False)
                session.adopt(found)
            except MCPError as exc:
                mutual = _mutual_modern(exc)
                if mutual is not None:  # even the same one: it said it has it
                    version = mutual
                    continue
                logger.debug("%s: server/discover: %s", spec.name, exc.message)
                return None
            except (ValueError, RuntimeError) as exc:
                logger.debug("%s: server/discover: %s", spec.name, exc)
                return None
            return found
    return None


def _mutual_modern(exc: MCPError) -> str | None:
    """The newest 2026-era revision we share with a server that refused ours
    with -32022 and named the ones it supports, if any."""
    if exc.code != UNSUPPORTED_PROTOCOL_VERSION or not isinstance(exc.data, dict):
        return None
    supported = exc.data.get("supported")
    if not isinstance(supported, list):
        return None
    mutual = [v for v in MODERN_PROTOCOL_VERSIONS if v in supported]
    return mutual[-1] if mutual else None


def _modern_info(session: ClientSession, found: types.DiscoverResult) -> ServerInfo:
    server = session.server_info
    return ServerInfo(
        name=server.name if server is not None else "",
        version=server.version if server is not None else "",
        protocol=str(session.protocol_version),
        capabilities=found.capabilities.model_dump(
            by_alias=True, mode="json", exclude_none=True
        ),
    )
