"""A batch of fetches read column by column: what record_many checks and
reads of every fetch (see fetches.parse_fetch), for the whole batch at once.

A crawler's batch is nearly always of one shape: dicts with a str URL, an
int status, a float time, a dict of str headers, and bytes, text or a
16-byte digest.  Such a batch is read here a column at a time (each check
made once per column, or once per distinct value: statuses, dates, hosts)
instead of a call per fetch.  A batch with anything else in it, or with any
fetch that breaks a rule, is read by parse_fetch one fetch at a time, which
gives the same values and raises the error naming the first bad fetch:
this module only ever takes the batches parse_fetch reads without a word.

>>> batch = parse_columns([{"url": "https://a.example/x", "status": 200,
...                         "headers": {"ETag": ' "v1" '}, "digest": bytes(16),
...                         "time": 5.0}], 0.0, str, False)
>>> batch.key, batch.host, batch.etag, batch.at
(['https://a.example/x'], ['a.example'], ['"v1"'], [5.0])
"""

from __future__ import annotations

import math
from itertools import repeat
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from crawldedup._kernel import hash128
from crawldedup.recrawl.fetches import (
    MAX_LENGTH,
    NETLOC,
    Fetch,
    hostname,
    parse_fetch,
    parse_http_date,
)

_NONE = type(None)
_GET: Any = dict.get  # a column of a batch of dicts: map(_GET, items, repeat(name))


class Columns(NamedTuple):
    """The fields of Fetch, each a list with one entry per fetch."""

    key: List[str]
    host: List[str]
    status: List[int]
    etag: List[Optional[str]]
    last_modified: List[Optional[str]]
    content_length: List[Optional[int]]
    digest: List[Optional[bytes]]
    text: List[Optional[str]]
    at: List[float]
    bad_date: List[bool]
    bad_length: List[bool]

    def rows(self) -> Iterable[Fetch]:
        """The batch as Fetch tuples, in order."""
        return map(Fetch._make, zip(*self))


def _one_by_one(items: Sequence[Any], clock: float, key_of: Callable[[Any], str],
                canonical: bool) -> Columns:
    parsed = [parse_fetch(i, item, clock, key_of, canonical) for i, item in enumerate(items)]
    if not parsed:
        return Columns(*([] for _ in Columns._fields))
    return Columns(*(list(column) for column in zip(*parsed)))


# Header names (any case) -> the validator they hold.
_WANTED = {"etag": 0, "last-modified": 1, "content-length": 2}


def _layout(names: Tuple[Any, ...]) -> Optional[Tuple[Tuple[int, int], ...]]:
    """Where a headers dict with these names holds the validators: pairs
    (position, validator); None when a name is not a str."""
    out = []
    for position, name in enumerate(names):
        if type(name) is not str:
            return None
        slot = _WANTED.get(name.lower())
        if slot is not None:
            out.append((position, slot))
    return tuple(out)


def _validators(headers: List[Any], n: int) -> Optional[List[List[Any]]]:
    """The raw ETag, Last-Modified and Content-Length values of dicts of str
    headers (None where absent); None when a name is not a str or a value
    that matters is not a str of ASCII characters."""
    found: List[List[Any]] = [[None] * n, [None] * n, [None] * n]
    layouts: Dict[Tuple[Any, ...], Optional[Tuple[Tuple[int, int], ...]]] = {}
    for i, h in enumerate(headers):
        if not h:
            continue
        names = tuple(h)
        layout = layouts.get(names, ())
        if layout == ():
            layout = layouts[names] = _layout(names)
        if layout is None:
            return None
        if layout:
            values = tuple(h.values())
            for position, slot in layout:
                found[slot][i] = values[position]  # a later spelling wins, as in validators
    for column in found:
        present = [v for v in column if v is not None]
        if present and (set(map(type, present)) != {str}
                        or not all(map(str.isascii, present))):
            return None
    return found


