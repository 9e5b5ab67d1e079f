"""Secret audit: declared secrets never show on any surface of the real daemon.

Secrets reach the daemon as `${env:…}` values in a header, in URL userinfo, in a
stdio server's env and in a stdio argument (`--token=…`, which the server's
argparse echoes back on stderr), and as a password written into the script's
URL. The daemon runs at DEBUG with spans printed to its stdout, connections
succeed and fail, calls succeed and fail; then every surface is read (log,
spans, event stream, `status --json`, the `status` table, `details`, call
errors) and no secret value may appear in any of them.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
from servers import Blackhole, HttpServerFactory, free_port, raw_command
from servers.daemon import DaemonProcess

from manager.cli import main
from manager.core.errors import ManagerError

pytestmark = pytest.mark.usefixtures("no_leaked_children")


def _lua(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid Lua string literal here


def test_no_secret_value_appears_on_any_surface(
    make_http_server: HttpServerFactory,
    blackhole: Blackhole,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    values = {
        name: f"s3cr3t-{name.lower()}-{secrets.token_hex(8)}"
        for name in ("HDR", "KEY", "PW", "ENV", "ARG", "BH", "LIT", "REF")
    }
    env = {  # LIT is only ever written into the script
        f"MM_AUDIT_{name}": value for name, value in values.items() if name != "LIT"
    }
    server = make_http_server("http")
    command, args = raw_command()
    raw_args = ", ".join(_lua(a) for a in args)
    dead = free_port()
    script = tmp_path / "startup.lua"
    script.write_text(
        # HTTP with secret headers, connected.
        f"mcp_add('hdr', {_lua(server.url)}, {{headers = {{"
        "Authorization = 'Bearer ${env:MM_AUDIT_HDR}', "
        "['X-Custom'] = '${env:MM_AUDIT_KEY}'}, ping_interval = 0.2})\n"
        # URL userinfo with a secret password, refused.
        f"mcp_add('userinfo', 'http://bob:${{env:MM_AUDIT_PW}}@127.0.0.1:{dead}/mcp',"
        " {connect_timeout = 1, hold = 0})\n"
        # Headers to a server that never answers: connect timeouts.
        f"mcp_add('hole', 'http://127.0.0.1:{blackhole.port}/mcp', "
        "{connect_timeout = 0.3, hold = 0, "
        "headers = {Authorization = '${env:MM_AUDIT_BH}'}})\n"
        # A password written into the script's URL and a secret header, refused.
        f"mcp_add('literal', 'http://user:pw-{values['LIT']}@127.0.0.1:{dead}/mcp', "
        "{hold = 0, headers = {Authorization = 'Bearer ${env:MM_AUDIT_REF}'}})\n"
        # stdio with a secret env value, connected.
        f"mcp_add('stdio_env', {{command = {_lua(command)}, args = {{{raw_args}}}, "
        "env = {API_TOKEN = '${env:MM_AUDIT_ENV}'}})\n"
        # stdio with a secret argument the server rejects and echoes on stderr.
        f"mcp_add('stdio_arg', {{command = {_lua(command)}, args = {{{raw_args}, "
        "'--token=${env:MM_AUDIT_ARG}'}}, {hold = 0})\n"
    )
    otel = {
        "OTEL_SDK_DISABLED": "false",
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
    }
    surfaces: dict[str, str] = {}
    with DaemonProcess(script, "--log-level", "DEBUG", env={**env, **otel}) as daemon:
        daemon.wait_event("connected", "hdr")
        daemon.wait_event("connected", "stdio_env")
        daemon.wait_event("connect_failed", "userinfo")
        daemon.wait_event("connect_failed", "hole")
        daemon.wait_event("connect_failed", "literal")
        daemon.wait_event("connect_failed", "stdio_arg")
        daemon.wait_event("stderr", "stdio_arg")
        client = daemon.client
        calls = []
        for target, tool, arguments in (
            ("hdr", "echo", {"text": "hi"}),
            ("hdr", "no_such_tool", {}),
            ("stdio_env", "echo", {"text": "hi"}),
            ("stdio_env", "crash", {"code": 7}),
            ("userinfo", "echo", {}),
            ("hole", "echo", {}),
            ("literal", "echo", {}),
            ("stdio_arg", "echo", {}),
        ):
            try:
                calls.append(repr(client.call(target, tool, arguments, timeout=1.0)))
            except ManagerError as exc:
                calls.append(f"{type(exc).__name__}: {exc}")
        surfaces["calls"] = "\n".join(calls)
        daemon.wait_event("disconnected", "stdio_env")  # the crash: a loss
        # A lost HTTP session: kill the server under the connection.
        server.kill()
        daemon.wait_event("disconnected", "hdr")
        daemon.wait_event("connect_failed", "hdr")
        names = ("hdr", "userinfo", "hole", "literal", "stdio_env", "stdio_arg")
        surfaces["details"] = json.dumps([client.details(n).to_dict() for n in names])
        surfaces["status"] = json.dumps([row.to_dict() for row in client.status()])
        assert main(["status", "--json", "--socket", str(daemon.socket)]) == 0
        assert main(["status", "--socket", str(daemon.socket)]) == 0
        surfaces["cli"] = capsys.readouterr().out
        surfaces["events"] = json.dumps(daemon.events)
    surfaces["log"] = daemon.log()

    # The audit proves something only if the surfaces were really exercised.
    assert '"name": "mcp.connect_attempt"' in surfaces["log"]  # spans printed
    assert "DEBUG" in surfaces["log"]
    assert "stdio_arg" in surfaces["cli"]
    assert "***" in surfaces["events"] + surfaces["details"] + surfaces["log"]
    assert "http://user:***@127.0.0.1" in surfaces["details"]  # the written password
    for surface, text in surfaces.items():
        for name, value in values.items():
            assert value not in text, f"MM_AUDIT_{name} leaked into {surface}"
