"""Reconnect delays: exponential, capped, jittered downwards, never exhausted.

The delay before try `n` of an episode is `min(cap, initial * 2 ** (n - 1))`, then
lowered by up to `jitter` of itself, so it is never above the cap and never below
`(1 - jitter)` of nominal. There is no attempt limit. Pure: the random draw is an
argument.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "WAKE_GRID",
    "WAKE_GRIDS",
    "BackoffPolicy",
    "aligned_delay",
    "delay",
    "nominal_delay",
]

_MAX_EXPONENT = 2200
"""Past this, `initial * 2 ** n` overflows for any positive float `initial`, so the
result is the cap; stops 2 ** n from growing without bound."""


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """How long to wait between connection attempts.

    Attributes:
        initial: Seconds before the first retry.
        cap: Largest delay in seconds.
        jitter: Largest downward fraction taken off a delay (0.1 = at most 10 %).
    """

    initial: float = 0.1
    cap: float = 3.0
    jitter: float = 0.1

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.cap < math.inf:
            raise ValueError("backoff needs 0 < initial <= cap, cap finite")
        if not 0 <= self.jitter < 1:
            raise ValueError("backoff jitter must be in [0, 1)")


def nominal_delay(policy: BackoffPolicy, attempt: int) -> float:
    """The delay before try `attempt` (1-based) without jitter.

    Args:
        policy: The backoff policy.
        attempt: The number of the try about to be made, starting at 1.

    Returns:
        `min(cap, initial * 2 ** (attempt - 1))` seconds.
    """
    exponent = min(max(attempt, 1) - 1, _MAX_EXPONENT)
    try:
        return min(policy.cap, math.ldexp(policy.initial, exponent))
    except OverflowError:
        return policy.cap


def delay(policy: BackoffPolicy, attempt: int, rand: float) -> float:
    """The jittered delay before try `attempt`.

    Args:
        policy: The backoff policy.
        attempt: The number of the try about to be made, starting at 1.
        rand: A draw from [0, 1); 0 gives the nominal delay.

    Returns:
        Seconds to wait, in `[(1 - jitter) * nominal, nominal]`.
    """
    nominal = nominal_delay(policy, attempt)
    return nominal * (1.0 - policy.jitter * min(max(rand, 0.0), 1.0))


WAKE_GRID = 0.05
"""Finest step, in seconds, of the shared wake-up instants for retries."""

WAKE_GRIDS = (0.25, 0.1, WAKE_GRID)
"""Grid steps tried, coarsest first; the first that fits the jitter window wins."""

_EPSILON = 1e-9


def aligned_delay(
    policy: BackoffPolicy, attempt: int, rand: float, now: float
) -> float:
    """`delay()`, moved to end on a shared grid of instants when it can.

    Hundreds of dead upstreams at the cap each wake the process on their own
    schedule; a wake-up of a cold Python process costs far more than the attempt
    it makes. Ending every delay on a common grid lets one wake-up serve several
    connections. The grid is the coarsest of WAKE_GRIDS that fits the jitter
    window `[(1 - jitter) * nominal, nominal]` (0.25 s at a 3 s cap), and the
    result always stays inside that window; when even the finest grid does not
    fit (short delays), the plain jittered delay is returned.

    Args:
        policy: The backoff policy.
        attempt: The number of the try about to be made, starting at 1.
        rand: A draw from [0, 1).
        now: The current time on the clock the delay will be measured with.

    Returns:
        Seconds to wait.
    """
    wait = delay(policy, attempt, rand)
    nominal = nominal_delay(policy, attempt)
    low = (1.0 - policy.jitter) * nominal
    # the coarsest grid whose step fits the window: 0.25 s at the 3 s cap
    grid = next((g for g in WAKE_GRIDS if g <= nominal - low), WAKE_GRID)
    due = now + wait
    snapped = math.floor(due / grid + _EPSILON) * grid
    if snapped - now < low - _EPSILON:
        snapped += grid
    aligned = snapped - now
    if not low - _EPSILON <= aligned <= nominal + _EPSILON:
        return wait
    return min(max(aligned, low), nominal)  # float rounding stays inside
