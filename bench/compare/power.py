"""What a comparison could have detected at its own noise.

A gated row fails on a change whose interval excludes no change and that is beyond the
threshold ``T``. At standard error ``se`` (on the interval's scale) with ``df`` degrees of
freedom, a true change ``x`` does so with probability ``power`` when
``x >= max(t_c * se, T) + t_p * se`` (``t_c``: the interval's quantile, ``t_p``: the
power's). The smallest such ``x`` is the row's **detectable** regression. A row is
**powered** when its detectable regression is at most ``detect * T`` (Settings.detect,
default 2: a regression of twice the tolerance is caught 90% of the time), else
**underpowered**, with about how many more units (server starts) would power it: the
standard error shrinks as the square root of their number.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import t as t_dist

#: The power a detectable regression is stated at.
POWER = 0.90


def detectable(se: float, df: float, level: float, threshold: float,
               power: float = POWER) -> float:
    """The smallest true change (on the scale, in the bad direction) that fails the gate
    with probability ``power``; ``threshold`` on the same scale."""
    if se == 0:
        return threshold
    t_c = float(t_dist.ppf((1 + level) / 2, df))
    return max(t_c * se, threshold) + float(t_dist.ppf(power, df)) * se


def units_needed(se: float, df: float, units: int, level: float, threshold: float,
                 target: float, power: float = POWER, limit: int = 1000) -> int | None:
    """About how many units (at the same spread per unit) bring the detectable regression
    down to ``target``; None beyond ``limit`` or when none can."""
    if target <= threshold or se <= 0:
        return None
    k = np.arange(units, limit + 1)
    dof = df + k - units
    scaled = se * np.sqrt(units / k)
    can = np.maximum(t_dist.ppf((1 + level) / 2, dof) * scaled, threshold) + \
        t_dist.ppf(power, dof) * scaled
    fits = can <= target
    return int(k[fits.argmax()]) if fits.any() else None
