"""Straight at a server and through the daemon: the same, field by field.

Three servers nobody here tuned for the daemon's sake, each started once
for the module over streamable HTTP: the demo server, the official reference
server (`@modelcontextprotocol/server-everything`, handshake era only) and a
server on the SDK's own low-level `Server` that answers both eras
(`servers/conformance_everything.py`, the conformance suite's fixtures). A
client of each era lists everything (every page), reads resources and gets
prompts, once straight at the server and once through the HTTP front with the
same server declared `prefix = ""`; what it sees must not differ. Seeded
hypothesis runs send argument and result shapes both ways (1000 in `.ci/run`).
`test_eras.py` covers calls, logs, progress, errors, input rounds and the
stdio front.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.client import ConnectMode
from mcp.client.stdio import StdioServerParameters
from servers import HttpServerProcess
from servers.everything import (
    EverythingNotInstalled,
    require_everything,
    serve_everything,
)
from support.eras import (
    SERVER_INFO_KEY,
    answer_elicitation,
    answer_sampling,
    wire,
)
from support.gateway import running_gateway

from manager.core.spec import ConnectionSpec, endpoint_key, parse_spec
from manager.files import default_state_dir, write_private_json
from manager.transport.eras import EraMemory

pytestmark = pytest.mark.usefixtures("no_leaked_children")

SERVERS = Path(__file__).parent.parent / "servers"
CONFORMANCE_SERVER = SERVERS / "conformance_everything.py"

READS = 5
"""Resources read per server (the reference server lists a hundred)."""

UPSTREAM_ERA: dict[str, str] = {}
"""The protocol the daemon speaks to each server (as it told in `status`)."""

MODES: tuple[ConnectMode, ...] = ("auto", "legacy")
"""The SDK `Client`'s default (2026-07-28 where the server speaks it) and the
handshake era."""


class _ConformanceServer(HttpServerProcess):
    """`servers/conformance_everything.py` over streamable HTTP."""

    def _launch(self) -> tuple[list[str], dict[str, str], Path | None]:
        argv = [sys.executable, str(CONFORMANCE_SERVER), "--port", str(self.port)]
        return argv, {}, None


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Each server once for the module, over streamable HTTP: its URL. A
    client talks to it straight; the daemon declares the same URL."""
    logs = tmp_path_factory.mktemp("servers")
    demo = HttpServerProcess("http", log_path=logs / "demo.log")
    sdk = _ConformanceServer("http", log_path=logs / "sdk.log")
    with contextlib.ExitStack() as stack:
        for server in (demo, sdk):
            server.start()
            stack.callback(server.kill)
        urls = {"demo": demo.url, "sdk": sdk.url}
        try:
            require_everything()
        except EverythingNotInstalled:
            pass
        else:
            log = logs / "everything.log"
            urls["everything"] = stack.enter_context(
                serve_everything("http", log_path=log)
            )
        yield urls


async def _all_pages(list_page: Callable[[str | None], Awaitable[Any]]) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(100):
        page = await list_page(cursor)
        items.extend(page[0])
        cursor = page[1]
        if not cursor:
            break
    return items


async def _survey(client: Client) -> dict[str, Any]:
    """Everything a client can see without calling a tool."""

    async def tools(cursor: str | None) -> tuple[list[Any], str | None]:
        page = await client.list_tools(cursor=cursor)
        return page.tools, page.next_cursor

    async def prompts(cursor: str | None) -> tuple[list[Any], str | None]:
        page = await client.list_prompts(cursor=cursor)
        return page.prompts, page.next_cursor

    async def resources(cursor: str | None) -> tuple[list[Any], str | None]:
        page = await client.list_resources(cursor=cursor)
        return page.resources, page.next_cursor

    async def templates(cursor: str | None) -> tuple[list[Any], str | None]:
        page = await client.list_resource_templates(cursor=cursor)
        return page.resource_templates, page.next_cursor

    seen: dict[str, Any] = {}
    for kind, lister in (
        ("tools", tools),
        ("prompts", prompts),
        ("resources", resources),
        ("templates", templates),
    ):
        items = await _all_pages(lister)
        seen[kind] = [wire(item) for item in items]
    for resource in seen["resources"][:READS]:
        uri = resource["uri"]
        seen[f"read {uri}"] = wire(await client.read_resource(uri))
    for prompt in seen["prompts"]:
        if any(a.get("required") for a in prompt.get("arguments", [])):
            continue
        name = prompt["name"]
        seen[f"prompt {name}"] = wire(await client.get_prompt(name))
    return seen


