"""Tool discovery: three tools in place of hundreds, and the index behind them.

An agent with ten servers sees two hundred tool definitions in every request.
A profile with `discovery = "search"` shows it `DISCOVERY_TOOLS` instead:
`search_tools` (ranked over every tool's name, description and argument names),
`describe_tool` (one tool's full definition) and `call_tool` (run it by its
exposed name). This module is the pure part: the three definitions, the
`ToolIndex` they read, and the text the model gets back. The gateway owns the
tool list, rebuilds the index when it changes and routes `call_tool`.

A tool is found by the words of its name (split at `__`, `_`, `-`, `.` and
camelCase, so the server's prefix is one of them), title, description, and its
arguments' names, descriptions and enum values (nested one level), plus a small
table of related words (`open a bug` finds `create_issue`). Queries and tools
go through the same words: lowercased, English stopwords out, stemmed. A
query's `#channel`, `@user`, `file.ext` and URLs also count as those words.
Scores are BM25 over all those words plus half of BM25 over name and title.

With meaning attached (`ToolIndex.attach_meaning`, `gateway.semantic`: a small
sentence-embedding model, optional), a tool is also found by what its name
and description mean: the words' ranking and the meaning's are fused by
score (`ToolIndex._fused`), so "give the money back" finds a refund tool that
shares no word with it.

The library: `bm25s`, maintained (releases through 2026) and light: numpy is
its one requirement (scipy, numba and PyStemmer are extras it runs without),
and it indexes words we split ourselves. `rank-bm25` is as light but has had
no release since 2022. Stemming is Snowball's English stemmer from
`snowballstemmer`, pure Python (PyStemmer is the same in C), behind a cache.
No network, no model.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import bm25s
import mcp.types as types
import numpy as np
import snowballstemmer
from bm25s.stopwords import STOPWORDS_EN_PLUS

# bm25s sets its own logger to DEBUG when imported, which would print a line
# per rebuild at the daemon's INFO level: back to inheriting the root's level.
logging.getLogger("bm25s").setLevel(logging.NOTSET)

__all__ = [
    "CALL_TOOL",
    "DEFAULT_LIMIT",
    "DESCRIBE_TOOL",
    "DISCOVERY_TOOLS",
    "MAX_LIMIT",
    "SEARCH_TOOLS",
    "SUMMARY_CHARS",
    "Hit",
    "ToolIndex",
    "describe_result",
    "nearest_result",
    "search_result",
    "unknown_tool_result",
]

SEARCH_TOOLS = "search_tools"
DESCRIBE_TOOL = "describe_tool"
CALL_TOOL = "call_tool"

DEFAULT_LIMIT = 8
"""Tools `search_tools` returns when the model gives no `limit`."""

MAX_LIMIT = 50
"""Most tools one search returns; a larger `limit` is cut to this."""

SUMMARY_CHARS = 160
"""Longest one-line summary in a search result, in characters."""

_SEPARATOR = "__"
"""Between a server's prefix and its tool's name (as `gateway.names` makes them)."""

DISCOVERY_TOOLS: tuple[types.Tool, ...] = (
    types.Tool(
        name=SEARCH_TOOLS,
        title="Search tools",
        description=(
            "Find the tools you need among the many this endpoint offers from "
            "several servers (they are not listed one by one). Say what you want "
            "to do in a few words, naming the service if you know it: 'create "
            "github issue', 'post slack message', 'slowest postgres queries'. "
            "Returns tool names, best match first, each with a one-line summary. "
            f"Next, call {DESCRIBE_TOOL} with a name to get its arguments, then "
            f"{CALL_TOOL} to run it. Search again with other words if nothing fits."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "description": "What you want to do, in a few words.",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                    "default": DEFAULT_LIMIT,
                    "description": "How many tools to return.",
                },
            },
            "required": ["query"],
        },
        annotations=types.ToolAnnotations(
            title="Search tools", read_only_hint=True, open_world_hint=False
        ),
    ),
    types.Tool(
        name=DESCRIBE_TOOL,
        title="Describe tool",
        description=(
            f"Get the full definition of a tool that {SEARCH_TOOLS} found: its "
            "description and the JSON Schema of its arguments. Pass the name "
            f"exactly as {SEARCH_TOOLS} returned it, then call {CALL_TOOL} with "
            "arguments that match the schema."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "description": f"A tool name from {SEARCH_TOOLS}.",
                },
            },
            "required": ["name"],
        },
        annotations=types.ToolAnnotations(
            title="Describe tool", read_only_hint=True, open_world_hint=False
        ),
    ),
    types.Tool(
        name=CALL_TOOL,
        title="Call tool",
        description=(
            f"Run a tool that {SEARCH_TOOLS} found, by its exact name, with "
            f"arguments that match the schema from {DESCRIBE_TOOL}. Returns that "
            "tool's own result."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "description": f"A tool name from {SEARCH_TOOLS}.",
                },
                "arguments": {
                    "type": "object",
                    "description": "The tool's arguments, as its schema asks.",
                    "default": {},
                },
            },
            "required": ["name"],
        },
    ),
)
"""What a client sees in `tools/list` under `discovery = "search"`."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One tool a search found.

    Attributes:
        name: The tool's exposed name, as `call_tool` takes it.
        score: BM25 score, or the fused score with meaning (higher is
            better); only comparable within a search.
        summary: The description's first sentence, at most `SUMMARY_CHARS`.
        server: The connection it comes from ("" if unknown).
        flags: What its annotations say about running it (`read-only`,
            `destructive`), for the model to weigh before calling.
    """

    name: str
    score: float
    summary: str
    server: str = ""
    flags: tuple[str, ...] = ()


_K1 = 1.2
_B = 0.75
"""BM25's term-frequency saturation and length normalization: Robertson's
usual values (bm25s defaults to k1 = 1.5, a little worse on the bench)."""

_NAME_WEIGHT = 3
"""Times a tool's name words count among all its words."""

