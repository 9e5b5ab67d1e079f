"""An MCP Apps server (`io.modelcontextprotocol/ui`), on the SDK's `MCPServer`.

It offers the extension and one view, `ui://weather/view.html` (an HTML
document, `text/html;profile=mcp-app`), named by its tools' `_meta.ui`:

- `show_weather(city)`: for the model and the view; returns
  `weather in CITY from LABEL`;
- `refresh_weather(city)`: for the view only (`visibility: ["app"]`);
  returns `refreshed CITY from LABEL`;
- `apps_declared()`: `yes` or `no`, whether the calling client declared the
  extension (what a server behind the daemon sees of its client).

`LABEL` (`--label`) tells two copies apart. Run: `python
tests/servers/apps.py --label NAME` (stdio).
"""

from __future__ import annotations

import argparse
import sys

from mcp.server.extension import Extension
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.exceptions import MCPError

UI = "io.modelcontextprotocol/ui"
VIEW = "ui://weather/view.html"
APP_MIME = "text/html;profile=mcp-app"

__all__ = ["VIEW", "build"]


class Apps(Extension):
    """The extension, advertised with no settings."""

    identifier = UI


def build(label: str) -> MCPServer:
    """The server, its answers signed with `label`."""
    server = MCPServer("apps", extensions=[Apps()])

    @server.resource(VIEW, name="weather view", mime_type=APP_MIME)
    def view() -> str:
        """The weather view."""
        return f"<!doctype html><title>weather from {label}</title>"

    @server.tool(meta={"ui": {"resourceUri": VIEW}})
    def show_weather(city: str) -> str:
        """Show the weather in `city`."""
        return f"weather in {city} from {label}"

    @server.tool(meta={"ui": {"resourceUri": VIEW, "visibility": ["app"]}})
    def refresh_weather(city: str) -> str:
        """Refresh the view's data for `city` (the view calls it)."""
        return f"refreshed {city} from {label}"

    @server.tool()
    def apps_declared(ctx: Context) -> str:
        """Whether the calling client declared MCP Apps."""
        try:
            require_client_extension(ctx.request_context, UI)
        except MCPError:
            return "no"
        return "yes"

    return server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--label", default="apps")
    args = parser.parse_args()
    build(args.label).run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
