"""Tests for manager.core.spec: validating declarations, resolving templates."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

import pytest

from manager.core.backoff import BackoffPolicy
from manager.core.errors import ConfigError
from manager.core.redact import SecretRegistry
from manager.core.resolve import resolve_spec
from manager.core.spec import (
    OPTION_DEFAULTS,
    ConnectionSpec,
    applies_live,
    changed_fields,
    display_endpoint,
    parse_spec,
    spec_summary,
    validate_name,
)

# ------------------------------------------------------------------ valid input


@pytest.mark.parametrize(
    ("endpoint", "opts", "expected"),
    [
        pytest.param(
            "http://127.0.0.1:8000/mcp",
            None,
            {"transport": "http", "url": "http://127.0.0.1:8000/mcp"},
            id="url-string-is-streamable-http",
        ),
        pytest.param(
            "https://example.com/mcp",
            None,
            {"transport": "http", "url": "https://example.com/mcp"},
            id="https-url-string",
        ),
        pytest.param(
            {"url": "http://h/mcp"},
            None,
            {"transport": "http", "url": "http://h/mcp"},
            id="url-table-defaults-to-http",
        ),
        pytest.param(
            {"url": "http://h/mcp", "transport": "http"},
            None,
            {"transport": "http"},
            id="url-table-explicit-http",
        ),
        pytest.param(
            {"url": "http://h:9/sse", "transport": "sse"},
            None,
            {"transport": "sse", "url": "http://h:9/sse"},
            id="url-table-sse",
        ),
        pytest.param(
            "http://[::1]:8000/mcp",
            None,
            {"url": "http://[::1]:8000/mcp"},
            id="ipv6-host",
        ),
        pytest.param(
            {
                "command": "npx",
                "args": ["-y", "some-mcp-server"],
                "env": {"B": "2", "A": "1"},
                "cwd": "/srv",
            },
            None,
            {
                "transport": "stdio",
                "command": "npx",
                "args": ("-y", "some-mcp-server"),
                "env": (("A", "1"), ("B", "2")),
                "cwd": "/srv",
                "url": "",
            },
            id="stdio-table-with-args-env-cwd",
        ),
        pytest.param(
            {"command": "  node  "},
            None,
            {"command": "node", "args": (), "env": (), "cwd": None},
            id="stdio-command-is-stripped",
        ),
        pytest.param(
            {"command": "srv", "args": [1, 2.5, 3.0, "x"]},
            None,
            {"args": ("1", "2.5", "3", "x")},
            id="numeric-args-become-strings",
        ),
        pytest.param(
            {"command": "srv", "args": {}, "env": []},
            None,
            {"args": (), "env": ()},
            id="empty-lua-tables-are-empty-lists-and-maps",
        ),
        pytest.param(
            {"command": "srv", "env": {"PORT": 8080, "RATIO": 0.5}},
            None,
            {"env": (("PORT", "8080"), ("RATIO", "0.5"))},
            id="numeric-env-values-become-strings",
        ),
        pytest.param(
            "http://h/mcp",
            {"headers": {"X-B": "2", "X-A": "1"}},
            {"headers": (("X-A", "1"), ("X-B", "2"))},
            id="headers-are-sorted-pairs",
        ),
        pytest.param(
            "http://h/mcp",
            {"headers": []},
            {"headers": ()},
            id="empty-headers-table",
        ),
        pytest.param(
            "http://h/mcp",
            {
                "connect_timeout": 3,
                "call_timeout": 1.5,
                "ping_interval": 0,
                "ping_timeout": 2,
                "hold": 0,
                "stable_after": 0,
                "enabled": False,
            },
            {
                "connect_timeout": 3.0,
                "call_timeout": 1.5,
                "ping_interval": 0.0,
                "ping_timeout": 2.0,
                "hold": 0.0,
                "stable_after": 0.0,
                "enabled": False,
            },
            id="every-option-in-opts",
        ),
        pytest.param(
            {"url": "http://h/mcp", "hold": 1, "headers": {"A": "b"}},
            None,
            {"hold": 1.0, "headers": (("A", "b"),)},
            id="options-inside-the-url-table",
        ),
        pytest.param(
            {"command": "srv", "enabled": False, "backoff": {"cap": 9}},
            None,
            {"enabled": False, "backoff": BackoffPolicy(initial=0.1, cap=9.0)},
            id="options-inside-the-stdio-table",
        ),
        pytest.param(
            "http://h/mcp",
            {"backoff": {"initial": 0.5}},
            {"backoff": BackoffPolicy(initial=0.5, cap=3.0)},
            id="backoff-cap-defaults-to-three",
        ),
        pytest.param(
            "http://h/mcp",
            {"backoff": {"initial": 2, "cap": 2}},
            {"backoff": BackoffPolicy(initial=2.0, cap=2.0)},
            id="backoff-initial-may-equal-cap",
        ),
        pytest.param(
            "http://h/mcp",
            {"call_timeout": 86400},
            {"call_timeout": 86400.0},
            id="duration-at-the-one-day-limit",
        ),
    ],
)
def test_valid_declarations_build_the_expected_spec(
    endpoint: object, opts: Mapping[str, object] | None, expected: dict[str, object]
) -> None:
    spec = parse_spec("srv", endpoint, opts)
    assert spec.name == "srv"
    assert {key: getattr(spec, key) for key in expected} == expected


def test_options_default_to_the_documented_values() -> None:
    spec = parse_spec("srv", "http://h/mcp")
    assert {key: getattr(spec, key) for key in OPTION_DEFAULTS} == OPTION_DEFAULTS
    assert spec.headers == ()
    assert spec.backoff == BackoffPolicy(initial=0.1, cap=3.0)


def test_connection_spec_field_defaults_match_option_defaults() -> None:
    spec = ConnectionSpec(name="x", transport="http")
    assert {key: getattr(spec, key) for key in OPTION_DEFAULTS} == OPTION_DEFAULTS


def test_option_in_endpoint_table_gives_the_same_spec_as_in_opts() -> None:
    inline = parse_spec("srv", {"url": "http://h/mcp", "call_timeout": 7})
    separate = parse_spec("srv", {"url": "http://h/mcp"}, {"call_timeout": 7})
    assert inline == separate


def test_the_same_declaration_twice_gives_equal_specs_whatever_the_key_order() -> None:
    a = parse_spec("s", {"command": "x", "env": {"A": "1", "B": "2"}})
    b = parse_spec("s", {"env": {"B": "2", "A": "1"}, "command": "x"})
    assert a == b
    assert hash(a) == hash(b)


def test_parse_does_not_mutate_the_callers_tables() -> None:
    endpoint: dict[str, object] = {"url": "http://h/mcp", "hold": 1}
    opts: dict[str, object] = {"call_timeout": 2}
    parse_spec("srv", endpoint, opts)
    assert endpoint == {"url": "http://h/mcp", "hold": 1}
    assert opts == {"call_timeout": 2}


@pytest.mark.parametrize(
    "name", ["a", "A", "0", "srv-1", "my_server.v2", "a" * 64, "x--y", "9lives"]
)
def test_valid_names_are_accepted(name: str) -> None:
    assert validate_name(name) == name
    assert parse_spec(name, "http://h/").name == name


@pytest.mark.parametrize(
    ("endpoint", "opts"),
    [
        pytest.param("http://${env:HOST}:8000/mcp", None, id="host"),
        pytest.param("http://127.0.0.1:${env:PORT}/mcp", None, id="port"),
        pytest.param("https://u:${env:PW}@h/mcp?k=${env:Q}", None, id="password-query"),
        pytest.param(
            "http://h/mcp",
            {"headers": {"Authorization": "Bearer ${env:TOKEN}"}},
            id="header",
        ),
        pytest.param(
            {
                "command": "${env:BIN}",
                "args": ["--token=${env:T}", "${env:A}${env:B}"],
                "env": {"KEY": "${env:_K_1}"},
                "cwd": "${env:HOME}/srv",
            },
            None,
            id="stdio-everywhere",
        ),
        pytest.param({"command": "x", "args": ["$HOME", "${"]}, None, id="no-template"),
    ],
)
def test_env_templates_are_accepted_and_kept_unresolved(
    endpoint: object, opts: Mapping[str, object] | None
) -> None:
    spec = parse_spec("srv", endpoint, opts)
    written = json.dumps([endpoint, opts])
    values = [spec.url, spec.command, *spec.args, *dict(spec.env).values()]
    for value in [*values, *dict(spec.headers).values(), spec.cwd or ""]:
        assert value in written


# ---------------------------------------------------------------- invalid input


@pytest.mark.parametrize(
    ("endpoint", "opts", "phrases"),
    [
        # --- endpoint shape
        pytest.param(42, None, ["endpoint must be a URL string or a table"], id="num"),
        pytest.param(None, None, ["endpoint must be", "got nil"], id="nil"),
        pytest.param(True, None, ["got a boolean"], id="bool"),
        pytest.param(
            {"url": "http://h/", "command": "x"},
            None,
            ["exactly one of 'url' or 'command'"],
            id="url-and-command",
        ),
        pytest.param({}, None, ["exactly one of 'url' or 'command'"], id="empty"),
        pytest.param(
            {"command": "x", "foo": 1},
            None,
            ["unknown endpoint key 'foo'", "allowed here:", "args"],
            id="unknown-stdio-key",
        ),
        pytest.param(
            {"url": "http://h/", "args": ["x"]},
            None,
            ["unknown endpoint key 'args'", "allowed here:", "transport"],
            id="stdio-key-in-url-table",
        ),
        pytest.param(
            {"command": "x", "transport": "sse"},
            None,
            ["unknown endpoint key 'transport'"],
            id="transport-in-stdio-table",
        ),
        pytest.param(
            {"command": "x", 1: "positional", "zz": 2},
            None,
            ["unknown endpoint key"],
            id="mixed-key-types",
        ),
        pytest.param(
            {"url": "http://h/", "hold": 1},
            {"hold": 2},
            ["option 'hold' given both", "keep one"],
            id="option-given-twice",
        ),
        pytest.param(
            "http://h/", ["x"], ["options must be a table", "got a table"], id="opts"
        ),
        pytest.param(
            "http://h/",
            {"retries": 3},
            ["unknown option 'retries'", "known options:", "connect_timeout"],
            id="unknown-option",
        ),
        pytest.param(
            "http://h/",
            {"conect_timeout": 3},
            ["unknown option 'conect_timeout' (did you mean 'connect_timeout'?);"],
            id="misspelt-option",
        ),
        pytest.param(
            {"command": "x", "argz": ["y"]},
            None,
            ["unknown endpoint key 'argz' (did you mean 'args'?); allowed here:"],
            id="misspelt-endpoint-key",
        ),
        pytest.param(
            {"comand": "x"},
            None,
            ["exactly one of 'url' or 'command'", "it has 'comand' (did you mean"],
            id="misspelt-command",
        ),
        # --- URLs
        pytest.param("ftp://h/x", None, ["bad URL 'ftp://h/x'", "http://"], id="ftp"),
        pytest.param("http:///mcp", None, ["bad URL", "HOST"], id="no-host"),
        pytest.param("not a url", None, ["bad URL"], id="garbage"),
        pytest.param("garbage!!", None, ["bad URL", "http://HOST"], id="garbage-word"),
        pytest.param("", None, ["bad URL"], id="empty-url"),
        pytest.param("//h/mcp", None, ["bad URL"], id="no-scheme"),
        pytest.param("localhost:8000", None, ["bad URL"], id="host-port-only"),
        pytest.param("http://[::1/mcp", None, ["bad URL", "IPv6"], id="bad-ipv6"),
        pytest.param("http://h:99999/", None, ["bad URL", "Port"], id="port-range"),
        pytest.param("http://h:abc/", None, ["bad URL", "Port"], id="port-garbage"),
        pytest.param(
            "http://my host/", None, ["bad URL", "whitespace"], id="space-in-host"
        ),
        pytest.param("http://h/\nx", None, ["bad URL", "control"], id="newline"),
        pytest.param({"url": 5}, None, ["url must be a string"], id="url-number"),
        pytest.param(
            {"url": "http://h/", "transport": "stdio"},
            None,
            ['transport must be "http"', '"sse"', "'stdio'"],
            id="bad-transport",
        ),
        # --- stdio
        pytest.param({"command": ""}, None, ["command is empty", "e.g."], id="empty"),
        pytest.param({"command": "   "}, None, ["command is empty"], id="blank"),
        pytest.param({"command": 5}, None, ["command must be a string"], id="cmd-num"),
        pytest.param(
            {"command": "a\x00b"}, None, ["must not contain NUL"], id="nul-command"
        ),
        pytest.param(
            {"command": "x", "args": "--flag"},
            None,
            ["args must be a list of strings", "got a string"],
            id="args-string",
        ),
        pytest.param(
            {"command": "x", "args": {"a": 1}},
            None,
            ["args must be a list of strings"],
            id="args-map",
        ),
        pytest.param(
            {"command": "x", "args": ["ok", True]},
            None,
            ["args[2] must be a string", "boolean"],
            id="args-bool",
        ),
        pytest.param(
            {"command": "x", "args": [["nested"]]},
            None,
            ["args[1] must be a string", "a table"],
            id="args-nested",
        ),
        pytest.param(
            {"command": "x", "args": ["a\x00"]},
            None,
            ["must not contain NUL"],
            id="nul-arg",
        ),
        pytest.param(
            {"command": "x", "env": "A=1"},
            None,
            ["env must be a table of strings", 'env={NAME="value"}'],
            id="env-string",
        ),
        pytest.param(
            {"command": "x", "env": {"A": True}},
            None,
            ["env.A must be a string", "boolean"],
            id="env-bool",
        ),
        pytest.param(
            {"command": "x", "env": {1: "x"}},
            None,
            ["env keys must be non-empty strings"],
            id="env-number-key",
        ),
        pytest.param(
            {"command": "x", "env": {"": "x"}},
            None,
            ["env keys must be non-empty strings"],
            id="env-empty-key",
        ),
        pytest.param(
            {"command": "x", "env": {"A": "\x00"}},
            None,
            ["env.A contains a forbidden character"],
            id="env-nul",
        ),
        pytest.param(
            {"command": "x", "cwd": 1}, None, ["cwd must be a string"], id="cwd"
        ),
        pytest.param(
            {"command": "x"},
            {"headers": {"A": "b"}},
            ["headers apply to http/sse endpoints only", "env="],
            id="headers-on-stdio",
        ),
        # --- options with the wrong type or range
        *[
            pytest.param(
                "http://h/",
                {key: value},
                [f"{key} must be", shown],
                id=f"{key}-{label}",
            )
            for key in OPTION_DEFAULTS
            if key != "enabled"
            for value, shown, label in [
                ("10", "a number of seconds", "string"),
                (True, "a number of seconds", "bool"),
                ({}, "a number of seconds", "table"),
                (-1, "at most 86400 seconds", "negative"),
                (float("inf"), "at most 86400 seconds", "inf"),
                (float("nan"), "at most 86400 seconds", "nan"),
                (86401, "at most 86400 seconds", "too-long"),
            ]
        ],
        *[
            pytest.param("http://h/", {key: 0}, [f"{key} must be > 0"], id=f"{key}-0")
            for key in ("connect_timeout", "call_timeout", "ping_timeout")
        ],
        pytest.param(
            "http://h/",
            {"enabled": "yes"},
            ["enabled must be true or false", "a string"],
            id="enabled-string",
        ),
        pytest.param(
            "http://h/",
            {"enabled": 1},
            ["enabled must be true or false", "a number"],
            id="enabled-number",
        ),
        pytest.param(
            "http://h/",
            {"lock": False},
            ["lock applies to stdio servers launched from a registry"],
            id="lock-on-http",
        ),
        pytest.param(
            {"command": "npx"},
            {"lock": "yes"},
            ["lock must be true or false", "a string"],
            id="lock-string",
        ),
        pytest.param(
            {"command": "npx"},
            {"min_age": -1},
            ["min_age must be a number of days from 0 to 365", "-1"],
            id="min-age-negative",
        ),
        pytest.param(
            {"command": "npx"},
            {"min_age": True},
            ["min_age must be a number of days"],
            id="min-age-bool",
        ),
        pytest.param(
            "http://h/",
            {"headers": "Authorization: x"},
            ["headers must be a table of strings"],
            id="headers-string",
        ),
        pytest.param(
            "http://h/",
            {"headers": {"X": ["a"]}},
            ["headers.X must be a string", "a table"],
            id="header-value-table",
        ),
        pytest.param(
            "http://h/",
            {"headers": {"X": "a\r\nEvil: 1"}},
            ["headers.X contains a forbidden character"],
            id="header-injection",
        ),
        pytest.param(
            "http://h/",
            {"backoff": 3},
            ["backoff must be a table like {initial=0.1, cap=3}", "a number"],
            id="backoff-number",
        ),
        pytest.param(
            "http://h/",
            {"backoff": {"max": 3}},
            ["unknown backoff key 'max'", "initial and cap"],
            id="backoff-unknown-key",
        ),
        pytest.param(
            "http://h/",
            {"backoff": {1: 2, "x": 3}},
            ["unknown backoff key"],
            id="backoff-mixed-keys",
        ),
        pytest.param(
            "http://h/",
            {"backoff": {"initial": 5, "cap": 1}},
            ["backoff.initial (5.0) must not exceed backoff.cap (1.0)"],
            id="backoff-initial-above-cap",
        ),
        pytest.param(
            "http://h/",
            {"backoff": {"initial": 0}},
            ["backoff.initial must be > 0"],
            id="backoff-initial-zero",
        ),
        pytest.param(
            "http://h/",
            {"backoff": {"cap": "3"}},
            ["backoff.cap must be a number of seconds"],
            id="backoff-cap-string",
        ),
        # --- templates
        *[
            pytest.param(
                endpoint,
                opts,
                [
                    f"{where}: unknown template ${{{inner}}}",
                    "the forms are ${env:NAME}, ${keyring:SERVICE/NAME}",
                ],
                id=f"template-{where}-{inner}",
            )
            for endpoint, opts, where, inner in [
                ("http://${X}/mcp", None, "url", "X"),
                ("http://${env:}/mcp", None, "url", "env:"),
                ("http://${ENV:X}/mcp", None, "url", "ENV:X"),
                ("http://${env:1X}/mcp", None, "url", "env:1X"),
                ("http://${env:A-B}/mcp", None, "url", "env:A-B"),
                ({"command": "${X}"}, None, "command", "X"),
                ({"command": "x", "args": ["a", "${HOME}"]}, None, "args[2]", "HOME"),
                ({"command": "x", "args": ["${env:X\n}"]}, None, "args[1]", "env:X\n"),
                ({"command": "x", "env": {"K": "${K}"}}, None, "env.K", "K"),
                ({"command": "x", "cwd": "${PWD}"}, None, "cwd", "PWD"),
                ("http://h/", {"headers": {"A": "${file:/x}"}}, "headers.A", "file:/x"),
            ]
        ],
    ],
)
def test_invalid_declarations_raise_config_error_naming_connection_and_fix(
    endpoint: object, opts: object, phrases: list[str]
) -> None:
    with pytest.raises(ConfigError) as info:
        parse_spec("srv", endpoint, opts)  # type: ignore[arg-type]
    message = str(info.value)
    assert message.startswith("mcp_add('srv'): ")
    assert info.value.connection == "srv"
    for phrase in phrases:
        assert phrase in message


@pytest.mark.parametrize(
    ("name", "phrases"),
    [
        ("", ["invalid connection name ''", "1-64 letters, digits"]),
        ("-lead", ["invalid connection name '-lead'", "starting with a letter"]),
        (".hidden", ["invalid connection name '.hidden'"]),
        ("a b", ["invalid connection name 'a b'"]),
        ("a/b", ["invalid connection name 'a/b'"]),
        ("a:b", ["invalid connection name 'a:b'"]),
        ("a" * 65, ["invalid connection name", "1-64"]),
        ("trailing\n", ["invalid connection name 'trailing\\n'"]),
        ("caf\u00e9", ["invalid connection name"]),
        (5, ["connection name must be a string", "a number (5)"]),
        (None, ["connection name must be a string", "nil"]),
        # '__' splits exposed names: 'a__b' + 'echo' would be a__b__echo,
        # which server a's tool 'b__echo' could take over (found by an audit)
        ("a__b", ["invalid connection name 'a__b'", "SERVER__TOOL", "'a_b'"]),
    ],
)
def test_bad_names_raise_config_error_saying_what_a_name_may_contain(
    name: object, phrases: list[str]
) -> None:
    with pytest.raises(ConfigError) as info:
        parse_spec(name, "http://h/")
    for phrase in phrases:
        assert phrase in str(info.value)
    if isinstance(name, str):
        assert info.value.connection == name


def test_a_bad_url_error_never_shows_the_password() -> None:
    with pytest.raises(ConfigError) as info:
        parse_spec("srv", "ftp://user:hunter2-pw@h/")
    assert "hunter2-pw" not in str(info.value)
    assert "user:***@h" in str(info.value)


def test_config_error_str_has_file_and_line_when_lua_sets_them() -> None:
    with pytest.raises(ConfigError) as info:
        parse_spec("srv", 42)
    info.value.file, info.value.line = "startup.lua", 7
    assert str(info.value).startswith("startup.lua:7: mcp_add('srv'): ")


# ------------------------------------------------------------------- resolving


ENV = {
    "HOST": "api.example.com",
    "PORT": "8443",
    "TOKEN": "tok-resolved-1",
    "PW": "pw-resolved-2",
    "BIN": "/opt/bin/server",
    "ARG": "arg-resolved-3",
    "DIR": "/var/lib/srv",
    "K": "env-resolved-4",
}


def test_resolve_spec_substitutes_templates_in_every_http_field() -> None:
    spec = parse_spec(
        "srv",
        "https://user:${env:PW}@${env:HOST}:${env:PORT}/mcp",
        {"headers": {"Authorization": "Bearer ${env:TOKEN}", "X-Static": "v4lue"}},
    )
    resolved = resolve_spec(spec, ENV.get, SecretRegistry())
    assert resolved.url == "https://user:pw-resolved-2@api.example.com:8443/mcp"
    assert dict(resolved.headers) == {
        "Authorization": "Bearer tok-resolved-1",
        "X-Static": "v4lue",
    }
    assert "${env:" in spec.url  # the declared spec is left as written


def test_resolve_spec_substitutes_templates_in_every_stdio_field() -> None:
    spec = parse_spec(
        "srv",
        {
            "command": "${env:BIN}",
            "args": ["--x=${env:ARG}", "${env:ARG}${env:PORT}", "plain"],
            "env": {"KEY": "${env:K}", "PLAIN": "1"},
            "cwd": "${env:DIR}/run",
        },
    )
    resolved = resolve_spec(spec, ENV.get, SecretRegistry())
    assert resolved.command == "/opt/bin/server"
    assert resolved.args == ("--x=arg-resolved-3", "arg-resolved-38443", "plain")
    assert resolved.env == (("KEY", "env-resolved-4"), ("PLAIN", "1"))
    assert resolved.cwd == "/var/lib/srv/run"


def test_resolve_spec_registers_resolved_values_and_implicit_secrets() -> None:
    secrets = SecretRegistry()
    spec = parse_spec(
        "srv",
        "https://user:literal-pw-5@h/mcp?a=${env:ARG}",
        {"headers": {"X-Api": "literal-header-6", "Authorization": "${env:TOKEN}"}},
    )
    resolve_spec(spec, ENV.get, secrets)
    for value in ("arg-resolved-3", "tok-resolved-1", "literal-header-6"):
        assert value in secrets
    assert "literal-pw-5" in secrets


def test_resolve_spec_registers_stdio_env_values_and_resolved_args() -> None:
    secrets = SecretRegistry()
    spec = parse_spec(
        "srv", {"command": "x", "args": ["${env:ARG}"], "env": {"A": "literal-env-7"}}
    )
    resolve_spec(spec, ENV.get, secrets)
    assert "arg-resolved-3" in secrets
    assert "literal-env-7" in secrets
    assert secrets.redact("x arg-resolved-3 literal-env-7") == "x *** ***"


def test_resolve_spec_registers_what_the_endpoint_masks_by_key() -> None:
    """A secret written in `args` is masked in the endpoint by its flag's
    name; a server that echoes it (its stderr, its error) shows the bare
    value, so it is masked by value too (found by an audit). So is a
    header's token without its scheme."""
    secrets = SecretRegistry()
    spec = parse_spec(
        "srv",
        {
            "command": "x",
            "args": [
                "--api-key",
                "ghp_ArgOnlySecret123",
                "--token=literal-tok-8",
                "GITHUB_TOKEN=literal-env-arg-9",
                "Authorization: Bearer hdr-arg-10",
                "--verbose",
                "plain-value-11",
            ],
        },
    )
    resolve_spec(spec, ENV.get, secrets)
    for value in (
        "ghp_ArgOnlySecret123",
        "literal-tok-8",
        "literal-env-arg-9",
        "hdr-arg-10",
    ):
        assert value in secrets, value
    assert "plain-value-11" not in secrets
    http = parse_spec(
        "web", "https://h/mcp", {"headers": {"Authorization": "Bearer sk-hdr789"}}
    )
    resolve_spec(http, ENV.get, secrets)
    assert secrets.redact("token sk-hdr789 refused") == "token *** refused"