@asynccontextmanager
async def _both_ways(
    name: str, url: str, modes: Sequence[ConnectMode], protocol: str = "auto"
) -> AsyncIterator[list[tuple[Client, Client]]]:
    """For each mode, a client straight at the server at `url` and one
    through the daemon's HTTP front (which speaks `protocol` to it)."""
    spec = parse_spec(name, url, {"prefix": "", "protocol": protocol})
    # The daemon's own session can be asked things (it routes them to the
    # client that called), and some servers list tools by what their client
    # can do: both clients declare the same.
    can: dict[str, Any] = {
        "elicitation_callback": answer_elicitation,
        "sampling_callback": answer_sampling,
    }
    async with (
        running_gateway([spec], wait_for=[name]) as (gateway, manager, _),
        contextlib.AsyncExitStack() as stack,
    ):
        status = manager.status(name)
        assert status is not None
        UPSTREAM_ERA[name] = status.protocol
        pairs = []
        for mode in modes:
            straight = await stack.enter_async_context(Client(url, mode=mode, **can))
            through = Client(str(gateway.url), mode=mode, **can)
            pairs.append((straight, await stack.enter_async_context(through)))
        yield pairs


@pytest.mark.anyio
@pytest.mark.parametrize("server", ["demo", "everything", "sdk"])
async def test_what_a_client_sees_is_the_same_straight_and_through(
    server: str, servers: dict[str, str]
) -> None:
    if server not in servers:
        pytest.skip("the reference server is not installed (npm)")
    async with _both_ways(server, servers[server], MODES) as pairs:
        for straight, through in pairs:
            mine = await _survey(straight)
            theirs = await _survey(through)
            eras = {
                straight.protocol_version,
                UPSTREAM_ERA[server],
                through.protocol_version,
            }
            _same(mine, theirs, eras)


def _same(mine: dict[str, Any], theirs: dict[str, Any], eras: set[Any]) -> None:
    assert mine["tools"], "the comparison compares something"
    if len(eras) > 1:
        # Not one era from end to end (the client straight, the daemon to the
        # server, the client through us): what 2026-07-28 has no field for
        # (a tool's `execution`, moved to the tasks extension) is not there
        # to compare.
        assert eras == {"2025-11-25", "2026-07-28"}
        for tool in mine["tools"]:
            tool.pop("execution", None)
    for seen in (mine, theirs):
        for value in seen.values():
            if isinstance(value, dict):
                # Cache hints are the SDK server's defaults on our side, not
                # the upstream's (README, "Protocol eras": not supported yet).
                value.pop("ttlMs", None)
                value.pop("cacheScope", None)
    assert theirs == mine


# ------------------------------------------------------------ hypothesis

