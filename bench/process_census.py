"""Which tests start which Python processes, and the CPU those processes burn.

Run: `.venv/bin/python bench/process_census.py [--fork] [--top N]
[-- PYTEST_ARGS...]`.

`make test` spends much of its CPU outside its workers: every daemon, demo
server and `mcp-manager stdio` front a test starts is a Python process, and
importing the SDK costs each one about a CPU-second here. This counts them.
For the length of one run of the suite (forking off, `MM_TESTS_FORK=0`,
unless `--fork`; no coverage), a `.pth` file in the venv has every Python
process the venv starts write its command line, its parent, the test that
was running when it started and its CPU time (user + system) to a folder,
every 0.25 s and at exit, so a process killed by a signal still counts up to
its last quarter second. The file is removed when the run ends, however it
ends. A process that does not name a test itself (a server a daemon starts
gets a cleaned environment) takes its parent's.

Prints the CPU by kind of process (workers, daemons, demo servers, fronts...)
and by test, most first. With `--fork`, forked processes run no `.pth`, so
only what is exec'd is counted.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HOOK = """\
import os, sys, json, time, threading, atexit
_dir = {folder!r}
if os.path.isdir(_dir):
    _test = os.environ.get("PYTEST_CURRENT_TEST", "")
    if not _test:
        try:
            with open(os.path.join(_dir, f"{{os.getppid()}}.json")) as _f:
                _parent = json.JSONDecoder().raw_decode(_f.read())[0]
            _test = _parent.get("started_in") or _parent.get("test", "")
        except (OSError, ValueError):
            pass
    _lock = threading.Lock()
    def _report():
        t = os.times()
        record = {{
            "pid": os.getpid(), "ppid": os.getppid(),
            "argv": list(getattr(sys, "orig_argv", sys.argv))[:8],
            "cpu": t.user + t.system, "started_in": _test,
            "test": os.environ.get("PYTEST_CURRENT_TEST", ""),
        }}
        path = os.path.join(_dir, f"{{os.getpid()}}.json")
        with _lock:
            try:
                with open(path + ".tmp", "w") as f:
                    f.write(json.dumps(record))
                os.replace(path + ".tmp", path)
            except OSError:
                pass
    def _loop():
        while True:
            time.sleep(0.25)
            _report()
    _report()
    threading.Thread(target=_loop, daemon=True, name="process-census").start()
    atexit.register(_report)
"""

KINDS = (
    ("exec(eval(", "pytest worker"),
    ("manager run", "daemon (run)"),
    ("manager stdio", "stdio front"),
    ("manager attach", "attach"),
    ("manager.demo_server", "demo server"),
    ("conformance", "conformance server"),
    ("preload.py", "preloader"),
    ("-m pytest", "pytest (the run itself)"),
)


def kind_of(argv: list[str]) -> str:
    line = " ".join(argv)
    for needle, kind in KINDS:
        if needle in line:
            return kind
    return "other: " + " ".join(argv[1:4])[:60]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fork", action="store_true", help="leave forking on")
    parser.add_argument("--top", type=int, default=30, help="tests to list")
    parser.add_argument("pytest_args", nargs="*", help="after --: for pytest")
    args = parser.parse_args()
    purelib = Path(sysconfig.get_paths()["purelib"])
    if not str(purelib).startswith(str(ROOT / ".venv")):
        raise SystemExit("run it with the venv's python: .venv/bin/python")
    folder = Path(tempfile.mkdtemp(prefix="mm-census-"))
    hook = purelib / "zz_mm_process_census.py"
    pth = purelib / "zz_mm_process_census.pth"
    hook.write_text(HOOK.format(folder=str(folder)))
    pth.write_text("import zz_mm_process_census\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "plugins")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not args.fork:
        env["MM_TESTS_FORK"] = "0"
    command = [sys.executable, "-m", "pytest", "-p", "untraced_imports", "-q"]
    command += ["-n", "4", "--dist", "worksteal", *args.pytest_args]
    try:
        status = subprocess.run(command, cwd=ROOT, env=env).returncode
    finally:
        pth.unlink(missing_ok=True)
        hook.unlink(missing_ok=True)
    records = []
    for path in folder.glob("*.json"):
        text = path.read_text()
        if text:
            records.append(json.JSONDecoder().raw_decode(text)[0])
    shutil.rmtree(folder, ignore_errors=True)
    report(records, args.top)
    return status


def report(records: list[dict[str, object]], top: int) -> None:
    by_kind: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    by_test: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for record in records:
        kind = kind_of(list(record["argv"]))  # type: ignore[call-overload]
        cpu = float(record["cpu"])  # type: ignore[arg-type]
        by_kind[kind][0] += 1
        by_kind[kind][1] += cpu
        if kind in ("pytest worker", "pytest"):
            continue
        test = str(record["started_in"] or "?").split(" (")[0]
        by_test[test][0] += 1
        by_test[test][1] += cpu
    total = sum(cpu for _, cpu in by_kind.values())
    print(f"\n{len(records)} Python processes, {total:.1f} CPU-s in all")
    print(f"\n{'CPU-s':>7} {'count':>5}  kind")
    for kind, (count, cpu) in sorted(by_kind.items(), key=lambda kv: -kv[1][1]):
        print(f"{cpu:7.1f} {int(count):5d}  {kind}")
    print(f"\n{'CPU-s':>7} {'count':>5}  test that started them (first {top})")
    ranked = sorted(by_test.items(), key=lambda kv: -kv[1][1])
    for test, (count, cpu) in ranked[:top]:
        print(f"{cpu:7.1f} {int(count):5d}  {test}")


if __name__ == "__main__":
    sys.exit(main())