def test_resolve_spec_without_templates_returns_an_equal_spec() -> None:
    spec = parse_spec("srv", {"command": "x", "args": ["a"]})
    assert resolve_spec(spec, ENV.get, SecretRegistry()) == spec


def test_resolved_values_are_not_expanded_again() -> None:
    spec = parse_spec("srv", {"command": "x", "args": ["${env:A}"]})
    resolved = resolve_spec(spec, {"A": "${env:B}", "B": "no"}.get, SecretRegistry())
    assert resolved.args == ("${env:B}",)


def test_resolve_spec_raises_config_error_naming_a_missing_variable() -> None:
    spec = parse_spec("srv", "http://h/mcp", {"headers": {"A": "${env:NOPE_VAR}"}})
    with pytest.raises(ConfigError) as info:
        resolve_spec(spec, dict[str, str]().get, SecretRegistry())
    message = str(info.value)
    assert info.value.connection == "srv"
    assert "mcp_add('srv')" in message
    assert "NOPE_VAR is not set" in message
    assert "${env:NOPE_VAR}" in message
    assert "set it in the environment" in message


def test_resolve_spec_registers_nothing_when_a_variable_is_missing() -> None:
    secrets = SecretRegistry()
    spec = parse_spec("srv", {"command": "x", "args": ["${env:ARG}", "${env:NOPE}"]})
    with pytest.raises(ConfigError):
        resolve_spec(spec, ENV.get, secrets)
    assert len(secrets) == 0