_JSON_LEAF = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(max_size=12)
)
_JSON_INNER = (
    _JSON_LEAF
    | st.lists(_JSON_LEAF, max_size=4)
    | st.dictionaries(st.text(max_size=8), _JSON_LEAF, max_size=4)
)
_JSON = (
    _JSON_LEAF
    | st.lists(_JSON_INNER, max_size=4)
    | st.dictionaries(st.text(max_size=8), _JSON_INNER, max_size=4)
)
"""JSON two levels deep (`st.recursive` raised a spurious deprecation
warning here once, which this suite treats as an error)."""
_ARGUMENTS = st.dictionaries(st.text(max_size=8), _JSON, max_size=5)
_BLOCK = st.fixed_dictionaries(
    {"type": st.just("text"), "text": st.text(max_size=20)},
    optional={"_meta": st.dictionaries(st.text(max_size=8), _JSON, max_size=2)},
)
_RESULT = st.fixed_dictionaries(
    {"content": st.lists(_BLOCK, max_size=3)},
    optional={
        "structuredContent": st.dictionaries(st.text(max_size=8), _JSON, max_size=3),
        "isError": st.booleans(),
        "_meta": st.dictionaries(
            st.text(max_size=8).filter(lambda k: not k.startswith("io.")),
            _JSON,
            max_size=3,
        ),
    },
)


def test_argument_and_result_shapes_cross_unchanged(servers: dict[str, str]) -> None:
    """Seeded shapes, a sample of the full run below."""
    _shapes_cross(servers["demo"], examples=25)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_thousand_argument_and_result_shapes_cross_unchanged(
    servers: dict[str, str],
) -> None:
    """1000 seeded shapes in all (250 arguments and 250 results, per era);
    runs in `.ci/run` after `make test` (`pytest -m slow
    tests/test_differential.py`)."""
    _shapes_cross(servers["demo"], examples=250)


def _shapes_cross(url: str, examples: int) -> None:
    """Arguments the demo's `arguments` tool echoes, and results its `result`
    tool returns as given: the same straight and through, in both eras."""
    with anyio.from_thread.start_blocking_portal(backend="asyncio") as portal:
        for mode in MODES:
            # One era end to end: a dual-era server serialises its two eras
            # differently (2026-07-28 drops a null inside `_meta`), and which
            # one the daemon speaks to it is not the daemon's fidelity.
            protocol = "legacy" if mode == "legacy" else "2026-07-28"
            both = _both_ways("demo", url, [mode], protocol)
            with portal.wrap_async_context_manager(both) as pairs:
                ((straight, through),) = pairs
                _shapes_of_one_pair(portal, straight, through, examples)


def _shapes_of_one_pair(
    portal: anyio.from_thread.BlockingPortal,
    straight: Client,
    through: Client,
    examples: int,
) -> None:
    def both(name: str, arguments: dict[str, Any]) -> tuple[Any, Any]:
        return (
            portal.call(_call, straight, name, arguments),
            portal.call(_call, through, name, arguments),
        )

    @settings(max_examples=examples, derandomize=True, deadline=None)
    @given(arguments=_ARGUMENTS)
    def arguments_cross(arguments: dict[str, Any]) -> None:
        mine, theirs = both("arguments", arguments)
        assert json.loads(mine["content"][0]["text"]) == arguments
        assert theirs == mine

    @settings(max_examples=examples, derandomize=True, deadline=None)
    @given(result=_RESULT)
    def results_cross(result: dict[str, Any]) -> None:
        mine, theirs = both("result", {"result": result})
        assert theirs == mine

    arguments_cross()
    results_cross()


async def _call(client: Client, name: str, arguments: dict[str, Any]) -> Any:
    result = await client.call_tool(name, arguments)
    data = wire(result)
    meta = data.get("_meta")
    assert not (isinstance(meta, dict) and SERVER_INFO_KEY in meta)
    return data


async def _list_roots(context: Any) -> Any:
    import mcp.types as types

    return types.ListRootsResult(roots=[types.Root(uri="file:///work/project")])  # type: ignore[arg-type]


async def _outcome(client: Client, name: str) -> Any:
    try:
        return await _call(client, name, {})
    except Exception as exc:  # the outcome is compared, either way
        return {"error": getattr(exc, "code", type(exc).__name__)}


