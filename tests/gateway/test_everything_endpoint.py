"""The official reference server behind our endpoint: what a client gets through
mcp-manager is what it would get directly, names prefixed.

`@modelcontextprotocol/server-everything` (npm, pinned in tests/node) runs over
stdio, SSE and streamable HTTP; the downstream is the SDK's `ClientSession`
over our HTTP endpoint, declaring sampling and elicitation.
"""

from __future__ import annotations

from pathlib import Path

import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from servers.everything import EverythingServer, require_everything
from support.clients import Client, downstream
from support.gateway import running_gateway, text_of, wait_until

from manager.core.spec import ConnectionSpec, parse_spec

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]

FAST = {"backoff": {"initial": 0.05, "cap": 0.4}}


def stdio_spec(command: tuple[str, list[str]], **opts: object) -> ConnectionSpec:
    cmd, args = command
    return parse_spec("e", {"command": cmd, "args": args}, {**FAST, **opts})


async def same_through_the_endpoint(client: ClientSession, prefix: str) -> None:
    """Prompts, resources, templates, completion and a read, as the reference
    server gives them, with tool and prompt names prefixed."""
    head = f"{prefix}__" if prefix else ""
    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    assert {f"{head}simple-prompt", f"{head}args-prompt"} <= set(prompts)
    args = {a.name for a in prompts[f"{head}args-prompt"].arguments or []}
    assert args == {"city", "state"}
    got = await client.get_prompt(f"{head}args-prompt", {"city": "Lyon"})
    assert "Lyon" in str(got.messages[0].content)
    resources = {str(r.uri) for r in (await client.list_resources()).resources}
    readme = "demo://resource/static/document/features.md"
    assert readme in resources  # URIs pass through unchanged
    read = await client.read_resource(readme)
    assert str(read.contents[0].uri) == readme
    templates = (await client.list_resource_templates()).resource_templates
    template = "demo://resource/dynamic/text/{resourceId}"
    assert template in {t.uri_template for t in templates}
    dynamic = await client.read_resource("demo://resource/dynamic/text/3")
    assert dynamic.contents
    done = await client.complete(
        types.PromptReference(type="ref/prompt", name=f"{head}completable-prompt"),
        {"name": "department", "value": "S"},
    )
    assert set(done.completion.values) >= {"Sales", "Support"}


async def test_everything_over_stdio_with_sampling_and_elicitation(
    everything_stdio: tuple[str, list[str]],
) -> None:
    async with running_gateway([stdio_spec(everything_stdio)], wait_for=("e",)) as (
        gateway,
        _,
        _,
    ):
        assert gateway.url is not None
        await wait_until(lambda: "e__trigger-sampling-request" in gateway.table.routes)
        client = Client()
        async with downstream(gateway.url, client) as session:
            await same_through_the_endpoint(session, "e")
            sampled = await session.call_tool(
                "e__trigger-sampling-request", {"prompt": "hi", "maxTokens": 10}
            )
            assert "a sampled reply" in text_of(sampled)
            elicited = await session.call_tool("e__trigger-elicitation-request", {})
            assert client.asked and not elicited.is_error


async def test_everything_as_a_bridge_keeps_its_own_names(
    everything_stdio: tuple[str, list[str]],
) -> None:
    spec = stdio_spec(everything_stdio, prefix="")
    async with running_gateway([spec], wait_for=("e",)) as (gateway, _, _):
        assert gateway.url is not None
        async with downstream(gateway.url, Client()) as session:
            await same_through_the_endpoint(session, "")
            echoed = await session.call_tool("echo", {"message": "hi"})
            assert text_of(echoed) == "Echo: hi"


@pytest.mark.parametrize("transport", ["sse", "http"])
async def test_everything_over_sse_and_http(
    transport: str, everything_sse: str, everything_http: str
) -> None:
    url = everything_sse if transport == "sse" else everything_http
    spec = parse_spec("e", {"url": url, "transport": transport}, FAST)
    async with running_gateway([spec], wait_for=("e",)) as (gateway, _, _):
        assert gateway.url is not None
        async with downstream(gateway.url, Client()) as session:
            await same_through_the_endpoint(session, "e")


async def test_a_subscription_survives_the_upstream_being_killed(
    tmp_path: Path,
) -> None:
    """server-everything over SSE: subscribed through us, its updates flow; it is
    killed and started again on the same port; updates flow again without the
    client doing anything (the gateway subscribes again upstream)."""
    require_everything()
    server = EverythingServer("sse", log_path=tmp_path / "everything.log")
    server.start()
    try:
        spec = parse_spec("e", {"url": server.url, "transport": "sse"}, FAST)
        async with running_gateway([spec], wait_for=("e",)) as (gateway, _, rec):
            assert gateway.url is not None
            client = Client()
            async with downstream(gateway.url, client) as session:
                uri = "demo://resource/static/document/features.md"
                subscribe = types.SubscribeRequest(
                    params=types.SubscribeRequestParams(uri=uri)
                )
                await session.send_request(subscribe, types.EmptyResult)

                def updates() -> int:
                    return sum(
                        isinstance(n, types.ResourceUpdatedNotification)
                        for n in client.notes
                    )

                await session.call_tool("e__toggle-subscriber-updates", {})
                await wait_until(lambda: updates() >= 1)
                server.kill()
                await rec.wait_for("disconnected", "e")
                server.start()
                await rec.wait_for("connected", "e")
                before = updates()
                # A fresh server process sends updates only once told to.
                await session.call_tool("e__toggle-subscriber-updates", {})
                await wait_until(lambda: updates() > before)
    finally:
        server.stop()


async def test_results_through_the_endpoint_equal_direct_ones(
    everything_stdio: tuple[str, list[str]],
) -> None:
    """Same requests, directly and through us: equal results, names prefixed."""
    cmd, args = everything_stdio
    params = StdioServerParameters(command=cmd, args=args)
    async with (
        running_gateway([stdio_spec(everything_stdio)], wait_for=("e",)) as (
            gateway,
            _,
            _,
        ),
        stdio_client(params) as (read, write),
        ClientSession(read, write) as direct,
    ):
        await direct.initialize()
        assert gateway.url is not None
        async with downstream(gateway.url, Client()) as through:
            listed = (await direct.list_prompts()).prompts
            via = {p.name: p for p in (await through.list_prompts()).prompts}
            for prompt in listed:
                mine = via[f"e__{prompt.name}"]
                assert mine.model_copy(update={"name": prompt.name}) == prompt
            asked = {"city": "Lyon", "state": "Rhône"}
            assert await through.get_prompt(
                "e__args-prompt", asked
            ) == await direct.get_prompt("args-prompt", asked)
            uri = "demo://resource/static/document/features.md"
            assert await through.read_resource(uri) == await direct.read_resource(uri)
            direct_resources = (await direct.list_resources()).resources
            assert (await through.list_resources()).resources == direct_resources
            ref = types.PromptReference(type="ref/prompt", name="completable-prompt")
            via_ref = types.PromptReference(
                type="ref/prompt", name="e__completable-prompt"
            )
            argument = {"name": "department", "value": "S"}
            assert await through.complete(via_ref, argument) == await direct.complete(
                ref, argument
            )
