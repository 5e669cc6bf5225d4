"""Sizing a Bloom filter: the number of bits and hashes for a capacity and
error rate (:func:`optimal_parameters`), the false-positive model of the
blocked layout, and whether a filter fits in this machine's memory."""

from __future__ import annotations

import functools
import math
import os
from typing import Optional, Tuple

from crawldedup import _checks
from crawldedup._kernel import MAX_NUM_HASHES, nbytes_for
from crawldedup.bloom.layouts import BY_NAME, check_layout

_LN2 = math.log(2.0)
MAX_NUM_BITS = 1 << 62


def max_insert_count(num_bits: int) -> int:
    """The largest insert count a filter of num_bits bits can carry: an add
    that reports a new key sets a bit, and a merge's estimate stays below
    (m / k) ln(2m) < 44 m (m below 2**62), so 64 m bounds both; counts are
    signed 64-bit in the core."""
    return min(64 * num_bits, 2 ** 63 - 1)

BLOCK_BITS = BY_NAME["blocked"].block_bits


def _blocked_fpr(k: int, load: float) -> float:
    """False-positive rate of a blocked filter whose 512-bit blocks receive a
    Poisson(load) number of keys, each setting k uniformly random bits of its
    block: sum over j of P(j keys) * (1 - (1 - 1/512)^(k j))^k."""
    if load <= 0:
        return 0.0
    spread = 12 * math.sqrt(load) + 30
    lo, hi = max(0, int(load - spread)), int(load + spread) + 1
    log_keep = math.log1p(-1.0 / BLOCK_BITS)
    total = 0.0
    for j in range(lo, hi + 1):
        pmf = math.exp(-load + j * math.log(load) - math.lgamma(j + 1))
        total += pmf * (-math.expm1(k * j * log_keep)) ** k
    return total


@functools.lru_cache(maxsize=256)
def _blocked_load(error_rate: float) -> Tuple[float, int]:
    """(keys per block, k): the highest load whose false-positive rate is
    still error_rate, and the k that allows it.  Independent of the capacity,
    so computed once per error rate."""
    k_standard = max(1, round(-math.log2(error_rate)))
    best_load, best_k = 0.0, 1
    for k in range(max(1, k_standard - 4), min(MAX_NUM_HASHES, k_standard + 10) + 1):
        lo, hi = 0.0, 4.0 * BLOCK_BITS
        if _blocked_fpr(k, hi) <= error_rate:
            lo = hi
        else:
            for _ in range(60):
                mid = (lo + hi) / 2
                if _blocked_fpr(k, mid) <= error_rate:
                    lo = mid
                else:
                    hi = mid
        if lo > best_load:
            best_load, best_k = lo, k
    return best_load, best_k


def optimal_parameters(capacity: int, error_rate: float,
                       layout: str = "standard") -> Tuple[int, int]:
    """(num_bits, num_hashes) for capacity keys at the given false-positive rate.

    Standard layout: ``m = ceil(-n ln p / (ln 2)^2)`` and ``k = round(m / n ln 2)``.
    Blocked layout: whole 512-bit blocks, as few as keep the false-positive
    rate at ``p`` given that keys spread unevenly over blocks (see
    docs/format.md); it needs more bits than the standard layout.

    >>> optimal_parameters(1_000_000, 0.01)
    (9585059, 7)
    """
    n = _checks.check_capacity(capacity)
    p = _checks.check_error_rate(error_rate)
    block_bits = BY_NAME[check_layout(layout)].block_bits
    if block_bits:
        load, k = _blocked_load(p)
        if load <= 0:
            raise ValueError(f"error_rate {p!r} is too small for the blocked layout")
        m = math.ceil(n / load) * block_bits
    else:
        m = math.ceil(-n * math.log(p) / (_LN2 * _LN2))
        k = max(1, round(m / n * _LN2))
    if k > MAX_NUM_HASHES:
        raise ValueError(
            f"error_rate {p!r} needs {k} hash functions; at most {MAX_NUM_HASHES} are "
            f"supported, so error_rate must be at least 1e-19")
    if m > MAX_NUM_BITS:
        raise ValueError(
            f"capacity {n} at error_rate {p!r} needs {m} bits ({format_size(m / 8)}); at most "
            f"2**62 are supported")
    return m, k


def format_size(nbytes: float) -> str:
    """A byte count for people: '512 bytes', '1.5 MiB', '109.1 TiB'."""
    size = float(nbytes)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if size < 1024 or unit == "PiB":
            return f"{size:,.0f} {unit}" if unit == "bytes" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} PiB"  # pragma: no cover


def physical_memory() -> Optional[int]:
    """Bytes of RAM of this machine, or None where the OS does not say."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def check_memory(capacity: int, error_rate: float, num_bits: int) -> None:
    """ValueError naming capacity and the memory needed when an in-memory
    filter of num_bits bits could not fit in this machine's RAM (instead of
    a MemoryError or OSError from the allocation, or the whole machine
    swapping)."""
    need = nbytes_for(num_bits)
    ram = physical_memory()
    if ram is not None and need > ram:
        raise ValueError(
            f"capacity {capacity:,} at error_rate {error_rate!r} needs {format_size(need)} of "
            f"memory ({num_bits:,} bits); this machine has {format_size(ram)}: lower capacity, "
            f"raise error_rate, or keep the filter in a file (BloomFilter.open)")
