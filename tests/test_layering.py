"""Enforce the import direction of style.md ("Package layout and dependency direction").

Every `manager/**/*.py` is parsed with `ast` (nothing is imported). Four rules:

1. Package-internal imports point down `LAYERS`, never up or sideways to a later
   module, and each room imports only what its row of `ROOM_IMPORTS` (style.md's
   per-room table) allows. A module in a subpackage (`manager/hud/app.py`)
   belongs to the layer of its top-level name (`hud`). Importing the package
   root (`from . import __version__`) is always allowed.
2. Each third-party library has one door (`DOORS`), and the pure core imports
   none of them nor anything on `PURE_CORE_FORBIDDEN`.
3. Nobody in the package imports a module in `LEAVES` (e.g. the demo server).
4. A module in `CONFINED` imports only the package modules listed for it: the
   demo server stands on `mcpserver` alone, never on the gateway or the engine.

Modules missing from `LAYERS` (`__init__`, `__main__`, the demo server) may exist,
but a module in the table may import only modules that are in it. To add a module,
put its name at the right height in `LAYERS`; to add a library door, extend `DOORS`.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# These read the source as text and run none of it: nothing for coverage to
# measure, and its tracer doubles the time of the AST walks.
pytestmark = pytest.mark.no_cover

PACKAGE = "manager"
PACKAGE_DIR = Path(__file__).resolve().parent.parent / PACKAGE

LAYERS: tuple[str, ...] = (
    "core",
    "files",
    "transport",
    "engine",
    "lua",
    "logs",
    "telemetry",
    "hud",
    "control",
    "mcpserver",
    "gateway",
    "daemon",
    "cli",
)
"""Bottom first: a module may import only modules listed before it."""

PURE_CORE = frozenset({"core"})
"""No I/O, clocks, randomness or third-party runtime (style.md habit 3)."""

DOORS: dict[str, frozenset[str]] = {
    "mcp": frozenset({"transport", "mcpserver", "gateway", "demo_server"}),
    "mcp_types": frozenset({"transport", "mcpserver", "gateway", "demo_server"}),
    "lupa": frozenset({"lua"}),
    "rich": frozenset({"hud"}),
    "textual": frozenset({"hud"}),
    "opentelemetry": frozenset({"telemetry"}),
    # The MCP server side: the aggregated endpoint (and the demo server);
    # `mcpserver` reads a request's session id off starlette's `Request`.
    "uvicorn": frozenset({"gateway", "demo_server"}),
    "starlette": frozenset({"mcpserver", "gateway", "demo_server"}),
    # Tool discovery's ranking and stemming (gateway/discovery.py), and the
    # optional sentence-embedding model it may fuse (gateway/semantic.py).
    "bm25s": frozenset({"gateway"}),
    "snowballstemmer": frozenset({"gateway"}),
    "numpy": frozenset({"gateway"}),
    # Secret references in the OS keychain (engine/vault.py).
    "keyring": frozenset({"engine"}),
    "tokenizers": frozenset({"gateway"}),
    "safetensors": frozenset({"gateway"}),
}
"""Third-party top-level package -> the only modules that may import it."""

SUBMODULE_DOORS: dict[str, frozenset[str]] = {
    "mcp.server": frozenset({"mcpserver", "gateway", "demo_server"}),
    "mcp.client": frozenset({"transport"}),
}
"""Finer doors inside a library: the SDK's server side vs its client side."""

PURE_CORE_FORBIDDEN = frozenset(
    {"anyio", "asyncio", "trio", "time", "datetime", "random", "httpx", *DOORS}
)
"""Top-level packages the pure core must not import."""

LEAVES = frozenset({"demo_server", "cli"})
"""Modules nobody in the package imports (`__main__` may still run the CLI)."""

LEAF_IMPORTERS_ALLOWED = {"cli": frozenset({"__main__"})}
"""Exceptions to LEAVES: `python -m manager` calls `cli.main`."""

CONFINED: dict[str, frozenset[str]] = {"demo_server": frozenset({"mcpserver"})}
"""Modules outside LAYERS -> the only package modules each may import (the
package root aside): the demo server shares the server side with the endpoint
(`mcpserver`) and nothing else, so it never loads the gateway or the engine."""