# --------------------------------------------------------------------- display

SECRET_MARK = "s3cr3t"

LEAKY_SPECS = [
    pytest.param(
        "https://user:s3cr3t-pw@h/mcp?api_key=s3cr3t-query&x=1",
        {
            "headers": {
                "Authorization": "Bearer s3cr3t-bearer",
                "X-Innocent-Name": "s3cr3t-value",
            }
        },
        id="http",
    ),
    pytest.param(
        {"url": "http://:s3cr3t-pw-only@h/sse", "transport": "sse"},
        {"headers": {"Cookie": "s3cr3t-cookie"}},
        id="sse",
    ),
    pytest.param(
        {
            "command": "npx",
            "args": [
                "--token=s3cr3t-flag",
                "--api-key",
                "s3cr3t-next-arg",
                "-e",
                "GITHUB_TOKEN=s3cr3t-docker",
                "--header",
                "Authorization: Bearer s3cr3t-header-arg",
                "https://u:s3cr3t-url-arg@h/x?token=s3cr3t-url-query",
            ],
            "env": {"API_TOKEN": "s3cr3t-env", "PLAIN": "s3cr3t-plain-env"},
        },
        None,
        id="stdio",
    ),
]


@pytest.mark.parametrize(("endpoint", "opts"), LEAKY_SPECS)
def test_display_endpoint_never_contains_a_secret(
    endpoint: object, opts: Mapping[str, object] | None
) -> None:
    shown = display_endpoint(parse_spec("srv", endpoint, opts))
    assert SECRET_MARK not in shown
    assert "***" in shown


