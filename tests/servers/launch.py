"""Run `python -m MODULE ...` forked from a test worker's preloader, as this process.

`launch.py SOCKET -m MODULE ARGS...` (run with `python -S`: standard library
only, about 20 ms to start) hands its stdin, stdout and stderr to the preloader
(`preload.py`), which forks a child that runs the module with them. This
process then stands for the child, for whoever started it (the daemon, over
stdio): signals it gets go on to the child, its exit status is the child's, and
when it is SIGKILLed the preloader kills the child. The pipes close when the
child exits, as they would. If the preloader cannot fork it (gone, or another
`PYTHON*` environment), it execs `python -m MODULE ...` itself.

What it does not stand for: process groups. The child runs in the preloader's
group, so a signal to this process's group reaches only this process (and
through it the child), never the child's own children: tests about process
groups use the plain command (`stdio_command(..., fork=False)`).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)


def main() -> None:
    path, argv = sys.argv[1], sys.argv[2:]
    child: list[int] = []  # the child's pidfd, once there is one
    pending: list[int] = []  # signals that came before it

    def forward(sig: int, _frame: object) -> None:
        if not child:
            pending.append(sig)
            return
        try:
            signal.pidfd_send_signal(child[0], sig)
        except ProcessLookupError:
            pass

    for sig in FORWARDED:  # from the start: no window where one kills us alone
        signal.signal(sig, forward)
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        conn.connect(path)
        request = {
            "module": argv[1],
            "argv": argv[1:],
            "env": dict(os.environ),
            "cwd": os.getcwd(),
        }
        socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
        reply = json.loads(conn.recv(4096) or b"{}")
    except OSError:
        reply = {}
    if "pid" not in reply:
        for early in pending:  # what would have ended the exec'd process
            signal.signal(early, signal.SIG_DFL)
            os.kill(os.getpid(), early)
        os.execv(sys.executable, [sys.executable, *argv])
    # The stdio is the child's now: the pipes close when it exits.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    try:
        child.append(os.pidfd_open(reply["pid"]))
    except ProcessLookupError:
        pass  # exited already: its status is on its way
    else:
        for early in pending:
            forward(early, None)
    said = conn.recv(64)
    code = int(said) if said else -signal.SIGKILL
    if code < 0:  # die of the same signal
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


if __name__ == "__main__":
    main()
