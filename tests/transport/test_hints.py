"""`ListHint.merged`: lists made of several (pages, or servers) are as fresh
as the least fresh part."""

from __future__ import annotations

from manager.transport.base import ListHint


def test_the_shortest_non_zero_life_and_private_if_any_is() -> None:
    a = ListHint(ttl_ms=60_000, private=False)
    b = ListHint(ttl_ms=5_000, private=False)
    never = ListHint(ttl_ms=0, private=True)
    assert a.merged(b) == ListHint(5_000, private=False)
    assert a.merged(never) == ListHint(60_000, private=True)
    assert never.merged(never) == ListHint(0, private=True)