ROOM_IMPORTS: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "files": frozenset(),
    "transport": frozenset({"core", "files"}),
    # The transport's seam, its facade (`mcp_transport`) and the OAuth facade,
    # nothing concrete (`transport.__init__` is the package itself).
    "engine": frozenset(
        {"core", "files", "transport.__init__", "transport.base", "transport.oauth"}
    ),
    "lua": frozenset({"core"}),
    # Sinks see events and the typed status, never the manager.
    "logs": frozenset({"core", "engine.bus", "engine.tracing"}),
    "telemetry": frozenset({"core", "engine.bus", "engine.tracing"}),
    "hud": frozenset({"core", "engine.bus", "engine.tracing"}),
    "control": frozenset({"core", "engine"}),
    "mcpserver": frozenset({"core"}),
    # style.md: core, engine. Also the transport's seam (`Upstream`, the
    # progress callback, the request link), never its SDK client side; and
    # where the state directory is (the endpoint's own token file lives there),
    # the socket rules of `control.paths` (HTTP on a Unix socket), and the
    # attach socket's key (`control.keys`).
    "gateway": frozenset(
        {"core", "files", "engine", "mcpserver", "transport.base"}
        | {"control.paths", "control.keys"}
    ),
    "daemon": frozenset(
        {"core", "files", "transport", "engine", "lua", "logs", "telemetry", "hud"}
        | {"control", "gateway"}
    ),
    # style.md: daemon, control's client, core. Also what the light commands
    # run in the CLI process itself: `check` runs the Lua, `status` renders the
    # HUD's table, `stdio` answers `initialize` before loading the gateway.
    "cli": frozenset(
        {"core", "daemon", "control.client", "control.paths", "control.protocol"}
        | {"lua", "hud.render", "hud.run", "gateway.early", "gateway.options"}
        | {"engine.vault"}  # `secret set` stores in the keychain
        | {"engine.calllog"}  # `log` reads the call log itself
    ),
}
"""style.md's per-room table: room -> the package rooms (or `room.module`)
its modules may import, besides their own room and the package root."""


@dataclass(frozen=True)
class Import:
    """One import statement's target, resolved to absolute dotted form."""

    source: Path
    line: int
    target: str

    @property
    def top(self) -> str:
        return self.target.split(".")[0]

    @property
    def internal(self) -> str | None:
        """The package module imported (top-level name), "" for the root, or None."""
        parts = self.target.split(".")
        if parts[0] != PACKAGE:
            return None
        return parts[1] if len(parts) > 1 else ""

    def __str__(self) -> str:
        rel = self.source.relative_to(PACKAGE_DIR.parent)
        return f"{rel}:{self.line} imports {self.target}"


def module_files() -> list[Path]:
    return sorted(PACKAGE_DIR.rglob("*.py"))


