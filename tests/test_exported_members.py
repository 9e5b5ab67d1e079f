"""Pin the package's public surface: a change to `manager.__all__` is deliberate."""

from __future__ import annotations

import manager

EXPORTED = ["__version__"]
"""Update this list together with `manager/__init__.py`."""


def test_the_package_exports_exactly_the_pinned_names() -> None:
    assert sorted(manager.__all__) == sorted(EXPORTED)


def test_every_exported_name_exists() -> None:
    for name in manager.__all__:
        assert hasattr(manager, name), name


def test_the_version_is_a_non_empty_string() -> None:
    assert isinstance(manager.__version__, str)
    assert manager.__version__