@pytest.mark.parametrize(("endpoint", "opts"), LEAKY_SPECS)
def test_spec_summary_never_contains_a_secret(
    endpoint: object, opts: Mapping[str, object] | None
) -> None:
    summary = spec_summary(parse_spec("srv", endpoint, opts))
    assert SECRET_MARK not in json.dumps(summary)


@pytest.mark.parametrize(
    ("endpoint", "shown"),
    [
        ("http://127.0.0.1:8000/mcp", "http://127.0.0.1:8000/mcp"),
        ("http://u:${env:PW}@h/mcp", "http://u:***@h/mcp"),
        ({"command": "uvx", "args": ["srv", "--port", "9"]}, "uvx srv --port 9"),
        ({"command": "x", "args": ["--token", "${env:T}"]}, "x --token ***"),
        ({"command": "x", "args": ["--config=${env:CFG}"]}, "x --config=${env:CFG}"),
    ],
)
def test_display_endpoint_shows_the_endpoint_as_written_with_secrets_masked(
    endpoint: object, shown: str
) -> None:
    assert display_endpoint(parse_spec("srv", endpoint)) == shown


def test_spec_summary_lists_header_and_env_names_with_masked_values() -> None:
    http = spec_summary(parse_spec("a", "http://h/", {"headers": {"X-A": "v4lue"}}))
    stdio = spec_summary(
        parse_spec("b", {"command": "x", "env": {"E": "v4lue"}, "cwd": "/w"})
    )
    assert http["headers"] == {"X-A": "***"}
    assert "env" not in http
    assert stdio["env"] == {"E": "***"}
    assert stdio["cwd"] == "/w"
    assert "headers" not in stdio