_NAME_FIELD = 0.5
"""Weight of the name-and-title field's score, added to the all-words one."""

_WORDS_WEIGHT = 2.0
"""The words' say against the meaning's when both rank: a tool's fused score
is its meaning's similarity in standard deviations above the mean over all
tools, plus this times its words' score over the best words' score. Measured
on the tuning half of `bench/data/queries`: flat between 1.5 and 2.25."""


class _Field:
    """One BM25 index over the same field of every tool, in the index's order."""

    def __init__(self, documents: list[list[str]]) -> None:
        self._size = len(documents)
        self._bm25 = bm25s.BM25(k1=_K1, b=_B)
        # bm25s tells a corpus of words from one of ids by its first
        # document's first item: no document may be empty.
        self._bm25.index([doc or [""] for doc in documents], show_progress=False)

    def scores(self, words: list[str]) -> list[float]:
        """Each tool's score for these query words (0 where none occurs)."""
        ids = self._bm25.get_tokens_ids(words)
        if not ids:
            return [0.0] * self._size
        return [float(score) for score in self._bm25.get_scores(ids).tolist()]


class ToolIndex:
    """A search index over one tool list, rebuilt whenever the list changes.

    Two BM25 fields, summed: every word a tool is found by, and its name and
    title alone (a name is short and says what the tool does; in the first
    field alone a long schema would drown it). Building is cheap (tens of
    milliseconds for 300 tools, see `bench/discovery.py`), so the gateway
    builds a new index instead of updating one. A name listed twice keeps its
    first definition.

    Args:
        tools: The tools to index, by the names the endpoint exposes.
        origins: Exposed name -> (connection, the server's own tool name);
            by default read off the name (`PREFIX__TOOL`).
    """

    def __init__(
        self,
        tools: Iterable[types.Tool],
        origins: Mapping[str, tuple[str, str]] | None = None,
    ) -> None:
        by_name: dict[str, types.Tool] = {}
        for tool in tools:
            by_name.setdefault(tool.name, tool)
        # Sorted by name: ties are broken by index order, so by name.
        self._tools = tuple(by_name[name] for name in sorted(by_name))
        self._by_name = by_name
        self._origins = {
            name: (origins or {}).get(name) or _origin(name) for name in by_name
        }
        own: dict[str, list[str]] = {}
        for name, (_, tool_name) in self._origins.items():
            own.setdefault(tool_name, []).append(name)
        self._by_own_name = {
            tool_name: names[0] for tool_name, names in own.items() if len(names) == 1
        }
        self._shared_own_names = {
            tool_name: tuple(sorted(names))
            for tool_name, names in own.items()
            if len(names) > 1
        }
        self._grams: tuple[frozenset[str], ...] | None = None
        self._meaning: tuple[Any, Any] | None = None
        """(encoder, one unit vector per tool), once `attach_meaning` ran."""
        self._summaries = tuple(_summary(tool) for tool in self._tools)
        self._fields: tuple[tuple[_Field, float], ...] = ()
        if self._tools:
            self._fields = (
                (_Field([_document(tool) for tool in self._tools]), 1.0),
                (_Field([_name_document(tool) for tool in self._tools]), _NAME_FIELD),
            )

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def has_meaning(self) -> bool:
        """Whether searches also rank by meaning (`attach_meaning` ran)."""
        return self._meaning is not None

    def attach_meaning(self, encoder: Any) -> None:
        """Embed every tool's name and description with `encoder` (a
        `gateway.semantic.Encoder`); searches rank by meaning too from then
        on. Seconds for hundreds of tools: run it in a worker thread."""
        vectors = encoder.embed([_meaning_text(tool) for tool in self._tools])
        self._meaning = (encoder, vectors)

    @property
    def servers(self) -> tuple[str, ...]:
        """The server prefixes of the indexed names, sorted."""
        return tuple(sorted({_prefix(tool.name) for tool in self._tools} - {""}))

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> list[Hit]:
        """Rank the tools for a query.

        Args:
            query: What the model wants to do, in its own words.
            limit: At most this many hits (cut to `MAX_LIMIT`).

        Returns:
            The tools that share a word with the query, best first; equal
            scores in name order. Empty when no tool shares one.

        Raises:
            ValueError: The query is blank, or `limit` is below 1; the message
                says what to send instead.
        """
        if not query.strip():
            raise ValueError(
                "query is empty: say in a few words what you want to do, "
                "e.g. 'create github issue' or 'post slack message'"
            )
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        # Each distinct word once: saying "file" twice is not asking twice.
        words = list(dict.fromkeys(_tokens(query)))
        scores = [0.0] * len(self._tools)
        for field, weight in self._fields:
            for index, score in enumerate(field.scores(words)):
                scores[index] += weight * score
        found = [index for index, score in enumerate(scores) if score > 0]
        found.sort(key=lambda index: (-scores[index], index))
        limit = min(limit, MAX_LIMIT)
        if self._meaning is not None:
            return self._fused(query, scores, limit)
        return [self._hit(i, scores[i]) for i in found[:limit]]

    def _fused(self, query: str, words: list[float], limit: int) -> list[Hit]:
        """The meaning's scores and the words', summed on one scale.

        Scores, not ranks: where no tool shares a word with the query, or all
        share one weak word, the words' order is noise, and fusing ranks
        (reciprocal rank, tried first) gave that noise as much say as the
        meaning. Here a weak words' ranking moves little: each side counts by
        how far a tool stands out on it (`_WORDS_WEIGHT`)."""
        assert self._meaning is not None
        encoder, vectors = self._meaning
        similarity = vectors @ encoder.embed([query], remember=False)[0]
        spread = float(similarity.std()) or 1.0
        fused = (similarity - similarity.mean()) / spread
        best = max(words, default=0.0)
        if best > 0:
            fused = fused + (_WORDS_WEIGHT / best) * np.asarray(words)
        # Stable on the negated scores: equal scores keep index (name) order.
        order = np.argsort(-fused, kind="stable")[:limit]
        return [self._hit(int(i), float(fused[i])) for i in order]

    def nearest(self, query: str, limit: int = DEFAULT_LIMIT) -> list[Hit]:
        """The tools whose text is spelled closest to the query's, for a query
        that shares no word with any tool (`search` found nothing): overlap of
        letter trigrams, so a misspelling or a word in another form still
        lands somewhere. Empty only when nothing is indexed."""
        if self._grams is None:
            self._grams = tuple(_grams(_spelling(tool)) for tool in self._tools)
        wanted = _grams(query)
        scores = [
            len(wanted & grams) / (len(wanted | grams) or 1) for grams in self._grams
        ]
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        return [self._hit(i, scores[i]) for i in order[: min(limit, MAX_LIMIT)]]

    def _hit(self, index: int, score: float) -> Hit:
        tool = self._tools[index]
        return Hit(
            tool.name,
            round(score, 4),
            self._summaries[index],
            self._origins[tool.name][0],
            _flags(tool),
        )

    def describe(self, name: str) -> types.Tool | None:
        """The full definition of the tool with this name: as the endpoint
        exposes it, or the server's own name where only one server has it."""
        tool = self._by_name.get(name)
        if tool is None and name in self._by_own_name:
            tool = self._by_name[self._by_own_name[name]]
        return tool

    def sharing(self, name: str) -> tuple[str, ...]:
        """The exposed names of the tools whose server calls them `name`,
        when more than one server in view does (nothing to pick by it)."""
        return self._shared_own_names.get(name, ())


