"""The call policy through the endpoint, in both eras: a deny is a tool error
naming its rule, an ask waits for the user (never the client), unanswered it
ends at its deadline, and the user's hints override a server's.

The gateway, the manager and the demo server (a subprocess over stdio) are the
real ones; rules are set as a loaded script sets them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
import httpx2
import mcp.types as types
import pytest
from mcp import Client
from mcp.client.client import ConnectMode
from memory import MemoryServers
from support.clients import initialize
from support.gateway import demo_memory, running_gateway, text_of

from manager.core.errors import PolicyDenied
from manager.core.events import ApprovalAsked, Event
from manager.core.policy import parse_rule
from manager.core.profile import parse_profile
from manager.engine.calllog import read
from manager.engine.policy import Caller
from manager.files import default_state_dir

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]

MODES: tuple[ConnectMode, ...] = ("legacy", "auto")
"""A handshake-era client and a 2026-07-28 one."""

RULES = (
    parse_rule("deny", {"tool": "*fail*"}, "startup.lua:3"),
    parse_rule("allow", {"read_only": True}, "startup.lua:4"),
    parse_rule("ask", {"server": "a", "timeout": 60}, "startup.lua:5"),
)


@pytest.mark.parametrize("mode", MODES)
async def test_a_deny_is_a_tool_error_and_an_ask_waits_for_the_user(
    mode: ConnectMode,
) -> None:
    spec = demo_memory("a", annotations={"echo": {"readOnlyHint": True}})
    asked_client: list[object] = []

    async def elicited(context: Any, params: Any) -> types.ElicitResult:
        asked_client.append(params)  # the approval must never come this way
        return types.ElicitResult(action="accept", content={})

    async with running_gateway([spec], wait_for=["a"], memory=MemoryServers()) as (
        gateway,
        manager,
        rec,
    ):
        manager.policy.set_rules(RULES, None)
        async with Client(
            str(gateway.url), mode=mode, elicitation_callback=elicited
        ) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            # The user's hint is what clients see, and what the rules read.
            hints = listed["a__echo"].annotations
            assert hints is not None and hints.read_only_hint is True
            echoed = await client.call_tool("a__echo", {"text": "hi"})
            assert text_of(echoed) == "hi"

            denied = await client.call_tool("a__fail", {"message": "x"})
            assert denied.is_error
            assert "denied by policy rule at startup.lua:3" in text_of(denied)

            got: list[types.CallToolResult] = []

            async def call() -> None:
                got.append(await client.call_tool("a__add", {"a": 2, "b": 3}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                asked = await rec.wait_for("approval_asked", "a")
                assert isinstance(asked, ApprovalAsked)
                assert (asked.tool, asked.rule) == ("add", "startup.lua:5")
                assert asked.arguments == '{"a": 2, "b": 3}'
                assert [a.approval for a in manager.policy.pending()] == [
                    asked.approval
                ]
                manager.policy.answer(asked.approval, "allow", "once", by="hud")
            (added,) = got
            assert not added.is_error and "5" in text_of(added)
            decided = await rec.wait_for("approval_decided", "a", after=asked.seq)
            assert (decided.verdict, decided.by) == ("allow", "hud")  # type: ignore[attr-defined]
        assert asked_client == []  # the client was never asked to approve
        manager.calls.flush()
    said = {r["tool"]: r["verdict"] for r in read()[-3:]}
    assert said == {
        "echo": "",
        "fail": "denied by rule startup.lua:3",
        "add": "allowed by hud (once), rule startup.lua:5",
    }


async def test_an_unanswered_ask_ends_at_its_deadline_and_an_answer_may_last() -> None:
    rules = (parse_rule("ask", {"tool": "add"}, "startup.lua:7"),)
    spec = demo_memory("a", call_timeout=1)
    async with running_gateway([spec], wait_for=["a"], memory=MemoryServers()) as (
        gateway,
        manager,
        rec,
    ):
        manager.policy.set_rules(rules, None)
        async with Client(str(gateway.url)) as client:
            late = await client.call_tool("a__add", {"a": 1, "b": 1})
            assert late.is_error and "not approved within 1 s" in text_of(late)
            decided = await rec.wait_for("approval_decided", "a")
            assert decided.by == "deadline"  # type: ignore[attr-defined]
            assert manager.policy.pending() == []

            got: list[types.CallToolResult] = []

            async def call() -> None:
                got.append(await client.call_tool("a__add", {"a": 1, "b": 2}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                asked = await rec.wait_for("approval_asked", "a", after=decided.seq)
                manager.policy.answer(
                    asked.approval,  # type: ignore[attr-defined]
                    "allow",
                    "session",
                    by="cli",
                )
            assert not got[0].is_error
            # The same client's next call is not asked again.
            again = await client.call_tool("a__add", {"a": 1, "b": 3})
            assert not again.is_error
            remembered = rec.of("approval_decided", "a")[-1]
            assert remembered.by == "remembered"  # type: ignore[attr-defined]
        with pytest.raises(ValueError, match="a deny is for this call only"):
            manager.policy.answer("nope", "deny", "always", by="cli")
        with pytest.raises(KeyError):
            manager.policy.answer("nope", "allow", "once", by="cli")


async def test_removing_a_server_ends_the_questions_of_its_waiting_calls() -> None:
    """A call waiting for approval when its server is removed ends at once,
    saying why; its question is gone (no `allow` of a call that cannot run)."""
    rules = (parse_rule("ask", {"tool": "add", "timeout": 600}, "startup.lua:7"),)
    async with running_gateway(
        [demo_memory("a")], wait_for=["a"], memory=MemoryServers()
    ) as (gateway, manager, rec):
        manager.policy.set_rules(rules, None)
        async with Client(str(gateway.url)) as client:
            got: list[types.CallToolResult] = []

            async def call() -> None:
                got.append(await client.call_tool("a__add", {"a": 1, "b": 2}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                asked = await rec.wait_for("approval_asked", "a")
                manager.remove("a")
            (ended,) = got
            assert ended.is_error
            assert "a was removed from the config while the call waited" in (
                text_of(ended)
            )
            assert manager.policy.pending() == []
            decided = await rec.wait_for("approval_decided", "a", after=asked.seq)
            assert (decided.verdict, decided.by) == ("deny", "removal")  # type: ignore[attr-defined]
            with pytest.raises(KeyError):
                manager.policy.answer(asked.approval, "allow", "once", by="cli")  # type: ignore[attr-defined]


async def test_a_search_profiles_call_tool_is_judged_as_the_real_tool() -> None:
    """`call_tool` carries no annotations of its own: the rules judge the tool
    behind it, and `describe_tool` shows that tool's hints as overridden."""
    spec = demo_memory("a", annotations={"echo": {"readOnlyHint": True}})
    rules = (
        parse_rule("allow", {"read_only": True}, "startup.lua:2"),
        parse_rule("deny", {"profile": "agent"}, "startup.lua:3"),
    )
    async with running_gateway([spec], wait_for=["a"], memory=MemoryServers()) as (
        gateway,
        manager,
        _,
    ):
        manager.policy.set_rules(rules, None)
        manager.profiles = {"agent": parse_profile("agent", {"discovery": "search"})}
        async with Client(f"{gateway.url}/agent") as client:
            described = await client.call_tool("describe_tool", {"name": "a__echo"})
            shown = json.loads(text_of(described))
            assert shown["annotations"] == {"readOnlyHint": True}
            echoed = await client.call_tool(
                "call_tool", {"name": "a__echo", "arguments": {"text": "hi"}}
            )
            assert text_of(echoed) == "hi"
            denied = await client.call_tool(
                "call_tool", {"name": "a__add", "arguments": {"a": 1, "b": 2}}
            )
            assert denied.is_error
            assert "denied by policy rule at startup.lua:3" in text_of(denied)


