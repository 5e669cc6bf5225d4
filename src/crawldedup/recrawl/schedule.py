"""Change-rate estimation and re-crawl scheduling.

Pages are modelled as Poisson processes of changes (rate ``lambda``, changes
per second) that a crawler samples at its fetch times: a fetch tells only
whether the page changed at least once since the previous fetch.

Estimator (Cho & Garcia-Molina, "Estimating frequency of change", 2003):
for fetches at irregular intervals the maximum-likelihood rate solves
``sum_changed t_i / (exp(lambda t_i) - 1) = sum_unchanged t_j``.  We keep three
numbers per page: the count ``n`` of intervals that ended with a change, the
total length ``Tc`` of those intervals and the total length ``Tu`` of the
intervals without a change.  Taking the changed intervals at their mean length
``Tc / n`` solves the equation in closed form::

    lambda = n / Tc * log(1 + Tc / (Tu + t/2))

(``t`` is the page's mean fetch interval).  With regular fetches this is
exactly their bias-reduced estimator ``-log((N - X + 0.5) / (N + 0.5)) / I``;
with irregular ones it is the MLE with each changed interval replaced by their
mean.  The prior enters as pseudo-observations: ``PRIOR_WEIGHT`` intervals of
length ``1 / lambda0`` of which the share ``1 - 1/e`` ended with a change
(so that without data the estimate is ``lambda0``; the bias correction ``t/2``
uses the page's own intervals only), ``lambda0`` being the page's host's
pooled rate (the same estimator over the sums of all its pages), or the
global prior for a new host.

Allocation (Cho & Garcia-Molina, "Synchronizing a database to improve
freshness", 2000): under a budget of fetches per unit time, the freshness
optimum gives each page the fetch frequency ``f`` where the marginal freshness
``dF/df = (1 - (1 + r) exp(-r)) / lambda`` (``r = lambda / f``) equals one
Lagrange multiplier ``mu`` for all pages; a page with ``lambda * mu >= 1``
changes too fast to be kept fresh and gets no fetches.  The same quantity at
a page's current age ``a``, ``g(a) = (1 - (1 + lambda a) exp(-lambda a)) /
lambda``, is the expected freshness gained per fetch: ``due`` ranks pages by
it, and a page becomes due when it reaches ``mu``.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple, Union

import numpy as np

from crawldedup._checks import check_flag

DAY = 86400.0

#: Weight of the prior, in pseudo fetch intervals.
PRIOR_WEIGHT = 1.0
#: Share of the prior's pseudo intervals (of length 1/lambda0) that end with
#: a change: 1 - 1/e, so that without data the estimate is lambda0.
PRIOR_CHANGED = 1.0 - math.exp(-1.0)

#: Rates are kept within these bounds (changes per second).
MIN_RATE = 1e-10
MAX_RATE = 1.0

# Rate histogram (for solving mu from a budget): log10 bins.
HIST_LOW = -10.0
HIST_BINS_PER_DECADE = 20
HIST_BINS = int((0.0 - HIST_LOW) * HIST_BINS_PER_DECADE)

ArrayLike = Union[float, np.ndarray]


def estimate_rate(changes: ArrayLike, t_changed: ArrayLike, t_unchanged: ArrayLike,
                  fetches: ArrayLike, prior_rate: ArrayLike,
                  prior_weight: float = PRIOR_WEIGHT) -> np.ndarray:
    """Change rates (per second) from interval sums and a prior rate.

    ``changes`` intervals ended with a change and lasted ``t_changed`` in all;
    the others lasted ``t_unchanged`` in all; ``fetches`` is the number of
    fetches (intervals + 1).  Works on numpy arrays element-wise.

    >>> day = 86400.0
    >>> # fetched daily for 10 days, changed on 5 of the 10 intervals
    >>> r = float(estimate_rate(5, 5 * day, 5 * day, 11, 1 / day, prior_weight=0)[0])
    >>> round(r * day, 3) == round(-math.log(5.5 / 10.5), 3)
    True
    """
    n = np.asarray(changes, dtype=np.float64)
    tc = np.asarray(t_changed, dtype=np.float64)
    tu = np.asarray(t_unchanged, dtype=np.float64)
    intervals = np.maximum(np.asarray(fetches, dtype=np.float64) - 1.0, 0.0)
    lam0 = np.clip(np.asarray(prior_rate, dtype=np.float64), MIN_RATE, MAX_RATE)
    with np.errstate(divide="ignore", invalid="ignore"):
        # the bias correction: half of the page's own mean interval
        half = np.where(intervals > 0, 0.5 * (tc + tu) / np.maximum(intervals, 1.0), 0.0)
        tau = 1.0 / lam0
        w = prior_weight
        n = n + w * PRIOR_CHANGED
        tc = tc + w * PRIOR_CHANGED * tau
        denom = tu + w * (1.0 - PRIOR_CHANGED) * tau + half
        rate = np.where(tc > 0, n / np.where(tc > 0, tc, 1.0)
                        * np.log1p(tc / np.where(denom > 0, denom, 1e-300)), 0.0)
    rate = np.where(n > 0, rate, MIN_RATE)
    return np.atleast_1d(np.clip(rate, MIN_RATE, MAX_RATE))


# h(x) = 1 - (1 + x) exp(-x), increasing from 0 to 1: the marginal freshness
# of a page times its rate, at x = rate * interval.  Inverted by interpolation
# on a log grid (h(x) ~ x^2 / 2 below the grid).
_X = np.logspace(-4, math.log10(60.0), 6000)
_H = -np.expm1(-_X) - _X * np.exp(-_X)
_LOGX = np.log(_X)
_LOGH = np.log(_H)


def marginal(rate: ArrayLike, age: ArrayLike) -> np.ndarray:
    """Expected freshness gained per fetch, g = (1 - (1 + r a) e^(-r a)) / r, in
    seconds, for pages of rate ``rate`` last fetched ``age`` seconds ago."""
    lam = np.maximum(np.asarray(rate, dtype=np.float64), MIN_RATE)
    x = lam * np.maximum(np.asarray(age, dtype=np.float64), 0.0)
    return np.atleast_1d((-np.expm1(-x) - x * np.exp(-x)) / lam)


def _inverse_h(c: np.ndarray) -> np.ndarray:
    """x with h(x) = c for 0 <= c < 1 (inf for c >= 1)."""
    c = np.asarray(c, dtype=np.float64)
    out = np.full(c.shape, np.inf)
    small = c < _H[0]
    out[small] = np.sqrt(2.0 * np.maximum(c[small], 0.0))
    mid = (~small) & (c < _H[-1])
    out[mid] = np.exp(np.interp(np.log(c[mid]), _LOGH, _LOGX))
    high = (c >= _H[-1]) & (c < 1.0)
    out[high] = _X[-1]
    return out


def optimal_interval(rate: ArrayLike, mu: float, min_interval: float,
                     max_interval: float) -> np.ndarray:
    """The interval at which a page of rate ``rate`` reaches the marginal value
    ``mu`` (seconds), clamped to [min_interval, max_interval]; pages too fast
    to keep fresh (``rate * mu >= 1``) get ``max_interval``."""
    lam = np.maximum(np.atleast_1d(np.asarray(rate, dtype=np.float64)), MIN_RATE)
    x = _inverse_h(lam * mu)
    with np.errstate(over="ignore", invalid="ignore"):
        interval = x / lam
    interval = np.where(np.isfinite(interval), interval, max_interval)
    return np.clip(interval, min_interval, max_interval)


def fetch_rates(rates: np.ndarray, mu: float, min_interval: float,
                max_interval: float) -> np.ndarray:
    """Fetches per second each page gets at multiplier ``mu``."""
    return 1.0 / optimal_interval(rates, mu, min_interval, max_interval)


def solve_mu(rates: np.ndarray, budget: float, min_interval: float, max_interval: float,
             counts: Optional[np.ndarray] = None) -> float:
    """The Lagrange multiplier whose allocation spends ``budget`` fetches per
    second over pages of rates ``rates`` (each weighted by ``counts``).
    This is the oracle's allocation when ``rates`` are the true rates."""
    rates = np.asarray(rates, dtype=np.float64)
    weights = np.ones_like(rates) if counts is None else np.asarray(counts, dtype=np.float64)
    if budget <= 0 or weights.sum() == 0:
        return float("inf")

    def spent(mu: float) -> float:
        return float(np.dot(weights, fetch_rates(rates, mu, min_interval, max_interval)))

    lo, hi = 1e-6, 1e13
    if spent(lo) <= budget:
        return lo
    if spent(hi) >= budget:
        return hi
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        if spent(mid) > budget:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-9:
            break
    return math.sqrt(lo * hi)


