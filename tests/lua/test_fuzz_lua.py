"""Bad input into the Lua API: always a ConfigError with a message, never an escape.

Hypothesis builds random Lua values (tables, wrong types, deep nesting, huge and
unicode strings, functions, coroutines, tables with hostile metatables) and
passes them to every declaration function. Whatever happens, `run_script`
either returns or raises `ConfigError` with a non-empty message; any other
exception is a bug. Injection attempts (`python`, `os`, `io`, `load`, `debug`,
the string metatable, coroutine tricks) must find nothing to escape through.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from manager.core.errors import ConfigError
from manager.lua import ScriptResult, run_script

BUDGET = 0.5
"""Seconds of Lua time each fuzzed script may use."""

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)


def _lua_string(text: str) -> str:
    return json.dumps(text)  # a JSON string literal is a valid Lua string literal


_scalars = st.one_of(
    st.just("nil"),
    st.sampled_from(["true", "false", "0/0", "1/0", "-1/0", "math.maxinteger"]),
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.text(max_size=40).map(_lua_string),
    st.sampled_from(
        [
            '"http://127.0.0.1:9/mcp"',
            '"sse+http://127.0.0.1:9/sse"',
            '"http://u:p@127.0.0.1:9/mcp"',
            '"${env:HOME}"',
            '"${env:}"',
            '"${nope}"',
            '"stdio"',
            '"ok-name"',
            "string.rep('x', 100000)",
            "string.rep('é', 5000)",
            "function() return 1 end",
            "coroutine.create(function() end)",
            "print",
            "mcp_add",
            "setmetatable({}, {__index = function() error('idx') end})",
            "setmetatable({}, {__pairs = function() error('pairs') end})",
            "setmetatable({}, {__len = function() error('len') end})",
            "setmetatable({}, {__tostring = function() error('ts') end})",
            "setmetatable({}, {__gc = function() error('gc') end})",
        ]
    ),
)

_keys = st.one_of(
    st.sampled_from(
        [
            "command",
            "args",
            "env",
            "cwd",
            "url",
            "transport",
            "headers",
            "backoff",
            "initial",
            "cap",
            "connect_timeout",
            "call_timeout",
            "ping_interval",
            "ping_timeout",
            "hold",
            "stable_after",
            "enabled",
        ]
    ),
    st.text(max_size=10),
    st.integers(min_value=-3, max_value=5),
)


def _key(key: str | int) -> str:
    return f"[{_lua_string(key)}]" if isinstance(key, str) else f"[{key}]"


_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda items: "{" + ", ".join(items) + "}"),
        st.dictionaries(_keys, inner, max_size=4).map(
            lambda d: "{" + ", ".join(f"{_key(k)} = {v}" for k, v in d.items()) + "}"
        ),
    ),
    max_leaves=12,
)


def _run(source: str) -> ScriptResult | ConfigError:
    """Run `source`; a failure must be a ConfigError with a message and a line."""
    try:
        result = run_script(source, time_budget=BUDGET, getenv=lambda _: None)
    except ConfigError as exc:
        assert str(exc).strip(), f"empty ConfigError message for {source!r}"
        # Resource limits hit the whole script: no single line is to blame.
        unplaced = ("memory limit", "C stack overflow")
        if not any(words in str(exc) for words in unplaced):
            assert exc.line is not None and exc.line >= 1, f"no line: {source!r}"
        return exc
    assert len({spec.name for spec in result.specs}) == len(result.specs)
    return result


@FUZZ
@given(
    func=st.sampled_from(["mcp_add", "mcp_remove", "mcp_status", "mcp_list"]),
    args=st.lists(_values, max_size=4),
)
def test_any_arguments_to_the_api_give_a_result_or_a_config_error(
    func: str, args: list[str]
) -> None:
    _run(f"{func}({', '.join(args)})")


@FUZZ
@given(name=st.text(min_size=1, max_size=80), endpoint=_values, opts=_values)
def test_any_name_endpoint_and_options_give_a_result_or_a_config_error(
    name: str, endpoint: str, opts: str
) -> None:
    outcome = _run(f"mcp_add({_lua_string(name)}, {endpoint}, {opts})")
    if isinstance(outcome, ScriptResult):
        assert [spec.name for spec in outcome.specs] == [name]


@FUZZ
@given(source=st.text(max_size=200))
def test_random_source_text_gives_a_result_or_a_config_error(source: str) -> None:
    _run(source)


@pytest.mark.parametrize("depth", [31, 33, 200])
def test_deep_nesting_is_refused_with_a_config_error(depth: int) -> None:
    nested = "{" * depth + "}" * depth
    outcome = _run(f'mcp_add("deep", {{command = "x", args = {nested}}})')
    assert isinstance(outcome, ConfigError)


def test_a_huge_string_is_refused_or_accepted_but_never_crashes() -> None:
    command = _run('mcp_add("huge", {command = string.rep("x", 20 * 1024 * 1024)})')
    if isinstance(command, ScriptResult):
        assert command.specs[0].command == "x" * 20 * 1024 * 1024
    name = _run('mcp_add(string.rep("n", 1000000), "http://127.0.0.1:9/mcp")')
    # A connection name that long is refused (names are short identifiers).
    assert isinstance(name, ConfigError)


def test_a_huge_table_is_refused_with_a_config_error() -> None:
    outcome = _run(
        "local t = {} for i = 1, 20000 do t[i] = 'a' end\n"
        'mcp_add("big", {command = "x", args = t})'
    )
    assert isinstance(outcome, ConfigError)


ESCAPES = [
    "python.eval('1')",
    "python.import_module('os')",
    "os.execute('true')",
    "os.getenv('HOME')",
    "io.open('MARKER', 'w')",
    "load('return 1')()",
    "loadstring('return 1')()",
    "dofile('MARKER')",
    "loadfile('MARKER')",
    "require('os')",
    "package.loadlib('libc.so.6', 'system')",
    "debug.getinfo(1)",
    "debug.sethook()",
    "load(string.dump(print))()",
    "collectgarbage('count')",
    "rawget(_G, 'python').eval('1')",
    "getmetatable('').__index.python",
    "getmetatable('').__index.os.execute('true')",
    "(function() local s = getmetatable(''); s.__index = {} return s end)().x()",
    "getmetatable(mcp_add).__index",
    "debug.getupvalue(mcp_add, 1)",
    "mcp_add.__class__",
    "mcp_add('x', 'http://127.0.0.1:9/mcp').__class__",
    "coroutine.wrap(function() return python end)().eval('1')",
    "coroutine.wrap(function() return os end)().execute('true')",
    "select(2, coroutine.resume(coroutine.create(function() return io end)))"
    ".open('MARKER', 'w')",
    "_ENV.python.eval('1')",
    "setmetatable(_G, {__index = function(_, k) return k end}).python.eval('1')",
]


@pytest.mark.parametrize("attempt", ESCAPES)
def test_injection_attempts_find_nothing_to_escape_through(
    attempt: str, tmp_path: Path
) -> None:
    marker = tmp_path / "escaped"
    code = attempt.replace("MARKER", str(marker))
    # Direct: must be a ConfigError. Under pcall: must not have succeeded.
    outcome = _run(code)
    assert isinstance(outcome, ConfigError), f"{attempt} ran without error"
    probe = _run(
        f"local ok, v = pcall(function() return {code} end)\n"
        "if ok and v ~= nil and type(v) ~= 'string' and type(v) ~= 'number' then "
        "mcp_add('escaped', 'http://127.0.0.1:9/mcp') end"
    )
    if isinstance(probe, ScriptResult):
        names = [spec.name for spec in probe.specs]
        assert "escaped" not in names, f"{attempt} reached something"
    assert not marker.exists()


@pytest.mark.parametrize(
    "loop",
    [
        "while true do end",
        "while true do pcall(function() while true do end end) end",
        "local co = coroutine.wrap(function() while true do end end) co()",
        "local function f() return f() end f()",
        "local t = {} while true do t[#t + 1] = string.rep('x', 1024) end",
        "local s = 'x' while true do s = s .. s end",
    ],
)
def test_runaway_scripts_stop_with_a_config_error(loop: str) -> None:
    outcome = _run(loop)
    assert isinstance(outcome, ConfigError)