@pytest.mark.anyio
async def test_a_server_judges_the_client_that_calls_not_the_daemon(
    servers: dict[str, str],
) -> None:
    """A 2026-07-28 server judges each request by the capabilities its
    client declares: through the daemon it sees the caller's, not the
    daemon's (a tool that samples is refused, -32021, for a client without
    sampling), and a server that asks for roots where the connection
    declares none asks the calling client, in either era: the same outcome
    as straight."""
    url = servers["sdk"]
    spec = parse_spec("sdk", url, {"prefix": "", "protocol": "2026-07-28"})
    kinds: dict[str, dict[str, Any]] = {
        "bare": {},
        "able": {
            "sampling_callback": answer_sampling,
            "list_roots_callback": _list_roots,
        },
    }
    tools = ("test_missing_capability", "test_input_required_result_list_roots")
    async with running_gateway([spec], wait_for=["sdk"]) as (gateway, _, _):
        for mode in MODES:
            for kind, can in kinds.items():
                seen: dict[str, list[Any]] = {"straight": [], "through": []}
                for way, at in (("straight", url), ("through", str(gateway.url))):
                    async with Client(at, mode=mode, **can) as client:
                        for tool in tools:
                            seen[way].append(await _outcome(client, tool))
                assert seen["through"] == seen["straight"], (mode, kind)
                if mode == "auto" and kind == "bare":
                    assert seen["straight"][0] == {"error": -32021}
                if kind == "able":
                    text = seen["straight"][1]["content"][0]["text"]
                    assert text == "Found 1 root(s): file:///work/project"


@pytest.mark.slow  # ~10 s of fresh processes straight; CI runs the slow ones
@pytest.mark.anyio
async def test_a_dual_era_stdio_server_meets_each_client_in_its_own_era() -> None:
    """A stdio server that speaks both eras, declared with nothing but its
    command (`protocol = "auto"`): straight, each client starts its own
    process and is met in its own era; through the daemon, a 2026-07-28
    client is served by a process met in 2026-07-28 beside the handshake one
    (`EraSide`): the server judges that client's own capabilities (-32021)
    and asks it in `input_required` rounds, while a handshake client that
    can be asked gets the questions on its back-channel. Same outcomes as
    straight, client by client, tool by tool (for a handshake client: the
    tools that ask it)."""
    argv = [str(CONFORMANCE_SERVER), "--stdio"]
    spec = parse_spec("conf", {"command": sys.executable, "args": argv}, {"prefix": ""})
    straight = StdioServerParameters(command=sys.executable, args=argv)
    kinds: dict[str, dict[str, Any]] = {
        "bare": {},
        "able": {
            "sampling_callback": answer_sampling,
            "elicitation_callback": answer_elicitation,
            "list_roots_callback": _list_roots,
        },
    }
    tools = (
        "test_missing_capability",
        "test_input_required_result_list_roots",
        "test_input_required_result_elicitation",
        "test_sampling",
        "test_elicitation",
    )
    async with running_gateway([spec], wait_for=["conf"]) as (gateway, manager, _):
        for mode in MODES:
            for kind, can in kinds.items():
                seen: dict[str, list[Any]] = {"straight": [], "through": []}
                ways: dict[str, Any] = {
                    "straight": straight,
                    "through": str(gateway.url),
                }
                for way, at in ways.items():
                    async with Client(at, mode=mode, **can) as client:
                        for tool in tools:
                            seen[way].append(await _outcome(client, tool))
                if mode == "auto":  # the whole row, as straight
                    assert seen["through"] == seen["straight"], kind
                    if kind == "bare":  # judged as the caller, not the daemon
                        assert seen["through"][0] == {"error": -32021}
                    continue
                # A handshake session carries the capabilities the daemon
                # declared at its initialize, not each client's (README,
                # "Protocol eras"): what is compared is what its client is
                # asked, on its own back-channel.
                if kind == "able":
                    asked = slice(2, None)
                    assert seen["through"][asked] == seen["straight"][asked]
                    assert all("error" not in o for o in seen["straight"][asked])
        # The process beside shows in status, apart from the connection's own.
        status = manager.status("conf")
        assert status is not None and status.beside.startswith("2026-07-28, pid ")
        assert status.beside != f"2026-07-28, pid {status.pid}"


