"""The batch work of record_many and due done a column at a time.

``compare_columns``: verdicts.compare for a batch of distinct pages, with
one array operation a field instead of Python code a fetch.

``paused_gc``: a batch allocates tens of thousands of small containers (the
rows read back from the store, the tuples bound to its statements), which
set off Python's cyclic garbage collector over and over although none of
them can form a cycle; it is paused for the length of one batch.
"""

from __future__ import annotations

import contextlib
import gc
import operator
from collections import Counter
from itertools import repeat
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from crawldedup.near.simhash import hamming_many, simhash_many
from crawldedup.recrawl.columns import Columns
from crawldedup.recrawl.pages import HAS_DIGEST, HAS_LENGTH, HAS_SIMHASH, PAGE_NUM, Pages
from crawldedup.recrawl.stores import HOST_FIELDS
from crawldedup.recrawl.verdicts import (
    H_BAD_DATES,
    H_BAD_LENGTHS,
    H_CHANGES,
    H_ETAG_CHECKS,
    H_ETAG_LIES,
    H_INTERVALS,
    H_LM_CHECKS,
    H_LM_LIES,
    H_T_CHANGED,
    H_T_UNCHANGED,
    Verdict,
    compare,
)

_ZERO16 = bytes(16)


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (reference counting
    still frees everything at once); it is switched back on only if it was
    on, so a caller that turned it off keeps it off."""
    was_on = gc.isenabled()
    if was_on:
        gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


# The verdicts by code, as compare_columns numbers them.
_VERDICTS = (Verdict.NEW, Verdict.NOT_MODIFIED, Verdict.UNCHANGED, Verdict.NEAR_DUPLICATE,
             Verdict.CHANGED)
_NEW, _NOT_MODIFIED, _UNCHANGED, _NEAR, _CHANGED = range(5)
class Compared(NamedTuple):
    """What a batch did: the pages after it (in the batch's order), the
    verdict of each fetch, what it adds to each host's sums (rows of
    HOST_FIELDS, one per host of ``hosts``, and the host of each page), and
    the stored rates of the pages that were known."""

    pages: Pages
    verdicts: List[Verdict]
    hosts: List[str]
    host_of: np.ndarray
    deltas: np.ndarray
    old_rates: np.ndarray
    #: key -> what NutchPolicy.next needs (compare_rows with nutch=True)
    nutch_rows: Optional[Dict[str, Tuple[Optional[float], Optional[bool], float,
                                         Optional[str]]]] = None


def simhashes_of(texts: Sequence[Optional[str]]) -> List[Optional[int]]:
    """The SimHash of each text (None where there is none), in one call."""
    present = [t for t in texts if t is not None]
    if not present:
        return [None] * len(texts)
    sims = iter(simhash_many(present).tolist())
    return [None if t is None else next(sims) for t in texts]


def compare_rows(batch: Columns, simhashes: Sequence[Optional[int]], stored: Pages, *,
                 k: int, near_duplicate_is_change: bool, nutch: bool,
                 stats: Counter[str]) -> Compared:
    """verdicts.compare (fetch by fetch: a batch may fetch a page twice),
    its result as compare_columns gives it (the pages in key order)."""
    hosts = list(dict.fromkeys(batch.host))
    compared = compare(zip(*batch), simhashes, {row[0]: row for row in stored.rows()}, hosts,
                       k=k, near_duplicate_is_change=near_duplicate_is_change, nutch=nutch,
                       stats=stats)
    pages = Pages.from_rows(sorted(compared.rows.values()))
    host_index = {h: i for i, h in enumerate(hosts)}
    return Compared(pages, compared.verdicts, hosts,
                    np.fromiter(map(host_index.__getitem__, pages.host), np.intp, len(pages)),
                    np.array([compared.deltas[h] for h in hosts], dtype=np.float64),
                    np.array(list(compared.old_rates.values()), dtype=np.float64),
                    compared.nutch_rows if nutch else None)


def _strings_equal(a: Sequence[Optional[str]], b: Sequence[Optional[str]]) -> np.ndarray:
    return np.fromiter(map(operator.eq, a, b), bool, len(a))


def _present(values: Sequence[Any]) -> np.ndarray:
    return np.fromiter(map(operator.is_not, values, repeat(None)), bool, len(values))


def compare_columns(batch: Columns, simhashes: Sequence[Optional[int]], stored: Pages, *,
                    k: int, near_duplicate_is_change: bool, stats: Counter[str]) -> Compared:
    """verdicts.compare for a batch whose keys are all different, an array
    operation a field: the same verdicts, rows, host sums and counts (a
    hypothesis test holds the two to it).  Rates and due times are left to
    the caller."""
    keys = batch.key
    n = len(keys)
    index = stored.index
    pos = np.fromiter(map(index.get, keys, repeat(-1)), np.intp, n)
    known = pos >= 0
    num = np.zeros(n, PAGE_NUM)
    num[known] = stored.num[pos[known]]
    old_etag = [None if p < 0 else stored.etag[p] for p in pos.tolist()]
    old_lm = [None if p < 0 else stored.last_modified[p] for p in pos.tolist()]
    old_rates = num["rate"][known].copy()

    status = np.fromiter(batch.status, np.int64, n)
    at = np.fromiter(batch.at, np.float64, n)
    has_digest = _present(batch.digest)
    digest = np.frombuffer(b"".join(_ZERO16 if d is None else d for d in batch.digest),
                           "<u8").reshape(n, 2)
    has_sim = _present(simhashes)
    sim = np.fromiter((0 if s is None else s for s in simhashes), np.uint64, n)
    has_length = _present(batch.content_length)
    length = np.fromiter((0 if v is None else v for v in batch.content_length), np.int64, n)

    flags = num["flags"]
    old_sim = num["simhash"].view(np.uint64)
    full = known & (status != 304)
    old_has_digest = (flags & HAS_DIGEST) != 0
    same = full & old_has_digest & has_digest & (digest == num["digest"]).all(axis=1)
    near = (full & ~same & ((flags & HAS_SIMHASH) != 0) & has_sim
            & (hamming_many(old_sim ^ sim, 0) <= k))
    moved = full & ~same & ~near
    code = np.where(known, np.where(full, np.where(same, _UNCHANGED, np.where(
        near, _NEAR, _CHANGED)), _NOT_MODIFIED), _NEW)
    changed = moved | (near & near_duplicate_is_change)

    # Validator checks: a page whose previous and current response both
    # carry it, its previous version with a digest.
    hosts = list(dict.fromkeys(batch.host))
    host_index = {h: i for i, h in enumerate(hosts)}
    host_of = np.fromiter(map(host_index.__getitem__, batch.host), np.intp, n)
    deltas = np.zeros((len(hosts), len(HOST_FIELDS)))

    def add(column: int, weights: np.ndarray) -> None:
        deltas[:, column] += np.bincount(host_of, weights, minlength=len(hosts))

    checked = full & old_has_digest
    for old, new, checks, lies, name in ((old_lm, batch.last_modified, H_LM_CHECKS, H_LM_LIES,
                                          "lm_lies"),
                                         (old_etag, batch.etag, H_ETAG_CHECKS, H_ETAG_LIES,
                                          "etag_lies")):
        both = checked & _present(old) & _present(new)
        if both.any():
            equal = _strings_equal(old, new)
            lie = both & ((~equal & same) | (equal & moved))
            add(checks, both.astype(np.float64))
            add(lies, lie.astype(np.float64))
            if lie.any():
                stats[name] += int(lie.sum())
    bad_date = np.fromiter(batch.bad_date, bool, n)
    bad_length = np.fromiter(batch.bad_length, bool, n)
    if bad_date.any():
        add(H_BAD_DATES, bad_date.astype(np.float64))
        stats["bad_dates"] += int(bad_date.sum())
    if bad_length.any():
        add(H_BAD_LENGTHS, bad_length.astype(np.float64))
        stats["bad_lengths"] += int(bad_length.sum())

    # The new rows.  A 304 keeps the content and takes the validators it
    # brings; a 2xx takes everything it brings.
    status_304 = known & ~full
    take = ~status_304  # new pages and 2xx: the fetch's values
    etag = [e if (t or e is not None) else o
            for e, o, t in zip(batch.etag, old_etag, take.tolist())]
    lm = [v if (t or v is not None) else o
          for v, o, t in zip(batch.last_modified, old_lm, take.tolist())]
    num["content_length"] = np.where(take, length, num["content_length"])
    num["digest"] = np.where(take[:, None], digest, num["digest"])
    new_flags = np.where(take, (flags & HAS_SIMHASH) | np.where(has_length, HAS_LENGTH, 0)
                         | np.where(has_digest, HAS_DIGEST, 0), flags)
    # The reference SimHash moves on a change (or a near duplicate counted
    # as one), and is set when there was none.
    set_sim = has_sim & take & (~known | ((flags & HAS_SIMHASH) == 0) | changed)
    num["simhash"] = np.where(set_sim, sim.view(np.int64), num["simhash"])
    num["flags"] = new_flags | np.where(set_sim, HAS_SIMHASH, 0)

    fresh = ~known
    interval = at - num["last_fetched"]
    counted = known & (interval > 0)
    interval = np.where(counted, interval, 0.0)
    num["changes"] += known & changed
    num["t_changed"] += np.where(changed, interval, 0.0)
    num["t_unchanged"] += np.where(changed, 0.0, interval)
    if counted.any():
        add(H_CHANGES, (counted & changed).astype(np.float64))
        add(H_T_CHANGED, np.where(changed, interval, 0.0))
        add(H_T_UNCHANGED, np.where(changed, 0.0, interval))
        add(H_INTERVALS, counted.astype(np.float64))
    num["last_changed"] = np.where(fresh | (known & changed), at, num["last_changed"])
    num["last_fetched"] = np.where(fresh, at, np.maximum(num["last_fetched"], at))
    num["first_seen"] = np.where(fresh, at, num["first_seen"])
    num["fetches"] += 1
    num["due_at"] = np.where(fresh, at, num["due_at"])
    pages = Pages(list(keys), list(batch.host), etag, lm, num)
    return Compared(pages, [_VERDICTS[c] for c in code.tolist()], hosts, host_of, deltas,
                    old_rates)