async def test_an_answer_kept_always_is_listed_and_can_be_taken_back() -> None:
    """`allow --always` could be neither listed nor taken back while the
    daemon ran (found by an audit): `grants` lists it, `revoke` takes it
    back, from approvals.json too, and the tool's calls are asked again."""
    rules = (parse_rule("ask", {"tool": "add"}, "startup.lua:7"),)
    async with running_gateway(
        [demo_memory("a")], wait_for=["a"], memory=MemoryServers()
    ) as (gateway, manager, rec):
        manager.policy.set_rules(rules, None)
        async with Client(str(gateway.url)) as client:
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "a__add", {"a": 1, "b": 2})
                asked = await rec.wait_for("approval_asked", "a")
                manager.policy.answer(
                    asked.approval,  # type: ignore[attr-defined]
                    "allow",
                    "always",
                    by="cli",
                )
            assert manager.policy.grants() == [
                {"scope": "always", "server": "a", "tool": "add", "client": ""}
            ]
            assert manager.policy.revoke("a", "echo") == []  # not that one
            (gone,) = manager.policy.revoke("a")
            assert (gone["tool"], gone["scope"]) == ("add", "always")
            assert manager.policy.grants() == []
            kept = json.loads((default_state_dir() / "approvals.json").read_text())
            assert kept == {"always": []}
            mark = rec.last_seq
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "a__add", {"a": 1, "b": 3})
                again = await rec.wait_for("approval_asked", "a", after=mark)
                manager.policy.answer(
                    again.approval,  # type: ignore[attr-defined]
                    "deny",
                    "once",
                    by="cli",
                )


