"""The official MCP reference server, `@modelcontextprotocol/server-everything`.

Pinned to 2026.8.31 in `tests/node/package.json` (+ `package-lock.json`; it pulls
in the TypeScript SDK `@modelcontextprotocol/sdk` 1.32.2). `make test` installs
it with `npm ci --prefix tests/node --no-audit --no-fund` when npm exists;
without it, the `everything_*` fixtures (tests/conftest.py) skip the test.

Helpers: `everything_stdio_command()` gives `(command, args)` for stdio;
`serve_everything(transport)` runs it over `"sse"` or `"http"` on a free
127.0.0.1 port and yields the URL; `EverythingServer` is the same as an object
(`.url`, `.pid`, `.port`, `.log_text()`, `start/stop/kill`) for tests that need
to kill or restart it. Everything below was read from the package source in
`tests/node/node_modules` or measured with the SDK 2.3 client (marked *seen*).

Starting it
-----------
- `node dist/index.js [stdio|sse|streamableHttp]` (`bin` mcp-server-everything;
  default `stdio`; anything else prints usage to stderr and exits 1). No other
  arguments, no `--help`. The only setting is the `PORT` env var (default
  3001); there is no host option and `app.listen(PORT)` binds every interface,
  so `EverythingServer` preloads a tiny module (`node --import data:...`) that
  binds 127.0.0.1 instead. It listens about 0.23 s after spawn (*seen*).
- URLs: streamable HTTP `POST/GET/DELETE /mcp`; SSE `GET /sse`, whose `endpoint`
  event is `/message?sessionId=<uuid>` for the POSTs. CORS `*`, no auth, no
  Host/Origin checks.
- Logs (both go to `log_path` here): stdio writes one stderr line, `Starting
  default (STDIO) server...` (plus errors). SSE writes to stderr: `Starting SSE
  server...`, `Server is running on port N`, `Client Connected:  <sid>`,
  `Client Message from <sid>` per POST. Streamable HTTP writes to stdout
  `Starting Streamable HTTP server...`, `Received MCP POST request` per POST,
  `Session initialized with ID: <sid>`, `Received MCP GET request`, `Received
  session termination request for session <sid>`, and to stderr `MCP Streamable
  HTTP Server listening on port N` (or the EADDRINUSE message, exit 1).
- Signals: no SIGTERM handler, so SIGTERM kills it at once (status -15, what
  `stop()` returns). SIGINT: stdio and streamable HTTP exit 0; SSE dies.
- stdio and stdin EOF: it exits about 0.35 s after EOF (a 350 ms roots timer
  armed at `initialized`), *but not* while `toggle-simulated-logging` or
  `toggle-subscriber-updates` is on: their intervals keep node alive, so the
  SDK's `stdio_client` teardown waits its 2 s grace and SIGTERMs it (*seen*).

Identity and capabilities (*seen*)
----------------------------------
`server_info`: name `mcp-servers/everything`, title `Everything Reference
Server`, version `2.0.0`; `instructions` = its docs/instructions.md. Capabilities:
tools.listChanged, prompts.listChanged, resources.subscribe + listChanged,
logging, completions, tasks (list, cancel, requests.tools.call). Protocol
versions 2025-11-25 (latest; what `ClientSession.initialize()` gets), 2025-06-18,
2025-03-26, 2024-11-05, 2024-10-07; no 2026-07-28, and `mcp.Client(url)`
(`mode="auto"`) falls back to initialize at once (0.06 s, no 10 s wait).
Every list fits in one page (`next_cursor` None).

Tools
-----
Always (13): `echo` (message) -> text `Echo: <message>`; `get-sum` (a, b);
`get-annotated-message` (messageType error|success|debug, includeImage);
`get-env` (the server's whole environment as JSON: never pass secrets);
`get-resource-links` (count 1-10, default 3; `resource_link` blocks);
`get-resource-reference` (resourceType Text|Blob, resourceId int; an embedded
`resource`); `get-structured-content` (location "New York"|"Chicago"|"Los
Angeles"; has an outputSchema and returns `structuredContent`); `get-tiny-image`;
`gzip-file-as-resource` (name, data, outputType resourceLink|resource; the
default `data` is a GitHub URL, so pass a `data:` URI offline; it registers
`demo://resource/session/<name>` and sends `notifications/resources/list_changed`);
`toggle-simulated-logging`; `toggle-subscriber-updates`;
`trigger-long-running-operation`; `simulate-research-query` (topic, ambiguous;
taskSupport "required": a plain `tools/call` gives an `is_error` result with
"MCP error -32601: Tool simulate-research-query requires task augmentation").

Gated on client capabilities, registered when `notifications/initialized`
arrives, each followed by a `notifications/tools/list_changed` (5 in a row):
- `get-roots-list` (no args): needs roots (`list_roots_callback`).
- `trigger-sampling-request` (prompt, maxTokens=100): needs sampling
  (`sampling_callback`). SAMPLING: sends `sampling/createMessage` with one user
  message `Resource trigger-sampling-request context: <prompt>`, systemPrompt
  `You are a helpful test server.`, temperature 0.7; returns text `LLM sampling
  result: \n<result JSON>`. The server gives the client 60 s.
- `trigger-elicitation-request` (no args): needs elicitation
  (`elicitation_callback`). ELICITATION: form-mode `elicitation/create`, message
  `Please provide inputs for the following fields:`, a 13-field schema (only
  `name` required); answers "accept"/"decline"/"cancel" give texts starting
  with ✅ / ❌ / ⚠️ plus `Raw result: ...`. The server waits 10 min.
- `trigger-url-elicitation` (url, message, elicitationId, errorPath): needs
  elicitation.url (the SDK advertises form + url whenever an
  `elicitation_callback` is given). URL-mode `elicitation/create`, or with
  errorPath=true the MCP error -32042 (UrlElicitationRequiredError).
- `trigger-sampling-request-async` / `trigger-elicitation-request-async`: need
  the client capability `tasks.requests.*`, which SDK 2.3's ClientSession never
  advertises, so they never appear.
So: 13 tools with no callbacks, 16 with sampling + elicitation, 17 with roots.

Notifications
-------------
- LOGGING: `toggle-simulated-logging` starts, for the calling session, one
  random-level message at once and one every 5 s (levels debug..emergency,
  data e.g. `Error-level message - SessionId <sid>`, no logger); call it again
  to stop. Filtered by `logging/setLevel`. Also sent: an info log for each
  `resources/subscribe` / `unsubscribe` (`Received Subscribe Resource request for
  URI: <uri> ...`), and, 350 ms after `initialized` if the client has roots, a
  `roots/list` request followed by an info log from logger `everything-server`:
  `Roots updated: N root(s) received from client`.
- RESOURCE UPDATES: `resources/subscribe` (any URI, even an unknown one), then
  `toggle-subscriber-updates`: `notifications/resources/updated {uri}` at once
  and every 5 s for each subscribed URI; call it again to stop. Subscriptions
  are process-global and never removed when a session ends.
- PROGRESS: `trigger-long-running-operation` (duration s, default 10; steps,
  default 5) sleeps duration/steps per step and sends `notifications/progress`
  (progress i, total steps, no message) only when the call carries a
  progressToken (`call_tool(..., progress_callback=...)`); result text `Long
  running operation completed. Duration: <d> seconds, Steps: <n>.` With its
  defaults it is the slow tool for cancellation and timeout tests.
- SDK 2.3 marks `set_logging_level`, `subscribe_resource` and
  `unsubscribe_resource` deprecated: each emits MCPDeprecationWarning, an
  error under our `filterwarnings = error`; wrap them in `pytest.warns`.

Prompts
-------
`simple-prompt` (no arguments); `args-prompt` (city required, state optional)
-> `What's weather in <city>[, <state>]?`; `completable-prompt` (department,
name; both required) -> `Please promote <name> to the head of the <department>
team.`; `resource-prompt` (resourceType "Text"|"Blob", resourceId a positive
integer as a string; both required) -> a text message plus an embedded resource.

Resources
---------
Listed: `demo://resource/static/document/<file>.md` (text/markdown) for
architecture, extension, features, how-it-works, instructions, startup,
structure. Templates: `demo://resource/dynamic/text/{resourceId}` ("Dynamic Text
Resource", text/plain) and `demo://resource/dynamic/blob/{resourceId}` ("Dynamic
Blob Resource"); resourceId must be a positive integer (else error `Unknown
resource: <uri>`); the text includes the local time, so it changes. Per session:
`demo://resource/session/<name>` from `gzip-file-as-resource`.

Completions (`completion/complete`)
-----------------------------------
- ref/prompt `completable-prompt`: `department` by prefix over Engineering,
  Sales, Marketing, Support ("S" -> Sales, Support, *seen*); `name` from
  `context.arguments.department` (Engineering: Alice, Bob, Charlie; Sales:
  David, Eve, Frank; Marketing: Grace, Henry, Iris; Support: John, Kim, Lee;
  none: []).
- ref/prompt `resource-prompt`: `resourceType` (Text, Blob); `resourceId` echoes
  a positive integer, else [].
- ref/resource, both templates: `resourceId` echoes a positive integer ("7" ->
  ["7"], *seen*).

Per transport
-------------
- stdio: one session per process. stdio and SSE deliver the 5 `list_changed`
  notifications sent just after initialize (*seen*).
- streamable HTTP: one server and session per `mcp-session-id`. Requests and
  notifications tied to a call (sampling, elicitation, progress) go on that
  `tools/call`'s POST SSE response stream (relatedRequestId; checked with raw
  HTTP). Everything else (log messages, resources/updated, list_changed, the
  roots/list request) goes on the standalone GET stream, so the 5 list_changed
  sent right after initialize are lost: the client has not opened the GET stream
  yet and they are only stored for a Last-Event-ID replay (*seen*: none
  arrive). Responses are always SSE (no JSON mode); an in-memory event store
  (never pruned) allows resuming with Last-Event-ID. DELETE ends the session
  and stops its intervals. An unknown or stale `mcp-session-id` gets HTTP 400
  (`-32000 Bad Request: No valid session ID provided`), not 404, so a client
  will not re-initialize by itself after a server restart.
- SSE: works with the SDK's `sse_client`, including sampling, elicitation,
  roots, progress and logging (*seen*). A POST to an unknown sessionId is never
  answered (the server only logs `No transport found for sessionId ...`), so
  after a server restart an old client's requests hang until its own timeout.
"""

