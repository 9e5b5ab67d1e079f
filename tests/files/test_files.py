"""Tests for manager.files: where the state directory is, and how its private
files are written (0700 folders, 0600 files, replaced whole)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from manager.files import default_state_dir, write_private_json


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_state_directory_follows_xdg_state_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_state_dir() == tmp_path / "mcp-manager"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_state_dir() == tmp_path / "home" / ".local/state/mcp-manager"


def test_a_private_file_and_its_folders_are_the_owners_alone(tmp_path: Path) -> None:
    path = tmp_path / "state" / "tokens" / "api.json"
    write_private_json(path, {"b": 1, "a": [2]})
    assert json.loads(path.read_text()) == {"b": 1, "a": [2]}
    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700
    assert mode(path.parent.parent) == 0o700
    assert [p.name for p in path.parent.iterdir()] == ["api.json"]  # no .tmp left


def test_a_folder_made_open_is_closed_again(tmp_path: Path) -> None:
    folder = tmp_path / "pins"
    folder.mkdir(mode=0o755)
    write_private_json(folder / "fs.json", [], indent=2)
    assert mode(folder) == 0o700


def test_what_is_not_json_leaves_the_old_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "eras.json"
    write_private_json(path, {"fs": "2026-07-28"})
    with pytest.raises(TypeError):
        write_private_json(path, {"fs": object()})
    assert json.loads(path.read_text()) == {"fs": "2026-07-28"}
