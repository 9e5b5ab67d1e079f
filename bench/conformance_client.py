"""The daemon as the client of the official MCP conformance suite.

The suite runs `CMD URL` with `MCP_CONFORMANCE_SCENARIO` and
`MCP_CONFORMANCE_CONTEXT` set (see `bench/conformance.py`). This command plays
a user of mcp-manager: it writes a startup.lua declaring the server (for the
client-credentials scenarios, with `oauth = {...}` from the context, the
issuer read from the server's protected resource metadata as a user would
copy it from their provider's page), runs `mcp-manager run`, waits until the
connection is up, lists its tools and calls `test-tool` through the control
socket, then stops the daemon.

Run by the suite: `python bench/conformance_client.py URL`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from manager.control.client import ControlClient  # noqa: E402
from manager.core.errors import ManagerError  # noqa: E402

WAIT = 20.0


def get_json(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=5) as response:
        data: dict[str, object] = json.loads(response.read())
        return data


def issuer_of(server_url: str) -> str:
    """The authorization server's issuer, as the server's metadata names it."""
    parts = urlsplit(server_url)
    origin = f"{parts.scheme}://{parts.netloc}"
    prm = get_json(f"{origin}/.well-known/oauth-protected-resource{parts.path}")
    servers = prm.get("authorization_servers")
    assert isinstance(servers, list) and servers
    auth = str(servers[0]).rstrip("/")
    a = urlsplit(auth)
    meta = get_json(
        f"{a.scheme}://{a.netloc}/.well-known/oauth-authorization-server{a.path}"
    )
    return str(meta["issuer"])


def main() -> int:
    url = sys.argv[1]
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    work = Path(tempfile.mkdtemp(prefix="mm-conf-"))
    options = ["hold = 5"]
    env = dict(os.environ)
    if "client_secret" in context:
        env["CONF_SECRET"] = str(context["client_secret"])
        method = (
            "client_secret_post"
            if "post" in str(context.get("name"))
            else ("client_secret_basic")
        )
        options.append(
            'oauth = {grant = "client_credentials", '
            f"client_id = {json.dumps(context['client_id'])}, "
            'client_secret = "${env:CONF_SECRET}", '
            f"issuer = {json.dumps(issuer_of(url))}, "
            f"auth_method = {json.dumps(method)}}}"
        )
    script = work / "startup.lua"
    script.write_text(f'mcp_add("conf", {json.dumps(url)}, {{{", ".join(options)}}})\n')
    sock = work / "control.sock"
    daemon = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "manager",
            "run",
            str(script),
            "--no-hud",
            "--no-telemetry",
            "--socket",
            str(sock),
        ],
        env=env,
        stderr=open(work / "daemon.log", "wb"),
    )
    client = ControlClient(sock)
    try:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                status = client.status()
                if status and status[0].state == "connected":
                    break
            except ManagerError:
                pass
            time.sleep(0.1)
        else:
            print(f"never connected; see {work / 'daemon.log'}", file=sys.stderr)
            return 1
        tools = [row["name"] for row in client.catalog("tools", "conf")]
        if "test-tool" in tools:
            client.call("conf", "test-tool", {})
        return 0
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(10)


if __name__ == "__main__":
    sys.exit(main())
