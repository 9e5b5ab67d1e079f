"""Tool discovery: the three tools, the index they search, what the model reads.

The realistic tool list and queries are the bench's (`bench/discovery_tools.py`),
so the recall this suite asserts is the recall `bench/discovery.py` prints.
"""

from __future__ import annotations

import json
from typing import Any

import mcp.types as types
import pytest
from discovery_tools import QUERIES, TOOLS

from manager.gateway.discovery import (
    CALL_TOOL,
    DEFAULT_LIMIT,
    DESCRIBE_TOOL,
    DISCOVERY_TOOLS,
    MAX_LIMIT,
    SEARCH_TOOLS,
    SUMMARY_CHARS,
    Hit,
    ToolIndex,
    describe_result,
    nearest_result,
    search_result,
    unknown_tool_result,
)


def _tool(
    name: str, description: str | None = None, properties: dict[str, Any] | None = None
) -> types.Tool:
    return types.Tool(
        name=name,
        description=description,
        input_schema={"type": "object", "properties": properties or {}},
    )


@pytest.fixture(scope="module")
def index() -> ToolIndex:
    return ToolIndex(TOOLS)


# ------------------------------------------------------------ the three tools


def test_the_discovery_tools_are_named_search_describe_call() -> None:
    assert [tool.name for tool in DISCOVERY_TOOLS] == [
        "search_tools",
        "describe_tool",
        "call_tool",
    ]
    assert (SEARCH_TOOLS, DESCRIBE_TOOL, CALL_TOOL) == (
        "search_tools",
        "describe_tool",
        "call_tool",
    )


@pytest.mark.parametrize("tool", DISCOVERY_TOOLS, ids=lambda tool: tool.name)
def test_each_discovery_tool_is_a_valid_mcp_tool_on_the_wire(tool: types.Tool) -> None:
    wire = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    listed = types.ListToolsResult.model_validate({"tools": [wire]})
    assert listed.tools[0] == tool
    schema = wire["inputSchema"]
    assert schema["type"] == "object"
    assert set(schema["required"]) <= set(schema["properties"])
    assert tool.description and len(tool.description) > 80


def test_the_descriptions_lead_from_search_to_describe_to_call() -> None:
    search, describe, call = DISCOVERY_TOOLS
    assert search.description is not None
    assert DESCRIBE_TOOL in search.description and CALL_TOOL in search.description
    assert describe.description is not None and CALL_TOOL in describe.description
    assert call.description is not None and SEARCH_TOOLS in call.description


def test_search_tools_takes_a_required_query_and_a_bounded_limit() -> None:
    schema = DISCOVERY_TOOLS[0].input_schema
    assert schema["required"] == ["query"]
    assert schema["properties"]["query"]["type"] == "string"
    assert schema["properties"]["limit"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_LIMIT,
        "default": DEFAULT_LIMIT,
        "description": "How many tools to return.",
    }
    assert (DEFAULT_LIMIT, MAX_LIMIT) == (8, 50)


def test_describe_takes_a_name_and_call_takes_a_name_and_arguments() -> None:
    describe, call = DISCOVERY_TOOLS[1].input_schema, DISCOVERY_TOOLS[2].input_schema
    assert describe["required"] == ["name"]
    assert describe["properties"]["name"]["type"] == "string"
    assert call["required"] == ["name"]
    assert call["properties"]["name"]["type"] == "string"
    assert call["properties"]["arguments"]["type"] == "object"


def test_only_call_tool_may_change_anything() -> None:
    search, describe, call = DISCOVERY_TOOLS
    assert search.annotations is not None and search.annotations.read_only_hint
    assert describe.annotations is not None and describe.annotations.read_only_hint
    assert call.annotations is None


# ------------------------------------------------------------------ searching


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("create github issue", "github__create_issue"),
        ("open a bug on GitHub", "github__create_issue"),
        ("post a message to a slack channel", "slack__slack_post_message"),
        ("take a screenshot of the page", "playwright__browser_take_screenshot"),
        ("slowest queries", "postgres__get_top_queries"),
        ("transition jira issue", "jira__jira_transition_issue"),
        ("merge a GitLab merge request", "gitlab__merge_merge_request"),
    ],
)
def test_a_clear_query_ranks_its_tool_first(
    index: ToolIndex, query: str, first: str
) -> None:
    assert index.search(query)[0].name == first


def test_hits_are_ranked_by_falling_score(index: ToolIndex) -> None:
    hits = index.search("list issues", 20)
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(score > 0 for score in scores)


@pytest.mark.parametrize("limit", [1, 3, DEFAULT_LIMIT, 20])
def test_search_returns_at_most_limit_hits(index: ToolIndex, limit: int) -> None:
    assert len(index.search("list issues", limit)) == limit


