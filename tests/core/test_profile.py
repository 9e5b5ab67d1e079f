"""Profiles: `mcp_profile` in a script, its checks, and what a view shows."""

from __future__ import annotations

import pytest

from manager.core.errors import ConfigError
from manager.core.profile import Profile, parse_profile
from manager.lua import run_script

DEMO = 'mcp_add("github", {command = "x"}) mcp_add("fs", {command = "y"})\n'


def test_a_script_declares_profiles_in_order_with_their_line() -> None:
    result = run_script(
        DEMO
        + 'mcp_profile("coding", {servers = {"github"}, tools = {deny = {"*delete*"}},'
        ' discovery = "search"})\n'
        'mcp_profile("all")\n',
        file="startup.lua",
    )
    coding, everything = result.profiles
    assert coding.name == "coding" and coding.servers == ("github",)
    assert coding.tools.deny == ("*delete*",) and coding.discovery == "search"
    assert coding.where == "startup.lua:2"
    assert everything == Profile(name="all", where="startup.lua:3")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('mcp_profile("c", {servers = {"gitlab"}})', "no connection named 'gitlab'"),
        ('mcp_profile("c", {discovery = "magic"})', "discovery must be one of"),
        ('mcp_profile("c", {tools = {block = {"x"}}})', "unknown key 'block'"),
        ('mcp_profile("c", {servers = {}})', "servers is empty"),
        ('mcp_profile("c", {colour = "red"})', "unknown option 'colour'; allowed:"),
        ('mcp_profile("c", {server = {"a"}})', "(did you mean 'servers'?); allowed"),
        ('mcp_profile("no/slash")', "invalid profile name"),
        ("mcp_profile(42)", "profile name must be a string"),
    ],
)
def test_a_bad_profile_names_the_line_and_the_fix(line: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        run_script(DEMO + line + "\n", file="startup.lua")
    assert expected in caught.value.message
    assert caught.value.file == "startup.lua" and caught.value.line == 2


def test_a_profile_declared_twice_differently_names_both_lines() -> None:
    with pytest.raises(ConfigError, match="startup.lua:2 and startup.lua:3"):
        run_script(
            DEMO + 'mcp_profile("c", {servers = {"fs"}})\nmcp_profile("c")\n',
            file="startup.lua",
        )


def test_a_view_matches_exposed_or_upstream_names() -> None:
    profile = parse_profile(
        "p", {"servers": ["gh"], "tools": {"allow": ["gh__issue*", "list_*"]}}
    )
    assert profile.shows("tools", "gh", "gh__issue_create", "issue_create")
    assert profile.shows("tools", "gh", "gh__list_repos", "list_repos")
    assert not profile.shows("tools", "gh", "gh__delete_repo", "delete_repo")
    assert not profile.shows("tools", "fs", "fs__list_dir", "list_dir")
    deny = parse_profile("q", {"tools": {"deny": ["*delete*"]}})
    assert not deny.shows("tools", "gh", "gh__delete_repo", "delete_repo")
    assert deny.shows("tools", "fs", "fs__read", "read")
