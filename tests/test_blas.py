"""A fork while numpy multiplies in another thread must not hang the daemon."""

from __future__ import annotations

import os
import subprocess
import sys


def test_numpy_loads_with_one_blas_thread_under_the_daemon() -> None:
    """OpenBLAS's fork handler joins its worker threads: a stdio server
    spawned while tool search multiplied matrices in a worker thread hung the
    daemon for good, SIGTERM included (found by an audit, with gdb). With one
    BLAS thread there is nothing to join. Checked in a fresh interpreter,
    where numpy loads after the package (as in the daemon)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    code = (
        "import manager.gateway.discovery, os, numpy; "
        "print(os.environ.get('OPENBLAS_NUM_THREADS'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"