def test_a_limit_above_the_maximum_is_cut_to_it(index: ToolIndex) -> None:
    assert len(index.search("get list search create", 1000)) == MAX_LIMIT


def test_the_default_limit_is_eight(index: ToolIndex) -> None:
    assert len(index.search("list issues")) == DEFAULT_LIMIT


@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_below_one_is_refused(index: ToolIndex, limit: int) -> None:
    with pytest.raises(ValueError, match="limit must be at least 1"):
        index.search("list issues", limit)


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_a_blank_query_is_refused_with_an_example(index: ToolIndex, query: str) -> None:
    with pytest.raises(ValueError, match="query is empty.*create github issue"):
        index.search(query)


@pytest.mark.parametrize("query", ["the of and", "xyzzy plugh", "?!"])
def test_a_query_no_tool_shares_a_word_with_finds_nothing(
    index: ToolIndex, query: str
) -> None:
    assert index.search(query) == []


def test_the_server_prefix_finds_that_servers_tools(index: ToolIndex) -> None:
    hits = index.search("sentry", MAX_LIMIT)
    assert len(hits) == 20
    assert {hit.name.split("__")[0] for hit in hits} == {"sentry"}


def test_the_servers_are_the_names_prefixes(index: ToolIndex) -> None:
    assert index.servers == (
        "filesystem",
        "gdrive",
        "github",
        "gitlab",
        "jira",
        "linear",
        "playwright",
        "postgres",
        "sentry",
        "slack",
    )


# ------------------------------------------------------------ what is indexed


def test_a_name_is_split_at_underscores_dots_dashes_and_camel_case() -> None:
    index = ToolIndex(
        [
            _tool("web__getHTTPResponse"),
            _tool("web__list.v2-items"),
            _tool("web__PurgeCache"),
        ]
    )
    assert index.search("http response")[0].name == "web__getHTTPResponse"
    assert index.search("items v2")[0].name == "web__list.v2-items"
    assert index.search("purge cache")[0].name == "web__PurgeCache"


def test_argument_names_and_descriptions_are_indexed_one_level_deep() -> None:
    nested = {
        "type": "object",
        "properties": {
            "checksum": {"type": "string", "description": "sha256 digest"},
            "deeper": {
                "type": "object",
                "properties": {"watermark": {"type": "string"}},
            },
        },
    }
    index = ToolIndex(
        [
            _tool("a__upload", "Upload.", {"blob": nested}),
            _tool(
                "a__batch",
                "Batch.",
                {"items": {"type": "array", "items": nested}},
            ),
            _tool("a__other", "Something else.", {"colour": {"type": "string"}}),
        ]
    )
    assert [hit.name for hit in index.search("checksum")] == ["a__batch", "a__upload"]
    assert [hit.name for hit in index.search("sha256 digest")] == [
        "a__batch",
        "a__upload",
    ]
    assert [hit.name for hit in index.search("colour")] == ["a__other"]
    assert index.search("watermark") == []


def test_titles_and_enum_values_are_indexed() -> None:
    titled = types.Tool(
        name="x__t1",
        title="Frobnicate widgets",
        input_schema={"type": "object"},
    )
    annotated = types.Tool(
        name="x__t2",
        input_schema={"type": "object"},
        annotations=types.ToolAnnotations(title="Defenestrate gadgets"),
    )
    enum = _tool("x__t3", "Review.", {"event": {"type": "string", "enum": ["APPROVE"]}})
    index = ToolIndex([titled, annotated, enum])
    assert index.search("frobnicate")[0].name == "x__t1"
    assert index.search("defenestrate")[0].name == "x__t2"
    assert index.search("approve")[0].name == "x__t3"


def test_a_brand_name_in_prose_stays_one_word() -> None:
    index = ToolIndex(
        [
            _tool("gitlab__create_issue", "Create an issue in a GitLab project."),
            _tool("hub__create_issue", "Create an issue in a git hub."),
        ]
    )
    assert index.search("GitLab issue")[0].name == "gitlab__create_issue"


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("who posted in #general", "chat__channel_history"),
        ("profile of @dana", "chat__user_profile"),
        ("edit config.yaml", "fs__edit_file"),
        ("open https://example.com/login", "web__navigate"),
        ("file a bug about the crash", "tracker__create_issue"),
    ],
)
def test_what_a_query_mentions_is_found_by_its_kind(query: str, first: str) -> None:
    index = ToolIndex(
        [
            _tool("chat__channel_history", "Get recent messages from a channel."),
            _tool("chat__user_profile", "Get a user's profile."),
            _tool("fs__edit_file", "Make line-based edits to a text file."),
            _tool("web__navigate", "Navigate to a URL."),
            _tool("tracker__create_issue", "Create a new issue."),
            _tool("tracker__get_issue", "Get an issue and its history."),
        ]
    )
    assert index.search(query)[0].name == first


