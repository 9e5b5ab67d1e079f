"""Start a stdio server confined by Linux Landlock, then become it.

Run by the daemon, never imported: `python -I -S confine.py RULE... --
COMMAND ARGS...` (standard library only, and only what it needs: it starts in
about 10 ms more than a bare interpreter). Each RULE is one argument:
`read=PATH`, `write=PATH`, `port=N`, or `net=limited` (TCP is limited to the
`port=` rules, none when there are none; without it TCP is not limited).
COMMAND is as the daemon found it on PATH (it is not looked up here: once
restricted, a PATH lookup may fail). This process
restricts itself with Landlock (unprivileged, inherited by everything it
execs): files and directories only under `read` (read and execute) and
`write` (everything), TCP connect and bind only to `ports` (none when empty;
not restricted when null), then `exec`s the server. A path that does not
exist is skipped.

It gives up every capability first (a root server in a container would
otherwise read the daemon's `/proc/PID/environ`: Landlock yields to
CAP_SYS_PTRACE). Since ABI 6 (Linux 6.12) it may not signal a process
outside the sandbox (the daemon, the user's editor) and, where TCP is
limited, not connect to an abstract Unix socket made outside it.

What Landlock cannot do: it limits TCP by port, not by host (egress rules by
host need a proxy); UDP and Unix sockets by path are not limited (the
daemon's own sockets ask for a key the sandbox cannot read); what the server
already holds open (its stdin and stdout) stays usable. Needs a kernel with
Landlock (5.13+; TCP rules 6.7+, ABI 4): without it this exits 126 and says
so, and the daemon decides beforehand whether to run the server unconfined.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys

CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
"""Landlock's syscall numbers (the same on x86-64 and arm64)."""

VERSION = 1 << 0
PATH_BENEATH, NET_PORT = 1, 2
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
CAPABILITY_V3 = 0x20080522

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
BIND_TCP, CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
"""ABI 6 (Linux 6.12): no signal to, and no connection to an abstract Unix
socket of, a process outside the sandbox (the daemon, the user's editor)."""
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
"""The rights a rule on a file (not a directory) may carry."""


def abi(libc: ctypes.CDLL) -> int:
    """Landlock's ABI version here, or 0 when the kernel has none."""
    version = libc.syscall(CREATE_RULESET, None, 0, VERSION)
    return max(int(version), 0)


def fs_rights(version: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: execute ... make_sym
    if version >= 2:
        rights |= REFER
    if version >= 3:
        rights |= TRUNCATE
    if version >= 5:
        rights |= IOCTL_DEV
    return rights


def drop_capabilities(libc: ctypes.CDLL) -> None:
    """Give up every capability for good, as root too: under root (a
    container, say) CAP_SYS_PTRACE lets a confined server read the daemon's
    and other servers' `/proc/PID/environ` (Landlock yields to it), and
    CAP_DAC_OVERRIDE ignores file modes. Emptied: the bounding set (an exec
    regains nothing), the ambient and inheritable sets. A user without
    capabilities has none to drop (EPERM, ignored)."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as file:
            last = int(file.read())
    except (OSError, ValueError):
        last = 40
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = ctypes.create_string_buffer(struct.pack("=Ii", CAPABILITY_V3, 0))
    data = ctypes.create_string_buffer(24)  # two of effective, permitted, inheritable
    if libc.capget(header, data) == 0:  # glibc's wrappers: any architecture
        words = list(struct.unpack("=6I", data.raw))
        words[2] = words[5] = 0  # inheritable
        libc.capset(header, ctypes.create_string_buffer(struct.pack("=6I", *words)))


def confine(rules: dict[str, list[str] | list[int] | None]) -> str | None:
    """Restrict this process; None, or why it could not be done."""
    libc = ctypes.CDLL(None, use_errno=True)
    version = abi(libc)
    if version < 1:
        return "this kernel has no Landlock"
    handled = fs_rights(version)
    ports = rules.get("ports")
    net = BIND_TCP | CONNECT_TCP if ports is not None and version >= 4 else 0
    if ports is not None and version < 4:
        return f"Landlock ABI {version} cannot limit TCP (needs 4, Linux 6.7)"
    if version >= 6:
        scoped = SCOPE_SIGNAL
        if ports is not None:  # network limited: abstract sockets too
            scoped |= SCOPE_ABSTRACT_UNIX_SOCKET
        attr = struct.pack("=QQQ", handled, net, scoped)
    elif version >= 4:
        attr = struct.pack("=QQ", handled, net)
    else:
        attr = struct.pack("=Q", handled)
    buffer = ctypes.create_string_buffer(attr)
    ruleset = libc.syscall(CREATE_RULESET, buffer, len(attr), 0)
    if ruleset < 0:
        return f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}"
    read = EXECUTE | READ_FILE | READ_DIR | (IOCTL_DEV & handled)
    for key, allowed in (("read", read), ("write", handled)):
        for path in rules.get(key) or []:
            try:
                fd = os.open(str(path), os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not on this machine
            try:
                rights = allowed
                if not os.path.isdir(str(path)):
                    rights &= FILE_RIGHTS
                rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd))
                if libc.syscall(ADD_RULE, ruleset, PATH_BENEATH, rule, 0) < 0:
                    return (
                        f"landlock_add_rule {path}: {os.strerror(ctypes.get_errno())}"
                    )
            finally:
                os.close(fd)
    for port in ports or []:
        rule = ctypes.create_string_buffer(struct.pack("=QQ", net, int(port)))
        if libc.syscall(ADD_RULE, ruleset, NET_PORT, rule, 0) < 0:
            return f"landlock_add_rule port {port}: {os.strerror(ctypes.get_errno())}"
    drop_capabilities(libc)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"no_new_privs: {os.strerror(ctypes.get_errno())}"
    if libc.syscall(RESTRICT_SELF, ruleset, 0) < 0:
        return f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}"
    os.close(ruleset)
    return None


def parse(given: list[str]) -> dict[str, list[str] | list[int] | None] | None:
    """The rules `RULE...` say, or None if one is not a rule."""
    read: list[str] = []
    write: list[str] = []
    ports: list[int] | None = None
    numbers: list[int] = []
    for rule in given:
        key, equals, value = rule.partition("=")
        if not equals:
            return None
        if key == "read":
            read.append(value)
        elif key == "write":
            write.append(value)
        elif key == "port" and value.isdigit():
            numbers.append(int(value))
        elif key == "net" and value == "limited":
            ports = numbers
        else:
            return None
    return {"read": read, "write": write, "ports": ports}


def main(argv: list[str]) -> int:
    if "--" not in argv[1:]:
        return 2
    split = argv.index("--", 1)
    rules, command = parse(argv[1:split]), argv[split + 1 :]
    if rules is None or not command:
        return 2
    problem = confine(rules)
    if problem is not None:
        return 126
    try:
        os.execv(command[0], command)
    except OSError:
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv))