TASKS = "io.modelcontextprotocol/tasks"


async def _rpc(
    http: Any, url: str, method: str, params: dict[str, Any], caps: dict[str, Any]
) -> dict[str, Any]:
    """One 2026-07-28 request, by hand (the SDK's client has no tasks API):
    its JSON-RPC answer, from a JSON or an SSE response."""
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": caps,
    }
    name = params.get("name", params.get("taskId"))
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
        **({"Mcp-Name": name} if isinstance(name, str) else {}),
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": method,
        "params": {**params, "_meta": envelope},
    }
    response = await http.post(url, json=body, headers=headers)
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in text.splitlines():
            if line.startswith("data:") and '"id":1' in line.replace(" ", ""):
                text = line[len("data:") :]
                break
    answer: dict[str, Any] = json.loads(text)
    return answer


async def _task_story(http: Any, url: str) -> dict[str, Any]:
    """What a client that follows tasks sees of one, and what one that does
    not declare the extension sees."""
    follows: dict[str, Any] = {"extensions": {TASKS: {}}}
    story: dict[str, Any] = {}
    args = {"name": "slow_compute", "arguments": {"seconds": 0.2, "label": "t"}}
    created = (await _rpc(http, url, "tools/call", args, follows))["result"]
    story["created"] = {k: created.get(k) for k in ("resultType", "status")}
    task_id = created["taskId"]
    with anyio.fail_after(30):
        while True:
            got = await _rpc(http, url, "tasks/get", {"taskId": task_id}, follows)
            assert "result" in got, got
            if got["result"]["status"] in ("completed", "failed", "cancelled"):
                break
            await anyio.sleep(0.05)  # polling is the protocol's own way here
    story["done"] = {k: got["result"].get(k) for k in ("status", "result", "taskId")}
    story["same id"] = got["result"]["taskId"] == task_id
    plain = await _rpc(http, url, "tools/call", args, {})
    story["without the extension"] = plain["result"]
    refused = await _rpc(http, url, "tasks/get", {"taskId": task_id}, {})
    story["tasks/get without it"] = refused["error"]["code"]
    unknown = await _rpc(http, url, "tasks/get", {"taskId": "nobody"}, follows)
    story["unknown task"] = unknown["error"]["code"]
    return story


@pytest.mark.anyio
async def test_tasks_cross_as_tasks_with_their_ids_named_for_the_owner(
    servers: dict[str, str],
) -> None:
    """A 2026-07-28 server that runs `tools/call` as a task (SEP-2663) does so
    for a client that declares the extension, through the daemon as straight:
    `tasks/get` reaches the owner under the id the client was given
    (`{server}/{taskId}`) and the result it inlines is the server's; a client
    without the extension gets the result at once, and `-32021` for
    `tasks/get`."""
    import httpx2

    url = servers["sdk"]
    spec = parse_spec("sdk", url, {"prefix": "", "protocol": "2026-07-28"})
    async with (
        running_gateway([spec], wait_for=["sdk"]) as (gateway, _, _),
        httpx2.AsyncClient(timeout=30) as http,
    ):
        straight = await _task_story(http, url)
        through = await _task_story(http, str(gateway.url))
    assert straight["created"] == {"resultType": "task", "status": "working"}
    assert straight["done"]["status"] == "completed"
    done_straight = dict(straight.pop("done"))
    done_through = dict(through.pop("done"))
    assert done_through["taskId"].startswith("sdk/")
    assert done_through["taskId"][len("sdk/") :] and done_straight["taskId"]
    assert done_through["result"] == done_straight["result"]
    assert through == straight


