"""`mcp-manager stdio` answers `initialize` before it has loaded anything.

A client that spawns `mcp-manager stdio` waits for the answer to its
`initialize`; importing the SDK alone takes most of half a second here. So the
first line on stdin is read (byte by byte: nothing after it is taken from the
pipe) and, when it is an `initialize` of a handshake-era version, answered at
once from what the endpoint will say anyway: every capability it can carry
(what the upstreams offer is not known yet, and the endpoint announces all of
them while a connection is on its first attempt), its name, version and
instructions. Once the SDK server runs, the same request is replayed into it
and its own answer is dropped, so the session state is the SDK's, as if it had
answered itself (`tests/test_gateway_features.py` checks both answers agree).

No `mcp` import here: this runs before it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from .. import __version__

__all__ = [
    "CAPABILITIES",
    "HANDSHAKE_VERSIONS",
    "INSTRUCTIONS",
    "SERVER_NAME",
    "EarlyStart",
    "answer_initialize",
]

SERVER_NAME = "mcp-manager"

INSTRUCTIONS = (
    "Tools, prompts and resources of the MCP servers that mcp-manager keeps "
    "connected; tools and prompts are named PREFIX__NAME. A server that is "
    "restarting keeps its lists; a request to it waits briefly for it, then "
    "fails with its status."
)

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""Protocol versions negotiated by `initialize` (the SDK's handshake versions)."""

CAPABILITIES: dict[str, object] = {
    "completions": {},
    "logging": {},
    "prompts": {"listChanged": True},
    "resources": {"subscribe": True, "listChanged": True},
    "tools": {"listChanged": True},
}
"""What the endpoint announces while its upstreams are not known yet."""

MAX_LINE = 1 << 20
"""Bytes of a first line read before giving up on answering it early."""


@dataclass(frozen=True, slots=True)
class EarlyStart:
    """The first line read from stdin, and the id answered early (if it was)."""

    line: bytes
    answered: str | int | None = None


def _answer(message: dict[str, object]) -> dict[str, object] | None:
    params = message.get("params")
    if message.get("method") != "initialize" or not isinstance(params, dict):
        return None
    requested = params.get("protocolVersion")
    if not isinstance(requested, str) or requested > HANDSHAKE_VERSIONS[-1]:
        return None  # a later era (or garbage): the SDK answers it itself
    version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    return {
        "jsonrpc": "2.0",
        "id": message["id"],
        "result": {
            "protocolVersion": version,
            "capabilities": CAPABILITIES,
            "serverInfo": {"name": SERVER_NAME, "version": __version__},
            "instructions": INSTRUCTIONS,
        },
    }


def answer_initialize(read_fd: int = 0, write_fd: int = 1) -> EarlyStart | None:
    """Read stdin's first line; answer it on stdout if it is an `initialize`.

    Returns None when stdin ended before a line came.
    """
    line = bytearray()
    while not line.endswith(b"\n") and len(line) < MAX_LINE:
        byte = os.read(read_fd, 1)
        if not byte:
            break
        line += byte
    if not line:
        return None
    try:
        message = json.loads(line)
    except ValueError:
        return EarlyStart(bytes(line))
    if not isinstance(message, dict) or not isinstance(message.get("id"), str | int):
        return EarlyStart(bytes(line))
    answer = _answer(message)
    if answer is None:
        return EarlyStart(bytes(line))
    data = json.dumps(answer, separators=(",", ":")).encode() + b"\n"
    while data:
        data = data[os.write(write_fd, data) :]
    return EarlyStart(bytes(line), message["id"])
