"""The preloader (`preload.py`) and its stand-in (`launch.py`): a forked
process behaves, for whoever started it, as the exec'd one would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from . import preload
from .process import DEMO_MODULE

pytestmark = pytest.mark.usefixtures("no_leaked_children")

PROBE = """\
import os, sys
print(os.getpid(), os.getppid(), "mcp" in sys.modules, sys.argv[1:], os.getcwd(),
      os.environ.get("PROBE"), type(sys.stdout.buffer).__name__, flush=True)
if sys.argv[1:] == ["wait"]:
    sys.stdin.read()
"""


@pytest.fixture(autouse=True)
def forking_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the fork, even under `MM_TESTS_FORK=0`."""
    monkeypatch.delenv("MM_TESTS_FORK", raising=False)


@pytest.fixture
def probe_dir(tmp_path: Path) -> Path:
    (tmp_path / "mm_probe.py").write_text(PROBE)
    return tmp_path


def _fields(out: str) -> list[str]:
    return out.strip().split(maxsplit=3)


def test_popen_forks_a_module_with_its_argv_env_cwd_and_exit_status(
    probe_dir: Path,
) -> None:
    log = probe_dir / "out.log"
    with log.open("wb") as out:
        process = preload.popen(
            [sys.executable, "-m", "mm_probe", "x", "y"],
            env={**os.environ, "PROBE": "seen"},
            stdout=out,
            cwd=probe_dir,
        )
        assert process.wait(20) == 0
    assert isinstance(process, preload.ForkedProcess)
    pid, parent, preloaded, rest = _fields(log.read_text())
    assert int(pid) == process.pid and int(parent) == preload.preloader_pid()
    assert preloaded == "True"  # what made it cheap
    assert f"['x', 'y'] {probe_dir} seen" in rest


def test_a_forked_process_gets_signals_and_reports_how_it_ended(
    tmp_path: Path,
) -> None:
    with (tmp_path / "out.log").open("wb") as out:
        code = preload.popen(
            [sys.executable, "-m", DEMO_MODULE, "--exit-immediately", "7"],
            env=dict(os.environ),
            stdout=out,
        ).wait(20)
        assert code == 7
        server = preload.popen(
            [sys.executable, "-m", DEMO_MODULE, "--transport", "http", "--port", "0"],
            env=dict(os.environ),
            stdout=out,
        )
        assert server.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            server.wait(0.05)
        server.kill()
        assert server.wait(10) == -signal.SIGKILL
        server.kill()  # gone: a no-op, as with Popen
        assert server.poll() == -signal.SIGKILL


def test_another_interpreter_set_up_gets_a_real_exec(probe_dir: Path) -> None:
    env = {**os.environ, "PYTHONIOENCODING": "latin-1"}
    with (probe_dir / "out.log").open("wb") as out:
        process = preload.popen(
            [sys.executable, "-m", "mm_probe"], env=env, stdout=out, cwd=probe_dir
        )
        assert isinstance(process, subprocess.Popen)
        assert process.wait(20) == 0


def _launch(probe_dir: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    command, argv = preload.launch_command("mm_probe", *args)
    return subprocess.Popen(
        [command, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=probe_dir,
        env={"PATH": os.environ["PATH"], **env},  # a daemon's short environment
    )


def test_the_launcher_stands_for_its_forked_child(probe_dir: Path) -> None:
    with _launch(probe_dir, "wait", PROBE="x", PYTHONUNBUFFERED="1") as launcher:
        assert launcher.stdout is not None and launcher.stdin is not None
        _pid, parent, preloaded, rest = _fields(launcher.stdout.readline())
        assert int(parent) == preload.preloader_pid() and preloaded == "True"
        assert rest.endswith("x FileIO")  # unbuffered, as PYTHONUNBUFFERED says
        # stdin is the child's: closing it ends the child, and the launcher too
        launcher.stdin.close()
        assert launcher.wait(10) == 0
        assert launcher.stdout.read() == ""  # and the pipe closed

    with _launch(probe_dir, "wait") as launcher:
        assert launcher.stdout is not None
        child = int(_fields(launcher.stdout.readline())[0])
        launcher.send_signal(signal.SIGTERM)  # passed on: the child dies of it
        assert launcher.wait(10) == -signal.SIGTERM
        assert not psutil.pid_exists(child)  # reaped before its status came back
        assert launcher.stdout.read() == ""

    with _launch(probe_dir, "wait") as launcher:
        assert launcher.stdout is not None
        child = int(_fields(launcher.stdout.readline())[0])
        launcher.kill()  # cannot be passed on: the preloader kills the child
        assert launcher.wait(10) == -signal.SIGKILL
        deadline = time.monotonic() + 10
        while psutil.pid_exists(child) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not psutil.pid_exists(child)
        assert launcher.stdout.read() == ""


def test_the_launcher_execs_what_the_preloader_cannot_fork(probe_dir: Path) -> None:
    with _launch(probe_dir, PYTHONIOENCODING="latin-1") as launcher:
        out, _ = launcher.communicate(timeout=20)
    pid, parent, preloaded, _rest = _fields(out)
    assert int(pid) == launcher.pid and int(parent) == os.getpid()
    assert preloaded == "False"
