"""Pinned definitions: trust on first use for what reaches the model.

A server (or a package update, or a compromised account) can change a tool's
description or schema after the user approved it: the "rug pull" behind most
tool-poisoning reports. The first time a connection lists its tools, prompts
and resource templates, a digest of each definition as the model sees it
(name, title, description, input and output schema, annotations; a prompt's
arguments) is written to `pins/NAME.json` in the state directory (0600 in a
0700 folder). A later listing is compared with it:

- a **changed** definition, or a **new** item on a connection already pinned,
  is news: one `tool_changed` event per item (kind, a readable diff with
  secrets masked, suspicious text found in it) and a WARNING log line;
- with `pin = "strict"` such an item is also **held back**: not listed, not
  callable (a clear error naming the change and `mcp-manager approve`),
  until approved;
- text that carries instructions to the model (`core.suspicious`) is told
  the same way, with what was found, even on first sight: under `strict`
  the item is held back, under `warn` it is pinned (and told once);
- `pin = "warn"` (the default) lists it all the same; `pin = "off"` skips
  all of it.

`mcp-manager approve NAME [ITEM...]` pins what the server lists now. A pin
file that cannot be read is never taken as "trust everything": the daemon
says so once and treats every item of that connection as changed (held under
`strict`) until an approval rewrites the file. The connection's own
`tools = {allow/deny}` filter applies first: hidden items are not pinned.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..core.events import ToolChanged
from ..core.redact import SecretRegistry, redact
from ..core.spec import ConnectionSpec
from ..core.suspicious import Finding, describe_findings, scan_definition
from ..core.text import meant
from ..files import write_private_json

__all__ = ["DIFF_LIMIT", "PIN_KINDS", "PinBook", "Review", "pinned_view"]

logger = logging.getLogger("manager.engine.pins")

PIN_KINDS = ("tools", "prompts", "templates")
"""What is pinned: tools, prompts and resource templates (by `uriTemplate`)."""

DIFF_LIMIT = 4000
"""Characters of a diff kept in an event (the rest is cut, and says so)."""

_VIEW_KEYS = {
    "tools": (
        "name",
        "title",
        "description",
        "inputSchema",
        "outputSchema",
        "annotations",
    ),
    "prompts": ("name", "title", "description", "arguments"),
    "templates": ("uriTemplate", "name", "title", "description", "mimeType"),
}
_KEY = {"tools": "name", "prompts": "name", "templates": "uriTemplate"}


def pinned_view(kind: str, definition: Mapping[str, object]) -> dict[str, object]:
    """What the model sees of one definition: the part that is pinned."""
    return {k: definition[k] for k in _VIEW_KEYS[kind] if k in definition}


def _digest(view: Mapping[str, object]) -> str:
    text = json.dumps(view, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Review:
    """What one listing of a connection looks like against its pins.

    Attributes:
        held: Per kind, the names held back (`strict` only).
        pending: Per kind, the names changed or new and not approved yet.
    """

    held: Mapping[str, frozenset[str]]
    pending: Mapping[str, frozenset[str]]


_NOTHING = Review(held={}, pending={})


@dataclass(frozen=True, slots=True)
class _Told:
    """One item that differs from its pin, as `review` found it."""

    kind: str
    name: str
    change: str
    digest: str
    findings: tuple[Finding, ...]
    held: bool


class PinBook:
    """The pins of every connection, one file each, and what changed.

    Args:
        directory: Where the pin files live (created on the first write).
        publish: Where `tool_changed` events go (the bus).
        secrets: Masked in every diff.
        read_only: Compare, never write (`mcp-manager pins check`): a first
            sight is not pinned.
    """

    def __init__(
        self,
        directory: Path,
        publish: Callable[[ToolChanged], object],
        secrets: SecretRegistry | None = None,
        *,
        read_only: bool = False,
    ) -> None:
        self.directory = directory
        self.read_only = read_only
        self._publish = publish
        self._secrets = secrets
        self._told: dict[
            tuple[str, str, str], str
        ] = {}  # (server, kind, name) -> digest
        self._broken: set[str] = set()  # servers whose pin file was unreadable, told
        self._current: dict[str, dict[str, dict[str, dict[str, object]]]] = {}
        self._changes: dict[str, dict[tuple[str, str], ToolChanged]] = {}

    # --- files ---------------------------------------------------------------------

    def _path(self, server: str) -> Path:
        return self.directory / f"{server}.json"

    def _load(self, server: str) -> dict[str, dict[str, dict[str, object]]] | None:
        """The pins of `server` (kind -> name -> view); {} if never pinned;
        None if the file exists but cannot be read (said once)."""
        path = self._path(server)
        try:
            text = path.read_text()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            self._unreadable(server, path, str(exc))
            return None
        try:
            data = json.loads(text)
            pins = data["pins"]
            if not isinstance(pins, dict) or not all(
                isinstance(table, dict)
                and all(isinstance(view, dict) for view in table.values())
                for table in pins.values()
            ):
                raise ValueError("no pins table of tables")
        except (ValueError, KeyError, TypeError) as exc:
            self._unreadable(server, path, f"not a pin file ({exc})")
            return None
        self._broken.discard(server)
        return {kind: dict(pins.get(kind, {})) for kind in PIN_KINDS}

    def _unreadable(self, server: str, path: Path, why: str) -> None:
        if server not in self._broken:  # said once
            self._broken.add(server)
            logger.warning(
                "%s: the pinned definitions in %s cannot be read: %s; every item "
                "counts as changed until `mcp-manager approve %s` rewrites it",
                server,
                path,
                why,
                server,
            )

    def pinned(self, server: str) -> bool:
        """Whether `server` has a pin file."""
        return self._path(server).exists()

    def _save(self, server: str, pins: Mapping[str, Mapping[str, object]]) -> None:
        if self.read_only:
            return
        path = self._path(server)
        try:
            write_private_json(path, {"version": 1, "pins": pins}, indent=1)
        except (
            OSError,
            TypeError,
            ValueError,
        ) as exc:  # boundary: nothing pinned is safer than a crash
            logger.warning("%s: cannot write its pins to %s: %s", server, path, exc)

    # --- reviews -------------------------------------------------------------------

    def review(
        self, spec: ConnectionSpec, lists: Mapping[str, Iterable[Mapping[str, object]]]
    ) -> Review:
        """Compare what `spec`'s server lists now with its pins.

        Args:
            spec: The connection (its `pin` mode and filters).
            lists: Per kind of `PIN_KINDS`, the definitions as listed.

        Returns:
            What is held back and what waits for an approval. News (a change
            or new item not told before) is published as `tool_changed`.
        """
        if spec.pin == "off":
            return _NOTHING
        server = spec.name
        current: dict[str, dict[str, dict[str, object]]] = {}
        for kind in PIN_KINDS:
            shown: dict[str, dict[str, object]] = {}
            for item in lists.get(kind, ()):
                name = str(item.get(_KEY[kind], ""))
                if kind == "tools" and not spec.exposure.tools.allows(name):
                    continue
                if kind == "prompts" and not spec.exposure.prompts.allows(name):
                    continue
                shown[name] = pinned_view(kind, item)
            current[kind] = shown
        self._current[server] = current
        pins = self._load(server)
        first_sight = pins == {}
        if first_sight:
            pins = {kind: {} for kind in PIN_KINDS}
        strict = spec.pin == "strict"
        held: dict[str, set[str]] = {kind: set() for kind in PIN_KINDS}
        pending: dict[str, set[str]] = {kind: set() for kind in PIN_KINDS}
        trusted: dict[str, dict[str, object]] = {kind: {} for kind in PIN_KINDS}
        changes = self._changes.setdefault(server, {})
        for kind, name in list(changes):
            if name not in current[kind]:
                # No longer listed (added, then removed): nothing to approve,
                # and `approve` could not take it (found by an audit).
                del changes[(kind, name)]
        for kind in PIN_KINDS:
            for name, view in current[kind].items():
                digest = _digest(view)
                old = None if pins is None else pins[kind].get(name)
                if old is not None and old.get("digest") == digest:
                    changes.pop((kind, name), None)
                    continue  # as approved: nothing to scan or tell
                findings = scan_definition(view)
                if first_sight:
                    if not (findings and strict):  # trusted on first use
                        trusted[kind][name] = {"digest": digest, "view": view}
                    if not findings:
                        continue
                    change = "suspicious"  # said even when trusted (warn)
                elif pins is None:
                    change = "unverified"
                else:
                    change = "new" if old is None else "changed"
                if name not in trusted[kind]:
                    pending[kind].add(name)
                    if strict:
                        held[kind].add(name)
                told = _Told(kind, name, change, digest, findings, strict)
                self._tell(server, told, old, view)
        if first_sight and any(current.values()):
            # Nothing listed yet (an on-demand server before its first start)
            # is no first use: its first real listing is.
            self._save(server, trusted)
        return Review(
            held={k: frozenset(v) for k, v in held.items() if v},
            pending={k: frozenset(v) for k, v in pending.items() if v},
        )

    def _tell(
        self,
        server: str,
        told: _Told,
        old: Mapping[str, object] | None,
        view: Mapping[str, object],
    ) -> None:
        before = old.get("view") if isinstance(old, Mapping) else None
        event = ToolChanged(
            name=server,
            item=told.name,
            item_kind=told.kind,
            change=told.change,
            diff=self._diff(before, view),
            suspicious=describe_findings(told.findings) if told.findings else "",
            held=told.held,
        )
        self._changes.setdefault(server, {})[(told.kind, told.name)] = event
        key = (server, told.kind, told.name)
        if self._told.get(key) == told.digest:
            return  # said already for this very definition
        self._told[key] = told.digest
        self._publish(event)

    def _diff(self, before: object, after: Mapping[str, object]) -> str:
        def lines(value: object) -> list[str]:
            if value is None:
                return []
            return json.dumps(value, indent=1, sort_keys=True, default=str).splitlines()

        text = "\n".join(
            difflib.unified_diff(
                lines(before), lines(after), "pinned", "listed now", lineterm="", n=2
            )
        )
        text = redact(text, self._secrets) if self._secrets is not None else text
        if len(text) > DIFF_LIMIT:
            text = (
                text[:DIFF_LIMIT] + f"\n... ({len(text) - DIFF_LIMIT} more characters)"
            )
        return text

    # --- what waits, approvals -----------------------------------------------------

    def pending(self, server: str | None = None) -> list[ToolChanged]:
        """The changes not approved yet (of `server`, or of every connection)."""
        names = sorted(self._changes) if server is None else [server]
        out: list[ToolChanged] = []
        for name in names:
            changes = self._changes.get(name, {})
            out.extend(changes[k] for k in sorted(changes))
        return out

    def approve(self, server: str, items: Iterable[str] = ()) -> list[str]:
        """Pin what `server` lists now: every item, or only `items` (names,
        or `uriTemplate`s). Returns the names that were not as approved
        (changed, new, suspicious): an item already pinned as it is listed
        is not approved again.

        Raises:
            KeyError: `server` has listed nothing yet, or an item it does not
                list (the message names what it lists).
        """
        current = self._current.get(server)
        if current is None:
            raise KeyError(f"{server} has listed nothing yet (is it connected?)")
        wanted = set(items)
        known = {name for kind in PIN_KINDS for name in current[kind]}
        unknown = sorted(wanted - known)
        if unknown:
            shown = ", ".join(sorted(known)) or "nothing"
            likely = meant(unknown[0], known) if len(unknown) == 1 else ""
            raise KeyError(
                f"{server} lists no {', '.join(repr(u) for u in unknown)}{likely} "
                f"(it lists: {shown})"
            )
        pins = self._load(server) or {kind: {} for kind in PIN_KINDS}
        approved = []
        for kind in PIN_KINDS:
            for name, view in current[kind].items():
                if wanted and name not in wanted:
                    continue
                digest = _digest(view)
                waited = self._changes.get(server, {}).pop((kind, name), None)
                if (
                    waited is not None
                    or pins[kind].get(name, {}).get("digest") != digest
                ):
                    approved.append(name)
                pins[kind][name] = {"digest": digest, "view": view}
        self._save(server, pins)
        self._broken.discard(server)
        return sorted(approved)

    def forget(self, server: str) -> None:
        """`server` was removed: drop what is only in memory (the file stays)."""
        self._current.pop(server, None)
        self._changes.pop(server, None)