def search_result(hits: Sequence[Hit], servers: Sequence[str] = ()) -> str:
    """The text `search_tools` answers with: one line per hit, then what next.

    Args:
        hits: What `ToolIndex.search` found.
        servers: The server prefixes, named when nothing was found.

    Returns:
        Plain text, compact on purpose: a search saves tokens only if its
        answer is short.
    """
    if not hits:
        where = f" Servers: {', '.join(servers)}." if servers else ""
        return (
            "No tool matches. Try other words: the action and the object "
            f"('list pull requests'), or the service's name.{where}"
        )
    lines = [_line(hit) for hit in hits]
    lines.append(
        f"Call {DESCRIBE_TOOL}(name) for a tool's arguments, then "
        f"{CALL_TOOL}(name, arguments)."
    )
    return "\n".join(lines)


def nearest_result(hits: Sequence[Hit], servers: Sequence[str] = ()) -> str:
    """The text `search_tools` answers with when no tool shares a word with
    the query: the closest by spelling, and the servers they come from."""
    near = list(dict.fromkeys(hit.server for hit in hits if hit.server))
    where = f" Servers: {', '.join(servers)}." if servers else ""
    head = (
        "No tool shares a word with that query. Closest by spelling"
        + (f" (from {', '.join(near)})" if near else "")
        + f"; search again naming the action and the object, or a server.{where}"
    )
    return "\n".join([head, *(_line(hit) for hit in hits)])


