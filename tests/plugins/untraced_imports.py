"""A pytest plugin for `make test`: the libraries imports, before coverage starts.

`make test` loads it with `-p untraced_imports` (this directory on
`PYTHONPATH`). In an xdist worker it imports, at plugin load, the third-party
modules the test modules and the package import at module level, so that
collection finds them imported. Coverage (pytest-cov) starts right after the
plugins are loaded and traces every Python frame from then on (Python 3.11 has
no `sys.monitoring`): importing the SDK's pydantic models, textual,
hypothesis, OpenTelemetry... under it cost each worker about 2.4 CPU-seconds
more than importing them here (4 workers on 2 cores: about 5 s of wall time
before the first test).

Nothing of `manager` is imported here, directly or through a library: its
module-level lines must run under coverage, or they would count as missed.
A module missing from `MODULES` costs collection time, never a result; the
xdist controller (which collects nothing) imports nothing.

The first process (the xdist controller, or a run without xdist) also writes
pytest's cache of the test modules with their asserts rewritten, where it is
missing or stale (`_rewrite_tests`), as pytest's own import hook would at
collection. On a fresh clone each worker would otherwise rewrite every test
module itself, under coverage, all four at once before any has written the
cache: measured, a collection of 20.9 s against 10.6 s with the cache
(with coverage; the rewriting alone is 2.3 s untraced, once). It uses
pytest's private rewriting functions: if they change, it does nothing and
collection is as slow as before, never different (the cache is keyed by the
source's hash and pytest's version, and read by pytest's own code).

It also warms Hypothesis's caches (`_warm_hypothesis`) at session start,
with its coverage paused, while the workers start: the literal constants of
each of our modules, which Hypothesis reads from their source to try as
examples (cached in `.hypothesis/constants` by the source's hash), and its
Unicode table. The first property test of each worker otherwise computes
them under coverage: 4.3 s more for one such test in a fresh clone, against
0.85 s untraced, once. A worker that gets there first computes what it needs,
as before.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

MODULES = (
    "anyio",
    "anyio.abc",
    "anyio.from_thread",
    "anyio.lowlevel",
    "anyio.streams.buffered",
    "anyio.streams.memory",
    "anyio.to_thread",
    "bm25s",
    "bm25s.stopwords",
    "cryptography.hazmat.primitives",
    "cryptography.hazmat.primitives.asymmetric.ec",
    "cryptography.hazmat.primitives.asymmetric.ed25519",
    "cryptography.hazmat.primitives.asymmetric.rsa",
    "cryptography.hazmat.primitives.serialization",
    "grpc",
    "httpx2",
    "hypothesis",
    "hypothesis.strategies",
    "lupa.lua54",
    "mcp",
    "mcp.client.auth",
    "mcp.client.auth.extensions.client_credentials",
    "mcp.client.auth.oauth2",
    "mcp.client.session",
    "mcp.client.sse",
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "mcp.client.subscriptions",
    "mcp.server",
    "mcp.server.lowlevel.server",
    "mcp.server.sse",
    "mcp.server.stdio",
    "mcp.server.streamable_http",
    "mcp.server.streamable_http_manager",
    "mcp.server.subscriptions",
    "mcp.server.transport_security",
    "mcp.shared.auth",
    "mcp.shared.exceptions",
    "mcp.shared.memory",
    "mcp.types",
    "mcp_types",
    "opentelemetry.metrics",
    "opentelemetry.propagate",
    "opentelemetry.proto.collector.metrics.v1.metrics_service_pb2",
    "opentelemetry.proto.collector.trace.v1.trace_service_pb2",
    "opentelemetry.sdk.metrics",
    "opentelemetry.sdk.metrics.export",
    "opentelemetry.sdk.metrics.view",
    "opentelemetry.sdk.resources",
    "opentelemetry.sdk.trace",
    "opentelemetry.sdk.trace.export",
    "opentelemetry.sdk.trace.export.in_memory_span_exporter",
    "opentelemetry.sdk.trace.sampling",
    "opentelemetry.semconv._incubating.attributes.gen_ai_attributes",
    "opentelemetry.semconv._incubating.attributes.mcp_attributes",
    "opentelemetry.semconv._incubating.metrics.mcp_metrics",
    "opentelemetry.trace",
    "psutil",
    "pydantic",
    "rich.console",
    "rich.table",
    "rich.text",
    "snowballstemmer",
    "starlette.applications",
    "starlette.requests",
    "starlette.responses",
    "starlette.routing",
    "textual.app",
    "textual.containers",
    "textual.pilot",
    "textual.screen",
    "textual.widgets",
    "uvicorn",
)
"""What the test modules and the package import at module level, less the
standard library and ourselves (measured after a collection)."""


def _preload() -> None:
    for name in MODULES:
        importlib.import_module(name)
    ours = sorted(m for m in sys.modules if m == "manager" or m.startswith("manager."))
    if ours:  # it would hide their module-level lines from coverage
        raise RuntimeError(f"untraced_imports imported the package: {ours}")


def _rewrite_tests() -> None:
    if sys.dont_write_bytecode:
        return
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return
    tests = Path(__file__).resolve().parent.parent
    if "enable_assertion_pass_hook" in (tests.parent / "pyproject.toml").read_text():
        return  # rewriting would then read the config, which is not loaded yet
    for path in sorted(tests.rglob("*.py")):
        if not (path.name.startswith("test_") or path.name == "conftest.py"):
            continue
        if "node_modules" in path.parts:
            continue
        try:
            pyc = rewrite.get_cache_dir(path) / (path.name[:-3] + rewrite.PYC_TAIL)
            if rewrite._read_pyc(path, pyc, _ignore) is not None:
                continue  # cached and current
            # config None: only `enable_assertion_pass_hook` reads it when
            # rewriting, and pyproject.toml leaves it off (checked above)
            source_hash, code = rewrite._rewrite_test(path, None)  # type: ignore[arg-type]
            pyc.parent.mkdir(exist_ok=True)
            rewrite._write_pyc(_State(), code, source_hash, pyc)  # type: ignore[arg-type]
        except SyntaxError:
            continue  # collection will say
        except (AttributeError, TypeError, ValueError, OSError):
            return  # pytest changed, or the folder is read-only


def _warm_hypothesis() -> None:
    try:
        from hypothesis.internal.charmap import charmap
        from hypothesis.internal.constants_ast import constants_from_module
    except ImportError:
        return
    root = Path(__file__).resolve().parent.parent.parent
    try:
        charmap()
        for folder in ("manager", "bench"):
            for path in sorted((root / folder).rglob("*.py")):
                # read from the file named, never imported here: the package's
                # module-level lines must first run under coverage
                module = types.ModuleType(path.stem)
                module.__file__ = str(path)
                constants_from_module(module)
    except Exception:  # a cache: the workers compute what is missing
        return


class _State:
    """What `_write_pyc` needs of pytest's assertion state: a trace."""

    @staticmethod
    def trace(*_args: object) -> None:
        return None


def _ignore(*_args: object) -> None:
    return None


if os.environ.get("PYTEST_XDIST_WORKER"):
    _preload()
else:
    _rewrite_tests()


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """In the first process, after Hypothesis's session start (its storage
    may be touched from then on), while the xdist workers start: with its
    coverage paused as pytest-cov's `no_cover` pauses it (nothing of ours runs
    here, so coverage has nothing to miss)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    plugin = session.config.pluginmanager.get_plugin("_cov")
    cov: Any = getattr(plugin, "cov_controller", None)
    if cov is None or not getattr(cov, "started", False):
        _warm_hypothesis()
        return
    cov.pause()
    try:
        _warm_hypothesis()
    finally:
        cov.resume()