def test_related_words_find_each_other() -> None:
    index = ToolIndex(
        [
            _tool("git__create_pull_request", "Create a new pull request."),
            _tool("git__list_branches", "List branches."),
            _tool("fs__list_directory", "List a directory."),
        ]
    )
    assert index.search("open a PR")[0].name == "git__create_pull_request"
    assert index.search("show the folder")[0].name == "fs__list_directory"


# ----------------------------------------------------------------- edge cases


def test_an_index_over_no_tools_finds_nothing_and_describes_nothing() -> None:
    index = ToolIndex([])
    assert len(index) == 0
    assert index.servers == ()
    assert index.search("anything") == []
    assert index.describe("github__create_issue") is None


def test_names_with_odd_characters_are_indexed_and_described() -> None:
    odd = [
        _tool("__"),
        _tool("-"),
        _tool("a"),
        _tool("ünïcode__tööl", "Handles ünïcode text."),
        _tool("srv__a.b-c_d", "Dotted."),
        _tool("no separator here", "Spaces in a name."),
    ]
    index = ToolIndex(odd)
    assert len(index) == len(odd)
    for tool in odd:
        assert index.describe(tool.name) is tool
    assert index.search("ünïcode")[0].name == "ünïcode__tööl"
    assert index.search("separator")[0].name == "no separator here"
    assert index.servers == ("srv", "ünïcode")


def test_an_index_whose_tools_have_no_words_finds_nothing() -> None:
    index = ToolIndex([_tool("__"), _tool("a")])
    assert index.search("anything") == []


def test_a_name_listed_twice_keeps_its_first_definition() -> None:
    first = _tool("s__t", "First definition.")
    index = ToolIndex([first, _tool("s__t", "Second definition.")])
    assert len(index) == 1
    assert index.describe("s__t") is first
    assert index.search("second") == []


def test_equal_scores_are_ordered_by_name() -> None:
    names = ["s__zeta", "s__alpha", "s__mid"]
    index = ToolIndex(_tool(name, "Same words.") for name in names)
    hits = index.search("same words")
    assert [hit.name for hit in hits] == sorted(names)
    assert len({hit.score for hit in hits}) == 1


def test_search_does_not_depend_on_the_order_tools_come_in(index: ToolIndex) -> None:
    reversed_index = ToolIndex(reversed(TOOLS))
    for query, _ in QUERIES:
        assert reversed_index.search(query, 10) == index.search(query, 10)
        assert index.search(query, 10) == index.search(query, 10)


# -------------------------------------------------------------------- results


def test_describe_returns_the_tool_with_its_full_schema(index: ToolIndex) -> None:
    tool = index.describe("github__create_issue")
    assert tool is not None
    assert tool is next(t for t in TOOLS if t.name == "github__create_issue")
    assert {"owner", "repo", "title", "body"} <= set(tool.input_schema["properties"])
    assert index.describe("github__nope") is None


def test_the_describe_result_is_the_tool_as_listed_without_client_details() -> None:
    tool = types.Tool(
        name="s__t",
        description="Does it.",
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
        output_schema={"type": "object"},
        annotations=types.ToolAnnotations(read_only_hint=True),
        _meta={"vendor/key": 1},
        icons=[types.Icon(src="https://example.com/i.png")],
    )
    assert json.loads(describe_result(tool)) == {
        "name": "s__t",
        "description": "Does it.",
        "inputSchema": {"type": "object", "properties": {"x": {"type": "integer"}}},
        "outputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
    }


def test_a_hit_summarizes_the_description_in_its_first_sentence(
    index: ToolIndex,
) -> None:
    hit = index.search("list issues gitlab", 1)[0]
    assert hit == Hit(
        "gitlab__list_issues",
        hit.score,
        "List issues in a GitLab project with filtering options",
        "gitlab",
        ("read-only",),  # its annotations say so
    )
    (read,) = [h for h in index.search("read text file", 5) if "read_text" in h.name]
    assert read.summary == (
        "Read the complete contents of a file from the file system as text."
    )


def test_a_first_sentence_does_not_end_at_an_abbreviation() -> None:
    index = ToolIndex([_tool("s__t", "Find things, e.g. Files or Folders. More.")])
    assert index.search("things")[0].summary == "Find things, e.g. Files or Folders."


def test_a_long_first_sentence_is_cut_at_a_word() -> None:
    long = "word " * 100
    index = ToolIndex([_tool("s__t", long.strip() + ". Second.")])
    (hit,) = index.search("word")
    assert len(hit.summary) <= SUMMARY_CHARS
    assert hit.summary.endswith("word…")


