"""Locality-sensitive hashing of MinHash signatures: bands and rows.

A signature of ``num_perm`` values is cut into ``b`` bands of ``r`` rows; two
documents become candidates when all r values of at least one band agree.
With Jaccard similarity s, that happens with probability
``1 - (1 - s**r)**b``: an S-curve whose steepest part sits near
``(1/b)**(1/r)``.  :func:`optimal_bands` chooses b and r for a threshold the
way datasketch's ``MinHashLSH`` does: the pair (b * r <= num_perm) that
minimizes the weighted sum of the false-positive probability (the area under
the curve below the threshold) and the false-negative probability (the area
above the curve over the threshold).

>>> from crawldedup.near.lsh import optimal_bands, candidate_probability
>>> optimal_bands(0.8, 128)
(9, 13)
>>> round(candidate_probability(0.9, 9, 13), 3)
0.929
"""

from __future__ import annotations

import functools
from typing import Tuple

import numpy as np

__all__ = ["optimal_bands", "candidate_probability"]


def candidate_probability(similarity: float, bands: int, rows: int) -> float:
    """The probability that two documents of this Jaccard similarity share
    at least one band: ``1 - (1 - s**rows)**bands``."""
    return float(1.0 - (1.0 - float(similarity) ** rows) ** bands)


def _check(threshold: object, num_perm: object, weights: object) -> Tuple[float, int,
                                                                          Tuple[float, float]]:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise TypeError(f"threshold must be a number, not {type(threshold).__name__}")
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0.0, 1.0], got {threshold}")
    if isinstance(num_perm, bool) or not isinstance(num_perm, int):
        raise TypeError(f"num_perm must be an int, not {type(num_perm).__name__}")
    if num_perm < 2:
        raise ValueError(f"num_perm must be at least 2, got {num_perm}")
    try:
        fp_weight, fn_weight = (float(w) for w in weights)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise TypeError("weights must be a pair of numbers (false positive, false negative)"
                        ) from None
    if not (0.0 <= fp_weight <= 1.0 and 0.0 <= fn_weight <= 1.0):
        raise ValueError(f"weights must be in [0.0, 1.0], got {weights}")
    if fp_weight + fn_weight != 1.0:
        raise ValueError(f"weights must sum to 1.0, got {weights}")
    return float(threshold), num_perm, (fp_weight, fn_weight)


def _pairs(num_perm: int) -> Tuple[np.ndarray, np.ndarray]:
    """Every (b, r) with b * r <= num_perm, b then r ascending."""
    bs, rs = [], []
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            bs.append(b)
            rs.append(r)
    return np.array(bs, dtype=np.float64), np.array(rs, dtype=np.float64)


@functools.lru_cache(maxsize=256)
def _errors_gauss(threshold: float, num_perm: int) -> Tuple[np.ndarray, np.ndarray,
                                                            np.ndarray, np.ndarray]:
    """(b, r, false-positive area, false-negative area) of every pair.  The
    integrands are polynomials of degree b * r <= num_perm, so Gauss-Legendre
    with num_perm // 2 + 1 nodes integrates them exactly (up to rounding)."""
    b, r = _pairs(num_perm)
    nodes, w = np.polynomial.legendre.leggauss(min(num_perm // 2 + 1, 1024))
    fp = np.empty_like(b)
    fn = np.empty_like(b)
    # [0, t] and [t, 1] mapped from [-1, 1]
    lo = (nodes + 1.0) * (threshold / 2.0)
    hi = threshold + (nodes + 1.0) * ((1.0 - threshold) / 2.0)
    for start in range(0, len(b), 4096):
        sl = slice(start, start + 4096)
        br, rr = b[sl, None], r[sl, None]
        fp[sl] = (1.0 - (1.0 - lo[None, :] ** rr) ** br) @ w * (threshold / 2.0)
        fn[sl] = ((1.0 - hi[None, :] ** rr) ** br) @ w * ((1.0 - threshold) / 2.0)
    return b, r, fp, fn


def optimal_bands(threshold: float, num_perm: int,
                  weights: Tuple[float, float] = (0.5, 0.5)) -> Tuple[int, int]:
    """The (bands, rows) for a Jaccard threshold, as datasketch chooses them:
    b * r <= num_perm minimizing ``weights[0] * false positives + weights[1] *
    false negatives`` (the first such pair, b then r ascending).  The areas
    are integrated exactly (Gauss-Legendre: the integrands are polynomials),
    where datasketch integrates numerically with scipy; the tests hold the
    two to the same choice.
    """
    t, n, (fp_weight, fn_weight) = _check(threshold, num_perm, weights)
    b, r, fp, fn = _errors_gauss(t, n)
    i = int(np.argmin(fp * fp_weight + fn * fn_weight))
    return int(b[i]), int(r[i])