def test_spec_summary_is_json_ready_and_has_every_option() -> None:
    summary = spec_summary(parse_spec("a", "http://h/", {"backoff": {"cap": 5}}))
    assert json.loads(json.dumps(summary)) == summary
    assert summary["name"] == "a"
    assert summary["transport"] == "http"
    assert summary["endpoint"] == "http://h/"
    assert summary["backoff"] == {"initial": 0.1, "cap": 5.0}
    for key in OPTION_DEFAULTS:
        assert summary[key] == OPTION_DEFAULTS[key]


# ------------------------------------------------------------- changed fields


BASE = parse_spec("srv", "http://h/mcp")


@pytest.mark.parametrize(
    ("new", "changed"),
    [
        (parse_spec("srv", "http://h/mcp"), ()),
        (parse_spec("srv", "http://h/other"), ("url",)),
        (
            parse_spec("srv", {"url": "http://h/mcp", "transport": "sse"}),
            ("transport",),
        ),
        (parse_spec("srv", "http://h/mcp", {"hold": 1}), ("hold",)),
        (
            parse_spec("srv", "http://h/mcp", {"backoff": {"cap": 9}, "hold": 1}),
            ("hold", "backoff"),
        ),
        (
            parse_spec(
                "srv", "http://h/mcp", {"headers": {"A": "b"}, "enabled": False}
            ),
            ("headers", "enabled"),
        ),
        (
            parse_spec("srv", {"command": "x"}),
            ("transport", "url", "command"),
        ),
    ],
)
def test_changed_fields_names_exactly_the_fields_that_differ_in_field_order(
    new: ConnectionSpec, changed: tuple[str, ...]
) -> None:
    assert changed_fields(BASE, new) == changed
    assert changed_fields(new, BASE) == changed


