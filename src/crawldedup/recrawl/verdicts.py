"""The verdict of a fetch: what it found against the page's previous
version (new, a 304, the same digest, a near duplicate by SimHash, or a
change), and what each fetch adds to its page's history and to its host's
validator and change statistics.  RecrawlState.record_many reads the stored
rows, calls compare() on a checked batch, then computes rates and due times
and writes the rows back in one transaction.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Mapping
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from crawldedup.near.simhash import hamming
from crawldedup.recrawl.fetches import signed64
from crawldedup.recrawl.stores import HOST_FIELDS, HOST_RATE_FIELDS, PAGE_FIELDS

# Column indexes of a host's sums (HOST_FIELDS) and of a page row (PAGE_FIELDS).
H = {name: i for i, name in enumerate(HOST_FIELDS)}
P = {name: i for i, name in enumerate(PAGE_FIELDS)}
P_CHANGES = P["changes"]
P_CONTENT_LENGTH = P["content_length"]
P_DIGEST = P["digest"]
P_DUE_AT = P["due_at"]
P_ETAG = P["etag"]
P_FETCHES = P["fetches"]
P_HOST = P["host"]
P_INTERVAL = P["interval"]
P_LAST_CHANGED = P["last_changed"]
P_LAST_FETCHED = P["last_fetched"]
P_LAST_MODIFIED = P["last_modified"]
P_RATE = P["rate"]
P_SIMHASH = P["simhash"]
P_T_CHANGED = P["t_changed"]
P_T_UNCHANGED = P["t_unchanged"]
H_RATE = [H[name] for name in HOST_RATE_FIELDS]
H_BAD_DATES = H["bad_dates"]
H_BAD_LENGTHS = H["bad_lengths"]
H_ETAG_CHECKS = H["etag_checks"]
H_ETAG_LIES = H["etag_lies"]
H_LM_CHECKS = H["lm_checks"]
H_LM_LIES = H["lm_lies"]
H_CHANGES = H["changes"]
H_INTERVALS = H["intervals"]
H_T_CHANGED = H["t_changed"]
H_T_UNCHANGED = H["t_unchanged"]


class Verdict(str, enum.Enum):
    """What a fetch found, compared with the page's previous version."""

    NEW = "new"                        #: first fetch of this URL
    NOT_MODIFIED = "not_modified"      #: a 304 answer to a conditional request
    UNCHANGED = "unchanged"            #: same digest as before
    NEAR_DUPLICATE = "near_duplicate"  #: SimHash within k bits: a counter, an ad, a date
    CHANGED = "changed"                #: different content

    def __str__(self) -> str:
        return self.value


_NEW, _NOT_MODIFIED, _UNCHANGED, _NEAR_DUPLICATE, _CHANGED = (
    Verdict.NEW, Verdict.NOT_MODIFIED, Verdict.UNCHANGED, Verdict.NEAR_DUPLICATE, Verdict.CHANGED)


_NEW, _NOT_MODIFIED, _UNCHANGED, _NEAR_DUPLICATE, _CHANGED = (
    Verdict.NEW, Verdict.NOT_MODIFIED, Verdict.UNCHANGED, Verdict.NEAR_DUPLICATE, Verdict.CHANGED)


class Compared(NamedTuple):
    """What a batch of fetches did to the pages, before rates and due times."""

    rows: Dict[str, List[Any]]           #: key -> its new row (PAGE_FIELDS order)
    deltas: Dict[str, List[float]]       #: host -> what the batch adds to its sums
    old_rates: Dict[str, float]          #: key -> its stored rate (pages seen before)
    verdicts: List[Verdict]              #: one per fetch, in order
    #: key -> (interval, changed, fetched at, Last-Modified), for NutchPolicy
    nutch_rows: Dict[str, Tuple[Optional[float], Optional[bool], float, Optional[str]]]