from __future__ import annotations

import base64
import json
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Literal

import pytest

from .process import HttpServerProcess, live_servers

__all__ = [
    "INSTALL_COMMAND",
    "INSTALL_HINT",
    "NODE_DIR",
    "PACKAGE",
    "PACKAGE_DIR",
    "EverythingNotInstalled",
    "EverythingServer",
    "everything_entry",
    "everything_stdio_command",
    "everything_version",
    "live_everything_pids",
    "require_everything",
    "serve_everything",
]

PACKAGE = "@modelcontextprotocol/server-everything"
NODE_DIR = Path(__file__).resolve().parent.parent / "node"
"""`tests/node`: the npm project that pins the server (`package-lock.json`)."""
PACKAGE_DIR = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything"
INSTALL_COMMAND = (
    "run `make test`, or `npm ci --prefix tests/node --no-audit --no-fund` "
    "(needs node >= 20 and npm)"
)
INSTALL_HINT = f"{PACKAGE} is not installed: {INSTALL_COMMAND}"

_LOOPBACK_PRELOAD = """\
import net from "node:net";
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  const numeric = typeof port === "number" || /^[0-9]+$/.test(String(port));
  if (numeric && typeof args[1] !== "string") args.splice(1, 0, "127.0.0.1");
  return listen.apply(this, args);
};
"""
"""Makes `app.listen(PORT)` bind 127.0.0.1 instead of every interface.

The server only reads `PORT` and has no host option; this module is loaded with
`node --import data:...` before it starts.
"""
_LOOPBACK_IMPORT = "data:text/javascript;base64," + base64.b64encode(
    _LOOPBACK_PRELOAD.encode()
).decode("ascii")