def _line(hit: Hit) -> str:
    """`NAME (server, read-only): summary`."""
    about = ", ".join(part for part in (hit.server, *hit.flags) if part)
    head = f"{hit.name} ({about})" if about else hit.name
    return f"{head}: {hit.summary}" if hit.summary else head


def describe_result(tool: types.Tool) -> str:
    """The text `describe_tool` answers with: the tool as `tools/list` shows it.

    Returns:
        Compact JSON of the name, title, description, input and output schemas
        and annotations (not `_meta`, icons or execution, which are for the
        client, not the model).
    """
    data = tool.model_dump(
        mode="json",
        by_alias=True,
        exclude_none=True,
        include={
            "name",
            "title",
            "description",
            "input_schema",
            "output_schema",
            "annotations",
        },
    )
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def unknown_tool_result(
    name: str, hits: Sequence[Hit] = (), sharing: Sequence[str] = ()
) -> str:
    """The error text for a name that no indexed tool has.

    Args:
        name: The name the model sent.
        hits: Close matches to offer, e.g. `index.search(name, 3)`.
        sharing: The tools of several servers that all call themselves
            `name` (`ToolIndex.sharing`): the name is theirs, not unknown.
    """
    if sharing:
        return (
            f"{name!r} names a tool of {len(sharing)} servers: "
            f"{', '.join(sharing)}. Use one of these names."
        )
    text = (
        f"No tool is named {name!r}. Use a name exactly as {SEARCH_TOOLS} returns it."
    )
    if hits:
        text += " Did you mean: " + ", ".join(hit.name for hit in hits) + "?"
    return text


# ----------------------------------------------------------------- tokenizing

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[A-Za-z0-9]+")
_STOPWORDS = frozenset(STOPWORDS_EN_PLUS)
_STEMMER = snowballstemmer.stemmer("english")


_STEM_LOCK = threading.Lock()
"""Snowball's stemmer keeps its word in the object: one word at a time (an
index is built in a worker thread while the loop searches)."""


@lru_cache(maxsize=16384)
def _stem(word: str) -> str:
    with _STEM_LOCK:
        return str(_STEMMER.stemWord(word))


_URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_FILE = re.compile(r"[\w.-]*\.([a-z][a-z0-9]{1,4})", re.IGNORECASE)
_DOMAINS = frozenset({"com", "org", "net", "io", "dev", "app", "ai"})
_EDGES = "\"'`()[]{}<>,;:!?"
_IDIOMS = ((re.compile(r"\bfile (?=an? )", re.IGNORECASE), "create "),)
"""Words that mislead in a phrase, and what they mean there: to file a bug is
to create one (and not to touch a file)."""


