"""Scripts that stay alive: `mcp_on` hooks, `mcp_call` completions, live changes."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from manager.core.errors import ConfigError
from manager.core.spec import ConnectionSpec
from manager.core.status import ConnectionStatus
from manager.lua import LiveScript, start_file
from manager.lua.api import PRINT_BURST
from manager.lua.live import RUNAWAY_LIMIT


class FakeLiveHost:
    """The running set, as a dict; what callbacks may change."""

    def __init__(self) -> None:
        self.specs: dict[str, ConnectionSpec] = {}

    def status(self, name: str) -> ConnectionStatus | None:
        return ConnectionStatus(name, state="connected") if name in self.specs else None

    def list(self) -> list[ConnectionStatus]:
        return [ConnectionStatus(n, state="connected") for n in sorted(self.specs)]

    def add(self, spec: ConnectionSpec) -> bool:
        changed = self.specs.get(spec.name) != spec
        self.specs[spec.name] = spec
        return changed

    def remove(self, name: str) -> bool:
        return self.specs.pop(name, None) is not None


def start(
    tmp_path: Path, source: str, **kwargs: object
) -> tuple[LiveScript, list[str]]:
    path = tmp_path / "startup.lua"
    path.write_text(source)
    printed: list[str] = []
    script = start_file(
        path,
        host=FakeLiveHost(),
        on_print=printed.append,
        **kwargs,  # type: ignore[arg-type]
    )
    return script, printed


EVENT = {"seq": 7, "time": 1.0, "kind": "connected", "name": "web", "tools": 3}


def test_hooks_get_matching_events_as_plain_tables(tmp_path: Path) -> None:
    script, printed = start(
        tmp_path,
        'mcp_on("connected", function(e) print(e.kind, e.name, e.tools) end)\n'
        'mcp_on("*", function(e) print("any", e.seq) end)\n'
        'mcp_on("removed", function(e) print("never") end)\n',
    )
    assert script.hook_kinds() == {"connected", "*", "removed"}
    assert script.dispatch(EVENT) == []
    assert printed == ["connected\tweb\t3", "any\t7"]


def test_a_failing_hook_is_reported_with_its_line_and_others_still_run(
    tmp_path: Path,
) -> None:
    script, printed = start(
        tmp_path,
        'mcp_on("connected", function(e)\n  error("boom " .. e.name)\nend)\n'
        'mcp_on("connected", function(e) print("second ran") end)\n',
    )
    errors = script.dispatch(EVENT)
    assert len(errors) == 1
    assert (errors[0].file, errors[0].line) == ("startup.lua", 2)
    assert errors[0].message == "boom web"
    assert printed == ["second ran"]


def test_a_runaway_hook_is_stopped_and_the_next_one_gets_a_fresh_budget(
    tmp_path: Path,
) -> None:
    script, printed = start(
        tmp_path,
        'mcp_on("connected", function(e)\n  while true do end\nend)\n'
        'mcp_on("connected", function(e) print("after") end)\n'
        'mcp_on("removed", function(e) pcall(function() while true do end end) end)\n',
        hook_budget=0.2,
    )
    started = time.monotonic()
    errors = script.dispatch(EVENT)
    assert time.monotonic() - started < 1.0
    assert [e.line for e in errors] == [2]
    assert "callback exceeded its time budget of 0.2 s" in errors[0].message
    assert printed == ["after"]
    errors = script.dispatch({**EVENT, "kind": "removed"})
    assert len(errors) == 1 and "time budget" in errors[0].message
    assert script.dispatch(EVENT)[0].line == 2  # still works afterwards


def test_a_loop_of_slow_string_functions_is_stopped_at_the_budget(
    tmp_path: Path,
) -> None:
    """A built-in call on a large string runs without the count hook, and a
    loop of them is only a few instructions: each checks the budget first
    (found by an audit: 100 gsubs on 5 MB ran 16 s and the config was
    applied). Their own errors keep their names."""
    script = tmp_path / "startup.lua"
    script.write_text(
        'local s = string.rep("a", 4e6)\nfor i = 1, 40 do\n  s:gsub("a", "b")\nend\n'
    )
    with pytest.raises(ConfigError, match="exceeded its time budget") as caught:
        start_file(script, host=FakeLiveHost(), time_budget=0.2)
    assert caught.value.line == 3
    script.write_text('print(("x"):rep())\n')
    with pytest.raises(ConfigError, match="bad argument #2 to 'rep'") as caught:
        start_file(script, host=FakeLiveHost())
    assert caught.value.line == 1


def test_a_hook_that_keeps_running_away_is_turned_off(tmp_path: Path) -> None:
    """Each runaway blocks the daemon's loop for the whole budget; a fleet
    sends events all the time, so a hook that loops on each would stall the
    daemon for good (found by an audit: 30 dead connections, `status` timing
    out, healthy servers dropped for missed pings)."""
    script, printed = start(
        tmp_path,
        'mcp_on("*", function(e)\n  while true do end\nend)\n'
        'mcp_on("connected", function(e) print("kept") end)\n',
        hook_budget=0.05,
    )
    for _ in range(RUNAWAY_LIMIT - 1):
        (error,) = script.dispatch(EVENT)
        assert "turned off" not in error.message
    (error,) = script.dispatch(EVENT)
    assert error.line == 2
    assert f"ran out of time {RUNAWAY_LIMIT} times" in error.message
    assert "turned off until startup.lua is loaded again" in error.message
    assert script.dispatch(EVENT) == []  # it no longer runs
    assert script.hook_kinds() == {"connected"}
    assert printed == ["kept"] * (RUNAWAY_LIMIT + 1)


def test_mcp_call_is_queued_and_its_callback_gets_result_or_error(
    tmp_path: Path,
) -> None:
    script, printed = start(
        tmp_path,
        'mcp_call("demo", "echo", {text = "hi"}, function(result, err)\n'
        "  if err then print('err', err) else print('ok', result.content[1].text) end\n"
        "end)\n",
    )
    calls = script.take_calls()
    assert [(c.server, c.tool, c.arguments) for c in calls] == [
        ("demo", "echo", {"text": "hi"})
    ]
    assert script.take_calls() == []
    result = {"content": [{"type": "text", "text": "hi"}], "isError": False}
    assert script.deliver(calls[0], result, None) is None
    assert script.deliver(calls[0], None, "demo is reconnecting") is None
    assert printed == ["ok\thi", "err\tdemo is reconnecting"]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('mcp_on("nope", function() end)', "must be an event kind"),
        ('mcp_on("connected", 42)', "fn must be a function"),
        ('mcp_call("demo", "echo", {})', "takes 4 arguments"),
        ('mcp_call("demo", "echo", {1, 2}, function() end)', "args must be a table of"),
        ('mcp_call(1, "echo", {}, function() end)', "server and tool must be strings"),
    ],
)
def test_bad_hook_and_call_arguments_fail_the_script(
    tmp_path: Path, source: str, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        start(tmp_path, "\n" + source)
    assert info.value.line == 2
    assert message in info.value.message


def test_callbacks_may_change_the_running_set(tmp_path: Path) -> None:
    path = tmp_path / "startup.lua"
    path.write_text(
        'mcp_on("disconnected", function(e)\n'
        '  mcp_add("backup", "http://127.0.0.1:9/mcp")\n'
        "  mcp_remove(e.name)\n"
        "end)\n"
    )
    host = FakeLiveHost()
    host.add(ConnectionSpec(name="web", transport="http", url="http://h/mcp"))
    script = start_file(path, host=host)
    assert script.dispatch({**EVENT, "kind": "disconnected"}) == []
    assert set(host.specs) == {"backup"}


def test_a_closed_script_runs_no_more_callbacks(tmp_path: Path) -> None:
    script, printed = start(
        tmp_path,
        'mcp_on("*", function(e) print("hook") end)\n'
        'mcp_call("demo", "echo", {}, function() print("call") end)\n',
    )
    calls = script.take_calls()
    script.close()
    assert script.closed
    assert script.dispatch(EVENT) == []
    assert script.deliver(calls[0], {}, None) is None
    assert printed == []


def test_an_async_job_awaits_calls_in_order(tmp_path: Path) -> None:
    script, printed = start(
        tmp_path,
        "mcp_async(function()\n"
        '  local r, err = mcp_await("demo", "echo", {text = "one"})\n'
        '  print("first", r.content[1].text, err)\n'
        '  local r2, err2 = mcp_await("down", "echo", {})\n'
        '  print("second", r2, err2)\n'
        "end)\n",
    )
    [job] = script.take_jobs()
    call, error = script.resume(job)
    assert error is None and call is not None
    assert (call.server, call.tool, call.arguments) == ("demo", "echo", {"text": "one"})
    result = {"content": [{"type": "text", "text": "one"}]}
    call, error = script.resume(job, result, None)
    assert error is None and call is not None and call.server == "down"
    assert script.resume(job, None, "down is reconnecting") == (None, None)
    assert printed == ["first\tone\tnil", "second\tnil\tdown is reconnecting"]


def test_a_failing_or_runaway_job_is_reported_with_its_line(tmp_path: Path) -> None:
    script, _ = start(
        tmp_path,
        'mcp_async(function()\n  mcp_await("a", "t", {})\n  error("job broke")\nend)\n'
        "mcp_async(function()\n  while true do end\nend)\n"
        "mcp_async(function() coroutine.yield(1) end)\n",
        hook_budget=0.2,
    )
    broke, loops, yields = script.take_jobs()
    assert script.resume(broke)[0] is not None
    _, error = script.resume(broke, {}, None)
    assert error is not None and (error.line, error.message) == (3, "job broke")
    _, error = script.resume(loops)
    assert error is not None and error.line == 6
    assert "callback exceeded its time budget" in error.message
    _, error = script.resume(yields)
    assert error is not None and "only mcp_await may wait" in error.message


def test_mcp_await_outside_a_job_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        start(tmp_path, '\nmcp_await("demo", "echo", {})')
    assert info.value.line == 2
    assert "only inside mcp_async" in info.value.message


def test_a_print_flood_is_cut_and_counted(tmp_path: Path) -> None:
    """`print` in a loop wrote 52 578 log lines in 2 s (found by an audit):
    past a burst of PRINT_BURST lines, the rest is dropped and counted, and
    said with the next line that gets through."""
    script, printed = start(
        tmp_path,
        f"for i = 1, {PRINT_BURST * 3} do print(i) end\n"
        'mcp_on("connected", function(e) print("later") end)\n',
    )
    assert printed[:PRINT_BURST] == [str(i) for i in range(1, PRINT_BURST + 1)]
    assert len(printed) < PRINT_BURST * 2
    before = len(printed)
    while len(printed) == before:  # the budget refills with time
        script.dispatch(EVENT)
    said = printed[before:]
    assert said[0].startswith("print: ") and "line(s) dropped" in said[0]
    assert said[-1] == "later"


BACKTRACKS = 'args.text:find("rm.*%-.*r.*f")'
"""A check whose one `string.find` backtracks for hours on a long argument
(found by an audit: 2,400 characters froze the daemon for 105 s, then the
check returned false and the call ran)."""


# Without the isolation the find never returns to Python: only the thread
# method of pytest-timeout can end the test (and its worker) then.
@pytest.mark.timeout(60, method="thread")
@pytest.mark.anyio
async def test_a_check_stuck_in_a_string_pattern_runs_out_and_the_runtime_goes_on(
    tmp_path: Path,
) -> None:
    script, _ = start(
        tmp_path,
        "seen = 0\n"
        'mcp_policy("deny", {check = function(args)\n'
        "  seen = seen + 1\n"
        f"  return {BACKTRACKS} ~= nil\n"
        "end})\n",
    )
    (rule,) = script.result.rules
    # An ordinary argument is judged as always, and twice the same way: what
    # a check changes (seen) is not kept, it is a function of the arguments.
    assert await script.judge(rule.check, {"text": "rm -r -f /"}) is True
    assert await script.judge(rule.check, {"text": "ls"}) is False
    # While it runs (and is killed), the loop goes on: twenty checks at once
    # held the daemon for 26 s when each was waited for on the loop (found
    # by a second audit).
    order: list[str] = []

    async def ticker() -> None:
        for _ in range(20):
            await anyio.lowlevel.checkpoint()
        order.append("loop turned")

    async def stuck() -> None:
        with pytest.raises(ConfigError, match="could not be interrupted") as caught:
            await script.judge(rule.check, {"text": "rm -r " * 3000})
        assert caught.value.file == "startup.lua"
        order.append("check ran out")

    async with anyio.create_task_group() as tg:
        tg.start_soon(stuck)
        tg.start_soon(ticker)
    assert order == ["loop turned", "check ran out"]
    assert await script.judge(rule.check, {"text": "rm -r -f /"}) is True


@pytest.mark.anyio
async def test_a_check_says_what_it_returned_and_where_it_failed(
    tmp_path: Path,
) -> None:
    script, _ = start(
        tmp_path,
        'mcp_policy("ask", {check = function(args) return {} end})\n'
        'mcp_policy("ask", {check = function(args) return "deny" end})\n'
        'mcp_policy("ask", {check = function(args) return args.a.b end})\n',
    )
    table, verdict, failing = script.result.rules
    assert await script.judge(table.check, {}) == "a table"
    assert await script.judge(verdict.check, {}) == "deny"
    with pytest.raises(ConfigError) as caught:
        await script.judge(failing.check, {})
    assert caught.value.line == 3 and "a nil value" in caught.value.message