def hist_bin(rate: ArrayLike) -> np.ndarray:
    """Histogram bin of each rate (log10 bins of HIST_BINS_PER_DECADE)."""
    lg = np.log10(np.clip(np.atleast_1d(np.asarray(rate, dtype=np.float64)), MIN_RATE, MAX_RATE))
    return np.clip(((lg - HIST_LOW) * HIST_BINS_PER_DECADE).astype(np.int64), 0, HIST_BINS - 1)


def hist_rates() -> np.ndarray:
    """The rate at the centre of each histogram bin."""
    return 10.0 ** (HIST_LOW + (np.arange(HIST_BINS) + 0.5) / HIST_BINS_PER_DECADE)


def _positive(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            0 < value < float("inf")):
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


def _bounds(min_interval: object, max_interval: object) -> Tuple[float, float]:
    """A policy's interval bounds: both > 0, the first not above the second."""
    low = _positive(min_interval, "min_interval")
    high = _positive(max_interval, "max_interval")
    if low > high:
        raise ValueError(f"min_interval ({min_interval}) must not exceed max_interval "
                         f"({max_interval})")
    return low, high


class ChangeRatePolicy:
    """crawldedup's schedule: each page's rate is estimated (see the module
    docstring) and pages are fetched when their expected freshness gain per
    fetch reaches the level that spends the budget.

    ``budget_per_day``: fetches a day the crawler can afford.  When ``None``,
    it is measured from the calls to ``RecrawlState.due`` (their ``limit`` per
    unit of time).  ``prior_rate``: changes per second assumed for a page of
    an unknown host (default: once a week).  Intervals are clamped to
    ``[min_interval, max_interval]`` seconds.
    """

    name = "change-rate"

    def __init__(self, budget_per_day: Optional[float] = None, *,
                 prior_rate: float = 1.0 / (7 * DAY), prior_weight: float = PRIOR_WEIGHT,
                 min_interval: float = 60.0, max_interval: float = 30 * DAY,
                 initial_mu: float = 3600.0) -> None:
        if budget_per_day is not None:
            _positive(budget_per_day, "budget_per_day")
        self.budget_per_day = None if budget_per_day is None else float(budget_per_day)
        self.prior_rate = _positive(prior_rate, "prior_rate")
        if isinstance(prior_weight, bool) or not isinstance(prior_weight, (int, float)) or not (
                0 <= prior_weight < float("inf")):
            raise ValueError(f"prior_weight must be a number >= 0, got {prior_weight!r}")
        self.prior_weight = float(prior_weight)
        self.min_interval, self.max_interval = _bounds(min_interval, max_interval)
        self.initial_mu = _positive(initial_mu, "initial_mu")

    def __repr__(self) -> str:
        return (f"ChangeRatePolicy(budget_per_day={self.budget_per_day!r}, "
                f"prior_rate={self.prior_rate!r}, min_interval={self.min_interval!r}, "
                f"max_interval={self.max_interval!r})")

    def intervals(self, rates: np.ndarray, mu: float) -> np.ndarray:
        return optimal_interval(rates, mu, self.min_interval, self.max_interval)