def _mention(chunk: str) -> str:
    """The word a tool's text uses for what `chunk` is, or "".

    A query names things by their shape, not their kind: `#general` is a
    channel, `@dana` a user, `config.yaml` a file, `https://…` a URL.
    """
    if not any(mark in chunk for mark in "#@.:"):
        return ""
    chunk = chunk.strip(_EDGES).rstrip(".")
    if _URL.match(chunk):
        return "url"
    if _EMAIL.fullmatch(chunk):
        return "email user"
    if len(chunk) > 1 and chunk[1].isalpha():
        if chunk[0] == "#":
            return "channel"
        if chunk[0] == "@":
            return "user"
    file = _FILE.fullmatch(chunk)
    if file and file.group(1).lower() not in _DOMAINS:
        return "file"
    return ""


@lru_cache(maxsize=16384)
def _tokens(text: str, *, identifier: bool = False) -> tuple[str, ...]:
    """Words of `text`, lowercased, without stopwords, stemmed.

    Split at punctuation, and at case changes inside an identifier: always in
    a tool's name (`listIssues`, `ListIssues`), in prose only in a word that
    starts lowercase (`pullNumber`), so that `GitHub` stays `github`, the
    word its tools' names have. What a word refers to is added after it
    (`_mention`).
    """
    for pattern, meaning in _IDIOMS:
        text = pattern.sub(meaning, text)
    words: list[str] = []
    for chunk in text.split():
        for word in _WORD.findall(chunk):
            if identifier or word[0].islower():
                words.extend(_CAMEL.sub(" ", word).lower().split())
            else:
                words.append(word.lower())
        if not identifier:
            words.extend(_mention(chunk).split())
    return tuple(
        _stem(word) for word in words if len(word) > 1 and word not in _STOPWORDS
    )


_RELATED_WORDS: tuple[tuple[str, ...], ...] = (
    ("create", "new", "add", "open", "make"),
    ("list", "show", "browse", "enumerate"),
    ("get", "show", "fetch", "read", "view", "retrieve", "see"),
    ("search", "find", "look", "lookup", "locate"),
    ("update", "edit", "change", "modify", "set"),
    ("delete", "remove", "trash", "erase"),
    ("post", "send", "tell", "announce", "notify"),
    ("reply", "respond", "answer"),
    ("comment", "note", "remark"),
    ("issue", "bug", "ticket", "defect"),
    ("error", "exception", "crash"),
    ("directory", "folder", "dir"),
    ("schedule", "later", "remind", "reminder"),
    ("navigate", "go", "visit", "url"),
    ("screenshot", "capture", "image", "picture"),
    ("run", "execute", "exec"),
    ("retry", "rerun", "restart"),
    ("user", "member", "person", "people", "account"),
    ("status", "state", "done", "progress", "todo", "backlog"),
    ("log", "output"),
    ("react", "reaction", "emoji"),
    ("download", "export"),
    ("repository", "repo"),
    ("document", "doc"),
    ("spreadsheet", "sheet"),
    ("database", "db", "postgres", "postgresql"),
    ("ci", "pipeline", "workflow", "build", "job"),
    ("frequent", "often", "common"),
)
"""Words that ask for the same thing in tool use: a tool whose text has one is
found by the others (`open a bug` finds `create_issue`). General vocabulary of
developer tools, not any one server's."""

_RELATED_PHRASES: tuple[tuple[str, str], ...] = (
    ("pull request", "pr"),
    ("merge request", "mr"),
    ("work log", "worklog"),
)
"""Phrases and their short forms: a tool saying the phrase is found by both."""


def _related_table() -> dict[str, frozenset[str]]:
    table: dict[str, set[str]] = {}
    for group in _RELATED_WORDS:
        stems = {_stem(word) for word in group}
        for stem in stems:
            table.setdefault(stem, set()).update(stems - {stem})
    return {stem: frozenset(others) for stem, others in table.items()}


_RELATED = _related_table()
_PHRASES = tuple((_tokens(phrase), _stem(short)) for phrase, short in _RELATED_PHRASES)


