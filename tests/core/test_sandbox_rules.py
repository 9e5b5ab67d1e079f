"""`core.sandbox.rules`: what `strict` grants by implication never opens the
home directory or the daemon's own directories (found by an audit: a server
started in `~`, or run from `~/bin`, read `~/.ssh`)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from manager.core.sandbox import covers, parse_sandbox, rules
from manager.transport.stdio.confinement import system_read

HOME = "/home/ann"
STRICT = parse_sandbox("s", "strict")


def _rules(command: str, cwd: str, private: tuple[str, ...] = ()) -> dict[str, object]:
    return rules(
        STRICT,
        command_paths=[command, command],
        args=[],
        cwd=cwd,
        tmpdir="/tmp/t",
        home=HOME,
        private=private,
    )


def _read(confined: dict[str, object]) -> list[str]:
    return cast("list[str]", confined["read"])


def test_a_server_started_in_the_home_directory_does_not_read_it() -> None:
    confined = _rules("/usr/bin/python3", HOME)
    assert not any(covers(p, HOME + "/.ssh") for p in _read(confined))
    assert confined["withheld"] == [(HOME, "its working directory")]


def test_nor_one_started_at_the_root() -> None:
    confined = _rules("/usr/bin/python3", "/")
    assert "/" not in _read(confined)
    assert confined["withheld"] == [("/", "its working directory")]


def test_a_command_in_home_bin_reads_its_folder_not_the_home() -> None:
    confined = _rules(f"{HOME}/bin/srv.py", "/srv/work")
    read = _read(confined)
    assert f"{HOME}/bin" in read and "/srv/work" in read
    assert HOME not in read
    assert confined["withheld"] == [(HOME, "the directory above its command's")]
    # A command right in the home directory: the file alone.
    read = _read(_rules(f"{HOME}/srv.py", "/srv/work"))
    assert f"{HOME}/srv.py" in read and HOME not in read


def test_a_private_directory_is_not_opened_by_the_working_directory() -> None:
    confined = _rules("/usr/bin/python3", "/srv", private=("/srv/state",))
    assert "/srv" not in _read(confined)
    # The ordinary case is untouched: an install, a working directory.
    confined = _rules("/opt/tool/bin/tool", "/srv/work", private=("/srv/state",))
    assert {"/opt/tool", "/srv/work"} <= set(_read(confined))
    assert confined["withheld"] == []


def test_what_the_declaration_names_is_granted_as_named() -> None:
    table = parse_sandbox("s", {"read": ["~"]})
    confined = rules(
        table,
        command_paths=["/usr/bin/python3"],
        args=[HOME + "/docs"],
        cwd=HOME,
        tmpdir="/tmp/t",
        home=HOME,
    )
    assert HOME in _read(confined) and HOME + "/docs" in _read(confined)


def test_system_directories_leave_out_the_runtime_directory(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "user" / "1000" / "mcp-manager").mkdir(parents=True)
    (run / "user" / "1001").mkdir()
    (run / "systemd").mkdir()
    private = str(run / "user" / "1000")
    found = system_read([private], [str(run), "/usr"])
    assert found == [str(run / "systemd"), str(run / "user" / "1001"), "/usr"]


def test_a_symlinked_home_is_still_the_home(tmp_path: Path) -> None:
    """Home as a symlink (/home -> /var/home), the daemon started in it:
    the working directory comes as its real path and was granted, with
    ~/.ssh and the state directory (found by an audit)."""
    real = tmp_path / "realhome"
    (real / ".ssh").mkdir(parents=True)
    link = tmp_path / "homelink"
    link.symlink_to(real)
    for cwd in (str(real), str(link)):
        confined = rules(
            STRICT,
            command_paths=["/usr/bin/python3"],
            args=[],
            cwd=cwd,
            tmpdir="/tmp/t",
            home=str(link),
        )
        assert cwd not in _read(confined), cwd
        assert confined["withheld"] == [(cwd, "its working directory")]


def test_the_socket_directory_is_kept_private_wherever_it_is() -> None:
    """Without a runtime directory the key is in /tmp/mcp-manager-UID: a
    server started in /tmp read it (found by an audit)."""
    from manager.transport.stdio import confinement

    confinement.keep_private("/tmp/mcp-manager-test-socket-dir")
    private = confinement._private_dirs()
    assert "/tmp/mcp-manager-test-socket-dir" in private
    confined = _rules("/usr/bin/python3", "/tmp", private=tuple(private))
    assert "/tmp" not in _read(confined)
