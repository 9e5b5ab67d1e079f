"""mcp-manager: keep a declared set of MCP client connections alive."""

from __future__ import annotations

import os

__version__ = "0.1.0"
"""The package version (pyproject.toml reads it from here)."""

__all__ = ["__version__"]

# Tool search runs numpy in a worker thread while the event loop forks stdio
# servers. OpenBLAS's own fork handler joins its worker threads while holding
# the fork, so a fork during a matrix product in another thread never returns:
# the daemon hung for good, SIGTERM included (found by an audit, with gdb).
# One BLAS thread has nothing to join. Set before numpy loads (it reads the
# variable once); our stdio servers do not inherit it (they get the SDK's
# default environment and their own `env`).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
