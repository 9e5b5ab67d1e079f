"""`max_output`: a result cut to fit, its note and link, and the whole kept.

Pure parts (`core.output.fit`, `engine.results.ResultStore`) and the options
that set the limit; the endpoint end to end is in
`tests/gateway/test_max_output.py`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from manager.core.errors import ConfigError
from manager.core.output import (
    RESULTS_PREFIX,
    TOKEN_CHARS,
    estimate_tokens,
    fit,
    results_uri,
)
from manager.core.profile import parse_profile
from manager.core.spec import applies_live, parse_spec
from manager.engine.results import ResultStore

URI = results_uri("abc123")


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _tokens(result: dict[str, Any]) -> int:
    return estimate_tokens(result)


def test_a_result_that_fits_is_left_alone() -> None:
    result = {"content": [_text("short")], "isError": False}
    assert fit(result, 1000, URI) is None


def test_a_long_text_is_cut_at_a_line_and_says_where_the_whole_is() -> None:
    lines = "\n".join(f"line {i}: " + "x" * 60 for i in range(20_000))
    result = {"content": [_text(lines)], "isError": False, "_meta": {"k": 1}}
    assert _tokens(result) > 200_000
    cut = fit(result, 20_000, URI)
    assert cut is not None
    assert _tokens(cut) <= 20_000
    assert cut["isError"] is False and cut["_meta"] == {"k": 1}
    shown, note, link = cut["content"]
    assert shown["text"].endswith("…")
    assert lines.startswith(shown["text"][:-1])
    assert shown["text"][:-1].rsplit("\n", 1)[-1].startswith("line ")  # whole lines
    assert note["type"] == "text" and URI in note["text"]
    assert "max_output" in note["text"] and "mcp-manager result abc123" in note["text"]
    assert link == {
        "type": "resource_link",
        "uri": URI,
        "name": "whole result",
        "mimeType": "application/json",
        "description": "The tool's whole result, as the server sent it.",
    }


def test_items_are_kept_in_order_while_they_fit_and_an_image_is_not_cut() -> None:
    image = {"type": "image", "data": "A" * 40_000, "mimeType": "image/png"}
    result = {"content": [_text("first"), image, _text("y " * 10_000)]}
    cut = fit(result, 2_000, URI)
    assert cut is not None and _tokens(cut) <= 2_000
    kinds = [item["type"] for item in cut["content"]]
    assert kinds[0] == "text" and cut["content"][0]["text"] == "first"
    assert "image" not in kinds  # too large to keep, never cut
    assert kinds[-2:] == ["text", "resource_link"]


def test_structured_content_is_kept_whole_or_left_out_never_cut() -> None:
    small = {"rows": [1, 2, 3]}
    result = {"content": [_text("z " * 50_000)], "structuredContent": small}
    cut = fit(result, 5_000, URI)
    assert cut is not None and cut["structuredContent"] == small
    big = {"rows": list(range(100_000))}
    result = {"content": [_text(json.dumps(big))], "structuredContent": big}
    cut = fit(result, 5_000, URI)
    assert cut is not None and "structuredContent" not in cut
    assert "structured content was left out" in cut["content"][-2]["text"]
    assert _tokens(cut) <= 5_000


def test_escaped_text_is_counted_as_the_client_reads_it() -> None:
    quoted = '"\\' * 50_000  # each character doubles in JSON
    cut = fit({"content": [_text(quoted)]}, 1_000, URI)
    assert cut is not None and _tokens(cut) <= 1_000
    assert estimate_tokens("abcd" * 10) == 10 == 40 // TOKEN_CHARS


def test_the_store_keeps_whole_results_bounded_in_bytes_and_time() -> None:
    now = [0.0]
    store = ResultStore(max_bytes=1_000, keep_seconds=60, clock=lambda: now[0])
    first = store.keep(json.dumps({"content": [_text("a" * 400)]}))
    second = store.keep(json.dumps({"content": [_text("b" * 400)]}))
    assert first != second and len(first) == 32
    assert json.loads(store.get(first) or "")["content"][0]["text"] == "a" * 400
    third = store.keep(json.dumps({"content": [_text("c" * 400)]}))  # > 1000 B
    assert store.get(first) is None and store.dropped == 1
    assert store.get(second) is not None and store.get(third) is not None
    now[0] = 61.0
    assert store.get(second) is None and len(store) == 0
    assert store.get("never") is None


def test_max_output_is_an_option_of_connections_and_profiles() -> None:
    spec = parse_spec("big", {"command": "x", "max_output": 20000}, {})
    assert spec.max_output == 20000
    assert parse_spec("big", {"command": "x"}, {}).max_output is None
    assert applies_live(spec, parse_spec("big", {"command": "x"}, {}))
    assert parse_profile("p", {"max_output": 8000}).max_output == 8000
    assert parse_profile("p", {}).max_output is None
    for bad in (0, 10, -5, 1.5, "20000", True):
        with pytest.raises(ConfigError, match="max_output must be a whole number"):
            parse_spec("big", {"command": "x", "max_output": bad}, {})
        with pytest.raises(ConfigError, match="max_output must be a whole number"):
            parse_profile("p", {"max_output": bad})
    assert RESULTS_PREFIX == "mcp-manager://results/"


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(st.text(min_size=0, max_size=3_000), min_size=1, max_size=8),
    limit=st.integers(min_value=500, max_value=3_000),
)
def test_a_cut_result_never_exceeds_its_limit(texts: list[str], limit: int) -> None:
    result = {"content": [_text(t) for t in texts], "isError": False}
    cut = fit(result, limit, URI)
    if cut is None:
        assert _tokens(result) <= limit
        return
    assert _tokens(cut) <= limit
    *shown, note, link = cut["content"]
    assert link["uri"] == URI and URI in note["text"]
    for item, original in zip(shown, texts, strict=False):
        assert original.startswith(item["text"].removesuffix("…"))
