"""The command line is built one command at a time (`build_parser(only=...)`):
what each command accepts and says must not depend on it."""

from __future__ import annotations

import pytest

from manager.cli.commands import build_parser, command_of


def help_of(
    argv: list[str], only: str | None, capsys: pytest.CaptureFixture[str]
) -> str:
    with pytest.raises(SystemExit) as exit_:
        build_parser(only).parse_args(argv)
    assert exit_.value.code == 0
    return capsys.readouterr().out


def every_command(capsys: pytest.CaptureFixture[str]) -> list[str]:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["no-such-command"])
    listed = capsys.readouterr().err.split("(choose from ")[1].rstrip(")\n")
    return [name.strip("'") for name in listed.split(", ")]


def test_each_command_built_alone_is_the_one_built_with_all(
    capsys: pytest.CaptureFixture[str],
) -> None:
    commands = every_command(capsys)
    assert {"run", "stdio", "status", "call", "pins", "attach", "add"} <= set(commands)
    for name in commands:
        whole = help_of([name, "--help"], None, capsys)
        alone = help_of([name, "--help"], name, capsys)
        assert alone == whole, name
    assert help_of(["pins", "check", "--help"], "pins", capsys) == help_of(
        ["pins", "check", "--help"], None, capsys
    )


def test_a_word_that_is_no_command_is_told_every_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        build_parser("statsu").parse_args(["statsu"])
    error = capsys.readouterr().err
    assert "invalid choice: 'statsu'" in error
    assert "'status'" in error and "'run'" in error


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["status", "--json"], "status"),
        (["--socket", "/tmp/s", "status"], "status"),
        (["--socket=/tmp/s", "call", "demo", "echo"], "call"),
        (["--socket"], None),
        (["--version"], None),
        (["-h", "status"], None),
        ([], None),
    ],
)
def test_the_command_is_the_first_word_that_is_not_an_option(
    argv: list[str], command: str | None
) -> None:
    assert command_of(argv) == command


@pytest.mark.parametrize("columns", ["120", "0", "-3", "wide", None])
def test_help_is_as_wide_as_shutil_would_make_it(
    columns: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from manager.cli.arguments import terminal_columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns


def test_a_command_line_loads_no_compression_module() -> None:
    """`shutil` imports bz2, lzma and zlib: 4 ms a command, for a number."""
    import subprocess
    import sys

    code = (
        "import sys; from manager.cli.commands import build_parser; "
        "build_parser('status').parse_args(['status', '--json']); "
        "print(sorted({'shutil', 'bz2', 'lzma'} & set(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("argv", "meant"),
    [
        (["stauts"], "'status'"),
        (["client-config", "cursr"], "'cursor'"),
        (["run", "startup.lua", "--log-format", "jsno"], "'json'"),
    ],
)
def test_a_mistyped_choice_gets_the_one_it_is_likely_to_be(
    capsys: pytest.CaptureFixture[str], argv: list[str], meant: str
) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser(command_of(argv)).parse_args(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice" in err and err.rstrip().endswith(f"(did you mean {meant}?)")


def test_a_word_like_no_choice_gets_no_guess(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["zzz"])
    assert "did you mean" not in capsys.readouterr().err