class NutchPolicy:
    """Apache Nutch's AdaptiveFetchSchedule, with Nutch's defaults.

    A page's interval starts at ``default_interval`` (Nutch's
    ``db.fetch.interval.default``: 30 days), is multiplied by ``1 + inc_rate``
    (1.4) after a fetch that found no change and by ``1 - dec_rate`` (0.8)
    after one that found a change, and is clamped to ``[min_interval,
    max_interval]`` (60 s and 365 days).  With ``sync_delta`` (Nutch's
    default), a changed page whose Last-Modified is known is scheduled from
    ``fetch time - sync_delta_rate * (fetch time - Last-Modified)`` and its
    interval is at most that delta.
    """

    name = "nutch"

    def __init__(self, *, default_interval: float = 30 * DAY, inc_rate: float = 0.4,
                 dec_rate: float = 0.2, min_interval: float = 60.0,
                 max_interval: float = 365 * DAY, sync_delta: bool = True,
                 sync_delta_rate: float = 0.3) -> None:
        self.default_interval = _positive(default_interval, "default_interval")
        for name, value in (("inc_rate", inc_rate), ("dec_rate", dec_rate),
                            ("sync_delta_rate", sync_delta_rate)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    0 <= value < 1):
                raise ValueError(f"{name} must be in [0, 1), got {value!r}")
        self.inc_rate = float(inc_rate)
        self.dec_rate = float(dec_rate)
        self.sync_delta_rate = float(sync_delta_rate)
        self.sync_delta = check_flag("sync_delta", sync_delta)
        self.min_interval, self.max_interval = _bounds(min_interval, max_interval)

    def __repr__(self) -> str:
        return (f"NutchPolicy(default_interval={self.default_interval!r}, "
                f"min_interval={self.min_interval!r}, max_interval={self.max_interval!r})")

    def next(self, interval: Optional[float], changed: Optional[bool], fetched_at: float,
             modified_at: Optional[float] = None) -> Tuple[float, float]:
        """(new interval, next fetch time) after a fetch; ``changed`` is None for
        the first fetch of a page."""
        if interval is None or changed is None:
            interval = self.default_interval
        elif changed:
            interval *= 1.0 - self.dec_rate
        else:
            interval *= 1.0 + self.inc_rate
        reference = fetched_at
        if changed and self.sync_delta and modified_at is not None and modified_at < fetched_at:
            delta = fetched_at - modified_at
            interval = min(interval, delta)
            reference = fetched_at - self.sync_delta_rate * delta
        interval = min(max(interval, self.min_interval), self.max_interval)
        return interval, reference + interval


Policy = Union[ChangeRatePolicy, NutchPolicy]

__all__ = ["ChangeRatePolicy", "NutchPolicy", "Policy", "estimate_rate", "marginal",
           "optimal_interval", "solve_mu", "fetch_rates"]