def dotted_name(path: Path) -> list[str]:
    parts = [PACKAGE, *path.relative_to(PACKAGE_DIR).with_suffix("").parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def layer_of(path: Path) -> str:
    """`manager/spec.py` -> "spec", `manager/hud/app.py` -> "hud"."""
    parts = dotted_name(path)
    return parts[1] if len(parts) > 1 else "__init__"


def _is_submodule(dotted: str) -> bool:
    parts = dotted.split(".")
    if parts[0] != PACKAGE:
        return False
    rel = PACKAGE_DIR.joinpath(*parts[1:])
    return rel.with_suffix(".py").is_file() or (rel / "__init__.py").is_file()


def imports_of(path: Path) -> Iterator[Import]:
    """Every import in `path`, including function-level and TYPE_CHECKING ones."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    name = dotted_name(path)
    package = name if path.name == "__init__.py" else name[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(path, node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                # `from . import spec` imports a module; `from . import X` else an attr.
                candidate = f"{module}.{alias.name}"
                yield Import(
                    path, node.lineno, candidate if _is_submodule(candidate) else module
                )


@functools.cache
def all_imports() -> list[Import]:
    """Every import in the package, parsed once per process when a test asks
    (not at collection: each xdist worker collects this module)."""
    return [imp for path in module_files() for imp in imports_of(path)]


def room_violations(imports: list[Import]) -> list[str]:
    """Imports a room's row of ROOM_IMPORTS does not allow."""
    problems = []
    for imp in imports:
        source = layer_of(imp.source)
        target = imp.internal
        allowed = ROOM_IMPORTS.get(source)
        if allowed is None or target is None or target in ("", source):
            continue
        parts = imp.target.split(".")
        # `room.module`, or `room.__init__` for the room's package itself
        module = ".".join(parts[1:3]) if len(parts) > 2 else f"{target}.__init__"
        if target not in allowed and module not in allowed:
            rooms = ", ".join(sorted(allowed)) or "nothing"
            problems.append(f"{imp}: {source!r} may import only {rooms}")
    return problems


def layer_violations(imports: list[Import]) -> list[str]:
    rank = {name: i for i, name in enumerate(LAYERS)}
    problems = []
    for imp in imports:
        source = layer_of(imp.source)
        target = imp.internal
        if source not in rank or target is None or target in ("", source):
            continue
        if target not in rank:
            problems.append(f"{imp}: {target!r} is not in LAYERS; add it there")
        elif rank[target] > rank[source]:
            problems.append(f"{imp}: {target!r} is above {source!r} in LAYERS")
    return problems


def door_violations(imports: list[Import]) -> list[str]:
    problems = []
    for imp in imports:
        source = layer_of(imp.source)
        doors = DOORS.get(imp.top)
        if doors is not None and source not in doors:
            allowed = ", ".join(sorted(doors))
            problems.append(f"{imp}: {imp.top} may be imported only in {allowed}")
        if source in PURE_CORE and imp.top in PURE_CORE_FORBIDDEN:
            problems.append(f"{imp}: the pure core must not import {imp.top}")
        for prefix, sub_doors in SUBMODULE_DOORS.items():
            if (
                imp.target == prefix or imp.target.startswith(prefix + ".")
            ) and source not in sub_doors:
                allowed = ", ".join(sorted(sub_doors))
                problems.append(f"{imp}: {prefix} may be imported only in {allowed}")
    return problems


def leaf_violations(imports: list[Import]) -> list[str]:
    return [
        f"{imp}: nobody in the package may import {imp.internal!r}"
        for imp in imports
        if imp.internal in LEAVES
        and layer_of(imp.source) != imp.internal
        and layer_of(imp.source) not in LEAF_IMPORTERS_ALLOWED.get(imp.internal, ())
    ]


def confinement_violations(imports: list[Import]) -> list[str]:
    problems = []
    for imp in imports:
        source = layer_of(imp.source)
        allowed = CONFINED.get(source)
        target = imp.internal
        if allowed is None or target in (None, "", source) or target in allowed:
            continue
        only = ", ".join(sorted(allowed))
        problems.append(f"{imp}: {source!r} may import only {only} of the package")
    return problems


# ---------------------------------------------------------------- the rules


def test_the_package_has_modules_to_check() -> None:
    present = {layer_of(path) for path in module_files()}
    assert PURE_CORE <= present
    assert all_imports()


def test_each_room_imports_only_what_its_row_allows() -> None:
    assert set(ROOM_IMPORTS) == set(LAYERS), "every room has a row"
    problems = room_violations(all_imports())
    assert not problems, "\n".join(problems)


def test_the_room_table_refuses_a_sink_that_reads_the_manager() -> None:
    path = PACKAGE_DIR / "hud" / "state.py"
    bad = [
        Import(path, 1, "manager.engine.manager"),
        Import(path, 2, "manager.engine.bus"),
        Import(PACKAGE_DIR / "gateway" / "tools.py", 3, "manager.transport.session"),
        Import(PACKAGE_DIR / "gateway" / "tools.py", 4, "manager.transport.base"),
    ]
    problems = room_violations(bad)
    assert [p.split(": ", 1)[0] for p in problems] == [
        "manager/hud/state.py:1 imports manager.engine.manager",
        "manager/gateway/tools.py:3 imports manager.transport.session",
    ]


def test_package_imports_point_down_the_layer_table() -> None:
    assert layer_violations(all_imports()) == []


def test_third_party_libraries_are_imported_only_through_their_door() -> None:
    assert door_violations(all_imports()) == []


LIGHT_MODULES: dict[str, frozenset[str]] = {
    # The seam: connection.py and the fakes import it without the SDK.
    "transport/base.py": frozenset({"mcp", "mcp_types", "httpx2"}),
    # What the CLI's client commands import: no event loop, no SDK.
    "control/client.py": frozenset({"anyio", "mcp", "mcp_types", "httpx2"}),
    "control/protocol.py": frozenset({"anyio", "mcp", "mcp_types", "httpx2"}),
    "control/paths.py": frozenset({"anyio", "mcp", "mcp_types", "httpx2"}),
}
"""Modules that must stay light, and the libraries each must not import."""


def test_light_modules_import_no_heavy_library() -> None:
    problems = [
        f"{imp}: {imp.top} is too heavy here"
        for imp in all_imports()
        for name, heavy in LIGHT_MODULES.items()
        if imp.source == PACKAGE_DIR / name and imp.top in heavy
    ]
    assert not problems, "\n".join(problems)
    for name in LIGHT_MODULES:
        assert (PACKAGE_DIR / name).is_file(), name


def test_nobody_in_the_package_imports_a_leaf_module() -> None:
    assert leaf_violations(all_imports()) == []


def test_confined_modules_import_only_what_they_are_allowed() -> None:
    assert confinement_violations(all_imports()) == []
    present = {layer_of(path) for path in module_files()}
    for name, allowed in CONFINED.items():
        assert name in present, name
        assert name not in LAYERS, f"{name} is in LAYERS: drop it from CONFINED"
        assert allowed <= set(LAYERS), allowed


# ------------------------------------------------ the checker itself, on fakes


def fake_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]
) -> list[Import]:
    """Write a throwaway package and collect its imports (PACKAGE_DIR patched)."""
    root = tmp_path / PACKAGE
    for rel, text in {"__init__.py": "", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE_DIR", root)
    return [imp for path in sorted(root.rglob("*.py")) for imp in imports_of(path)]


@pytest.mark.parametrize(
    ("files", "kind", "problem"),
    [
        pytest.param(
            {
                "core/__init__.py": "",
                "core/errors.py": "from ..engine.bus import EventBus\n",
                "engine/__init__.py": "",
                "engine/bus.py": "",
            },
            "layer",
            "'engine' is above 'core'",
            id="upward-relative",
        ),
        pytest.param(
            {"core/__init__.py": "", "core/events.py": "import manager.engine.bus\n"},
            "layer",
            "'engine' is above 'core'",
            id="upward-absolute",
        ),
        pytest.param(
            {
                "transport/__init__.py": "",
                "transport/base.py": "from .. import engine\n",
                "engine/__init__.py": "",
            },
            "layer",
            "'engine' is above 'transport'",
            id="upward-from-dot-import",
        ),
        pytest.param(
            {"hud/__init__.py": "", "hud/app.py": "from ..control import X\n"},
            "layer",
            "'control' is above 'hud'",
            id="upward-from-subpackage",
        ),
        pytest.param(
            {"core/__init__.py": "", "core/state.py": "from ..helpers import x\n"},
            "layer",
            "'helpers' is not in LAYERS",
            id="unlisted-module",
        ),
        pytest.param(
            {"core/__init__.py": "", "core/state.py": "import anyio\n"},
            "door",
            "pure core must not import anyio",
            id="pure-core-anyio",
        ),
        pytest.param(
            {
                "core/__init__.py": "",
                "core/backoff.py": "def f():\n    import random\n",
            },
            "door",
            "pure core must not import random",
            id="pure-core-random-in-function",
        ),
        pytest.param(
            {"engine.py": "from mcp.client.session import ClientSession\n"},
            "door",
            "mcp may be imported only in demo_server, gateway, mcpserver, transport",
            id="mcp-outside-its-doors",
        ),
        pytest.param(
            {"transport.py": "from mcp.server.stdio import stdio_server\n"},
            "door",
            "mcp.server may be imported only in demo_server, gateway, mcpserver",
            id="mcp-server-side-in-transport",
        ),
        pytest.param(
            {"gateway.py": "from mcp.client.session import ClientSession\n"},
            "door",
            "mcp.client may be imported only in transport",
            id="mcp-client-side-in-gateway",
        ),
        pytest.param(
            {"control.py": "import uvicorn\n"},
            "door",
            "uvicorn may be imported only in demo_server, gateway",
            id="http-server-outside-gateway",
        ),
        pytest.param(
            {"logs.py": "import rich.console\n"},
            "door",
            "rich may be imported only in hud",
            id="rich-outside-hud",
        ),
        pytest.param(
            {"engine.py": "from opentelemetry import trace\n"},
            "door",
            "opentelemetry may be imported only in telemetry",
            id="otel-outside-telemetry",
        ),
        pytest.param(
            {"daemon.py": "from . import demo_server\n", "demo_server.py": ""},
            "leaf",
            "nobody in the package may import 'demo_server'",
            id="demo-server-imported",
        ),
        pytest.param(
            {"daemon.py": "from .cli import main\n", "cli.py": ""},
            "leaf",
            "nobody in the package may import 'cli'",
            id="cli-imported",
        ),
        pytest.param(
            {
                "demo_server/__init__.py": "",
                "demo_server/tools.py": "from ..gateway.peers import Peers\n",
                "gateway/__init__.py": "",
                "gateway/peers.py": "",
            },
            "confined",
            "'demo_server' may import only mcpserver",
            id="demo-server-imports-the-gateway",
        ),
        pytest.param(
            {"demo_server.py": "from manager.engine import bus\n"},
            "confined",
            "'demo_server' may import only mcpserver",
            id="demo-server-imports-the-engine",
        ),
    ],
)
def test_the_checker_reports_each_kind_of_violation(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    files: dict[str, str],
    kind: str,
    problem: str,
) -> None:
    imports = fake_imports(tmp_path, monkeypatch, files)
    found = {
        "layer": layer_violations,
        "door": door_violations,
        "leaf": leaf_violations,
        "confined": confinement_violations,
    }[kind](imports)
    assert any(problem in message for message in found), found


@pytest.mark.parametrize(
    "files",
    [
        pytest.param({"transport.py": "from . import __version__\n"}, id="root"),
        pytest.param(
            {
                "engine/__init__.py": "",
                "engine/bus.py": "from ..core.events import E\n",
            },
            id="downward",
        ),
        pytest.param({"cli.py": "from .daemon import run\n"}, id="cli-down"),
        pytest.param({"__main__.py": "from .cli import main\n"}, id="main-runs-cli"),
        pytest.param(
            {"demo_server.py": "import mcp\nfrom manager import errors\n"},
            id="demo-server",
        ),
        pytest.param(
            {
                "demo_server/__init__.py": "",
                "demo_server/tools.py": "from ..mcpserver.peers import Peers\n",
                "mcpserver/__init__.py": "",
                "mcpserver/peers.py": "import mcp.server\nimport starlette\n",
            },
            id="demo-server-on-the-shared-server-side",
        ),
        pytest.param(
            {
                "hud/__init__.py": "",
                "hud/app.py": "from .state import S\nimport rich\n",
            },
            id="within-a-subpackage",
        ),
        pytest.param(
            {"engine/__init__.py": "", "engine/bus.py": "import anyio\n"},
            id="the-engine-is-not-pure-core",
        ),
    ],
)
def test_the_checker_accepts_allowed_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]
) -> None:
    imports = fake_imports(tmp_path, monkeypatch, files)
    assert layer_violations(imports) == []
    assert door_violations(imports) == []
    assert leaf_violations(imports) == []
    assert confinement_violations(imports) == []


