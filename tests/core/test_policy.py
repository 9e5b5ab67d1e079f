"""Call policy rules (`core.policy`): parsed with clear errors, first match wins."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio
import pytest

from manager.core.errors import ConfigError
from manager.core.policy import (
    CallFacts,
    Decision,
    annotation_overrides,
    decide,
    hints,
    looks_secret,
    masked,
    masked_names,
    parse_rule,
)
from manager.core.redact import SecretRegistry
from manager.core.spec import parse_spec, spec_summary
from manager.engine.calllog import shape_of


def decided(
    rules: Any,
    facts: CallFacts,
    check: Callable[[object, Mapping[str, object]], object] | None = None,
    known: SecretRegistry | None = None,
) -> Decision:
    """`decide` with a plain function as the check (the daemon's is awaited)."""

    async def awaited(fn: object, arguments: Mapping[str, object]) -> object:
        assert check is not None
        return check(fn, arguments)

    return anyio.run(decide, rules, facts, awaited if check else None, known)


def _facts(
    tool: str = "delete_repo",
    server: str = "github",
    annotations: Mapping[str, object] | None = None,
    arguments: Mapping[str, object] | None = None,
    client: str = "claude-code",
    profile: str = "",
) -> CallFacts:
    return CallFacts(
        server=server,
        tool=tool,
        exposed=f"{server}__{tool}",
        client=client,
        profile=profile,
        annotations=annotations or {},
        arguments=arguments or {},
    )


def test_the_first_matching_rule_decides_and_none_matching_allows() -> None:
    rules = [
        parse_rule("deny", {"tool": "*delete*"}, "startup.lua:3"),
        parse_rule("ask", {"server": "git*", "destructive": True}, "startup.lua:4"),
        parse_rule("allow", {"read_only": True}, "startup.lua:5"),
    ]
    denied = decided(rules, _facts())
    assert (denied.verdict, denied.where) == ("deny", "startup.lua:3")
    # The exposed name matches too.
    by_exposed = [parse_rule("deny", {"tool": "github__create_*"}, "f:1")]
    assert decided(by_exposed, _facts("create_issue")).verdict == "deny"
    # No annotations: destructive by the protocol's default, so asked.
    assert decided(rules, _facts("create_issue")).verdict == "ask"
    read = _facts("list_issues", annotations={"readOnlyHint": True})
    assert decided(rules, read).where == "startup.lua:5"
    assert decided(rules, _facts("x", server="fs")).verdict == "allow"  # no rule
    assert decided(rules, _facts("x", server="fs")).rule is None
    catch_all = [*rules, parse_rule("ask", None, "startup.lua:9")]
    assert decided(catch_all, _facts("x", server="fs")).where == "startup.lua:9"


def test_clients_and_profiles_narrow_a_rule() -> None:
    rules = [
        parse_rule("deny", {"client": "cursor*", "profile": ""}, "f:1"),
        parse_rule("ask", {"profile": ["review", "ops"]}, "f:2"),
    ]
    assert decided(rules, _facts(client="cursor-vscode")).verdict == "deny"
    assert decided(rules, _facts(client="cursor", profile="ops")).where == "f:2"
    assert decided(rules, _facts(client="claude")).verdict == "allow"


def test_the_protocols_defaults_fill_what_a_server_left_out() -> None:
    assert hints({}) == (False, True, True)
    assert hints({"readOnlyHint": True, "destructiveHint": True}) == (True, False, True)
    assert hints({"destructiveHint": False, "openWorldHint": False}) == (
        False,
        False,
        False,
    )


def test_a_guard_matches_secret_looking_or_large_arguments_only() -> None:
    known = SecretRegistry()
    known.add(["hunter2-the-users-own"])
    guard = [parse_rule("deny", {"guard": {"secrets": True, "max_bytes": 200}}, "f:7")]
    plain = _facts(arguments={"text": "hello", "count": 3})
    assert decided(guard, plain, known=known).verdict == "allow"
    for arguments in (
        {"body": "ghp_" + "a" * 36},  # a GitHub token's shape
        {"note": "use hunter2-the-users-own please"},  # one the daemon holds
        {"api_key": "abcdefgh12345"},  # named like one
        {"nested": [{"password": "correct horse"}]},
        {"text": "x" * 300},  # too large
        {"key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n"},
        {"content": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n"},
        {"dsn": "postgres://app:s3cret-pw@db.internal:5432/prod"},
    ):
        said = decided(guard, _facts(arguments=arguments), known=known)
        assert said.verdict == "deny", arguments
        assert "hunter2" not in said.reason and "ghp_" not in said.reason
    assert looks_secret({"keyword": "a perfectly fine value"}, None) == ""
    # sizes are the wire's: compact UTF-8, 2 bytes for "é" (211 in all)
    accented = _facts(arguments={"text": "é" * 100})
    assert (
        decided(
            [parse_rule("deny", {"guard": {"max_bytes": 211}}, "f:8")], accented
        ).verdict
        == "allow"
    )
    assert (
        decided(
            [parse_rule("deny", {"guard": {"max_bytes": 210}}, "f:8")], accented
        ).verdict
        == "deny"
    )
    assert looks_secret({"url": "https://example.com:8443/a@b"}, None) == ""
    assert looks_secret({"text": "-----BEGIN CERTIFICATE-----"}, None) == ""


def test_a_check_may_match_pick_a_verdict_pass_or_fail_into_ask() -> None:
    def check(fn: object, arguments: Mapping[str, object]) -> object:
        assert callable(fn)
        return fn(arguments)

    def failing(arguments: Mapping[str, object]) -> object:
        raise ConfigError("startup.lua:12: attempt to index a nil value")

    rules = [
        parse_rule("ask", {"check": lambda a: a.get("path") == "/etc"}, "f:1"),
        parse_rule("allow", {"check": lambda a: a.get("mode")}, "f:2"),
        parse_rule("allow", {"check": failing, "tool": "boom"}, "f:3"),
    ]
    assert decided(rules, _facts(arguments={"path": "/etc"}), check).verdict == "ask"
    picked = decided(rules, _facts(arguments={"mode": "deny"}), check)
    assert (picked.verdict, picked.where) == ("deny", "f:2")
    assert decided(rules, _facts(arguments={}), check).verdict == "allow"
    assert decided(rules, _facts(arguments={}), check).rule is None  # all passed
    failed = decided(rules, _facts("boom"), check)
    assert failed.verdict == "ask" and "attempt to index a nil" in failed.reason
    odd = decided(rules, _facts(arguments={"mode": 7}), check)
    assert odd.verdict == "ask" and "returned 7" in odd.reason


@pytest.mark.parametrize(
    ("verdict", "match", "says"),
    [
        ("maybe", None, "must be one of allow, ask, deny"),
        ("deny", {"tools": "x"}, "unknown condition 'tools'"),
        ("deny", {"tool": 3}, "tool must be a glob"),
        ("deny", {"read_only": "yes"}, "read_only must be true or false"),
        ("ask", {"timeout": -1}, "timeout must be seconds"),
        ("deny", {"guard": {"size": 1}}, "unknown key 'size'"),
        ("deny", {"guard": {"max_bytes": 1.5}}, "whole number of bytes"),
        ("deny", "github", "must be a table of conditions"),
    ],
)
def test_a_bad_rule_says_what_to_write(verdict: str, match: object, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        parse_rule(verdict, match, "startup.lua:1")


def test_annotation_overrides_apply_per_tool_and_show_in_the_spec() -> None:
    spec = parse_spec(
        "fs",
        {"command": "fs-server"},
        {
            "annotations": {
                "read_*": {"readOnlyHint": True},
                "write_file": {"destructiveHint": True},
            }
        },
    )
    assert spec.annotated("read_text", {"readOnlyHint": False}) == {
        "readOnlyHint": True
    }
    assert spec.annotated("write_file", {"destructiveHint": False}) == {
        "destructiveHint": True
    }
    assert spec.annotated("other", {"title": "t"}) == {"title": "t"}
    assert spec_summary(spec)["annotations"] == {
        "read_*": {"readOnlyHint": True},
        "write_file": {"destructiveHint": True},
    }
    for bad, says in (
        ({}, "must be a table like"),
        ({"x": {"readonly": True}}, "'readonly' = True; use readOnlyHint"),
        ({"x": {"readOnlyHint": "yes"}}, "use readOnlyHint"),
    ):
        with pytest.raises(ConfigError, match=says):
            annotation_overrides("mcp_add('fs')", bad)


def test_what_a_question_shows_masks_anything_named_or_shaped_like_a_secret() -> None:
    known = SecretRegistry()
    known.add(["the-users-own-secret"])
    shown = masked(
        {
            "password": "abc",  # short, but named like one
            "nested": {"api_key": "k", "path": "/src/a.py"},
            "note": "ghp_" + "z" * 36,
            "text": "uses the-users-own-secret here",
            "content": "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB\n",
            "url": "https://me:pa55word@git.example.com/r.git",
        },
        known,
    )
    assert shown == {
        "password": "***",
        "nested": {"api_key": "***", "path": "/src/a.py"},
        "note": "***",
        "text": "uses *** here",
        "content": "***",
        "url": "***",
    }


def test_a_secret_as_an_argument_s_name_is_caught_and_never_shown() -> None:
    """A known secret used as a *key* passed `guard = {secrets = true}` and
    was shown whole by `pending`, the events and `log` (found by an audit)."""
    known = SecretRegistry()
    known.add(["supersecretvalue-XYZZY-123456"])
    arguments = {"text": "hi", "supersecretvalue-XYZZY-123456": 1}
    assert looks_secret(arguments, known) == "(an argument's name)"
    nested = {"opts": {"ghp_" + "a" * 36: True}}
    assert looks_secret(nested, None) == "(an argument's name)"
    shown = masked(arguments, known)
    assert shown == {"text": "hi", "***": 1}
    assert "XYZZY" not in shape_of(masked_names(arguments, known))
    assert masked_names({"text": "hi"}, known) == {"text": "hi"}
    two = masked_names(
        {"supersecretvalue-XYZZY-123456": 1, "ghp_" + "b" * 36: 2}, known
    )
    assert sorted(two) == ["***", "***2"]
