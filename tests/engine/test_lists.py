"""Tests for manager.engine.lists: what on-demand servers listed, kept
between their sessions, for their endpoint only."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from manager.core.spec import parse_spec
from manager.engine.lists import ListMemory
from manager.transport.base import Catalog, ToolInfo

TOOL = {"name": "echo", "description": "Say it back.", "inputSchema": {}}


def test_a_listing_is_recalled_for_its_endpoint_only(tmp_path: Path) -> None:
    memory = ListMemory(tmp_path / "lists")
    spec = parse_spec("fs", {"command": "fs-server", "args": ["/srv"]}, {})
    catalog = Catalog(prompts=({"name": "greet"},))
    memory.keep(spec, (ToolInfo("echo", "Say it back.", TOOL),), catalog)
    tools, recalled = memory.recall(spec)
    assert [t.name for t in tools] == ["echo"] and tools[0].raw == TOOL
    assert recalled.prompts == ({"name": "greet"},)
    moved = parse_spec("fs", {"command": "fs-server", "args": ["/home"]}, {})
    assert memory.recall(moved) == ((), Catalog())


def test_what_is_not_a_listing_recalls_nothing(tmp_path: Path) -> None:
    memory = ListMemory(tmp_path)
    spec = parse_spec("fs", "http://127.0.0.1:9/mcp", {})
    memory.keep(spec, (), Catalog())
    path = tmp_path / "fs.json"
    kept = json.loads(path.read_text())
    path.write_text(json.dumps({**kept, "tools": [{"no": "name"}, 3], "prompts": 7}))
    assert memory.recall(spec) == ((), Catalog())
    path.write_text("not json")
    assert memory.recall(spec) == ((), Catalog())


def test_a_listing_that_cannot_be_written_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "lists"
    blocker.write_text("a file where the folder goes")
    spec = parse_spec("fs", "http://127.0.0.1:9/mcp", {})
    with caplog.at_level(logging.WARNING):
        ListMemory(blocker / "inner").keep(spec, (), Catalog())
    assert "fs: cannot remember its lists in" in caplog.text