def _module_level_imports(path: Path) -> Iterator[str]:
    """Package modules `path` imports when it is loaded: module-level imports,
    not those in functions or under `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    name = dotted_name(path)
    package = name if path.name == "__init__.py" else name[:-1]

    def walk(body: list[ast.stmt]) -> Iterator[ast.stmt]:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                yield from walk(node.orelse)
            elif isinstance(node, ast.If | ast.Try):
                yield from walk(node.body)
                yield from walk(getattr(node, "orelse", []))
            else:
                yield node

    for node in walk(tree.body):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            module = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                candidate = f"{module}.{alias.name}"
                yield candidate if _is_submodule(candidate) else module
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            f"{PACKAGE}."
        ):
            yield str(node.module)


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Cycles in a module graph (each found once, from its first module)."""
    cycles: list[list[str]] = []
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            cycles.append([*path[path.index(node) :], node])
            return
        if node in done:
            return
        for target in sorted(graph.get(node, ())):
            visit(target, [*path, node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])
    return cycles


def test_no_import_cycle_when_modules_load() -> None:
    graph = {
        ".".join(dotted_name(path)): {
            target
            for target in _module_level_imports(path)
            if target != ".".join(dotted_name(path))
        }
        for path in module_files()
    }
    cycles = import_cycles(graph)
    assert not cycles, "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_the_cycle_finder_finds_one() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c", "a"]]


