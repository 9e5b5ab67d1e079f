"""Launch locks for real: `npx -y lockdemo` against a local npm registry
stand-in serving real tarballs (`npm view` and `npx` themselves, not
stand-ins), a Python index stand-in (PEP 691 JSON) and an OCI registry
stand-in that asks for an anonymous token, as Docker Hub does.

The npm package's bin is a Python script that says its version on stderr and
then becomes a stdlib-only MCP server: what starts is seen, not inferred.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import anyio
import pytest
from fakes import Recorder
from servers import raw_command

from manager.core.errors import ConnectFailed
from manager.core.events import LaunchLock
from manager.core.launch import Launch, LaunchNote, parse_launch
from manager.core.spec import parse_spec
from manager.engine.bus import EventBus
from manager.engine.manager import Manager
from manager.transport.connect import McpTransport
from manager.transport.stdio.locks import LaunchLocks
from manager.transport.stdio.registries import Resolution, ResolveFailed, resolve

DAY = 86400.0


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


@dataclass
class Served:
    """What a stand-in serves: path -> (status, headers, body)."""

    routes: dict[str, tuple[int, dict[str, str], bytes]] = field(default_factory=dict)
    guarded: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Path -> (the bearer token it wants, the challenge it answers without)."""
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def served() -> Iterator[Served]:
    state = Served()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, head: bool) -> None:
            path = unquote(self.path.split("?")[0])
            state.seen.append((self.command, self.path, dict(self.headers)))
            status, headers, body = state.routes.get(path, (404, {}, b"{}"))
            if path in state.guarded:
                token, challenge = state.guarded[path]
                if self.headers.get("Authorization") != f"Bearer {token}":
                    status, headers, body = 401, {"WWW-Authenticate": challenge}, b""
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def do_GET(self) -> None:
            self._answer(head=False)

        def do_HEAD(self) -> None:
            self._answer(head=True)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# ------------------------------------------------------------------ npm


class NpmRegistry:
    """One package, `lockdemo`, its versions published as the test says."""

    def __init__(self, served: Served) -> None:
        self.served = served
        self.versions: dict[str, dict[str, object]] = {}
        self.times: dict[str, str] = {}

    def publish(self, version: str, when: float) -> None:
        tarball = _package(version)
        path = f"/lockdemo/-/lockdemo-{version}.tgz"
        self.served.routes[path] = (200, {}, tarball)
        integrity = (
            "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode()
        )
        self.versions[version] = {
            "name": "lockdemo",
            "version": version,
            "bin": {"lockdemo": "server.py"},
            "dist": {
                "tarball": self.served.url + path,
                "integrity": integrity,
                "shasum": hashlib.sha1(tarball).hexdigest(),
            },
        }
        self.times[version] = _iso(when)
        document = {
            "name": "lockdemo",
            "dist-tags": {"latest": version},
            "versions": self.versions,
            "time": {"created": min(self.times.values()), **self.times},
        }
        body = json.dumps(document).encode()
        self.served.routes["/lockdemo"] = (
            200,
            {"Content-Type": "application/json"},
            body,
        )