def _dual_era_stdio_spec() -> ConnectionSpec:
    """The conformance server over stdio, declared with its command alone,
    and remembered (`eras.json`, as a daemon from before capabilities were
    remembered wrote it) as a server that opens the 2026-07-28 process beside
    its handshake one: a request then waits for that process as long as any
    start (`connect_timeout`), not the 5 s a server never met in that era
    gets, so a slow machine meets the same server."""
    argv = [str(CONFORMANCE_SERVER), "--stdio"]
    spec = parse_spec(
        "conf",
        {"command": sys.executable, "args": argv},
        {"prefix": "", "connect_timeout": 60},
    )
    entry = {"endpoint": endpoint_key(spec), "era": "legacy", "beside": "yes"}
    path = default_state_dir() / "eras.json"
    write_private_json(path, {"conf": entry})
    assert EraMemory(path).recall_beside(spec) is True  # the daemon reads it so
    return spec


@pytest.mark.anyio
async def test_tasks_of_a_dual_era_stdio_server_are_followed_where_they_were_made(
    servers: dict[str, str],
) -> None:
    """The same server over stdio, declared with its command alone: a
    2026-07-28 client's task is made by the process met in its era beside
    the handshake one, and `tasks/get` goes there too (it went to the
    handshake process, which refused it: the conformance suite's `tasks-*`
    scenarios through a stdio upstream). What the client sees is what the
    same code over HTTP shows it straight."""
    import httpx2

    spec = _dual_era_stdio_spec()
    async with (
        running_gateway([spec], wait_for=["conf"]) as (gateway, manager, _),
        httpx2.AsyncClient(timeout=30) as http,
    ):
        straight = await _task_story(http, servers["sdk"])
        through = await _task_story(http, str(gateway.url))
        status = manager.status("conf")
        assert status is not None and status.beside.startswith("2026-07-28, pid ")
    done_straight = dict(straight.pop("done"))
    done_through = dict(through.pop("done"))
    assert done_through["taskId"].startswith("conf/")
    assert done_through["result"] == done_straight["result"]
    assert through == straight


@pytest.mark.anyio
async def test_a_2026_client_discovers_what_a_dual_era_stdio_server_offers_it(
    servers: dict[str, str],
) -> None:
    """`server/discover` before any call: the handshake process of a dual-era
    stdio server does not offer the tasks extension, the process met in
    2026-07-28 does, and a client straight at it would meet that one. So
    the first daemon opens it to ask (kept for the calls that follow); the
    next one knows the answer from `eras.json` and starts nothing for it.
    (A server never met in that era is waited for 5 s at most: `test_side`.)"""
    import httpx2

    spec = _dual_era_stdio_spec()
    async with httpx2.AsyncClient(timeout=30) as http:
        straight = await _rpc(http, servers["sdk"], "server/discover", {}, {})
        offered = set(straight["result"]["capabilities"]["extensions"])
        assert TASKS in offered
        for daemon in ("first", "second"):
            async with running_gateway([spec], wait_for=["conf"]) as (
                gateway,
                manager,
                _,
            ):
                status = manager.status("conf")
                assert status is not None and status.beside == ""
                through = await _rpc(http, str(gateway.url), "server/discover", {}, {})
                status = manager.status("conf")
                assert status is not None
                beside = status.beside
            capabilities = through["result"]["capabilities"]
            assert set(capabilities.get("extensions", {})) == offered, daemon
            if daemon == "first":
                assert beside.startswith("2026-07-28, pid ")
            else:
                assert beside == ""


