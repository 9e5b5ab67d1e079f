"""Nobody touches what is not theirs: enforced on the source (nothing imported).

1. No function reads or writes an underscored member of another object
   (`conn._attempt`, `getattr(app, "_driver")`): only `self.` and `cls.` may;
   no module imports another's private name (`from . import _fail`).
2. A foreign library's private names (`session._stamp`, a module path with an
   underscored part) are used only in that library's `compat_*.py` door,
   whose docstring says why and what public API would replace it
   (`tests/test_compat.py` checks they still exist).

Exceptions: the standard library's documented functions whose names start
with an underscore (`os._exit`, `sys._current_frames`) and argparse's
subparser type (`argparse._SubParsersAction`, for annotations only).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

# These read the source as text and run none of it: nothing for coverage to
# measure, and its tracer doubles the time of the AST walks.
pytestmark = pytest.mark.no_cover

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "manager"

DOCUMENTED = frozenset(
    {("os", "_exit"), ("sys", "_current_frames"), ("argparse", "_SubParsersAction")}
)
"""Standard-library names that start with an underscore and are public."""


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def violations(source: str, where: str) -> list[str]:
    """Where `source` touches another object's underscored member or imports
    a private module path."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        line = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = node.value
            if isinstance(owner, ast.Name):
                if owner.id in ("self", "cls") or (owner.id, node.attr) in DOCUMENTED:
                    continue
            found.append(f"{line}: .{node.attr} of {ast.unparse(owner)}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            found.append(f"{line}: {node.func.id}(..., {node.args[1].value!r})")
        elif isinstance(node, ast.ImportFrom):
            parts = (node.module or "").split(".")
            names = [alias.name for alias in node.names]
            if any(_private(p) for p in parts) or any(_private(n) for n in names):
                dots = "." * node.level
                found.append(
                    f"{line}: from {dots}{node.module or ''} import {', '.join(names)}"
                )
    return found


def test_nobody_touches_another_objects_private_members() -> None:
    found: list[str] = []
    doors = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if path.name.startswith("compat_"):
            doors.append(path)
            continue
        where = str(path.relative_to(PACKAGE_DIR.parent))
        found.extend(violations(path.read_text(), where))
    assert not found, "private names used outside a compat door:\n" + "\n".join(found)
    assert doors, "the compat doors are where private names live"
    for door in doors:
        doc = ast.get_docstring(ast.parse(door.read_text())) or ""
        assert "Replace with" in doc, f"{door.name}: say what public API replaces it"


def test_the_checker_sees_each_kind_of_reach() -> None:
    source = """
import os
from mcp.shared._otel import tracer
from pkg import _hidden
from . import _helper

class A:
    def f(self, other):
        self._mine = other._theirs
        getattr(other, "_driver")
        os._exit(0)
        return cls._ok
"""
    found = violations(source, "x.py")
    assert [f.split(": ", 1)[1] for f in found] == [
        "from mcp.shared._otel import tracer",
        "from pkg import _hidden",
        "from . import _helper",
        "._theirs of other",
        "getattr(..., '_driver')",
    ]


def test_no_module_passes_on_what_it_imports() -> None:
    """A name is imported from its home: no module (a package's `__init__`
    and the compat doors aside) lists an imported name in `__all__`."""
    shims: list[str] = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if path.name == "__init__.py" or path.name.startswith("compat_"):
            continue
        tree = ast.parse(path.read_text())
        imported = {
            alias.asname or alias.name
            for node in tree.body
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        }
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                listed = ast.literal_eval(node.value)
                where = path.relative_to(PACKAGE_DIR.parent)
                shims.extend(f"{where}: {name}" for name in listed if name in imported)
    assert not shims, "re-exported (import it from its home):\n" + "\n".join(shims)