def _package(version: str) -> bytes:
    """A real npm tarball: `package/package.json` and the bin."""
    command, args = raw_command()  # a stdlib-only server: starts in ms
    script = (
        f"#!{sys.executable} -S\n"
        "import os, sys\n"
        f"sys.stderr.write('lockdemo {version} started\\n')\n"
        "sys.stderr.flush()\n"
        f"os.execv({command!r}, {[command, *args]!r})\n"
    )
    manifest = {
        "name": "lockdemo",
        "version": version,
        "bin": {"lockdemo": "server.py"},
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text, mode in (
            ("package/package.json", json.dumps(manifest), 0o644),
            ("package/server.py", script, 0o755),
        ):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


needs_npx = pytest.mark.skipif(
    shutil.which("npx") is None or shutil.which("npm") is None,
    reason="npm/npx not installed",
)


def _npm_env(served: Served, tmp_path: Path) -> dict[str, str]:
    return {
        "npm_config_registry": served.url + "/",
        "npm_config_cache": str(tmp_path / "npm-cache"),
        "npm_config_update_notifier": "false",
        "npm_config_audit": "false",
        "npm_config_fund": "false",
        "npm_config_loglevel": "error",
    }


async def _started(rec: Recorder, version: str, after: int) -> None:
    """The server said, on stderr, that it is `version`, and is connected."""
    await rec.wait_for(
        "stderr",
        "lockdemo",
        where=lambda e: f"lockdemo {version} started" in getattr(e, "line", ""),
        after=after,
        within=60,
    )
    await rec.wait_for("connected", "lockdemo", after=after, within=60)


@needs_npx
@pytest.mark.anyio
async def test_npx_starts_the_locked_version_both_times_and_update_takes_the_new(
    served: Served, tmp_path: Path
) -> None:
    registry = NpmRegistry(served)
    registry.publish("1.0.0", time.time() - 30 * DAY)
    spec = parse_spec(
        "lockdemo",
        {
            "command": "npx",
            "args": ["-y", "lockdemo"],
            "env": _npm_env(served, tmp_path),
        },
        {"connect_timeout": 60},
    )
    state = tmp_path / "state"

    # First daemon: locks 1.0.0 at the first start.
    bus = EventBus()
    rec = Recorder(bus)
    async with Manager(bus, transport=McpTransport(state_dir=state)) as manager:
        manager.reconcile([spec])
        locked = await rec.wait_for("launch_lock", "lockdemo", within=60)
        assert isinstance(locked, LaunchLock)
        assert (locked.change, locked.version) == ("locked", "1.0.0")
        await _started(rec, "1.0.0", 0)
        status = manager.status("lockdemo")
        assert status is not None and status.launch == "lockdemo 1.0.0 locked"
    record = json.loads((state / "locks" / "lockdemo.json").read_text())
    assert record["version"] == "1.0.0" and record["wanted"] == ""
    assert (state / "locks" / "lockdemo.json").stat().st_mode & 0o777 == 0o600

    registry.publish("1.1.0", time.time())

    # Second daemon: 1.1.0 is the newest, 1.0.0 starts, the drift is told.
    bus = EventBus()
    rec = Recorder(bus)
    async with Manager(bus, transport=McpTransport(state_dir=state)) as manager:
        manager.reconcile([spec])
        await _started(rec, "1.0.0", 0)
        drift = await rec.wait_for(
            "launch_lock",
            "lockdemo",
            where=lambda e: getattr(e, "change", "") == "drift",
            within=60,
        )
        assert isinstance(drift, LaunchLock)
        assert (drift.version, drift.available) == ("1.0.0", "1.1.0")
        status = manager.status("lockdemo")
        assert status is not None
        assert status.launch == "lockdemo 1.0.0 locked; 1.1.0 available"

        with pytest.raises(ValueError, match="now offers 1.1.0, not 1.0.5"):
            await manager.launch_take("lockdemo", "1.0.5")
        mark = rec.last_seq
        await manager.launch_take("lockdemo", "1.1.0")
        updated = await rec.wait_for("launch_lock", "lockdemo", after=mark)
        assert isinstance(updated, LaunchLock)
        assert (updated.change, updated.version) == ("updated", "1.1.0")
        await _started(rec, "1.1.0", mark)
        status = manager.status("lockdemo")
        assert status is not None and status.launch == "lockdemo 1.1.0 locked"
    assert not [
        e for e in rec.of("launch_lock") if getattr(e, "change", "") == "unlocked"
    ]


@needs_npx
@pytest.mark.anyio
async def test_npm_min_age_holds_back_a_release_too_young(
    served: Served, tmp_path: Path
) -> None:
    registry = NpmRegistry(served)
    now = time.time()
    registry.publish("1.0.0", now - 30 * DAY)
    registry.publish("1.1.0", now - 1 * DAY)
    env = _npm_env(served, tmp_path)

    def spec_for(args: list[str], min_age: float) -> Any:
        return parse_spec(
            "lockdemo",
            {"command": "npx", "args": args, "env": env},
            {"min_age": min_age},
        )

    def launch_of(spec: Any) -> Launch:
        found = parse_launch(spec.command, spec.args)
        assert isinstance(found, Launch)
        return found

    young = spec_for(["-y", "lockdemo"], 7)
    found = await resolve(launch_of(young), young, now)
    assert (found.version, found.newest) == ("1.0.0", "1.1.0")
    missing = spec_for(["-y", "nothere"], 0)
    with pytest.raises(ResolveFailed, match="nothere"):
        await resolve(launch_of(missing), missing, now)


# ----------------------------------------------------------------- PyPI


@pytest.mark.anyio
async def test_a_python_index_gives_the_newest_release_old_enough(
    served: Served,
) -> None:
    now = time.time()
    files = [
        ("srv-1.0.tar.gz", now - 40 * DAY, False),
        ("srv-1.0-py3-none-any.whl", now - 40 * DAY, False),
        ("srv-1.1-py3-none-any.whl", now - 20 * DAY, False),
        ("srv-1.2-py3-none-any.whl", now - 10 * DAY, True),  # yanked
        ("srv-2.0rc1-py3-none-any.whl", now - 5 * DAY, False),
        ("srv-1.3-py3-none-any.whl", now - 2 * DAY, False),
    ]
    page = {
        "meta": {"api-version": "1.1"},
        "name": "srv",
        "files": [
            {"filename": f, "upload-time": _iso(t), "yanked": y, "url": "x"}
            for f, t, y in files
        ],
    }
    served.routes["/simple/srv/"] = (
        200,
        {"Content-Type": "application/vnd.pypi.simple.v1+json"},
        json.dumps(page).encode(),
    )
    env = {"UV_DEFAULT_INDEX": served.url + "/simple"}

    async def resolved(args: list[str], min_age: float = 0) -> Any:
        spec = parse_spec(
            "py", {"command": "uvx", "args": args, "env": env}, {"min_age": min_age}
        )
        launch = parse_launch(spec.command, spec.args)
        assert isinstance(launch, Launch)
        return await resolve(launch, spec, now)

    assert (await resolved(["srv"])).version == "1.3"
    assert (await resolved(["srv<1.3"])).version == "1.1"
    week = await resolved(["srv"], min_age=7)
    assert (week.version, week.newest) == ("1.1", "1.3")
    assert week.published == _iso(now - 20 * DAY)
    with pytest.raises(ResolveFailed, match="60 days old"):
        await resolved(["srv"], min_age=60)
    assert served.seen[-1][2]["Accept"] == "application/vnd.pypi.simple.v1+json"
    with pytest.raises(ResolveFailed, match="not on"):
        await resolved(["other"])


# ------------------------------------------------------------------ OCI


@pytest.mark.anyio
async def test_an_image_tag_resolves_to_its_digest_with_an_anonymous_token(
    served: Served,
) -> None:
    host = served.url.removeprefix("http://")
    digest = "sha256:" + "c" * 64
    served.routes["/token"] = (200, {}, json.dumps({"token": "anon-1"}).encode())
    challenge = (
        f'Bearer realm="{served.url}/token",service="stand-in",'
        'scope="repository:team/srv:pull"'
    )
    manifest = "/v2/team/srv/manifests/1.0"
    served.routes[manifest] = (200, {"Docker-Content-Digest": digest}, b"")
    served.guarded[manifest] = ("anon-1", challenge)
    spec = parse_spec(
        "img", {"command": "docker", "args": ["run", "-i", f"{host}/team/srv:1.0"]}
    )
    launch = parse_launch(spec.command, spec.args)
    assert isinstance(launch, Launch)
    found = await resolve(launch, spec, time.time())
    assert found.version == digest
    token_request = next(p for _, p, _ in served.seen if p.startswith("/token"))
    assert "service=stand-in" in token_request and "scope=repository" in token_request
    assert served.seen[-1][2].get("Authorization") == "Bearer anon-1"
    assert launch.locked(spec.args, found.version)[2] == f"{host}/team/srv:1.0@{digest}"


# ------------------------------------------------------- without a registry


@pytest.mark.anyio
async def test_a_registry_that_does_not_answer_starts_as_written_and_says_so(
    tmp_path: Path,
) -> None:
    calls: list[str] = []

    async def down(launch: Launch, spec: Any, now: float) -> Any:
        calls.append(launch.package)
        raise ResolveFailed("npm view lockdemo: connect ECONNREFUSED")

    clock = [1000.0]
    locks = LaunchLocks(tmp_path, resolver=down, clock=lambda: clock[0])
    told: list[LaunchNote] = []
    spec = parse_spec("lockdemo", {"command": "npx", "args": ["-y", "lockdemo"]})
    assert await locks.apply(spec, told.append) == spec
    assert [(n.change, n.package) for n in told] == [("unlocked", "lockdemo")]
    assert "ECONNREFUSED" in told[0].reason and "started as written" in told[0].reason
    # Not asked again at every restart, nor told twice; asked again later.
    assert await locks.apply(spec, told.append) == spec
    assert len(calls) == 1 and len(told) == 1
    clock[0] += 301
    await locks.apply(spec, told.append)
    assert len(calls) == 2 and len(told) == 1
    # A pinned command, `lock = false`, and a git package: nothing asked.
    for other in (
        parse_spec("a", {"command": "npx", "args": ["-y", "lockdemo@1.0.0"]}),
        parse_spec(
            "b", {"command": "npx", "args": ["-y", "lockdemo"]}, {"lock": False}
        ),
    ):
        assert await locks.apply(other, told.append) == other
    git = parse_spec("c", {"command": "npx", "args": ["-y", "github:o/r"]})
    assert await locks.apply(git, told.append) == git
    assert len(calls) == 2
    assert told[-1].change == "unlocked" and "git" in told[-1].reason


@pytest.mark.anyio
async def test_read_only_locks_start_what_is_locked_and_make_none(
    tmp_path: Path,
) -> None:
    """`mcp-manager pins check` starts what the daemon would, and changes no
    lock: a locked package starts locked, an unlocked one as written, and no
    registry is asked."""
    asked: list[str] = []

    async def registry(launch: Launch, spec: Any, now: float) -> Any:
        asked.append(launch.package)
        raise AssertionError("a read-only lock asked the registry")

    writer = LaunchLocks(tmp_path, resolver=registry)
    locked = parse_spec("locked", {"command": "npx", "args": ["-y", "pkg"]})
    writer.take(locked, "1.0.0")
    reader = LaunchLocks(tmp_path, resolver=registry, read_only=True)
    told: list[LaunchNote] = []
    started = await reader.apply(locked, told.append)
    assert started.args == ("-y", "pkg@1.0.0")
    fresh = parse_spec("fresh", {"command": "npx", "args": ["-y", "other"]})
    assert await reader.apply(fresh, told.append) == fresh
    assert not (tmp_path / "fresh.json").exists()
    assert asked == [] and told == []


@pytest.mark.anyio
@pytest.mark.parametrize("text", ['{"launcher": "npx", "version": "1.0', "[1, 2]"])
async def test_a_lock_file_that_cannot_be_read_starts_nothing_until_update(
    tmp_path: Path, text: str
) -> None:
    """A cut lock file was read as no lock: the next start asked the
    registry, took its newest release and wrote it over the lock, saying
    only "launch locked" (found by an audit). Now the server does not start
    unlocked; `update` locks it again."""
    asked: list[str] = []

    async def registry(launch: Launch, spec: Any, now: float) -> Any:
        asked.append(launch.package)
        return Resolution("2.0.0", "")

    spec = parse_spec("s", {"command": "npx", "args": ["-y", "pkg"]})
    LaunchLocks(tmp_path, resolver=registry).take(spec, "1.0.0")
    (tmp_path / "s.json").write_text(text)
    locks = LaunchLocks(tmp_path, resolver=registry)
    with pytest.raises(ConnectFailed, match="cannot be read") as caught:
        await locks.apply(spec, lambda note: None)
    assert "mcp-manager update s" in str(caught.value)
    assert asked == [] and (tmp_path / "s.json").read_text() == text
    locks.take(spec, "1.0.0")  # what `update` does once the user says yes
    started = await locks.apply(spec, lambda note: None)
    assert started.args == ("-y", "pkg@1.0.0") and asked == []


@pytest.mark.anyio
async def test_npm_is_asked_away_from_the_daemons_terminal(tmp_path: Path) -> None:
    """`npm view` runs in a session of its own with stdin from /dev/null: an
    npm that sees a terminal resets it on exit, and the HUD on it would stop
    seeing keys. The `npm` here refuses to answer otherwise."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "npm"
    fake.write_text(
        f"#!{sys.executable} -S\n"
        "import json, os, sys\n"
        "null = os.stat('/dev/null')\n"
        "stdin = os.fstat(0)\n"
        "alone = os.getsid(0) == os.getpid()\n"
        "same = (stdin.st_rdev, stdin.st_ino) == (null.st_rdev, null.st_ino)\n"
        "if not (same and alone):\n"
        "    sys.exit('stdin is not /dev/null or the session is the daemon\\'s')\n"
        "print(json.dumps({'time': {'1.0.0': '2026-01-01T00:00:00Z'},"
        " 'dist-tags': {'latest': '1.0.0'}}))\n"
    )
    fake.chmod(0o755)
    path = f"{bin_dir}:{os.environ.get('PATH', '')}"
    spec = parse_spec(
        "p", {"command": "npx", "args": ["-y", "pkg"], "env": {"PATH": path}}
    )
    launch = parse_launch(spec.command, spec.args)
    assert isinstance(launch, Launch)
    found = await resolve(launch, spec, time.time())
    assert found.version == "1.0.0"


@pytest.mark.anyio
async def test_a_registry_that_hangs_is_given_up_on_and_the_server_starts(
    tmp_path: Path,
) -> None:
    """A resolution has a deadline that fires: past it the server starts as
    written, and the reason says the registry gave no answer."""

    async def hangs(launch: Launch, spec: Any, now: float) -> Any:
        await anyio.sleep_forever()

    locks = LaunchLocks(tmp_path, resolver=hangs, resolve_timeout=0.2)
    told: list[LaunchNote] = []
    spec = parse_spec("slow", {"command": "npx", "args": ["-y", "pkg"]})
    with anyio.fail_after(10):
        assert await locks.apply(spec, told.append) == spec
    assert [n.change for n in told] == ["unlocked"]
    assert "no answer within 0.2 s" in told[0].reason