_SCRIPT_NAMES = {"sse": "sse", "http": "streamableHttp"}


class EverythingNotInstalled(RuntimeError):
    """The npm package (or node itself) is missing; the message says how to fix it."""


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        raise EverythingNotInstalled(f"`node` is not on PATH. {INSTALL_HINT}")
    return node


def _package_json() -> dict[str, object]:
    manifest = PACKAGE_DIR / "package.json"
    if not manifest.is_file():
        raise EverythingNotInstalled(INSTALL_HINT)
    data: dict[str, object] = json.loads(manifest.read_text())
    return data


def _pinned_version() -> str:
    manifest = json.loads((NODE_DIR / "package.json").read_text())
    return str(manifest["dependencies"][PACKAGE])


def everything_version() -> str:
    """The installed version, e.g. `"2026.8.31"` (pinned in tests/node/package.json).

    Raises:
        EverythingNotInstalled: The package is not installed.
    """
    return str(_package_json()["version"])


def everything_entry() -> Path:
    """The server's entry script (its `bin`: `dist/index.js`), run with `node`.

    Raises:
        EverythingNotInstalled: The package is not installed, or is not the
            version `tests/node/package.json` pins (a stale `node_modules`).
    """
    manifest = _package_json()
    if (installed := str(manifest["version"])) != (pinned := _pinned_version()):
        raise EverythingNotInstalled(
            f"{PACKAGE} {installed} is installed but tests/node pins {pinned}: "
            + INSTALL_COMMAND
        )
    bins = manifest.get("bin")
    relative = bins.get("mcp-server-everything") if isinstance(bins, dict) else bins
    entry = PACKAGE_DIR / str(relative or "dist/index.js")
    if not entry.is_file():
        raise EverythingNotInstalled(f"{entry} is missing. {INSTALL_HINT}")
    return entry


