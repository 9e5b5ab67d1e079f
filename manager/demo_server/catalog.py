"""The demo's prompts, resources, resource template and completions.

A client that aggregates servers has to pass all of these through, so the demo
offers one of each kind (text and image content, an embedded resource, a text
and a blob resource, a URI template, completions for both reference kinds) and
tools that change the lists at runtime or poke a subscribed resource, so list
changes and `resources/updated` can be tested on demand.

Handshake-era clients get `notifications/*` on their standalone channel (list
changes through `Peers`, resource updates only to the sessions that subscribed
to that URI); 2026-07-28 clients get the same events on the subscription bus
that serves their `subscriptions/listen` streams.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import mcp.types as types
from mcp.server import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    SubscriptionBus,
)
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ..mcpserver.peers import NOTIFY_TIMEOUT, Peers, session_key
from .toolkit import arg_str, page, text_result

__all__ = [
    "ITEM_ID_COMPLETIONS",
    "ITEM_TEMPLATE",
    "LOGO_URI",
    "NAME_COMPLETIONS",
    "PNG_1X1",
    "README_TEXT",
    "README_URI",
    "RESOURCE_NOT_FOUND",
    "Catalog",
]

logger = logging.getLogger(__name__)

RESOURCE_NOT_FOUND = -32002
"""The error code for an unknown resource URI in the handshake-era spec (the
SDK has no constant: 2026-07-28 retired the code)."""

README_URI = "demo://readme"
README_TEXT = "The demo server bundled with mcp-manager.\n"
LOGO_URI = "demo://logo"
PNG_1X1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kg"
    "AAAABJRU5ErkJggg=="
)
"""A valid 1x1 RGBA PNG, base64: the logo resource and the `with_image` prompt."""
ITEM_TEMPLATE = "demo://items/{id}"
_ITEM_URI = re.compile(r"demo://items/([^/]+)")

NAME_COMPLETIONS = ("alice", "albert", "bob")
"""What `completion/complete` offers for the `greet` prompt's `name`."""
ITEM_ID_COMPLETIONS = ("1", "2", "10", "11")
"""What `completion/complete` offers for the item template's `id`."""

_Render = Callable[[Mapping[str, str]], types.GetPromptResult]


@dataclass(frozen=True, slots=True)
class _Prompt:
    prompt: types.Prompt
    render: _Render


@dataclass(frozen=True, slots=True)
class _Resource:
    resource: types.Resource
    contents: types.TextResourceContents | types.BlobResourceContents


def _user(content: types.ContentBlock) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=content)


def _render_greet(args: Mapping[str, str]) -> types.GetPromptResult:
    name = args["name"]
    style = args.get("style")
    description = f"Greets {name}" + (f" in a {style} style" if style else "")
    return types.GetPromptResult(
        description=description,
        messages=[_user(types.TextContent(type="text", text=f"Hello, {name}!"))],
    )


def _readme_contents() -> types.TextResourceContents:
    return types.TextResourceContents(
        uri=README_URI, mime_type="text/plain", text=README_TEXT
    )


def _render_with_resource(args: Mapping[str, str]) -> types.GetPromptResult:
    return types.GetPromptResult(
        description="Embeds the readme resource.",
        messages=[_user(types.EmbeddedResource(resource=_readme_contents()))],
    )


def _render_with_image(args: Mapping[str, str]) -> types.GetPromptResult:
    return types.GetPromptResult(
        description="Shows the logo.",
        messages=[_user(types.ImageContent(data=PNG_1X1, mime_type="image/png"))],
    )


def _builtin_prompts() -> list[_Prompt]:
    greet = types.Prompt(
        name="greet",
        description="Greet someone by name.",
        arguments=[
            types.PromptArgument(name="name", description="Who.", required=True),
            types.PromptArgument(
                name="style", description="How (e.g. formal).", required=False
            ),
        ],
    )
    return [
        _Prompt(greet, _render_greet),
        _Prompt(
            types.Prompt(
                name="with_resource", description="A message embedding a resource."
            ),
            _render_with_resource,
        ),
        _Prompt(
            types.Prompt(name="with_image", description="A message with an image."),
            _render_with_image,
        ),
    ]