def test_each_room_s_docstring_names_every_module_it_holds() -> None:
    """A newcomer reads `manager/<room>/__init__.py` first: it lists them all."""
    missing = []
    for init in sorted(PACKAGE_DIR.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        for module in sorted(init.parent.glob("*.py")):
            name = module.stem
            if name not in ("__init__", "__main__") and f"`{name}" not in doc:
                missing.append(f"{init.parent.name}/{module.name}")
    assert not missing, "not named in their room's docstring: " + ", ".join(missing)


def test_the_architecture_map_has_a_row_for_every_module() -> None:
    """`docs/architecture.md` is the map a newcomer follows: every module of
    `manager/` (but the rooms' `__init__`) is linked from it, so a module
    added without a row fails here instead of drifting out of the map."""
    text = (PACKAGE_DIR.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [
        str(module.relative_to(PACKAGE_DIR))
        for module in sorted(PACKAGE_DIR.rglob("*.py"))
        if module.name != "__init__.py"
        and f"(../manager/{module.relative_to(PACKAGE_DIR).as_posix()})" not in text
    ]
    assert not missing, "no row in docs/architecture.md: " + ", ".join(missing)


BARE_TASKS = frozenset({"create_task", "ensure_future"})
"""Ways to start a task outside any task group."""

BARE_TASK_DOOR = ("gateway/exchange.py", "watch_beside")
"""The one helper that may start one (`issue 36`: one concurrency idiom)."""


def bare_task_starts(path: Path) -> Iterator[tuple[int, str]]:
    """(line, enclosing function) of each `create_task`/`ensure_future` call."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

    def walk(node: ast.AST, within: str) -> Iterator[tuple[int, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from walk(child, child.name)
                continue
            if isinstance(child, ast.Call):
                func = child.func
                name = func.attr if isinstance(func, ast.Attribute) else None
                if isinstance(func, ast.Name):
                    name = func.id
                if name in BARE_TASKS:
                    yield child.lineno, within
            yield from walk(child, within)

    yield from walk(tree, "")


def test_tasks_live_in_task_groups_but_for_one_helper() -> None:
    """anyio task groups everywhere; the one bare task, kept for its measured
    cost, starts in `BARE_TASK_DOOR` alone."""
    found = [
        f"{path.relative_to(PACKAGE_DIR).as_posix()}:{line} in {within or 'module'}"
        for path in module_files()
        for line, within in bare_task_starts(path)
        if (path.relative_to(PACKAGE_DIR).as_posix(), within) != BARE_TASK_DOOR
    ]
    assert not found, "a task outside any task group: " + ", ".join(found)
    door = PACKAGE_DIR / BARE_TASK_DOOR[0]
    assert [w for _, w in bare_task_starts(door)] == [BARE_TASK_DOOR[1]]


def test_the_bare_task_finder_finds_one(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "import asyncio\n"
        "async def f():\n"
        "    asyncio.get_running_loop().create_task(g())\n"
        "asyncio.ensure_future(g())\n"
    )
    assert list(bare_task_starts(source)) == [(3, "f"), (4, "")]


ENGINE_TRANSPORT_DOORS = frozenset(
    {"manager.transport", "manager.transport.base", "manager.transport.oauth"}
)
"""What the engine may import of the transport: its facade (`mcp_transport`),
the seam, and the OAuth facade; no concrete transport module."""


def test_the_engine_imports_the_transport_seam_and_facades_only() -> None:
    concrete = [
        str(imp)
        for imp in all_imports()
        if layer_of(imp.source) == "engine"
        and imp.internal == "transport"
        and imp.target not in ENGINE_TRANSPORT_DOORS
    ]
    assert not concrete, "the engine imports a concrete transport module: " + (
        ", ".join(concrete)
    )


TRANSPORT_MODULE_LINES = 600
"""Issue 36: `transport/` is cut by concept, no module of it over this."""


def test_no_transport_module_outgrows_one_concept() -> None:
    """A transport module that grows past the bar holds two concepts: cut it
    (as `handshake` was cut from `session`) instead of raising the bar."""
    long = {
        str(path.relative_to(PACKAGE_DIR)): lines
        for path in sorted((PACKAGE_DIR / "transport").rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines()))
        > TRANSPORT_MODULE_LINES
    }
    assert not long, f"over {TRANSPORT_MODULE_LINES} lines: {long}"
