"""The daemon as the client of the official MCP conformance suite.

The suite runs `CMD URL` with `MCP_CONFORMANCE_SCENARIO` and
`MCP_CONFORMANCE_CONTEXT` set (see `bench/conformance.py`). This command plays
a user of mcp-manager:

* it writes a startup.lua declaring the server as a user would: nothing more
  for a server that logs in with discovery and dynamic registration;
  `oauth = {client_id, client_secret}` when the context hands out a
  pre-registered client; `oauth = {client_metadata_url}` for the client ID
  metadata document scenario; `oauth = {grant = "client_credentials", ...}`
  for the headless ones, with `client_secret` or with `private_key` (the
  PEM key the context hands out, for private_key_jwt), the issuer read from
  the server's protected resource metadata, as a user would copy it from
  their provider's page;
* it runs `mcp-manager run` and waits until the connection is `connected`,
  `needs_login` or `refused`;
* whenever it is `needs_login` it runs `mcp-manager login conf --no-browser`
  and stands in for the browser: it GETs the authorization URL `login` prints
  without following the redirect (the conformance authorization server
  approves at once), then GETs the `Location`, which is the daemon's loopback
  callback. It keeps no count of its own: the daemon stops asking
  (`refused`) when logins keep being refused (`MAX_LOGINS` only guards against
  a daemon that never does);
* it lists the tools and calls `test-tool` through the control socket; a call
  refused with `needs_login` (a server asking for more scope) is made again
  after the next login;
* it stops the daemon (SIGTERM) and keeps its log (stderr) in the work folder
  when the scenario failed (or with MM_CONF_KEEP=1); a passing one leaves nothing
  (`MM_CONF_LOG_LEVEL=DEBUG` for a detailed one).

Run by the suite: `python bench/conformance_client.py URL`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from manager.control.client import ControlClient  # noqa: E402
from manager.core.errors import ManagerError  # noqa: E402

WAIT = 20.0
"""Seconds to wait for the connection to settle (connected or needs_login)."""

LOGIN_TIMEOUT = 30.0
"""`login --timeout`."""

MAX_LOGINS = 10
"""Logins at most for one run: a daemon asking for more never stops asking."""

CIMD_URL = "https://conformance-test.local/client-metadata.json"
"""The client ID metadata document URL `auth/basic-cimd` expects."""

NAME = "conf"


ACCEPT: dict[str, object] = {"action": "accept", "content": {"confirmed": True}}
"""The answer to a server's question during a call (`call --answer`)."""


def log(text: str) -> None:
    print(f"conformance_client: {text}", file=sys.stderr, flush=True)


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


def oauth_options(
    scenario: str, url: str, context: dict[str, object], env: dict[str, str]
) -> str | None:
    """The `oauth = {...}` a user would declare for this server, if any."""
    if "private_key_pem" in context:
        # private_key_jwt: the key in the environment, the algorithm from it.
        env["CONF_KEY"] = str(context["private_key_pem"])
        return (
            'oauth = {grant = "client_credentials", '
            f"client_id = {json.dumps(context['client_id'])}, "
            'private_key = "${env:CONF_KEY}", '
            f"issuer = {json.dumps(issuer_of(url))}}}"
        )
    if "client_secret" in context and "client-credentials" in scenario:
        env["CONF_SECRET"] = str(context["client_secret"])
        method = "client_secret_post" if "post" in scenario else "client_secret_basic"
        return (
            'oauth = {grant = "client_credentials", '
            f"client_id = {json.dumps(context['client_id'])}, "
            'client_secret = "${env:CONF_SECRET}", '
            f"issuer = {json.dumps(issuer_of(url))}, "
            f"auth_method = {json.dumps(method)}}}"
        )
    if "client_id" in context:
        # A client registered beforehand with the authorization server.
        env["CONF_SECRET"] = str(context.get("client_secret") or "")
        secret = ', client_secret = "${env:CONF_SECRET}"' if env["CONF_SECRET"] else ""
        return f"oauth = {{client_id = {json.dumps(context['client_id'])}{secret}}}"
    if scenario == "auth/basic-cimd":
        return f"oauth = {{client_metadata_url = {json.dumps(CIMD_URL)}}}"
    return None


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def browse(url: str) -> None:
    """Be the browser: open the authorization URL, follow its one redirect."""
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(url, timeout=10) as response:
            location = response.headers.get("Location")
            status = response.status
    except urllib.error.HTTPError as exc:  # 3xx land here without a handler
        location = exc.headers.get("Location")
        status = exc.code
    if not location:
        log(f"the authorization endpoint answered {status} without a redirect")
        return
    try:
        with urllib.request.urlopen(location, timeout=10) as response:
            log(f"callback answered {response.status}")
    except urllib.error.HTTPError as exc:
        log(f"callback answered {exc.code}")