def _builtin_resources() -> list[_Resource]:
    return [
        _Resource(
            types.Resource(
                name="readme",
                uri=README_URI,
                description="A short text.",
                mime_type="text/plain",
            ),
            _readme_contents(),
        ),
        _Resource(
            types.Resource(
                name="logo",
                uri=LOGO_URI,
                description="A 1x1 PNG.",
                mime_type="image/png",
            ),
            types.BlobResourceContents(
                uri=LOGO_URI, mime_type="image/png", blob=PNG_1X1
            ),
        ),
    ]


_TEMPLATES = (
    types.ResourceTemplate(
        name="item",
        uri_template=ITEM_TEMPLATE,
        description="Any item by id; reads as 'item {id}'.",
        mime_type="text/plain",
    ),
)


def _cursor(params: types.PaginatedRequestParams | None) -> str | None:
    return params.cursor if params is not None else None


def _prefixed(choices: Sequence[str], prefix: str) -> types.CompleteResult:
    values = [choice for choice in choices if choice.startswith(prefix)]
    return types.CompleteResult(
        completion=types.Completion(values=values, total=len(values), has_more=False)
    )


class Catalog:
    """Prompts, resources and completions, with the tools that change them.

    Args:
        page_size: Entries per page of every list.
        peers: The handshake-era sessions that get `list_changed`.
        bus: The subscription bus of the 2026-07-28 listen streams.
    """

    def __init__(self, page_size: int, peers: Peers, bus: SubscriptionBus) -> None:
        self._page_size = page_size
        self._peers = peers
        self._bus = bus
        self._prompts = {entry.prompt.name: entry for entry in _builtin_prompts()}
        self._resources = {entry.resource.uri: entry for entry in _builtin_resources()}
        self._subscribers: dict[str, dict[str, ServerSession]] = {}
        """URI -> session key -> the session that subscribed to it."""

    # -- prompts -----------------------------------------------------------------

    async def list_prompts(
        self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        prompts = [entry.prompt for entry in self._prompts.values()]
        items, next_cursor = page(prompts, _cursor(params), self._page_size)
        return types.ListPromptsResult(prompts=items, next_cursor=next_cursor)

    async def get_prompt(
        self, ctx: ServerRequestContext, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        """Render a prompt; INVALID_PARAMS for an unknown one or a missing argument."""
        entry = self._prompts.get(params.name)
        if entry is None:
            raise MCPError(INVALID_PARAMS, f"unknown prompt {params.name!r}")
        args = params.arguments or {}
        for argument in entry.prompt.arguments or ():
            if argument.required and argument.name not in args:
                raise MCPError(
                    INVALID_PARAMS,
                    f"prompt {params.name!r} needs the argument {argument.name!r}",
                )
        return entry.render(args)

    # -- resources ---------------------------------------------------------------

    async def list_resources(
        self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        resources = [entry.resource for entry in self._resources.values()]
        items, next_cursor = page(resources, _cursor(params), self._page_size)
        return types.ListResourcesResult(resources=items, next_cursor=next_cursor)

    async def list_resource_templates(
        self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        items, next_cursor = page(_TEMPLATES, _cursor(params), self._page_size)
        return types.ListResourceTemplatesResult(
            resource_templates=items, next_cursor=next_cursor
        )

    async def read_resource(
        self, ctx: ServerRequestContext, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        """Read a listed resource or an item; -32002 for anything else."""
        entry = self._resources.get(params.uri)
        if entry is not None:
            return types.ReadResourceResult(contents=[entry.contents])
        match = _ITEM_URI.fullmatch(params.uri)
        if match is not None:
            text = f"item {match.group(1)}"
            contents = types.TextResourceContents(
                uri=params.uri, mime_type="text/plain", text=text
            )
            return types.ReadResourceResult(contents=[contents])
        raise MCPError(
            RESOURCE_NOT_FOUND,
            f"resource not found: {params.uri}",
            data={"uri": params.uri},
        )

    async def subscribe(
        self, ctx: ServerRequestContext, params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        """Remember the session for `touch_resource` (any URI may be watched)."""
        self._subscribers.setdefault(params.uri, {})[session_key(ctx)] = ctx.session
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        sessions = self._subscribers.get(params.uri, {})
        sessions.pop(session_key(ctx), None)
        if not sessions:
            self._subscribers.pop(params.uri, None)
        return types.EmptyResult()

    # -- completion --------------------------------------------------------------

    async def complete(
        self, ctx: ServerRequestContext, params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        """Complete `greet`'s `name` and the item template's `id` by prefix.

        Other arguments of a known prompt or template have no suggestions (an
        empty list); an unknown prompt or template is INVALID_PARAMS.
        """
        ref, argument = params.ref, params.argument
        if isinstance(ref, types.PromptReference):
            if ref.name not in self._prompts:
                raise MCPError(INVALID_PARAMS, f"unknown prompt {ref.name!r}")
            wanted = (ref.name, argument.name) == ("greet", "name")
            return _prefixed(NAME_COMPLETIONS if wanted else (), argument.value)
        if ref.uri != ITEM_TEMPLATE:
            raise MCPError(INVALID_PARAMS, f"unknown resource template {ref.uri!r}")
        wanted = argument.name == "id"
        return _prefixed(ITEM_ID_COMPLETIONS if wanted else (), argument.value)

    # -- tools -------------------------------------------------------------------

    async def add_prompt(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        """Tool: add an argument-less prompt and announce the new list."""
        name = arg_str(args, "name")
        if name in self._prompts:
            return text_result(f"prompt {name!r} already exists", is_error=True)
        prompt = types.Prompt(name=name, description="Added at runtime.")

        def render(_: Mapping[str, str]) -> types.GetPromptResult:
            text = f"Prompt {name}, added at runtime."
            return types.GetPromptResult(
                messages=[_user(types.TextContent(type="text", text=text))]
            )

        self._prompts[name] = _Prompt(prompt, render)
        await self._prompts_changed()
        return text_result(f"added prompt {name}")

    async def remove_prompt(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        """Tool: remove any prompt (built-in ones too) and announce the new list."""
        name = arg_str(args, "name")
        if self._prompts.pop(name, None) is None:
            return text_result(f"no prompt {name!r}", is_error=True)
        await self._prompts_changed()
        return text_result(f"removed prompt {name}")

    async def add_resource(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        """Tool: add a text resource and announce the new list."""
        uri, text = arg_str(args, "uri"), arg_str(args, "text")
        if not uri:
            return text_result("the uri must not be empty", is_error=True)
        if uri in self._resources:
            return text_result(f"resource {uri!r} already exists", is_error=True)
        resource = types.Resource(
            name=uri, uri=uri, description="Added at runtime.", mime_type="text/plain"
        )
        contents = types.TextResourceContents(
            uri=uri, mime_type="text/plain", text=text
        )
        self._resources[uri] = _Resource(resource, contents)
        await self._resources_changed()
        return text_result(f"added resource {uri}")

    async def remove_resource(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        """Tool: remove any listed resource and announce the new list."""
        uri = arg_str(args, "uri")
        if self._resources.pop(uri, None) is None:
            return text_result(f"no resource {uri!r}", is_error=True)
        await self._resources_changed()
        return text_result(f"removed resource {uri}")

    async def touch_resource(
        self, ctx: ServerRequestContext, args: dict[str, Any]
    ) -> types.CallToolResult:
        """Tool: send `resources/updated` for a URI to the sessions subscribed to it.

        Returns how many handshake-era sessions were sent it, as text; 2026
        listen streams get the event from the bus and are not counted.
        """
        uri = arg_str(args, "uri")
        await self._bus.publish(ResourceUpdated(uri))
        sessions = self._subscribers.get(uri, {})
        notification = types.ResourceUpdatedNotification(
            params=types.ResourceUpdatedNotificationParams(uri=uri)
        )
        notified = 0
        for key, session in list(sessions.items()):
            try:
                with anyio.fail_after(NOTIFY_TIMEOUT):
                    await session.send_notification(notification)
            except Exception:  # boundary: a gone client must not stop the others
                logger.debug("dropping subscriber %s of %s (notify failed)", key, uri)
                sessions.pop(key, None)
            else:
                notified += 1
        return text_result(str(notified))

    async def _prompts_changed(self) -> None:
        await self._bus.publish(PromptsListChanged())
        await self._peers.notify_prompts_changed()

    async def _resources_changed(self) -> None:
        await self._bus.publish(ResourcesListChanged())
        await self._peers.notify_resources_changed()
