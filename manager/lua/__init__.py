"""The Lua control plane: the only package that imports lupa.

- `run`: run `startup.lua` (`run_script`, `load_file`, `start_file`).
- `sandbox`: one sandboxed runtime per run; budgets; errors at their line.
- `api`: the API functions a script calls, and what it declared.
- `prelude.lua`: the Lua side of the API (a real Lua file).
- `live`: a script kept alive for its hooks and calls.
- `isolated`: a policy check run in a forked copy, killed at its budget.
- `convert`: Lua values to Python values, bounded.
- `host`: the protocols the manager implements for a script.
"""

from __future__ import annotations

from .api import PYTHON_VARIABLE
from .host import LiveHost, LuaCall, LuaHost, ScriptResult
from .live import LiveScript
from .run import load_file, run_script, start_file
from .sandbox import (
    DEFAULT_HOOK_BUDGET,
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_TIME_BUDGET,
)

__all__ = [
    "DEFAULT_HOOK_BUDGET",
    "DEFAULT_MEMORY_LIMIT",
    "DEFAULT_TIME_BUDGET",
    "PYTHON_VARIABLE",
    "LiveHost",
    "LiveScript",
    "LuaCall",
    "LuaHost",
    "ScriptResult",
    "load_file",
    "run_script",
    "start_file",
]