def login(sock: Path, env: dict[str, str]) -> bool:
    """`mcp-manager login conf --no-browser`, with this process as the browser."""
    command = [
        sys.executable,
        "-m",
        "manager",
        "login",
        NAME,
        "--no-browser",
        "--socket",
        str(sock),
        "--timeout",
        str(LOGIN_TIMEOUT),
    ]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.strip()
        if line.startswith(("http://", "https://")):
            browse(line)
            break
    proc.stdout.read()
    code = proc.wait(LOGIN_TIMEOUT + 40)
    log(f"login exited {code}")
    return code == 0


SETTLED = ("connected", "needs_login", "refused")
"""States the connection waits in (for a call, a login, the user)."""


def settle(client: ControlClient, leave: str = "") -> tuple[str, str]:
    """Wait until the connection is connected, waits for a login or stopped
    asking (and is no longer in state `leave`). Returns its state and error."""
    deadline = time.monotonic() + WAIT
    state, error = "unknown", ""
    while time.monotonic() < deadline:
        try:
            status = client.status()
        except ManagerError:
            status = []
        if status:
            state, error = status[0].state, status[0].error or ""
            if state in SETTLED and state != leave:
                return state, error
        time.sleep(0.1)
    return state, error


def use(client: ControlClient, sock: Path, env: dict[str, str]) -> int:
    """Log in whenever asked, list the tools and call `test-tool`."""
    logins = 0
    state, error = settle(client)
    while True:
        if state == "needs_login":
            if logins >= MAX_LOGINS:
                log(f"the daemon still asks for a login after {logins}; giving up")
                return 1
            logins += 1
            login(sock, env)  # returns once the try that used it ended
            state, error = settle(client)
            continue
        if state == "refused":
            log(f"the daemon stopped asking after {logins} logins: {error}")
            return 1
        if state != "connected":
            log(f"the connection never settled (state {state})")
            return 1
        try:
            rows = client.catalog("tools", NAME)
            tools = [row.name for row in rows]
            if "test-tool" in tools:
                client.call(NAME, "test-tool", {})
            else:  # the non-auth scenarios: every tool, arguments by its schema
                for row in rows:
                    args = arguments_for(dict(row.input_schema))
                    try:
                        # A user who says yes to whatever the server asks.
                        client.call(NAME, row.name, args, answer=ACCEPT)
                    except ManagerError as exc:  # the suite judges what it saw
                        log(f"{row.name}: {exc}")
            log(f"tools {tools} listed and called")
            return 0
        except ManagerError as exc:
            log(f"the call failed: {exc}")
            state, error = settle(client, leave="connected")
            if state == "connected":
                return 1  # failed for another reason: the suite judges it


SAMPLES: dict[str, object] = {
    "number": 2,
    "integer": 2,
    "string": "Grüße, 世界 ✓",  # not ASCII: header values get base64
    "boolean": True,
    "object": {},
    "array": [],
}
"""An argument value of each JSON type, for tools the suite serves."""


def arguments_for(schema: dict[str, object]) -> dict[str, object]:
    """Arguments a user would give: each required property, a value of its type."""
    props = schema.get("properties")
    required = schema.get("required")
    if not isinstance(props, dict) or not isinstance(required, list):
        return {}
    out: dict[str, object] = {}
    for key in required:
        prop = props.get(key)
        kind = prop.get("type") if isinstance(prop, dict) else None
        out[str(key)] = SAMPLES.get(str(kind), "x")
    return out


def main() -> int:
    url = sys.argv[1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    work = Path(tempfile.mkdtemp(prefix="mm-conf-"))
    env = dict(os.environ)
    env["XDG_STATE_HOME"] = str(work / "state")
    options = ["hold = 5"]
    oauth = oauth_options(scenario, url, context, env)
    if oauth is not None:
        options.append(oauth)
    script = work / "startup.lua"
    table = ", ".join(options)
    script.write_text(f'mcp_add("{NAME}", {json.dumps(url)}, {{{table}}})\n')
    sock = work / "control.sock"
    log(f"{scenario}: work folder {work}")
    with open(work / "daemon.log", "wb") as daemon_log:
        daemon = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "manager",
                "run",
                str(script),
                "--no-hud",
                "--no-telemetry",
                "--log-level",
                os.environ.get("MM_CONF_LOG_LEVEL", "INFO"),
                "--socket",
                str(sock),
            ],
            env=env,
            cwd=ROOT,
            stderr=daemon_log,
        )
        code = 1
        try:
            code = use(ControlClient(sock), sock, env)
            return code
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(10)
            if code == 0 and not os.environ.get("MM_CONF_KEEP"):
                shutil.rmtree(work, ignore_errors=True)  # kept when it failed


if __name__ == "__main__":
    sys.exit(main())
