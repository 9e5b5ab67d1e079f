"""Run `startup.lua` (or a source string) and collect what it declares.

Every failure leaves as one `ConfigError` naming the file, the line and, when
known, the connection. The script only records intent: `mcp_add` validates a
declaration and returns in microseconds; it never touches the network.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict, Unpack

from lupa.lua54 import LuaError

from ..core.errors import ConfigError
from ..core.profile import unknown_servers
from ..core.redact import SecretRegistry
from .host import LiveHost, LuaHost, ScriptResult
from .live import LiveScript
from .sandbox import (
    DEFAULT_HOOK_BUDGET,
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_TIME_BUDGET,
    ScriptRun,
    budget_message,
)

__all__ = [
    "ScriptOptions",
    "execute",
    "load_file",
    "read_script",
    "run_script",
    "start_file",
]


class ScriptOptions(TypedDict, total=False):
    """How a script runs; every key may be left out.

    Keys:
        getenv: The environment seen through `env()` (default: `os.environ`).
        time_budget: Seconds the whole run may take.
        memory_limit: Bytes the runtime may allocate.
        on_print: Receives each `print` line (redacted); without it lines go to
            the log at INFO.
        config_dir: Where `mcp_load`/`require` find `<name>.lua` modules; None
            means modules are unavailable. `load_file` and `start_file` default
            it to the `config/` directory next to the script, if there is one.
        secrets: Where values read through `env()` under secret-looking names
            are registered, and what `print` lines and errors are masked with
            (the daemon's registry; one of its own if left out).
    """

    getenv: Callable[[str], str | None]
    time_budget: float
    memory_limit: int
    on_print: Callable[[str], None] | None
    config_dir: Path | None
    secrets: SecretRegistry


def run_script(
    source: str,
    *,
    file: str = "startup.lua",
    host: LuaHost | None = None,
    **options: Unpack[ScriptOptions],
) -> ScriptResult:
    """Run a config script in a fresh sandboxed runtime and return its declarations.

    Args:
        source: The Lua source.
        file: The name used in messages and as the chunk name (`@file`).
        host: The running daemon, for `mcp_status`, `mcp_list` and `mcp_remove`.
        **options: See `ScriptOptions`.

    Returns:
        The declared specs, the removed names and the duration.

    Raises:
        ConfigError: The script failed: syntax, runtime error, bad declaration,
            time budget or memory limit. It names the file, the line when known
            and the connection when the error is about one.
    """
    run = execute(source, file, host, options)
    run.release()
    return run.result


def load_file(
    path: Path, *, host: LuaHost | None = None, **options: Unpack[ScriptOptions]
) -> ScriptResult:
    """Read a config script and run it with `run_script`.

    Args:
        path: The script. Messages name it as `path.name`.
        host: See `run_script`.
        **options: See `ScriptOptions`.

    Raises:
        ConfigError: The file cannot be read, is not UTF-8, or the script failed.
    """
    source, options["config_dir"] = read_script(path, options.get("config_dir"))
    return run_script(source, file=path.name, host=host, **options)


def start_file(
    path: Path,
    *,
    host: LiveHost,
    hook_budget: float = DEFAULT_HOOK_BUDGET,
    **options: Unpack[ScriptOptions],
) -> LiveScript:
    """Run a config script and keep its runtime for its `mcp_on`/`mcp_call` callbacks.

    Args:
        path: The script.
        host: The running daemon; callbacks may add and remove connections.
        hook_budget: Seconds each later callback may run.
        **options: See `ScriptOptions` (`time_budget` is the script's own).

    Raises:
        ConfigError: As `load_file`.
    """
    source, options["config_dir"] = read_script(path, options.get("config_dir"))
    return LiveScript(execute(source, path.name, host, options), hook_budget)


def execute(
    source: str, file: str, host: LuaHost | None, options: ScriptOptions
) -> ScriptRun:
    """Run the script; the returned run still holds its runtime."""
    time_budget = options.get("time_budget", DEFAULT_TIME_BUDGET)
    memory_limit = options.get("memory_limit", DEFAULT_MEMORY_LIMIT)
    if not time_budget > 0 or memory_limit <= 0:
        raise ValueError("time_budget and memory_limit must be positive")
    started = time.perf_counter()
    run = ScriptRun(
        file=file,
        host=host,
        getenv=options.get("getenv", os.environ.get),
        on_print=options.get("on_print"),
        config_dir=options.get("config_dir"),
        deadline=time.monotonic() + time_budget,
        # not `or`: an empty registry is falsy (it has a length)
        secrets=options["secrets"] if "secrets" in options else SecretRegistry(),
    )
    try:
        run.execute(source, memory_limit)
    except (LuaError, UnicodeDecodeError) as exc:
        run.release()
        # The cause keeps no traceback: its frames would keep the runtime alive
        # for as long as someone holds the ConfigError.
        cause = exc.with_traceback(None)
        if run.fault is not None:
            raise run.fault from cause  # a bug in the host or here, not the script
        if isinstance(exc, UnicodeDecodeError):
            # lupa could not decode the error message the script raised.
            raw = exc.object if isinstance(exc.object, bytes) else b""
            text = raw.decode("utf-8", "replace")
        else:
            text = str(exc)
        raise run.config_error(text, exc, time_budget, memory_limit) from cause
    except BaseException:
        run.release()
        raise
    if run.fault is not None:
        run.release()
        raise run.fault  # the script caught it with pcall; still a bug to surface
    if run.expired:  # every path that could swallow the budget error is closed; still
        run.release()
        raise ConfigError(budget_message(time_budget), file=file)
    for profile in run.profiles.values():
        problem = unknown_servers(profile, run.declared)
        if problem is not None:
            run.release()
            where, _, line = profile.where.rpartition(":")
            raise ConfigError(
                problem,
                file=where or file,
                line=int(line) if line.isdigit() else None,
            )
    run.result = ScriptResult(
        specs=tuple(d.spec for d in run.declared.values()),
        removed=tuple(run.removed),
        duration=time.perf_counter() - started,
        profiles=tuple(run.profiles.values()),
        rules=tuple(run.rules),
        where={name: d.where for name, d in run.declared.items()},
    )
    run.memory_limit = memory_limit
    return run


def read_script(path: Path, config_dir: Path | None) -> tuple[str, Path | None]:
    try:
        source = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(f"cannot read {path}: {reason}", file=path.name) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path} is not UTF-8 text (bad byte at offset {exc.start}); "
            "save it as UTF-8",
            file=path.name,
        ) from exc
    if config_dir is None and (path.parent / "config").is_dir():
        config_dir = path.parent / "config"
    return source, config_dir