async def test_a_rule_naming_the_exposed_tool_applies_to_the_cli_and_lua_too() -> None:
    """`tool = "a__echo"` denied the call over the endpoint, but `mcp-manager
    call a echo` and Lua's `mcp_call` ran it: their exposed name was built
    without the `__` ("aecho"; found by an audit)."""
    rules = (parse_rule("deny", {"tool": "a__echo"}, "startup.lua:3"),)
    async with running_gateway(
        [demo_memory("a")], wait_for=["a"], memory=MemoryServers()
    ) as (_, manager, _):
        manager.policy.set_rules(rules, None)
        with pytest.raises(PolicyDenied, match="startup.lua:3"):
            await manager.call("a", "echo", {"text": "x"})
        result = await manager.call("a", "add", {"a": 1, "b": 2})  # not that one
        assert not result.is_error


async def _initialized(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    """A handshake-era session opened by hand; the headers of its requests."""
    headers = {"accept": "application/json, text/event-stream"}
    hello = initialize("raw")
    opened = await http.post(url, json=hello, headers=headers)
    headers["mcp-session-id"] = opened.headers["mcp-session-id"]
    headers["mcp-protocol-version"] = "2025-11-25"
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await http.post(url, json=note, headers=headers)
    listed = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    assert (await http.post(url, json=listed, headers=headers)).status_code == 200
    return headers


async def test_an_http_client_that_hangs_up_withdraws_its_waiting_call() -> None:
    """A handshake-era HTTP client killed while its call waits for approval
    never reads the answer (nothing it could resume): the call is withdrawn,
    its question leaves `pending`, and no later `allow` runs it."""
    rules = (parse_rule("ask", {"tool": "add", "timeout": 600}, "startup.lua:7"),)
    async with running_gateway(
        [demo_memory("a")], wait_for=["a"], memory=MemoryServers()
    ) as (gateway, manager, rec):
        manager.policy.set_rules(rules, None)
        url = str(gateway.url)
        async with httpx2.AsyncClient(timeout=30) as http:
            headers = await _initialized(http, url)
            call = {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "a__add", "arguments": {"a": 1, "b": 2}},
            }
            async with anyio.create_task_group() as tg:
                tg.start_soon(partial(http.post, url, json=call, headers=headers))
                asked = await rec.wait_for("approval_asked", "a")
                tg.cancel_scope.cancel()  # the client is gone: its socket closes
        decided = await rec.wait_for("approval_decided", "a", after=asked.seq)
        assert (decided.verdict, decided.by) == ("deny", "withdrawn")  # type: ignore[attr-defined]
        assert manager.policy.pending() == []
        with pytest.raises(KeyError):
            manager.policy.answer(asked.approval, "allow", "once", by="cli")  # type: ignore[attr-defined]


async def test_a_tool_the_server_does_not_list_is_refused_not_asked_about() -> None:
    """`mcp-manager call a no_such_tool` under an ask rule: nobody is asked
    to approve a call of a tool that is not there."""
    rules = (parse_rule("ask", {"server": "a", "timeout": 600}, "startup.lua:7"),)
    async with running_gateway(
        [demo_memory("a")], wait_for=["a"], memory=MemoryServers()
    ) as (gateway, manager, rec):
        manager.policy.set_rules(rules, None)
        with pytest.raises(PolicyDenied, match="a lists no tool 'no_such_tool'"):
            await manager.call("a", "no_such_tool", {})
        assert manager.policy.pending() == []
        assert rec.of("approval_asked") == []