def parse_columns(fetches: Iterable[Any], clock: float, key_of: Callable[[Any], str],
                  canonical: bool) -> Columns:
    """parse_fetch of every fetch of a batch, as columns (same values, same
    errors).  ``clock``: the time of a fetch without one; ``key_of`` and
    ``canonical`` as for parse_fetch."""
    items = fetches if isinstance(fetches, list) else list(fetches)
    n = len(items)
    if n == 0 or set(map(type, items)) != {dict}:
        return _one_by_one(items, clock, key_of, canonical)
    urls = list(map(_GET, items, repeat("url", n)))
    statuses = list(map(_GET, items, repeat("status", n)))
    times = list(map(_GET, items, repeat("time", n)))
    headers = list(map(_GET, items, repeat("headers", n)))
    bodies = list(map(_GET, items, repeat("body", n)))
    texts = list(map(_GET, items, repeat("text", n)))
    digests = list(map(_GET, items, repeat("digest", n)))
    if set(map(type, urls)) != {str} or not all(urls) \
            or list(map(str.strip, urls)) != urls \
            or set(map(type, statuses)) != {int} \
            or not all(200 <= s < 300 or s == 304 for s in set(statuses)) \
            or not set(map(type, times)) <= {float, int, _NONE} \
            or not set(map(type, headers)) <= {dict, _NONE} \
            or not set(map(type, bodies)) <= {bytes, _NONE} \
            or not set(map(type, texts)) <= {str, _NONE} \
            or not set(map(type, digests)) <= {bytes, _NONE} \
            or any(len(d) != 16 for d in digests if d is not None):
        return _one_by_one(items, clock, key_of, canonical)
    if 304 not in statuses or len(set(statuses)) > 1:  # some fetch needs content
        for s, b, t, d in zip(statuses, bodies, texts, digests):
            if b is None and t is None and d is None and s != 304:
                return _one_by_one(items, clock, key_of, canonical)
    try:
        at = [clock if t is None else float(t) for t in times]
    except OverflowError:  # an int too large for a float: parse_fetch says so
        return _one_by_one(items, clock, key_of, canonical)
    if not all(map(math.isfinite, at)):
        return _one_by_one(items, clock, key_of, canonical)
    raw = _validators(headers, n)
    if raw is None:
        return _one_by_one(items, clock, key_of, canonical)
    if canonical:
        try:
            keys = list(map(key_of, urls))
        except (TypeError, ValueError):
            return _one_by_one(items, clock, key_of, canonical)
    else:
        keys = urls
    etags = [None if v is None else (v.strip() or None) for v in raw[0]]
    lms: List[Optional[str]] = [None if v is None else (v.strip() or None) for v in raw[1]]
    bad_dates = [False] * n
    bad_lm = {v for v in set(lms) if v is not None and parse_http_date(v) is None}
    if bad_lm:
        bad_dates = [v in bad_lm for v in lms]
        lms = [None if bad else v for v, bad in zip(lms, bad_dates)]
    lengths: List[Optional[int]] = [None] * n
    bad_lengths = [False] * n
    if any(v is not None for v in raw[2]):
        for i, v in enumerate(raw[2]):
            if v is not None:
                v = v.strip()
                if v.isdigit() and int(v) <= MAX_LENGTH:
                    lengths[i] = int(v)
                else:
                    bad_lengths[i] = True
    fps: List[Optional[bytes]] = digests
    if any(b is not None for b in bodies) or any(t is not None for t in texts):
        fps = []
        for i, (b, t, d) in enumerate(zip(bodies, texts, digests)):
            if d is None and t is not None:
                d = hash128(t).to_bytes(16, "little")
            elif d is None and b is not None:
                d = hash128(b).to_bytes(16, "little")
                texts[i] = b.decode("utf-8", "replace")
            if b is not None and lengths[i] is None:
                lengths[i] = len(b)
            fps.append(d)
    netlocs = [None if m is None else m.group(1) for m in map(NETLOC.match, keys)]
    host_of = {g: "" if g is None else hostname(g) for g in set(netlocs)}
    hosts = [host_of[g] for g in netlocs]
    return Columns(keys, hosts, statuses, etags, lms, lengths, fps, texts, at, bad_dates,
                   bad_lengths)


__all__ = ["Columns", "parse_columns"]