def _expanded(tokens: list[str]) -> list[str]:
    """`tokens` plus, once each, the related words they do not already have."""
    present = set(tokens)
    extra: set[str] = set()
    for token in present:
        extra |= _RELATED.get(token, frozenset())
    for phrase, short in _PHRASES:
        if short in present:
            extra.update(phrase)
        elif phrase[0] in present and _has_phrase(tokens, phrase):
            extra.add(short)
    return tokens + sorted(extra - present)


def _has_phrase(tokens: Sequence[str], phrase: tuple[str, ...]) -> bool:
    width = len(phrase)
    return any(
        tokens[i] == phrase[0] and tuple(tokens[i : i + width]) == phrase
        for i in range(len(tokens) - width + 1)
    )


def _prefix(name: str) -> str:
    server, separator, _ = name.partition(_SEPARATOR)
    return server if separator else ""


def _origin(name: str) -> tuple[str, str]:
    """(server, own tool name) as a `PREFIX__TOOL` name says it."""
    server, separator, tool = name.partition(_SEPARATOR)
    return (server, tool) if separator else ("", name)


def _flags(tool: types.Tool) -> tuple[str, ...]:
    """What the tool's annotations (hints, not promises) say about running it."""
    notes = tool.annotations
    if notes is None:
        return ()
    if notes.read_only_hint:
        return ("read-only",)
    if notes.destructive_hint:
        return ("destructive",)
    return ()


def _meaning_text(tool: types.Tool) -> str:
    """What a tool's meaning is read from: its name as words, its description."""
    name = re.sub(r"[_\-.]+", " ", tool.name)
    return f"{name}: {tool.description or tool.title or ''}"


def _spelling(tool: types.Tool) -> str:
    """The text `nearest` compares a query with: name, title, description."""
    name = _CAMEL.sub(" ", tool.name).replace("_", " ").replace("-", " ")
    return " ".join((name, tool.title or "", (tool.description or "")[:300]))


def _grams(text: str) -> frozenset[str]:
    """The letter trigrams of each word of `text` (lowercased, padded)."""
    grams: set[str] = set()
    for word in _WORD.findall(text.lower()):
        padded = f" {word} "
        grams.update(padded[i : i + 3] for i in range(len(padded) - 2))
    return frozenset(grams)


def _schema_text(schema: Mapping[str, object], depth: int = 1) -> list[str]:
    """Property names, descriptions and enum values, nested `depth` levels."""
    parts: list[str] = []
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return parts
    for key, value in properties.items():
        parts.append(str(key))
        if not isinstance(value, Mapping):
            continue
        for field in ("title", "description"):
            text = value.get(field)
            if isinstance(text, str):
                parts.append(text)
        enum = value.get("enum")
        if isinstance(enum, list):
            parts.extend(str(item) for item in enum if isinstance(item, str))
        if depth > 0:
            items = value.get("items")
            for nested in (value, items):
                if isinstance(nested, Mapping):
                    parts.extend(_schema_text(nested, depth - 1))
    return parts


def _name_document(tool: types.Tool) -> list[str]:
    """The words of a tool's name and titles, plus the words related to them."""
    words = list(_tokens(tool.name, identifier=True))
    for title in (tool.title, tool.annotations.title if tool.annotations else None):
        words.extend(_tokens(title or ""))
    return _expanded(words)


def _document(tool: types.Tool) -> list[str]:
    """The words a tool is found by: its name's (weighted), its title's,
    its description's and its arguments', plus the words related to them."""
    words = list(_tokens(tool.name, identifier=True) * _NAME_WEIGHT)
    parts = [tool.title or "", tool.description or ""]
    if tool.annotations is not None and tool.annotations.title:
        parts.append(tool.annotations.title)
    parts.extend(_schema_text(tool.input_schema))
    for part in parts:
        # Part by part: arguments repeat across tools ("Repository owner"),
        # and the cache turns a rebuild into mostly lookups.
        words.extend(_tokens(part))
    return _expanded(words)


_SENTENCE_END = re.compile(
    r"(?<=[.!?])(?<![Ee]\.g\.)(?<![Ii]\.e\.)\s+(?=[A-Z0-9`'\"(\[])"
)
"""Where a description's first sentence ends (not at "e.g." or "i.e.")."""


def _summary(tool: types.Tool) -> str:
    text = " ".join((tool.description or tool.title or "").split())
    first = _SENTENCE_END.split(text, maxsplit=1)[0]
    if len(first) <= SUMMARY_CHARS:
        return first
    cut = first[: SUMMARY_CHARS - 1].rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:") + "…"
