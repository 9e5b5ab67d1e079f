"""Malformed requests on the control socket and the MCP endpoint of the real daemon.

One daemon (with `--listen` and one fast stdio upstream) takes random bytes,
over-long lines and wrong-typed requests on its control socket, and bad JSON-RPC,
unknown methods, wrong content types and huge bodies on its MCP endpoint. Each
gets a clear error (an `ok: false` line with a message, or an HTTP 4xx), never
a 5xx or a hang, and the daemon keeps serving: after every example a real
request still works.
"""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from servers import free_port, raw_command
from servers.daemon import DaemonProcess
from support.control import keyed_line

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
    ],
    derandomize=True,
)

ACCEPT = "application/json, text/event-stream"


class Response:
    def __init__(self, status_code: int, text: str) -> None:
        self.status_code = status_code
        self.text = text


class Target:
    def __init__(self, daemon: DaemonProcess, port: int) -> None:
        self.daemon = daemon
        self.port = port
        self.auth = daemon.headers()
        """The bearer token: fuzz reaches what is past the gate."""

    def request(
        self, method: str, body: bytes | None, headers: dict[str, str]
    ) -> Response:
        """One HTTP request on a fresh connection (a bad one may be dropped)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, "/mcp", body=body, headers={**self.auth, **headers})
            response = conn.getresponse()
            text = response.read(4096).decode(errors="replace")
            return Response(response.status, text)
        finally:
            conn.close()


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    tmp = tmp_path_factory.mktemp("fuzz-surfaces")
    command, args = raw_command()
    script = Path(tmp) / "startup.lua"
    script.write_text(
        f"mcp_add('fast', {{command = {json.dumps(command)}, "
        f"args = {{{', '.join(json.dumps(a) for a in args)}}}}})\n"
    )
    port = free_port()
    # Module-wide, so before each test's own state directory: one of its own.
    state = {"XDG_STATE_HOME": str(Path(tmp) / "state")}
    with DaemonProcess(script, "--listen", f"127.0.0.1:{port}", env=state) as daemon:
        daemon.wait_event("connected", "fast")
        yield Target(daemon, port)
        assert daemon.process.poll() is None, "the daemon died under fuzzing"


def _control_exchange(path: Path, payload: bytes) -> list[dict[str, object]]:
    """Send `payload`, half-close, and read every reply line until EOF."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        try:
            # Proven first, as the daemon's own clients do: the payload is
            # then read as requests, not refused for want of the key.
            sock.sendall(keyed_line(path, {"cmd": "ping"}) + payload)
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may drop an over-long line's sender mid-send
        data = b""
        try:
            while chunk := sock.recv(65536):
                data += chunk
        except ConnectionResetError:
            pass
    proof, *replies = [json.loads(line) for line in data.splitlines() if line.strip()]
    assert proof["ok"] is True, proof
    return replies


def _assert_clear_errors(replies: list[dict[str, object]]) -> None:
    for reply in replies:
        assert isinstance(reply, dict) and "ok" in reply
        if reply["ok"] is False:
            error = reply["error"]
            assert isinstance(error, dict)
            assert error["type"] != "InternalError", error
            assert str(error["message"]).strip()


def _still_serving(target: Target) -> None:
    assert target.daemon.client.ping()
    assert [row.name for row in target.daemon.client.status()] == ["fast"]


_json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False),
        st.text(max_size=20),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner)
    ),
    max_leaves=10,
)

_commands = st.sampled_from(
    ["status", "info", "details", "reconnect", "call", "reload", "ping", "nope", ""]
)

_requests = st.one_of(
    _json_values,
    st.fixed_dictionaries({"cmd": _commands}, optional={"server": _json_values}),
    st.fixed_dictionaries(
        {"cmd": st.just("call")},
        optional={
            "server": st.one_of(st.just("fast"), _json_values),
            "tool": st.one_of(st.just("echo"), _json_values),
            "args": _json_values,
            "timeout": st.one_of(st.floats(allow_nan=False), _json_values),
        },
    ),
)


@FUZZ
@given(request=_requests)
def test_wrong_typed_control_requests_get_clear_errors(
    target: Target, request: object
) -> None:
    line = json.dumps(request).encode() + b"\n"
    replies = _control_exchange(target.daemon.socket, line)
    assert len(replies) == 1
    _assert_clear_errors(replies)
    _still_serving(target)


@FUZZ
@given(payload=st.binary(max_size=300))
def test_random_bytes_on_the_control_socket_get_clear_errors(
    target: Target, payload: bytes
) -> None:
    _assert_clear_errors(_control_exchange(target.daemon.socket, payload + b"\n"))
    _still_serving(target)


@pytest.mark.parametrize("size", [64 * 1024, 2 * 1024 * 1024, 16 * 1024 * 1024])
def test_an_over_long_control_line_is_refused_and_the_server_keeps_serving(
    target: Target, size: int
) -> None:
    replies = _control_exchange(target.daemon.socket, b"x" * size + b"\n")
    _assert_clear_errors(replies)
    assert all(reply["ok"] is False for reply in replies)
    _still_serving(target)


def _post(
    target: Target, body: bytes, content_type: str = "application/json"
) -> Response:
    return target.request(
        "POST", body, {"Content-Type": content_type, "Accept": ACCEPT}
    )


def _mcp_still_serving(target: Target) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "fuzz", "version": "0"},
        },
    }
    response = _post(target, json.dumps(init).encode())
    assert response.status_code == 200, response.text
    _still_serving(target)


_jsonrpc = st.one_of(
    _json_values,
    st.fixed_dictionaries(
        {"jsonrpc": st.sampled_from(["2.0", "1.0", ""])},
        optional={
            "id": st.one_of(st.integers(), st.text(max_size=5), st.none()),
            "method": st.one_of(
                st.sampled_from(
                    [
                        "initialize",
                        "tools/list",
                        "tools/call",
                        "ping",
                        "resources/list",
                        "nope",
                        "notifications/initialized",
                    ]
                ),
                st.text(max_size=20),
            ),
            "params": _json_values,
        },
    ),
)


@FUZZ
@given(message=_jsonrpc)
def test_bad_json_rpc_on_the_endpoint_gets_a_4xx_or_an_error_reply(
    target: Target, message: object
) -> None:
    response = _post(target, json.dumps(message).encode())
    assert response.status_code < 500, response.text
    _mcp_still_serving(target)


@FUZZ
@given(body=st.binary(max_size=300))
def test_random_bodies_on_the_endpoint_get_a_4xx(target: Target, body: bytes) -> None:
    response = _post(target, body)
    assert response.status_code < 500, response.text
    _mcp_still_serving(target)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"{" * 100_000, "application/json"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "' + b"x" * 8_000_000 + b'"}', ""),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', "text/plain"),
        (b"[" + b"1," * 500_000 + b"1]", "application/json"),
    ],
)
def test_huge_or_mistyped_bodies_on_the_endpoint_get_a_4xx(
    target: Target, body: bytes, content_type: str
) -> None:
    response = _post(target, body, content_type or "application/json")
    assert 400 <= response.status_code < 500, response.status_code
    _mcp_still_serving(target)


def test_wrong_http_methods_on_the_endpoint_get_a_4xx(target: Target) -> None:
    for method in ("PUT", "PATCH", "DELETE", "GET"):
        response = target.request(method, None, {"Accept": ACCEPT})
        assert 400 <= response.status_code < 500, (method, response.status_code)
    _mcp_still_serving(target)
