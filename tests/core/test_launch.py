"""`core.launch`: the registry package in a launcher's command line, and the
same command naming one exact version."""

from __future__ import annotations

import pytest

from manager.core.launch import Launch, Unlockable, parse_launch


def launch(command: str, *args: str) -> Launch:
    found = parse_launch(command, args)
    assert isinstance(found, Launch), found
    return found


@pytest.mark.parametrize(
    ("command", "args", "package", "wanted", "locked"),
    [
        ("npx", ("-y", "@scope/srv"), "@scope/srv", "", ("-y", "@scope/srv@1.2.3")),
        (
            "npx",
            ("-y", "srv@^1.2", "--port", "1"),
            "srv",
            "^1.2",
            ("-y", "srv@1.2.3", "--port", "1"),
        ),
        ("/usr/bin/npx", ("--yes", "srv@next"), "srv", "next", ("--yes", "srv@1.2.3")),
        (
            "npx",
            ("-p", "srv@1", "srv-bin", "--x"),
            "srv",
            "1",
            ("-p", "srv@1.2.3", "srv-bin", "--x"),
        ),
        (
            "npx",
            ("--registry", "http://r", "srv"),
            "srv",
            "",
            ("--registry", "http://r", "srv@1.2.3"),
        ),
        ("bunx", ("srv",), "srv", "", ("srv@1.2.3",)),
    ],
)
def test_npm_launches_lock_the_package_argument(
    command: str,
    args: tuple[str, ...],
    package: str,
    wanted: str,
    locked: tuple[str, ...],
) -> None:
    found = launch(command, *args)
    assert (found.ecosystem, found.package, found.wanted) == ("npm", package, wanted)
    assert not found.exact
    assert found.locked(args, "1.2.3") == locked


@pytest.mark.parametrize(
    ("command", "args", "package", "locked"),
    [
        ("uvx", ("mcp-server-fetch",), "mcp-server-fetch", ("mcp-server-fetch==2.0",)),
        (
            "uvx",
            ("--python", "3.12", "srv[cli]>=1,<3", "--opt"),
            "srv",
            ("--python", "3.12", "srv[cli]==2.0", "--opt"),
        ),
        (
            "uvx",
            ("--from", "srv-pkg", "srv"),
            "srv-pkg",
            ("--from", "srv-pkg==2.0", "srv"),
        ),
        ("uvx", ("srv@latest",), "srv", ("srv==2.0",)),
        ("uv", ("tool", "run", "srv"), "srv", ("tool", "run", "srv==2.0")),
        ("pipx", ("run", "srv"), "srv", ("run", "srv==2.0")),
        (
            "pipx",
            ("run", "--spec", "srv-pkg~=1.0", "srv"),
            "srv-pkg",
            ("run", "--spec", "srv-pkg==2.0", "srv"),
        ),
    ],
)
def test_python_launches_lock_the_requirement(
    command: str, args: tuple[str, ...], package: str, locked: tuple[str, ...]
) -> None:
    found = launch(command, *args)
    assert (found.ecosystem, found.package, found.exact) == ("pypi", package, False)
    assert found.locked(args, "2.0") == locked


def test_an_image_locks_to_its_digest_and_keeps_its_tag() -> None:
    args = ("run", "-i", "--rm", "-e", "TOKEN", "-v", "/a:/b", "ghcr.io/o/srv:1", "x")
    found = launch("docker", *args)
    assert (found.ecosystem, found.package, found.wanted) == (
        "oci",
        "ghcr.io/o/srv",
        "1",
    )
    digest = "sha256:" + "a" * 64
    assert found.locked(args, digest)[7] == f"ghcr.io/o/srv:1@{digest}"
    assert launch("podman", "run", "-i", "localhost:5000/srv").wanted == "latest"


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("npx", ("-y", "srv@1.2.3")),
        ("npx", ("-y", "srv@1.2.3-beta.1")),
        ("uvx", ("srv==1.2",)),
        ("uvx", ("srv@1.2",)),
        ("pipx", ("run", "srv===1.2")),
        ("docker", ("run", "-i", "srv@sha256:" + "b" * 64)),
    ],
)
def test_a_command_already_naming_one_version_is_exact(
    command: str, args: tuple[str, ...]
) -> None:
    assert launch(command, *args).exact


@pytest.mark.parametrize(
    ("command", "args", "reason"),
    [
        ("npx", ("-y", "github:user/repo"), "not a package from the registry"),
        ("npx", ("-y", "./local"), "not a package from the registry"),
        ("npx", ("-y",), "no package named"),
        ("uvx", ("srv @ https://example.com/srv.whl",), "not a package"),
        ("uvx", ("--from=srv", "cmd"), "two arguments"),
        ("docker", ("run", "-i"), "no image named"),
        ("docker", ("run", "srv@md5:abc"), "sha256"),
    ],
)
def test_what_cannot_be_locked_says_why(
    command: str, args: tuple[str, ...], reason: str
) -> None:
    found = parse_launch(command, args)
    assert isinstance(found, Unlockable)
    assert reason in found.reason


def test_other_commands_are_no_launch() -> None:
    assert parse_launch("python", ("-m", "srv")) is None
    assert parse_launch("npm", ("start",)) is None
    assert parse_launch("docker", ("exec", "x")) is None
    assert parse_launch("uv", ("run", "srv")) is None