def compare(parsed: Iterable[Tuple[Any, ...]], simhashes: Sequence[Optional[int]],
            stored: Mapping[str, Sequence[Any]], hosts: Iterable[str], *, k: int,
            near_duplicate_is_change: bool, nutch: bool, stats: Counter[str]) -> Compared:
    """The verdict of each fetch against the stored row of its page (or the
    row an earlier fetch of the batch left), the rows updated, and what the
    batch adds to each host's sums (changes, intervals, validator checks and
    lies); bad dates and lengths, and lies, are counted in stats."""
    deltas: Dict[str, List[float]] = {h: [0.0] * len(HOST_FIELDS) for h in hosts}
    rows: Dict[str, List[Any]] = {}
    old_rates: Dict[str, float] = {}
    verdicts: List[Verdict] = []
    nutch_rows: Dict[str, Tuple[Optional[float], Optional[bool], float, Optional[str]]] = {}
    for (f_key, f_host, f_status, f_etag, f_last_modified, f_content_length, f_digest,
         _text, f_at, f_bad_date, f_bad_length), sim in zip(parsed, simhashes):
        delta = deltas[f_host]
        if f_bad_date:
            delta[H_BAD_DATES] += 1
            stats["bad_dates"] += 1
        if f_bad_length:
            delta[H_BAD_LENGTHS] += 1
            stats["bad_lengths"] += 1
        row = rows.get(f_key)
        if row is None and f_key in stored:
            row = list(stored[f_key])
            rows[f_key] = row
            old_rates[f_key] = row[P_RATE]
        if row is None:
            verdict = _NEW
            row = [f_key, f_host, f_etag, f_last_modified, f_content_length, f_digest,
                   None if sim is None else signed64(sim), f_at, f_at, f_at, 1, 0,
                   0.0, 0.0, 0.0, 0.0, f_at]
            rows[f_key] = row
            if nutch:
                nutch_rows[f_key] = (None, None, f_at, f_last_modified)
            verdicts.append(verdict)
            continue
        old_digest = row[P_DIGEST]
        if f_status == 304:
            verdict = _NOT_MODIFIED
            if f_etag is not None:
                row[P_ETAG] = f_etag
            if f_last_modified is not None:
                row[P_LAST_MODIFIED] = f_last_modified
        else:
            old_sim = row[P_SIMHASH]
            if old_digest is not None and f_digest == old_digest:
                verdict = _UNCHANGED
            elif (old_sim is not None and sim is not None
                  and hamming(old_sim & ((1 << 64) - 1), sim) <= k):
                verdict = _NEAR_DUPLICATE
            else:
                verdict = _CHANGED
            same = verdict is _UNCHANGED
            moved = verdict is _CHANGED
            if old_digest is not None:
                for field, new, checks, lies, name in (
                        (P_LAST_MODIFIED, f_last_modified, H_LM_CHECKS, H_LM_LIES,
                         "lm_lies"),
                        (P_ETAG, f_etag, H_ETAG_CHECKS, H_ETAG_LIES, "etag_lies")):
                    old = row[field]
                    if old is not None and new is not None:
                        delta[checks] += 1
                        if (new != old and same) or (new == old and moved):
                            delta[lies] += 1
                            stats[name] += 1
            row[P_ETAG] = f_etag
            row[P_LAST_MODIFIED] = f_last_modified
            row[P_CONTENT_LENGTH] = f_content_length
            row[P_DIGEST] = f_digest
            if sim is not None and (old_sim is None or verdict is _CHANGED
                                    or (verdict is _NEAR_DUPLICATE
                                        and near_duplicate_is_change)):
                row[P_SIMHASH] = signed64(sim)
        changed = verdict is _CHANGED or (
            verdict is _NEAR_DUPLICATE and near_duplicate_is_change)
        interval = f_at - row[P_LAST_FETCHED]
        if interval > 0:
            if changed:
                row[P_CHANGES] += 1
                row[P_T_CHANGED] += interval
                delta[H_CHANGES] += 1
                delta[H_T_CHANGED] += interval
            else:
                row[P_T_UNCHANGED] += interval
                delta[H_T_UNCHANGED] += interval
            delta[H_INTERVALS] += 1
        elif changed:
            row[P_CHANGES] += 1
        if changed:
            row[P_LAST_CHANGED] = f_at
        if nutch:
            nutch_rows[f_key] = (row[P_INTERVAL] or None, changed, f_at,
                                 row[P_LAST_MODIFIED])
        row[P_LAST_FETCHED] = max(row[P_LAST_FETCHED], f_at)
        row[P_FETCHES] += 1
        verdicts.append(verdict)
    return Compared(rows, deltas, old_rates, verdicts, nutch_rows)