@pytest.mark.parametrize(
    ("old", "new", "live"),
    [
        pytest.param({}, {}, True, id="unchanged"),
        pytest.param({}, {"prefix": "p"}, True, id="prefix"),
        pytest.param({}, {"tools": {"deny": ["x"]}}, True, id="filter"),
        pytest.param({"roots": ["/a"]}, {"roots": ["/b"]}, True, id="other-roots"),
        pytest.param({}, {"roots": ["/a"]}, False, id="roots-offered-now"),
        pytest.param({"roots": ["/a"]}, {}, False, id="roots-no-longer-offered"),
        pytest.param({}, {"hold": 1}, False, id="hold"),
        pytest.param({}, {"prefix": "p", "hold": 1}, False, id="prefix-and-hold"),
    ],
)
def test_applies_live_only_for_what_needs_no_reconnect(
    old: dict[str, object], new: dict[str, object], live: bool
) -> None:
    before = parse_spec("srv", "http://h/mcp", old)
    after = parse_spec("srv", "http://h/mcp", new)
    assert applies_live(before, after) is live


def test_specs_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        BASE.url = "http://other/"  # type: ignore[misc]


def test_the_protocol_option_takes_an_era_and_names_the_choices() -> None:
    assert parse_spec("a", "http://h/mcp").protocol == "auto"
    spec = parse_spec("a", "http://h/mcp", {"protocol": "2026-07-28"})
    assert spec.protocol == "2026-07-28"
    with pytest.raises(ConfigError) as caught:
        parse_spec("a", "http://h/mcp", {"protocol": "2025-11-25"})
    message = str(caught.value)
    assert "mcp_add('a')" in message and "'auto', 'legacy', '2026-07-28'" in message
    assert caught.value.connection == "a"


