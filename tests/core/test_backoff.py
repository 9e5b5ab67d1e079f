"""Tests for manager.core.backoff: capped exponential delays, jittered downward."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from manager.core.backoff import (
    WAKE_GRIDS,
    BackoffPolicy,
    aligned_delay,
    delay,
    nominal_delay,
)

DEFAULT = BackoffPolicy()


@pytest.mark.parametrize(
    ("attempt", "expected"),
    [
        (1, 0.1),
        (2, 0.2),
        (3, 0.4),
        (4, 0.8),
        (5, 1.6),
        (6, 3.0),
        (7, 3.0),
        (8, 3.0),
        (100, 3.0),
    ],
)
def test_default_policy_doubles_from_a_tenth_up_to_three_seconds(
    attempt: int, expected: float
) -> None:
    assert nominal_delay(DEFAULT, attempt) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("policy", "attempts", "expected"),
    [
        pytest.param(
            BackoffPolicy(initial=1.0, cap=10.0),
            [1, 2, 3, 4, 5, 6],
            [1.0, 2.0, 4.0, 8.0, 10.0, 10.0],
            id="initial-1-cap-10",
        ),
        pytest.param(
            BackoffPolicy(initial=0.5, cap=0.5),
            [1, 2, 50],
            [0.5, 0.5, 0.5],
            id="initial-equals-cap",
        ),
        pytest.param(
            BackoffPolicy(initial=0.25, cap=1.0),
            [1, 2, 3, 4],
            [0.25, 0.5, 1.0, 1.0],
            id="cap-hit-exactly",
        ),
        pytest.param(
            BackoffPolicy(initial=2.0, cap=3600.0),
            [1, 11, 12, 13],
            [2.0, 2048.0, 3600.0, 3600.0],
            id="large-cap",
        ),
    ],
)
def test_custom_policy_doubles_from_initial_and_stops_at_cap(
    policy: BackoffPolicy, attempts: list[int], expected: list[float]
) -> None:
    assert [nominal_delay(policy, n) for n in attempts] == pytest.approx(expected)


@pytest.mark.parametrize("attempt", [64, 65, 1_000, 10**6, 10**18, 2**200])
def test_huge_attempt_numbers_give_the_cap_without_overflow(attempt: int) -> None:
    assert nominal_delay(DEFAULT, attempt) == 3.0
    assert delay(DEFAULT, attempt, 0.0) == 3.0


@pytest.mark.parametrize(
    ("policy", "attempt"),
    [
        pytest.param(BackoffPolicy(initial=1e-30, cap=1.0), 200, id="tiny-initial"),
        pytest.param(BackoffPolicy(initial=5e-324, cap=1.0), 5_000, id="subnormal"),
        pytest.param(BackoffPolicy(initial=1e-300, cap=1e300), 10**9, id="wide"),
    ],
)
def test_a_tiny_initial_still_reaches_the_cap_eventually(
    policy: BackoffPolicy, attempt: int
) -> None:
    assert nominal_delay(policy, attempt) == policy.cap


@pytest.mark.parametrize("attempt", [0, -1, -1000])
def test_attempts_below_one_count_as_the_first_try(attempt: int) -> None:
    assert nominal_delay(DEFAULT, attempt) == nominal_delay(DEFAULT, 1)


@pytest.mark.parametrize("attempt", [1, 2, 3, 6, 50])
def test_rand_zero_gives_the_nominal_delay(attempt: int) -> None:
    assert delay(DEFAULT, attempt, 0.0) == nominal_delay(DEFAULT, attempt)


@pytest.mark.parametrize("attempt", [1, 2, 3, 6, 50])
@pytest.mark.parametrize("rand", [math.nextafter(1.0, 0.0), 1.0])
def test_rand_near_one_gives_ninety_percent_of_nominal(
    attempt: int, rand: float
) -> None:
    assert delay(DEFAULT, attempt, rand) == pytest.approx(
        0.9 * nominal_delay(DEFAULT, attempt)
    )


@pytest.mark.parametrize(
    ("rand", "fraction"),
    [(-5.0, 1.0), (-0.0, 1.0), (0.5, 0.95), (1.5, 0.9), (1e9, 0.9)],
)
def test_out_of_range_rand_is_clamped_into_the_jitter_band(
    rand: float, fraction: float
) -> None:
    assert delay(DEFAULT, 3, rand) == pytest.approx(0.4 * fraction)


def test_zero_jitter_always_gives_the_nominal_delay() -> None:
    policy = BackoffPolicy(jitter=0.0)
    assert [delay(policy, 4, r) for r in (0.0, 0.5, 0.999)] == [0.8, 0.8, 0.8]


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"initial": 0.0}, id="zero-initial"),
        pytest.param({"initial": -1.0}, id="negative-initial"),
        pytest.param({"initial": 5.0, "cap": 1.0}, id="initial-above-cap"),
        pytest.param({"cap": -3.0}, id="negative-cap"),
        pytest.param({"initial": math.nan}, id="nan-initial"),
        pytest.param({"cap": math.nan}, id="nan-cap"),
        pytest.param({"cap": math.inf}, id="infinite-cap"),
        pytest.param({"jitter": -0.1}, id="negative-jitter"),
        pytest.param({"jitter": 1.0}, id="jitter-one"),
        pytest.param({"jitter": math.nan}, id="nan-jitter"),
    ],
)
def test_invalid_policies_raise_value_error(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="backoff"):
        BackoffPolicy(**kwargs)


def test_policies_are_frozen_and_compare_by_value() -> None:
    assert BackoffPolicy() == BackoffPolicy(initial=0.1, cap=3.0, jitter=0.1)
    assert hash(BackoffPolicy()) == hash(BackoffPolicy())
    with pytest.raises(AttributeError):
        BackoffPolicy().cap = 5.0  # type: ignore[misc]


policies = st.builds(
    lambda initial, factor, jitter: BackoffPolicy(
        initial=initial, cap=initial * factor, jitter=jitter
    ),
    st.floats(min_value=1e-6, max_value=1e4),
    st.floats(min_value=1.0, max_value=1e6),
    st.floats(min_value=0.0, max_value=0.99),
)
attempts = st.integers(min_value=1, max_value=10**12)
draws = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)


@settings(max_examples=300, deadline=None)
@given(policy=policies, attempt=attempts, rand=draws)
def test_delay_stays_between_the_jitter_floor_and_nominal_and_under_the_cap(
    policy: BackoffPolicy, attempt: int, rand: float
) -> None:
    nominal = nominal_delay(policy, attempt)
    wait = delay(policy, attempt, rand)
    assert (1 - policy.jitter) * nominal <= wait <= nominal <= policy.cap
    assert wait > 0


@settings(max_examples=200, deadline=None)
@given(policy=policies, attempt=attempts)
def test_nominal_delay_never_decreases_from_one_try_to_the_next(
    policy: BackoffPolicy, attempt: int
) -> None:
    assert nominal_delay(policy, attempt) <= nominal_delay(policy, attempt + 1)


@settings(max_examples=200, deadline=None)
@given(policy=policies, attempt=st.integers(min_value=1, max_value=2000))
def test_nominal_delay_is_initial_doubled_per_try_and_capped(
    policy: BackoffPolicy, attempt: int
) -> None:
    expected = min(policy.cap, policy.initial * 2.0 ** min(attempt - 1, 1023))
    assert nominal_delay(policy, attempt) == expected


@given(
    attempt=st.integers(min_value=1, max_value=40),
    rand=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
    now=st.floats(min_value=0.0, max_value=2e9, allow_nan=False),
)
def test_aligned_delay_stays_in_the_jitter_window(
    attempt: int, rand: float, now: float
) -> None:
    policy = BackoffPolicy()
    nominal = nominal_delay(policy, attempt)
    wait = aligned_delay(policy, attempt, rand, now)
    assert (1 - policy.jitter) * nominal <= wait <= nominal


@pytest.mark.parametrize("now", [0.0, 0.013, 7.77, 1_795_000_000.123])
def test_long_delays_end_on_the_shared_wake_grid(now: float) -> None:
    policy = BackoffPolicy()
    wait = aligned_delay(policy, 10, 0.3, now)
    ticks = (now + wait) / WAKE_GRIDS[0]  # at the cap the coarsest grid fits
    assert abs(ticks - round(ticks)) < 1e-6
