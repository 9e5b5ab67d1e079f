"""`attach`'s bridge against a daemon that goes away: what is sent again.

The bridge runs as `attach` does (its loop on a thread, the client's pipes,
a real Unix socket); the daemon is a listener here that greets it, reads
what comes and acknowledges what the test says, then hangs up as a crashed
daemon would. The rule (`core.once`): after a crash, only what the daemon
never acknowledged, and requests that only read, reach the next daemon;
every other request in flight is answered with `stopped_error` at once.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from manager.cli.attach import Bridge, connect
from manager.core.once import STOPPED_CODE

WAIT = 10.0
"""Seconds any step may take before the test fails."""


class _Daemon:
    """A listener on the attach socket that plays the daemon, one client at a time."""

    def __init__(self, path: Path) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(4)
        self.listener.settimeout(WAIT)

    def accept(self, *, acks: bool) -> tuple[socket.socket, Any]:
        conn, _ = self.listener.accept()
        conn.settimeout(WAIT)
        reader = conn.makefile("rb")
        greeting = json.loads(reader.readline())
        assert greeting["ack"] is True  # attach always asks
        answer = {"ok": True, "ack": True} if acks else {"ok": True}
        conn.sendall(json.dumps(answer).encode() + b"\n")
        return conn, reader

    def close(self) -> None:
        self.listener.close()


def _hang_up(conn: socket.socket, reader: Any) -> None:
    """As a daemon that died: the connection ends (its reader with it)."""
    reader.close()
    conn.close()


def _request(request_id: int, method: str) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {}}
    return json.dumps(message).encode() + b"\n"


@pytest.fixture
def socket_path(control_socket: Path) -> Path:
    """The attach socket beside `control_socket`, in its private directory."""
    return control_socket.with_name("control.mcp.sock")


class _Attached:
    """The bridge on a thread, with the client's ends of its pipes."""

    def __init__(self, path: Path, daemon: _Daemon, *, acks: bool) -> None:
        stdin_r, self.stdin = os.pipe()
        self.stdout, stdout_w = os.pipe()
        self._fds = (stdin_r, stdout_w)
        accepted: list[tuple[socket.socket, Any]] = []
        waiter = threading.Thread(
            target=lambda: accepted.append(daemon.accept(acks=acks))
        )
        waiter.start()
        sock, daemon_acks = connect(path, None)
        waiter.join(WAIT)
        self.conn, self.reader = accepted[0]
        self.bridge = Bridge(
            path, None, 30.0, sock, stdin_r, stdout_w, acks=daemon_acks
        )
        self.exit: list[int] = []
        self.thread = threading.Thread(
            target=lambda: self.exit.append(self.bridge.run())
        )
        self.thread.start()
        self._out = os.fdopen(self.stdout, "rb")

    def send(self, data: bytes) -> None:
        os.write(self.stdin, data)

    def answer(self) -> dict[str, Any]:
        line = self._out.readline()
        assert line, "attach closed its stdout"
        message = json.loads(line)
        assert isinstance(message, dict)
        return message

    def close(self) -> int:
        os.close(self.stdin)
        self.thread.join(WAIT)
        assert not self.thread.is_alive()
        self._out.close()
        for fd in self._fds:
            os.close(fd)
        return self.exit[0]


def test_after_a_crash_only_what_the_daemon_never_took_or_only_reads_is_sent_again(
    socket_path: Path,
) -> None:
    daemon = _Daemon(socket_path)
    try:
        attached = _Attached(socket_path, daemon, acks=True)
        attached.send(_request(1, "tools/call") + _request(2, "tools/list"))
        attached.send(_request(3, "tools/call"))
        lines = [attached.reader.readline() for _ in range(3)]
        assert [json.loads(line)["id"] for line in lines] == [1, 2, 3]
        # The daemon took 1 and 2 (they may have run), then died before 3.
        attached.conn.sendall(b'{"ack": [1, 2]}\n')
        _hang_up(attached.conn, attached.reader)
        stopped = attached.answer()
        assert stopped["id"] == 1 and stopped["error"]["code"] == STOPPED_CODE
        assert "may have run" in stopped["error"]["message"]
        # The next daemon gets the read (2) and what was never taken (3).
        conn, reader = daemon.accept(acks=True)
        again = sorted(json.loads(reader.readline())["id"] for _ in range(2))
        assert again == [2, 3]
        for request_id in (2, 3):
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "result": {}}
            conn.sendall(json.dumps(reply).encode() + b"\n")
        assert {attached.answer()["id"], attached.answer()["id"]} == {2, 3}
        assert attached.close() == 0
        # Nothing else reached the second daemon: request 1 was not sent again.
        assert reader.readline() == b""
        _hang_up(conn, reader)
    finally:
        daemon.close()


def test_an_acknowledgement_is_not_passed_to_the_client(socket_path: Path) -> None:
    daemon = _Daemon(socket_path)
    try:
        attached = _Attached(socket_path, daemon, acks=True)
        attached.send(_request(7, "tools/call"))
        assert json.loads(attached.reader.readline())["id"] == 7
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "result": {}}
        attached.conn.sendall(b'{"ack": [7]}\n' + json.dumps(answer).encode() + b"\n")
        assert attached.answer() == answer
        assert attached.close() == 0
        _hang_up(attached.conn, attached.reader)
    finally:
        daemon.close()


def test_without_acknowledgements_whatever_was_sent_may_have_run(
    socket_path: Path,
) -> None:
    """An older daemon says nothing of what it took: a request handed to it
    is never sent again; one made while no daemon runs goes to the next."""
    daemon = _Daemon(socket_path)
    try:
        attached = _Attached(socket_path, daemon, acks=False)
        attached.send(_request(1, "tools/call"))
        assert json.loads(attached.reader.readline())["id"] == 1
        _hang_up(attached.conn, attached.reader)
        stopped = attached.answer()
        assert stopped["id"] == 1 and "not sent again" in stopped["error"]["message"]
        attached.send(_request(2, "tools/call"))  # no daemon now: it waits
        conn, reader = daemon.accept(acks=False)
        assert json.loads(reader.readline())["id"] == 2
        conn.sendall(b'{"jsonrpc": "2.0", "id": 2, "result": {}}\n')
        assert attached.answer()["id"] == 2
        assert attached.close() == 0
        _hang_up(conn, reader)
    finally:
        daemon.close()