def test_a_launch_lock_is_on_by_default_and_its_options_show_in_the_summary() -> None:
    plain = parse_spec("a", {"command": "npx", "args": ["-y", "pkg"]})
    assert plain.lock and plain.min_age == 0.0
    assert "lock" not in spec_summary(plain) and "min_age" not in spec_summary(plain)
    tuned = parse_spec("a", {"command": "npx"}, {"lock": False, "min_age": 7})
    assert (tuned.lock, tuned.min_age) == (False, 7.0)
    assert (
        spec_summary(tuned)["lock"] is False and spec_summary(tuned)["min_age"] == 7.0
    )


def test_a_prefix_with_a_double_underscore_is_refused() -> None:
    with pytest.raises(ConfigError, match="prefix 'x__y' holds '__'"):
        parse_spec("srv", "http://h/", {"prefix": "x__y"})


def test_a_ping_interval_that_would_hammer_the_server_is_refused() -> None:
    """ping_interval = 0.001 was accepted: a thousand pings a second (found by
    an audit). 0 still turns pings off; 0.1 s is the shortest."""
    with pytest.raises(ConfigError, match="would ping the server 1000 times a second"):
        parse_spec("srv", "http://h/", {"ping_interval": 0.001})
    assert parse_spec("srv", "http://h/", {"ping_interval": 0}).ping_interval == 0
    assert parse_spec("srv", "http://h/", {"ping_interval": 0.1}).ping_interval == 0.1


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("/opt/venv/bin/mcp-manager", ["attach", "--socket", "/run/x.sock"]),
        ("mcp-manager", ["stdio"]),
        ("python3", ["-m", "manager", "attach"]),
    ],
)
def test_a_connection_that_runs_mcp_manager_s_own_endpoint_is_refused(
    command: str, args: list[str]
) -> None:
    """The daemon attached to itself, its tool list growing without end
    (found by an audit, through `import`); written by hand it is refused."""
    with pytest.raises(ConfigError, match="would attach to itself") as caught:
        parse_spec("self", {"command": command, "args": args})
    assert caught.value.connection == "self"
    # Another subcommand, or a server merely named like it, is a server.
    parse_spec("runner", {"command": "mcp-manager", "args": ["--version"]})
    parse_spec("other", {"command": "python3", "args": ["-m", "manager_tools"]})
