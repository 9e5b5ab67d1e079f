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
