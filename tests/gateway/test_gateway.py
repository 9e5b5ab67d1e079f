"""The aggregated MCP endpoint, seen by the official SDK client.

Most tests run the gateway (manager + HTTP endpoint) in the test's own event loop,
in front of real upstreams: the hand-written servers over stdio and streamable
HTTP (fast to start), the demo server over stdio and over streamable HTTP. The
end-to-end tests run the real daemon (`mcp-manager run --listen`, `mcp-manager
stdio`) as a child process. Waits are on events, never on sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import mcp.types as types
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from memory import MemoryServers
from servers import (
    HttpServerFactory,
    HttpServerProcess,
    free_port,
    raw_command,
)
from servers.daemon import DaemonProcess
from support.gateway import (
    FAST,
    demo_memory,
    demo_stdio,
    raw,
    running_gateway,
    session,
    text_of,
    wait_until,
)

from manager.cli import main
from manager.core.spec import parse_spec
from manager.gateway import (
    UPSTREAM_META_KEY,
    EndpointError,
    EndpointOptions,
    build_tool_table,
    endpoint_options,
)
from manager.gateway.http import HttpEndpoint
from manager.transport.base import ToolInfo

# ---------------------------------------------------------------- the tool table


def info(name: str, **raw: object) -> ToolInfo:
    return ToolInfo(name, "", {"name": name, "inputSchema": {"type": "object"}, **raw})


def test_tools_are_exposed_as_server_double_underscore_tool_with_schemas() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "number"}}}
    out = {"type": "object", "properties": {"sum": {"type": "number"}}}
    table = build_tool_table(
        [
            ("b", [info("add", inputSchema=schema, outputSchema=out)]),
            ("a", [info("echo", description="Echo.", title="Echo it")]),
        ]
    )
    assert [t.name for t in table.tools] == ["a__echo", "b__add"]
    echo, add = table.tools
    assert (echo.description, echo.title) == ("Echo.", "Echo it")
    assert add.input_schema == schema and add.output_schema == out
    assert table.routes["b__add"].server == "b"
    assert table.routes["b__add"].tool == "add"
    assert table.problems == ()


@pytest.mark.parametrize(
    ("server", "tool", "exposed", "reason"),
    [
        ("fs", "read file", "fs__read_file", "characters MCP tool names may not"),
        ("fs", "dir/list", "fs__dir_list", "characters MCP tool names may not"),
        ("fs", "ünïcode", "fs___n_code", "characters MCP tool names may not"),
        ("s", "x" * 70, "s__" + "x" * 54 + "_", "longer than 64"),
    ],
)
def test_invalid_tool_names_are_renamed_and_reported(
    server: str, tool: str, exposed: str, reason: str
) -> None:
    table = build_tool_table([(server, [info(tool)])])
    (only,) = table.tools
    assert only.name.startswith(exposed) and len(only.name) <= 64
    assert table.routes[only.name].tool == tool
    assert only.meta == {UPSTREAM_META_KEY: {"server": server, "tool": tool}}
    assert len(table.problems) == 1 and reason in table.problems[0]


def test_a_server_whose_every_tool_is_renamed_is_said_in_one_line() -> None:
    """A connection name of 63 characters leaves no room for its tools'
    names: each is shortened, and said in one line, not one line per tool at
    every start (found by an audit: 24 warnings, cut at the terminal's edge)."""
    server = "a-really-long-connection-name-" + "x" * 33
    table = build_tool_table([(server, [info(f"tool_{n}") for n in range(5)])])
    assert len(table.tools) == 5 and all(len(t.name) <= 64 for t in table.tools)
    (line,) = table.problems
    assert line.startswith(f"{server}: 5 tools are exposed under other names (")
    assert "'tool_0' as " in line and "and 2 more" in line
    assert line.endswith(f"`mcp-manager tools {server}` lists every exposed name")


def test_colliding_names_keep_the_plain_one_and_hash_the_other() -> None:
    # "a_" + "__" + "_b" and "a" + "__" + "__b" are both "a____b".
    table = build_tool_table([("a_", [info("_b")]), ("a", [info("__b")])])
    names = {route.server: name for name, route in table.routes.items()}
    assert names["a"] == "a____b"  # sorted first, both plain: first wins
    assert names["a_"].startswith("a____b_") and len(names["a_"]) == len("a____b") + 7
    assert any("already taken" in p for p in table.problems)
    again = build_tool_table([("a", [info("__b")]), ("a_", [info("_b")])])
    assert again.routes.keys() == table.routes.keys()  # stable


def test_a_renamed_name_never_takes_a_plain_one() -> None:
    table = build_tool_table([("a", [info("x y"), info("x_y")])])
    assert table.routes["a__x_y"].tool == "x_y"
    renamed = [n for n, r in table.routes.items() if r.tool == "x y"]
    assert renamed and renamed[0] != "a__x_y"


def test_a_tool_listed_twice_is_exposed_once_and_reported() -> None:
    table = build_tool_table([("a", [info("t"), info("t", description="other")])])
    assert [t.name for t in table.tools] == ["a__t"]
    assert "listed twice" in table.problems[0]


# -------------------------------------------------------------- endpoint options


@pytest.mark.parametrize(
    ("listen", "host", "port"),
    [
        ("127.0.0.1:8765", "127.0.0.1", 8765),
        ("8765", "127.0.0.1", 8765),
        (":0", "127.0.0.1", 0),
        ("localhost:9", "localhost", 9),
        ("[::1]:1", "::1", 1),
    ],
)
def test_loopback_listen_addresses_parse_and_may_go_without_a_token(
    listen: str, host: str, port: int
) -> None:
    options = endpoint_options(listen, no_token=True, env={})
    assert (options.host, options.port, options.token) == (host, port, None)
    assert options.loopback and options.token_from == "none (--no-token)"


@pytest.mark.parametrize(
    ("listen", "message"),
    [
        ("0.0.0.0:8765", "refusing --no-token on 0.0.0.0:8765"),
        ("[::]:8765", "refusing --no-token"),
        ("10.1.2.3:80", "refusing --no-token"),
        ("example.com:80", "give an IP address"),
        ("127.0.0.1:99999", "port must be a number"),
        ("127.0.0.1", "use HOST:PORT"),
        ("::1:80", "write IPv6 as [ADDR]:PORT"),
    ],
)
def test_bad_or_unprotected_listen_addresses_are_refused(
    listen: str, message: str
) -> None:
    with pytest.raises(EndpointError, match=message.replace("[", r"\[")):
        endpoint_options(listen, no_token=True, env={})


def test_the_token_comes_from_the_file_or_the_environment(tmp_path: Path) -> None:
    file = tmp_path / "token"
    file.write_text("from-file\n")
    file.chmod(0o600)
    by_file = endpoint_options("0.0.0.0:1", token_file=str(file), env={})
    assert by_file.token == "from-file" and not by_file.loopback
    by_env = endpoint_options("0.0.0.0:1", env={"MCP_MANAGER_TOKEN": " env-tok "})
    assert by_env.token == "env-tok"
    assert "from-file" not in repr(by_file)
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(EndpointError, match="is empty"):
        endpoint_options("0.0.0.0:1", token_file=str(tmp_path / "empty"), env={})
    with pytest.raises(EndpointError, match="cannot read token file"):
        endpoint_options("0.0.0.0:1", token_file=str(tmp_path / "nope"), env={})


def test_a_busy_port_is_a_clear_endpoint_error() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        endpoint = HttpEndpoint(None, EndpointOptions("127.0.0.1", port))  # type: ignore[arg-type]
        with pytest.raises(EndpointError, match="address already in use"):
            endpoint.bind()


def test_the_cli_refuses_no_token_off_loopback_or_beside_a_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCP_MANAGER_TOKEN", raising=False)
    script = tmp_path / "startup.lua"
    script.write_text("")
    assert main(["run", str(script), "--listen", "0.0.0.0:8765", "--no-token"]) == 2
    err = capsys.readouterr().err
    assert "refusing --no-token on 0.0.0.0:8765" in err
    assert "listen on 127.0.0.1" in err
    token = tmp_path / "token"
    token.write_text("t")
    argv = ["run", str(script), "--listen", "8765", "--no-token", "--token-file"]
    assert main([*argv, str(token)]) == 2
    assert "--no-token and --token-file contradict" in capsys.readouterr().err
    assert main(["run", str(script), "--token-file", "x"]) == 2
    assert "need --listen" in capsys.readouterr().err


# ------------------------------------------------------------- against upstreams

pytestmark = pytest.mark.usefixtures("no_leaked_children")


@pytest.fixture(scope="module")
def read_only_web(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[HttpServerProcess]:
    """A demo server over streamable HTTP for the tests that only call its
    tools, changing nothing (the ones that kill it or change its tools start
    their own): one SDK server process per module instead of one per test."""
    log = tmp_path_factory.mktemp("web") / "server.log"
    with HttpServerProcess("http", log_path=log) as server:
        yield server


@pytest.mark.anyio
async def test_tools_of_stdio_and_http_upstreams_are_listed_and_called(
    read_only_web: HttpServerProcess,
) -> None:
    web = read_only_web
    specs = [raw("fast"), parse_spec("web", web.url, FAST)]
    async with (
        running_gateway(specs, wait_for=["fast", "web"]) as (gateway, _, _),
        session(str(gateway.url)) as client,
    ):
        init_tools = client.server_capabilities
        assert init_tools is not None and init_tools.tools is not None
        assert init_tools.tools.list_changed is True
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert {"fast__echo", "fast__pid", "web__echo", "web__add"} <= set(listed)
        assert listed["web__add"].output_schema is not None
        assert listed["web__add"].input_schema["required"] == ["a", "b"]

        assert text_of(await client.call_tool("fast__echo", {"text": "hi"})) == "hi"
        added = await client.call_tool("web__add", {"a": 2, "b": 3})
        assert added.structured_content == {"sum": 5}
        failed = await client.call_tool("web__fail", {"message": "boom"})
        assert failed.is_error and text_of(failed) == "boom"
        with pytest.raises(MCPError, match="unknown tool 'nope__x'.*PREFIX__TOOL"):
            await client.call_tool("nope__x", {})
        # A declared server gets calls its list does not show; it answers itself.
        unlisted = await client.call_tool("fast__no_such_tool", {})
        assert unlisted.is_error and "unknown tool 'no_such_tool'" in text_of(unlisted)


@pytest.mark.anyio
async def test_trace_context_is_forwarded_and_hop_only_meta_is_not(
    read_only_web: HttpServerProcess,
) -> None:
    web = read_only_web
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with (
        running_gateway([parse_spec("web", web.url, FAST)], wait_for=["web"]) as (
            gateway,
            _,
            rec,
        ),
        session(str(gateway.url)) as client,
        Client(str(gateway.url)) as modern,
    ):
        meta = {
            "traceparent": traceparent,
            "tracestate": "k=v",
            "io.modelcontextprotocol/logLevel": "alert",
        }
        # A handshake client meets the dual-era server in its own era, as
        # straight: a handshake hop, with no 2026-07-28 envelope at all.
        result = await client.call_tool("web__meta", {}, meta=meta)  # type: ignore[call-overload]
        seen = json.loads(text_of(result))
        assert seen["traceparent"] == traceparent and seen["tracestate"] == "k=v"
        assert "io.modelcontextprotocol/logLevel" not in seen
        assert "io.modelcontextprotocol/clientInfo" not in seen
        # A 2026-07-28 client: the envelope is the hop's (every level, the
        # daemon's own name), never the client's.
        result = await modern.call_tool("web__meta", {}, meta=meta)  # type: ignore[arg-type]
        seen = json.loads(text_of(result))
        assert seen["traceparent"] == traceparent and seen["tracestate"] == "k=v"
        assert seen["io.modelcontextprotocol/logLevel"] == "debug"
        client_info = seen["io.modelcontextprotocol/clientInfo"]
        assert client_info["name"] == "mcp-manager"
        # The call is accounted like any other: events name server and tool.
        done = await rec.wait_for("call_finished", "web")
        assert done.tool == "meta"  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_no_server_sees_the_link_a_call_of_a_client_that_can_be_asked_carries(
    read_only_web: HttpServerProcess,
) -> None:
    """A client that can be asked things mid-call gets a token on its calls
    (`LINK_META_KEY`) so a server's question finds it; the token is ours: no
    server sees it in `_meta`, over stdio (both eras) or HTTP (both eras)."""

    async def elicited(context: object, params: object) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    specs = [parse_spec("web", read_only_web.url, FAST), demo_stdio("pipe")]
    async with running_gateway(specs, wait_for=["web", "pipe"]) as (gateway, _, _):
        for mode in ("legacy", "auto"):
            async with Client(
                str(gateway.url), mode=mode, elicitation_callback=elicited
            ) as client:
                for name in ("web__meta", "pipe__meta"):
                    seen = json.loads(text_of(await client.call_tool(name, {})))
                    assert not any("mcp-manager" in key for key in seen), (
                        mode,
                        name,
                        seen,
                    )


@pytest.mark.anyio
async def test_upstream_progress_reaches_the_downstream_caller(
    read_only_web: HttpServerProcess,
) -> None:
    web = read_only_web
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(
        progress: float, total: float | None, message: str | None
    ) -> None:
        seen.append((progress, total, message))

    async with (
        running_gateway([parse_spec("web", web.url, FAST)], wait_for=["web"]) as (
            gateway,
            _,
            _,
        ),
        session(str(gateway.url)) as client,
    ):
        result = await client.call_tool(
            "web__sleep", {"seconds": 0.3}, progress_callback=on_progress
        )
        assert text_of(result) == "slept 0.3"
        # The first report is surely in before the result; the last may race it.
        assert seen and seen[0] == (0, 0.3, "sleeping")


@pytest.mark.anyio
async def test_upstreams_killed_mid_session_keep_the_session_and_the_tool_list(
    make_http_server: HttpServerFactory,
) -> None:
    # Both upstreams are the hand-written servers: what is tested is the
    # gateway's session across their deaths, not the SDK's server (a tenth of
    # its start-up CPU, and this one is started twice).
    web = make_http_server("http", raw=True)
    specs = [raw("fast"), parse_spec("web", web.url, {**FAST, "hold": 0.5})]
    notes: list[object] = []
    async with (
        running_gateway(specs, wait_for=["fast", "web"]) as (gateway, manager, rec),
        session(str(gateway.url), notes=notes) as client,
    ):
        before = sorted(t.name for t in (await client.list_tools()).tools)

        # stdio: the server dies, comes back within hold, the call just works.
        pid = manager.status("fast").pid  # type: ignore[union-attr]
        seen = rec.last_seq
        os.kill(int(str(pid)), signal.SIGKILL)
        await rec.wait_for("disconnected", "fast", after=seen)
        assert text_of(await client.call_tool("fast__echo", {"text": "a"})) == "a"
        assert manager.status("fast").pid != pid  # type: ignore[union-attr]

        # HTTP: down beyond hold, the call fails with the server's status.
        await web.akill()
        outcome = await client.call_tool("web__echo", {"text": "b"})
        assert outcome.is_error and "web" in text_of(outcome)
        await rec.wait_for("connect_failed", "web")
        held = await client.call_tool("web__echo", {"text": "c"})
        message = text_of(held)
        assert held.is_error
        assert "web__echo: web is reconnecting (attempt" in message
        assert "next retry in" in message and "connection refused" in message
        status = (held.meta or {})["mcp-manager/error"]
        assert status["state"] == "reconnecting" and status["attempt"] >= 1

        # The tool list is the same throughout: last known tools stay listed.
        assert sorted(t.name for t in (await client.list_tools()).tools) == before
        await web.astart()
        await rec.wait_for("connected", "web", after=seen)
        assert text_of(await client.call_tool("web__echo", {"text": "d"})) == "d"
        assert sorted(t.name for t in (await client.list_tools()).tools) == before
        assert not any(isinstance(n, types.ToolListChangedNotification) for n in notes)


@pytest.mark.anyio
async def test_upstream_tool_changes_notify_every_downstream_session(
    make_http_server: HttpServerFactory,
) -> None:
    web = make_http_server("http")
    first: list[object] = []
    second: list[object] = []

    def changed(notes: list[object]) -> int:
        return sum(isinstance(n, types.ToolListChangedNotification) for n in notes)

    async with (
        running_gateway([parse_spec("web", web.url, FAST)], wait_for=["web"]) as (
            gateway,
            _,
            _,
        ),
        session(str(gateway.url), notes=first) as one,
        session(str(gateway.url), notes=second) as two,
    ):
        await two.list_tools()  # both sessions have made a request
        await one.call_tool("web__add_tool", {"name": "extra"})
        await wait_until(lambda: changed(first) >= 1 and changed(second) >= 1)
        names = {t.name for t in (await two.list_tools()).tools}
        assert "web__extra" in names
        assert text_of(await two.call_tool("web__extra", {"k": 1})) == '{"k": 1}'
        await one.call_tool("web__remove_tool", {"name": "extra"})
        await wait_until(lambda: changed(first) >= 2 and changed(second) >= 2)
        assert "web__extra" not in {t.name for t in (await one.list_tools()).tools}
        assert gateway.sessions == 2


@pytest.mark.anyio
async def test_downstream_cancellation_cancels_the_upstream_call() -> None:
    async with (
        running_gateway([demo_stdio("demo")], wait_for=["demo"]) as (gateway, _, rec),
        session(str(gateway.url)) as client,
    ):
        with anyio.fail_after(10):
            with pytest.raises(MCPError, match="timed out"):
                await client.call_tool(
                    "demo__sleep", {"seconds": 30}, read_timeout_seconds=0.3
                )
            failed = await rec.wait_for("call_failed", "demo")
        assert failed.error == "cancelled"  # type: ignore[attr-defined]
        assert failed.duration < 5  # type: ignore[attr-defined]
        assert text_of(await client.call_tool("demo__echo", {"text": "ok"})) == "ok"


@pytest.mark.anyio
async def test_a_server_that_never_connected_gets_a_clear_error_after_hold() -> None:
    specs = [parse_spec("offline", "http://127.0.0.1:9/mcp", {**FAST, "hold": 0.2})]
    async with (
        running_gateway(specs) as (gateway, _, rec),
        session(str(gateway.url)) as client,
    ):
        await rec.wait_for("connect_failed", "offline")
        assert (await client.list_tools()).tools == []
        result = await client.call_tool("offline__echo", {})
        assert result.is_error
        assert "offline is reconnecting" in text_of(result)
        assert "connection refused (127.0.0.1:9)" in text_of(result)


# ------------------------------------------------------------------------ security


@pytest.mark.anyio
async def test_bad_host_and_origin_are_rejected_before_mcp() -> None:
    async with running_gateway([]) as (gateway, _, _):
        url = str(gateway.url)
        port = url.split(":")[2].split("/")[0]
        body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        headers = {"accept": "application/json, text/event-stream"}
        async with httpx2.AsyncClient() as http:
            evil = await http.post(
                url, json=body, headers={**headers, "origin": "http://evil.example"}
            )
            assert evil.status_code == 403
            assert "evil.example" in evil.json()["error"]["message"]
            other_port = await http.post(
                url, json=body, headers={**headers, "origin": "http://localhost:1"}
            )
            assert other_port.status_code == 403
            rebound = await http.post(
                url, json=body, headers={**headers, "host": f"attacker.example:{port}"}
            )
            assert rebound.status_code == 421
        own = {"origin": f"http://localhost:{port}"}
        async with session(url, headers=own) as client:
            await client.send_ping()


@pytest.mark.anyio
async def test_other_paths_than_the_endpoint_are_still_answered_by_starlette() -> None:
    async with running_gateway([]) as (gateway, _, _):
        url = str(gateway.url)
        async with httpx2.AsyncClient() as http:
            missing = await http.post(url.replace("/mcp", "/other"), json={})
            assert missing.status_code == 404
            slash = await http.post(url + "/", json={})
            assert slash.status_code == 307  # Starlette's redirect to /mcp
            assert slash.headers["location"].endswith("/mcp")
        async with session(url) as client:  # the endpoint itself, called direct
            await client.send_ping()


@pytest.mark.anyio
async def test_a_token_is_required_when_configured() -> None:
    options = EndpointOptions("127.0.0.1", 0, token="s3cret-token")
    async with running_gateway([raw("fast")], options, wait_for=["fast"]) as (
        gateway,
        _,
        _,
    ):
        url = str(gateway.url)
        async with httpx2.AsyncClient() as http:
            for auth in (None, "Bearer wrong", "s3cret-token", "Bearer s3cret-tokenX"):
                headers = {"authorization": auth} if auth else {}
                response = await http.post(url, json={}, headers=headers)
                assert response.status_code == 401, auth
                assert response.headers["www-authenticate"].startswith("Bearer")
        good = {"authorization": "Bearer s3cret-token"}
        async with session(url, headers=good) as client:
            assert text_of(await client.call_tool("fast__echo", {"text": "ok"})) == "ok"


# ---------------------------------------------------------------- end to end


def write_script(path: Path, *specs: tuple[str, str, list[str]]) -> Path:
    lines = [
        f"mcp_add({json.dumps(name)}, {{command = {json.dumps(cmd)}, "
        f"args = {{{', '.join(json.dumps(a) for a in args)}}}}})"
        for name, cmd, args in specs
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.anyio
async def test_the_daemon_serves_the_endpoint_and_survives_an_upstream_kill(
    tmp_path: Path,
) -> None:
    port = free_port()
    script = write_script(tmp_path / "startup.lua", ("fast", *raw_command()))
    with DaemonProcess(script, "--listen", f"127.0.0.1:{port}") as daemon:
        up = await anyio.to_thread.run_sync(daemon.wait_event, "connected", "fast")
        url = f"http://127.0.0.1:{port}/mcp"
        async with session(url, headers=daemon.headers()) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert names == ["fast__echo", "fast__pid", "fast__crash"]
            pid = int(text_of(await client.call_tool("fast__pid", {})))
            assert pid == up["pid"]
            os.kill(pid, signal.SIGKILL)
            await anyio.to_thread.run_sync(daemon.wait_event, "disconnected", "fast")
            # The session survives; the call waits for the restart (hold).
            assert text_of(await client.call_tool("fast__echo", {"text": "x"})) == "x"
            assert int(text_of(await client.call_tool("fast__pid", {}))) != pid
        daemon.signal(signal.SIGTERM)
        assert await anyio.to_thread.run_sync(daemon.wait, 10) == 0
    assert "MCP endpoint listening at " + url in daemon.log()


@pytest.mark.anyio
async def test_stdio_mode_serves_mcp_on_its_own_stdin_and_stdout(
    tmp_path: Path,
) -> None:
    script = write_script(tmp_path / "startup.lua", ("fast", *raw_command()))
    log = tmp_path / "gateway.log"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "manager", "stdio", str(script), "--log-level", "INFO"]
        + ["--log-file", str(log)],
        env={"XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]},  # not the user's
    )
    with anyio.fail_after(20):
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            # The first list waits for connections still on their first attempt.
            names = [t.name for t in (await client.list_tools()).tools]
            assert names == ["fast__echo", "fast__pid", "fast__crash"]
            assert text_of(await client.call_tool("fast__echo", {"text": "s"})) == "s"
    text = log.read_text()
    assert "stdio client closed the connection" in text and "stopped" in text


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_argument_of_several_megabytes_gets_through_the_http_front(
    mode: str,
) -> None:
    """A 5 MiB argument (a file as base64, say): the SDK's 4 MiB default
    answered 413 and the client saw -32603 (found by the endpoint audit)."""
    text = "x" * (5 * 1024 * 1024)
    async with (
        running_gateway([demo_memory("a")], wait_for=["a"], memory=MemoryServers()) as (
            gateway,
            _,
            _,
        ),
        Client(str(gateway.url), mode=mode) as client,
    ):
        # `pid` ignores what it is not asked for: a small answer (the SDK
        # client reads no SSE event over 1 MiB, straight or through us)
        done = await client.call_tool("a__pid", {"padding": text})
        assert not done.is_error and text_of(done).isdigit()