def require_everything() -> Path:
    """`everything_entry()`, or `pytest.skip` naming the install command."""
    try:
        _node()
        return everything_entry()
    except EverythingNotInstalled as exc:
        pytest.skip(str(exc))


def everything_stdio_command() -> tuple[str, list[str]]:
    """`(command, args)` that run the server over stdio, for `StdioServerParameters`.

    Raises:
        EverythingNotInstalled: node or the package is missing.
    """
    return _node(), [str(everything_entry()), "stdio"]


def live_everything_pids() -> set[int]:
    """PIDs of the `EverythingServer`s that are running right now."""
    return {
        pid
        for pid, server in live_servers().items()
        if isinstance(server, EverythingServer) and server.running
    }


class EverythingServer(HttpServerProcess):
    """The reference server over SSE or streamable HTTP, in a `node` child process.

    An `HttpServerProcess` (same start, stop, kill and reaping) whose command
    is node with the pinned package. The port is picked once (free on
    127.0.0.1, passed as `PORT`, the only setting the server has) and kept
    across `start()` calls.

    Args:
        transport: `"http"` (streamable HTTP, URL ends in `/mcp`) or `"sse"`
            (legacy HTTP+SSE, URL ends in `/sse`).
        env: Extra environment variables (e.g. `GZIP_ALLOWED_DOMAINS`).
        port: The port to use; a free one by default.
        log_path: Where stdout and stderr go (appended to); a file in a new
            temporary directory by default.

    Raises:
        EverythingNotInstalled: node or the package is missing.
    """

    def __init__(
        self,
        transport: Literal["http", "sse"] = "http",
        *,
        env: Mapping[str, str] | None = None,
        port: int | None = None,
        log_path: Path | None = None,
    ) -> None:
        super().__init__(
            transport,
            env=env,
            port=port,
            log_path=log_path
            or Path(tempfile.mkdtemp(prefix="everything-")) / "server.log",
        )
        self.argv = [
            _node(),
            "--import",
            _LOOPBACK_IMPORT,
            str(everything_entry()),
            _SCRIPT_NAMES[transport],
        ]

    def _launch(self) -> tuple[list[str], dict[str, str], Path | None]:
        return self.argv, {**self.env, "PORT": str(self.port)}, NODE_DIR

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextmanager
def serve_everything(
    transport: Literal["http", "sse"] = "http",
    *,
    env: Mapping[str, str] | None = None,
    log_path: Path | None = None,
) -> Iterator[str]:
    """Run the server on a free 127.0.0.1 port; yield its URL; stop and reap it.

    Raises:
        EverythingNotInstalled: node or the package is missing.
        RuntimeError: The server exited early or did not listen in time.
    """
    with EverythingServer(transport, env=env, log_path=log_path) as server:
        yield server.url