async def test_a_reload_judges_the_waiting_calls_again() -> None:
    """Rules changed while calls wait for approval: a call the new rules deny
    ends denied, one they allow runs, one they still ask about waits on."""
    ask = parse_rule("ask", {"server": "a", "timeout": 600}, "startup.lua:7")
    async with running_gateway(
        [demo_memory("a")], wait_for=["a"], memory=MemoryServers()
    ) as (gateway, manager, rec):
        manager.policy.set_rules((ask,), None)
        got: dict[str, object] = {}
        callers: dict[str, Caller] = {}

        async def call(tool: str, arguments: dict[str, Any]) -> None:
            callers[tool] = Caller(client="c")
            try:
                got[tool] = await manager.call(
                    "a", tool, arguments, caller=callers[tool]
                )
            except PolicyDenied as exc:
                got[tool] = exc

        def asked_about(tool: str) -> Callable[[Event], bool]:
            return lambda e: getattr(e, "tool", None) == tool

        def decided_on(tool: str) -> Any:
            return rec.wait_for("approval_decided", "a", where=asked_about(tool))

        async with anyio.create_task_group() as tg:
            for tool, arguments in (("add", {"a": 1, "b": 2}), ("echo", {"text": "x"})):
                tg.start_soon(call, tool, arguments)
                await rec.wait_for("approval_asked", "a", where=asked_about(tool))
            tg.start_soon(call, "pid", {})
            pid = await rec.wait_for("approval_asked", "a", where=asked_about("pid"))
            manager.policy.set_rules(
                (
                    parse_rule("deny", {"tool": "add"}, "startup.lua:3"),
                    parse_rule("ask", {"tool": "pid"}, "startup.lua:4"),
                ),
                None,
            )
            await decided_on("add")
            await decided_on("echo")
            assert [a.tool for a in manager.policy.pending()] == ["pid"]
            manager.policy.answer(pid.approval, "deny", "once", by="cli")  # type: ignore[attr-defined]
        assert isinstance(got["add"], PolicyDenied)
        assert "denied by the policy reloaded" in str(got["add"])
        assert "rule at startup.lua:3" in str(got["add"])
        echoed = got["echo"]
        assert not isinstance(echoed, PolicyDenied) and not echoed.is_error  # type: ignore[attr-defined]
        assert isinstance(got["pid"], PolicyDenied)
        # What the call log keeps names the rule that decided, not the one
        # that asked (found by an audit: `why` said startup.lua:7).
        assert callers["add"].verdict == "denied by reload, rule at startup.lua:3"
        assert callers["echo"].verdict == "allowed by reload (once), no rule matches"
        assert callers["pid"].verdict == "denied by cli, rule startup.lua:7"
        decided = [(e.tool, e.verdict, e.by) for e in rec.of("approval_decided")]  # type: ignore[attr-defined]
        assert sorted(decided) == [
            ("add", "deny", "reload"),
            ("echo", "allow", "reload"),
            ("pid", "deny", "cli"),
        ]


async def test_a_call_waiting_when_the_daemon_stops_is_told_so() -> None:
    ask = parse_rule("ask", {"server": "a", "timeout": 600}, "startup.lua:7")
    got: list[BaseException] = []

    async def call(manager: Any) -> None:
        try:
            await manager.call("a", "add", {"a": 1, "b": 2})
        except PolicyDenied as exc:
            got.append(exc)

    async with anyio.create_task_group() as tg:
        async with running_gateway(
            [demo_memory("a")], wait_for=["a"], memory=MemoryServers()
        ) as (gateway, manager, rec):
            manager.policy.set_rules((ask,), None)
            tg.start_soon(call, manager)
            await rec.wait_for("approval_asked", "a")
    (stopped,) = got
    assert "mcp-manager stopped while the call waited for approval" in str(stopped)
    assert "removed" not in str(stopped)


async def test_an_endpoint_client_cannot_pass_for_the_cli_or_lua() -> None:
    """`mcp_policy("allow", {client = "lua"})` let any endpoint client that
    said it was `lua` past a later deny (found by an audit)."""
    from mcp.types import Implementation

    rules = (
        parse_rule("allow", {"client": ["lua", "cli"]}, "startup.lua:2"),
        parse_rule("deny", {"tool": "add"}, "startup.lua:3"),
    )
    async with running_gateway(
        [demo_memory("a")], wait_for=["a"], memory=MemoryServers()
    ) as (gateway, manager, _):
        manager.policy.set_rules(rules, None)
        for name in ("lua", "cli", " LUA "):
            me = Implementation(name=name, version="1")
            async with Client(str(gateway.url), mode="legacy", client_info=me) as c:
                result = await c.call_tool("a__add", {"a": 1, "b": 2})
            assert result.is_error, name
            assert "denied by policy rule at startup.lua:3" in text_of(result)