def test_a_tool_without_description_has_an_empty_summary() -> None:
    (hit,) = ToolIndex([_tool("s__bare_tool")]).search("bare")
    assert hit.summary == ""
    assert search_result([hit]).splitlines()[0] == "s__bare_tool (s)"
    (bare,) = ToolIndex([_tool("bare_tool")]).search("bare")  # prefix ""
    assert search_result([bare]).splitlines()[0] == "bare_tool"


def test_the_search_result_is_one_line_per_hit_and_what_to_do_next(
    index: ToolIndex,
) -> None:
    hits = index.search("create github issue", 3)
    lines = search_result(hits).splitlines()
    assert lines[:3] == [f"{hit.name} ({hit.server}): {hit.summary}" for hit in hits]
    assert lines[0].startswith("github__create_issue (github): Create a new issue")
    assert lines[3] == (
        "Call describe_tool(name) for a tool's arguments, "
        "then call_tool(name, arguments)."
    )


def test_a_hit_names_its_server_and_what_its_annotations_say() -> None:
    def annotated(name: str, **hints: bool) -> types.Tool:
        notes = types.ToolAnnotations.model_validate(hints)
        return _tool(name, "Rows of the table.").model_copy(
            update={"annotations": notes}
        )

    index = ToolIndex(
        [
            annotated("db__select_rows", read_only_hint=True),
            annotated("db__drop_rows", destructive_hint=True),
            annotated("db__insert_rows", destructive_hint=False),
        ],
        origins={"db__select_rows": ("warehouse", "select_rows")},
    )
    lines = search_result(index.search("rows", 3)).splitlines()
    assert sorted(lines[:3]) == [
        "db__drop_rows (db, destructive): Rows of the table.",
        "db__insert_rows (db): Rows of the table.",
        "db__select_rows (warehouse, read-only): Rows of the table.",
    ]


def test_a_query_that_shares_no_word_still_gets_the_closest_tools() -> None:
    index = ToolIndex(
        [
            _tool("git__git_commit", "Records changes to the repository"),
            _tool("slack__post_message", "Post a message to a channel"),
        ]
    )
    assert index.search("comitt") == []  # misspelt: no word in common
    near = index.nearest("comitt", 2)
    assert [hit.name for hit in near] == ["git__git_commit", "slack__post_message"]
    text = nearest_result(near, index.servers)
    assert text.startswith("No tool shares a word with that query.")
    assert "(from git, slack)" in text and "git__git_commit (git):" in text
    assert ToolIndex([]).nearest("anything") == []


def test_describe_takes_the_servers_own_name_where_only_one_has_it() -> None:
    index = ToolIndex(
        [
            _tool("gh__create_issue"),
            _tool("gl__create_issue"),
            _tool("gh__fork_repository"),
        ]
    )
    found = index.describe("fork_repository")
    assert found is not None and found.name == "gh__fork_repository"
    assert index.describe("create_issue") is None  # two servers have it
    assert index.describe("gl__create_issue") is not None
    # ... and says so, naming every one, not "no tool is named" (found by an
    # audit: four servers had `echo`, three were offered, one left out).
    shared = index.sharing("create_issue")
    assert shared == ("gh__create_issue", "gl__create_issue")
    assert unknown_tool_result("create_issue", (), shared) == (
        "'create_issue' names a tool of 2 servers: gh__create_issue, "
        "gl__create_issue. Use one of these names."
    )
    assert index.sharing("fork_repository") == () == index.sharing("nope")


def test_an_empty_search_result_says_what_to_try_and_names_the_servers() -> None:
    text = search_result([], ("github", "slack"))
    assert text.startswith("No tool matches.")
    assert text.endswith("Servers: github, slack.")
    assert "Servers" not in search_result([])


def test_an_unknown_name_points_back_to_search_with_suggestions() -> None:
    assert unknown_tool_result("nope") == (
        "No tool is named 'nope'. Use a name exactly as search_tools returns it."
    )
    index = ToolIndex([_tool("a__create_issue"), _tool("b__create_issue")])
    text = unknown_tool_result("create_issue", index.search("create_issue", 2))
    assert text.endswith("Did you mean: a__create_issue, b__create_issue?")


# --------------------------------------------------------------------- recall


def test_the_bench_data_is_200_tools_and_50_queries_with_known_answers() -> None:
    names = {tool.name for tool in TOOLS}
    assert len(TOOLS) == len(names) == 200
    assert len(QUERIES) == 50
    assert {expected for _, expected in QUERIES} <= names


def test_recall_at_3_on_the_bench_queries_is_at_least_0_9(index: ToolIndex) -> None:
    misses = [
        (query, expected)
        for query, expected in QUERIES
        if expected not in [hit.name for hit in index.search(query, 3)]
    ]
    recall = 1 - len(misses) / len(QUERIES)
    assert recall >= 0.9, f"recall@3 {recall:.2f}, misses: {misses}"
