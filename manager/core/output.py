"""Tool results that fit the model: `max_output`, and what a cut result says.

Clients refuse a tool result over their token limit (Claude Code's is 25 000)
and an agent's context fills with one log dump. A connection or a profile
with `max_output = N` (tokens) has a larger result cut before it reaches the
client: its content is kept in order while it fits, a text cut at a paragraph,
line or word boundary, and a note says how much was left and where the whole
is: a `resource_link` to `mcp-manager://results/ID` (`results_uri`), which the
daemon keeps for a while (`engine.results`). `structuredContent` is never cut
(half a JSON value is no value): it stays whole when it fits, else it is
left out and the note says so.

Tokens are estimated offline as characters / 4 (`TOKEN_CHARS`), the usual
rule for English text and JSON with the common tokenizers; the estimate, not a
tokenizer, is the contract. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "RESULTS_PREFIX",
    "compact",
    "TOKEN_CHARS",
    "estimate_tokens",
    "fit",
    "results_uri",
]

TOKEN_CHARS = 4
"""Characters per token, for the estimate."""

RESULTS_PREFIX = "mcp-manager://results/"
"""Where a whole result is, by id."""

FRAME = 256
"""Characters kept back for what the endpoint adds around a result after it
is cut (a 2026-07-28 result's `resultType` and `_meta` server info)."""

_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def results_uri(result_id: str) -> str:
    """The resource that returns the whole result kept under `result_id`."""
    return RESULTS_PREFIX + result_id


def compact(value: object) -> str:
    """`value` as compact JSON (what a client reads, and what is kept)."""
    return str(_compact(value))


def estimate_tokens(value: object) -> int:
    """Tokens of `value` as a client reads it (its compact JSON), estimated."""
    text = value if isinstance(value, str) else _compact(value)
    return -(-len(text) // TOKEN_CHARS)


def fit(
    result: Mapping[str, Any], limit: int, uri: str, whole: int | None = None
) -> dict[str, Any] | None:
    """`result` (a `CallToolResult` as JSON) cut to about `limit` tokens, with
    a note and a link to `uri` where the whole is; None if it fits already.
    `whole`: its tokens, when the caller counted them already.

    The cut result is at most `limit` tokens (estimated), with `FRAME`
    characters to spare for what the endpoint adds around it.
    """
    if whole is None:
        whole = estimate_tokens(result)
    if whole <= limit:
        return None
    link = {
        "type": "resource_link",
        "uri": uri,
        "name": "whole result",
        "mimeType": "application/json",
        "description": "The tool's whole result, as the server sent it.",
    }
    longest = _note(whole, whole, limit, uri, _LEFT_OUT)  # the most it can say
    reserve = len(_compact([_text(longest), link]))
    budget = max(0, limit * TOKEN_CHARS - reserve - FRAME)
    out: dict[str, Any] = {
        key: value
        for key, value in result.items()
        if key not in ("content", "structuredContent")
    }
    # The rest of the result, and the frame around the content: its key and a
    # comma per item (counted with each item below).
    budget -= len(_compact(out)) + len(',"content":[]')
    structured = result.get("structuredContent")
    structured_note = ""
    if structured is not None:
        size = len(_compact(structured)) + len(',"structuredContent":')
        if size <= budget // 2:
            out["structuredContent"] = structured
            budget -= size
        else:
            structured_note = _LEFT_OUT
    kept: list[Any] = []
    left = 0
    for item in result.get("content") or []:
        size = len(_compact(item)) + 1
        if size <= budget:
            kept.append(item)
            budget -= size
            continue
        if isinstance(item, Mapping) and item.get("type") == "text" and budget > 80:
            text = str(item.get("text", ""))
            cut = _cut(text, budget - (size - len(_compact(text))) - 3)
            if cut:
                kept.append({**item, "text": cut + "…"})
                left += len(text) - len(cut)
                budget = 0
                continue
        left += size
        budget = 0
    shown = max(whole - -(-left // TOKEN_CHARS), 0)
    kept.append(_text(_note(whole, shown, limit, uri, structured_note)))
    kept.append(link)
    out["content"] = kept
    return out


_LEFT_OUT = " Its structured content was left out (too large)."


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def _note(whole: int, shown: int, limit: int, uri: str, structured: str) -> str:
    return (
        f"[mcp-manager: this result is about {whole:,} tokens, more than the "
        f"{limit:,} allowed here (max_output); about {shown:,} are shown."
        f"{structured} The whole result: read the resource {uri} "
        "(resources/read), or run `mcp-manager result "
        f"{uri.removeprefix(RESULTS_PREFIX)}`.]"
    )


def _cut(text: str, room: int) -> str:
    """The longest start of `text` within `room` characters (JSON-escaped)
    that ends at a paragraph, else a line, else a word boundary."""
    if room <= 0:
        return ""
    # Escaping can only lengthen a text: find the longest prefix that fits.
    low, high = 0, min(len(text), room)
    while low < high:
        middle = (low + high + 1) // 2
        if len(_compact(text[:middle])) - 2 <= room:
            low = middle
        else:
            high = middle - 1
    head = text[:low]
    for boundary in ("\n\n", "\n", " "):
        at = head.rfind(boundary)
        if at > low // 2:
            return head[:at]
    return head