@pytest.mark.anyio
# The server logs on purpose (deprecated as of 2026-07-28, not gone).
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_a_server_that_streams_json_lines_is_heard_and_answered() -> None:
    """A 2026-07-28 server that sends its streams as JSON lines in an
    `application/json` body (the TypeScript SDK's entry; here the conformance
    server behind `JsonLines`), in this test's own loop: a call whose answer
    follows its log messages is answered, the messages heard, and a list
    change on its `subscriptions/listen` stream reaches the daemon (the SDK's
    client read the open stream as one JSON body that never ended)."""
    import httpx2
    from servers.asgi import serving
    from servers.conformance_everything import ConformanceServer, http_app

    server = ConformanceServer()
    async with anyio.create_task_group() as tg:
        server.task_group = tg
        app = http_app(server, json_lines=True)
        async with server.server.session_manager.run(), serving(app) as base:
            spec = parse_spec("lines", base + "/mcp", {"prefix": ""})
            async with (
                running_gateway([spec], wait_for=["lines"]) as (gateway, _, rec),
                httpx2.AsyncClient(timeout=30) as http,
            ):
                url = str(gateway.url)
                call = {"name": "test_tool_with_logging", "arguments": {}}
                answer = await _rpc(http, url, "tools/call", call, {})
                assert "result" in answer, answer
                text = answer["result"]["content"][0]["text"]
                assert text == "Tool with logging executed successfully"
                log = await rec.wait_for("server_log", "lines")
                assert log.data == "Tool execution started"  # type: ignore[attr-defined]
                seen = rec.last_seq
                trigger = {"name": "test_trigger_tool_change", "arguments": {}}
                await _rpc(http, url, "tools/call", trigger, {})
                changed = await rec.wait_for("tools_changed", "lines", after=seen)
                assert "test_added_tool" in changed.added  # type: ignore[attr-defined]
        tg.cancel_scope.cancel()


async def _freshness(client: Client) -> dict[str, Any]:
    pages: dict[str, Any] = {
        "tools": await client.list_tools(),
        "prompts": await client.list_prompts(),
        "resources": await client.list_resources(),
        "templates": await client.list_resource_templates(),
    }
    return {kind: (page.ttl_ms, page.cache_scope) for kind, page in pages.items()}


@pytest.mark.anyio
@pytest.mark.parametrize("server", ["demo", "sdk"])
async def test_a_2026_client_may_keep_the_lists_as_long_as_straight(
    server: str, servers: dict[str, str]
) -> None:
    """Each list's `ttlMs` and `cacheScope` through the daemon are the
    server's own (the union's: the shortest non-zero life, private if any
    server's list is)."""
    async with _both_ways(server, servers[server], ["auto"]) as pairs:
        ((straight, through),) = pairs
        assert await _freshness(through) == await _freshness(straight)


@pytest.mark.anyio
async def test_input_responses_that_are_not_an_object_are_a_protocol_error(
    servers: dict[str, str],
) -> None:
    """`inputResponses: null` (or a number) is a JSON-RPC error, not a call:
    as straight at the SDK server, and through the daemon to a server of
    either era (here, the demo declared in the handshake era)."""
    import httpx2

    sdk = parse_spec("sdk", servers["sdk"], {"prefix": "", "protocol": "2026-07-28"})
    old = parse_spec("old", servers["demo"], {"prefix": "o", "protocol": "legacy"})
    tool = "test_input_required_result_elicitation"
    async with (
        running_gateway([sdk, old], wait_for=["sdk", "old"]) as (gateway, _, _),
        httpx2.AsyncClient(timeout=30) as http,
    ):
        for bad in (None, 12345):
            args: dict[str, Any] = {
                "name": tool,
                "arguments": {},
                "inputResponses": bad,
            }
            straight = await _rpc(http, servers["sdk"], "tools/call", args, {})
            through = await _rpc(http, str(gateway.url), "tools/call", args, {})
            assert "error" in straight and "result" not in straight
            assert through["error"]["code"] == -32602, through
            echo = {
                "name": "o__echo",
                "arguments": {"text": "x"},
                "inputResponses": bad,
            }
            to_old = await _rpc(http, str(gateway.url), "tools/call", echo, {})
            assert to_old["error"]["code"] == -32602, to_old
