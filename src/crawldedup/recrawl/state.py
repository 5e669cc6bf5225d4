"""RecrawlState: what a crawler knows about the pages it fetched before.

Per canonical URL it keeps the HTTP validators (ETag, Last-Modified,
Content-Length), a digest of the content (of the body, or of the extracted
text when given), its 64-bit SimHash, the fetch history (first seen, last
fetched, last changed, fetch and change counts) and a change-rate estimate,
from which it schedules the next fetch.

>>> import tempfile, os
>>> from crawldedup.recrawl import RecrawlState, Verdict
>>> path = os.path.join(tempfile.mkdtemp(), "recrawl.db")
>>> state = RecrawlState(path)
>>> state.record("https://example.com/a", 200, {"ETag": '"v1"'}, body=b"<p>hello</p>", now=0)
<Verdict.NEW: 'new'>
>>> state.conditional_headers("https://example.com/a")
{'If-None-Match': '"v1"'}
>>> state.record("https://example.com/a", 304, {}, now=3600)
<Verdict.NOT_MODIFIED: 'not_modified'>
>>> state.record("https://example.com/a", 200, {"ETag": '"v2"'}, body=b"<p>bye</p>", now=7200)
<Verdict.CHANGED: 'changed'>
>>> state.close()
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple, cast

import numpy as np

from crawldedup._checks import check_flag
from crawldedup.fingerprint import canonicalize_url
from crawldedup.recrawl.columnar import compare_columns, compare_rows, paused_gc, simhashes_of
from crawldedup.recrawl.columns import parse_columns
from crawldedup.recrawl.fetches import NETLOC, hostname, parse_http_date, validators
from crawldedup.recrawl.links import PageLinks, decode_links, encode_links
from crawldedup.recrawl.pages import Pages
from crawldedup.recrawl.schedule import (
    HIST_BINS,
    PRIOR_WEIGHT,
    ChangeRatePolicy,
    NutchPolicy,
    Policy,
    estimate_rate,
    hist_bin,
    hist_rates,
    marginal,
    solve_mu,
)
from crawldedup.recrawl.stores import (
    HOST_FIELDS,
    HOST_RATE_FIELDS,
    RecrawlStore,
    open_recrawl_store,
)
from crawldedup.recrawl.verdicts import (
    H_RATE,
    P_CONTENT_LENGTH,
    P_ETAG,
    P_HOST,
    P_LAST_MODIFIED,
    P_SIMHASH,
    H,
    Verdict,
)

#: A host's validator is ignored once it lied at least LIE_MIN times and in at
#: least LIE_SHARE of the fetches that could check it.
LIE_MIN = 2
LIE_SHARE = 0.5
#: How long (seconds) due() ranks with a host rate this process computed
#: before reading the host's sums again, and how many hosts it keeps.
HOST_RATE_TTL = 10.0
HOST_RATE_CACHE_SIZE = 1 << 20


class PageState(NamedTuple):
    """What the state holds about one URL (times in seconds since the epoch)."""

    url: str
    host: str
    etag: Optional[str]
    last_modified: Optional[str]
    content_length: Optional[int]
    digest: Optional[bytes]
    simhash: Optional[int]
    first_seen: float
    last_fetched: float
    last_changed: float
    fetches: int
    changes: int
    t_changed: float
    t_unchanged: float
    rate: float
    interval: float
    due_at: float


class RecrawlState:
    """Validators, content digests, change verdicts and a re-crawl schedule.

    ``store``: a :class:`~crawldedup.recrawl.stores.RecrawlStore`, a SQLite
    path (the embedded default), or a ``redis://`` URL or ``redis.Redis``
    client (``prefix=`` names its keys).  ``policy``:
    :class:`ChangeRatePolicy` (default) or :class:`NutchPolicy`.  ``k``: the
    largest SimHash distance of a near duplicate.  ``canonical``: key pages by
    their canonical URL (crawldedup.canonicalize_url).
    ``near_duplicate_is_change``: whether a near duplicate counts as a change
    for the change-rate estimate (default: no, a counter is not news).
    """

    def __init__(self, store: Any, *, policy: Optional[Policy] = None, k: int = 3,
                 canonical: bool = True, near_duplicate_is_change: bool = False,
                 **store_options: Any) -> None:
        if policy is None:
            policy = ChangeRatePolicy()
        if not isinstance(policy, (ChangeRatePolicy, NutchPolicy)):
            raise TypeError(f"policy must be a ChangeRatePolicy or a NutchPolicy, got "
                            f"{type(policy).__name__}")
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 32:
            raise ValueError(f"k must be an integer in [0, 32], got {k!r}")
        self.policy = policy
        self.k = k
        self.canonical = check_flag("canonical", canonical)
        self.near_duplicate_is_change = check_flag("near_duplicate_is_change",
                                                   near_duplicate_is_change)
        self.store: RecrawlStore = open_recrawl_store(store, **store_options)
        #: counts of this process: verdicts, bad dates and lengths, lies
        self.stats: Counter[str] = Counter()
        # host -> (pooled rate, time.monotonic() when computed): the rates
        # this process last computed (recording a batch computes its hosts'
        # new rates anyway); due() reuses them for HOST_RATE_TTL seconds
        # instead of reading every candidate's host again, so other
        # crawlers' fetches reach the ranking within that time.
        self._host_rate_cache: Dict[str, Tuple[float, float]] = {}
        try:
            meta = self.store.get_meta()
            self._mu = float(meta.get("mu", getattr(policy, "initial_mu", 3600.0)))
            if isinstance(policy, ChangeRatePolicy) and policy.budget_per_day is not None \
                    and "mu" not in meta:
                self._update_mu(policy.budget_per_day / 86400.0)
        except BaseException:
            if self.store is not store:  # opened here (damaged settings, a lost server)
                self.store.close()
            raise

    def __repr__(self) -> str:
        return f"RecrawlState({self.store!r}, policy={self.policy!r})"

    def __enter__(self) -> "RecrawlState":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()

    def __len__(self) -> int:
        return len(self.store)

    # ------------------------------------------------------------ lookups

    def key(self, url: Any) -> str:
        """The key of a URL in the state: its canonical form (with
        ``canonical=True``), else the URL itself."""
        if isinstance(url, (bytes, bytearray)):
            try:
                url = bytes(url).decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"url is not UTF-8: {bytes(url)[:80]!r}") from None
        if not isinstance(url, str):
            raise TypeError(f"url must be str or bytes, got {type(url).__name__}")
        if not url.strip():
            raise ValueError("url is empty")
        if self.canonical:
            try:
                return canonicalize_url(url)
            except ValueError:
                return url
        return url

    @staticmethod
    def _host(key: str) -> str:
        m = NETLOC.match(key)
        return "" if m is None else hostname(m.group(1))

    def get(self, url: Any) -> Optional[PageState]:
        """What the state holds about ``url``, or None."""
        rows = self.store.read_pages([self.key(url)]).rows()
        return self._page_state(rows[0]) if rows else None

    @staticmethod
    def _page_state(row: Sequence[Any]) -> PageState:
        values = list(row)
        if values[P_SIMHASH] is not None:
            values[P_SIMHASH] &= (1 << 64) - 1
        return PageState(*values)

    def host_stats(self, host: str) -> Dict[str, Any]:
        """A host's pooled statistics, its pooled change rate, and whether its
        ETag and Last-Modified are trusted."""
        stats = self.store.get_hosts([host]).get(host, [0.0] * len(HOST_FIELDS))
        out: Dict[str, Any] = dict(zip(HOST_FIELDS, stats))
        out["rate"] = float(self._host_rates([[out[f] for f in HOST_RATE_FIELDS]])[0])
        out["etag_trusted"] = self._trusted(stats, "etag")
        out["last_modified_trusted"] = self._trusted(stats, "lm")
        return out

    @staticmethod
    def _trusted(stats: Sequence[float], which: str) -> bool:
        lies = stats[H[f"{which}_lies"]]
        checks = stats[H[f"{which}_checks"]]
        return not (lies >= LIE_MIN and lies >= LIE_SHARE * checks)

    def _host_rates(self, stats: Any) -> np.ndarray:
        """Pooled change rates of hosts from their HOST_RATE_FIELDS sums."""
        if len(stats) == 0:
            return np.zeros(0)
        arr = np.asarray(stats, dtype=np.float64)
        prior = getattr(self.policy, "prior_rate", 1.0 / (7 * 86400.0))
        weight = getattr(self.policy, "prior_weight", PRIOR_WEIGHT)
        return estimate_rate(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3] + 1.0, prior, weight)

    def conditional_headers(self, url: Any) -> Dict[str, str]:
        """The validator to send with a conditional GET of a known URL:
        ``If-None-Match`` when it has an ETag, else ``If-Modified-Since``
        when it has a Last-Modified (empty for an unknown URL; a validator
        its host was caught lying about is not sent).

        One is enough: a server that gets both must ignore If-Modified-Since
        (RFC 9110, section 13.2.2), so the second would only add bytes to
        every request.
        """
        rows = self.store.read_pages([self.key(url)]).rows()
        if not rows:
            return {}
        row = rows[0]
        etag, lm = row[P_ETAG], row[P_LAST_MODIFIED]
        if not etag and not lm:
            return {}
        host = self.store.get_hosts([row[P_HOST]]).get(row[P_HOST])
        if etag and (host is None or self._trusted(host, "etag")):
            return {"If-None-Match": etag}
        if lm and (host is None or self._trusted(host, "lm")):
            return {"If-Modified-Since": lm}
        return {}

    def head_says_unchanged(self, url: Any, headers: Any) -> bool:
        """The seed's HEAD strategy: does a HEAD answer say the page is the
        version already recorded?  Trusted validators decide first (ETag, then
        Last-Modified); without them, an equal Content-Length does.  False for
        an unknown URL or when nothing can be compared."""
        key = self.key(url)
        found = validators(key, headers)
        rows = self.store.read_pages([key]).rows()
        if not rows:
            return False
        row = rows[0]
        host = self.store.get_hosts([row[P_HOST]]).get(row[P_HOST])
        old_etag, old_lm = row[P_ETAG], row[P_LAST_MODIFIED]
        if old_etag and found.get("etag") and (host is None or self._trusted(host, "etag")):
            return bool(found["etag"] == old_etag)
        if old_lm and found.get("last_modified") and (host is None
                                                      or self._trusted(host, "lm")):
            return bool(found["last_modified"] == old_lm)
        length = found.get("content_length", "")
        old_length = row[P_CONTENT_LENGTH]
        if length.isdigit() and old_length is not None:
            return cast(bool, int(length) == old_length)
        return False

    # ------------------------------------------------------------ links

    def get_links(self, url: Any) -> Optional[PageLinks]:
        """The requests last kept for ``url`` by :meth:`set_links`, with the
        digest of the version they were made from; None when none were
        kept.  A damaged record raises the store's CorruptFileError."""
        key = self.key(url)
        blob = self.store.read_links([key]).get(key)
        if blob is None:
            return None
        try:
            return decode_links(blob)
        except ValueError as exc:
            raise self.store._corrupt(f"the recrawl links of {key!r} are damaged: "
                                      f"{exc}") from None

    def set_links(self, url: Any, digest: bytes, links: Optional[Sequence[Sequence[Any]]],
                  body: Optional[bytes] = None,
                  headers: Optional[Dict[str, str]] = None) -> None:
        """Keep the requests made from the version of ``url`` whose digest is
        ``digest`` (``PageState.digest``), replacing those kept before:
        ``links`` as crawldedup.recrawl.links describes, or None for "they
        could not be kept"; and that version's ``body`` and ``headers``
        when given."""
        self.store.write_links({self.key(url): encode_links(digest, links, body, headers)})

    # ------------------------------------------------------------ recording

    def record(self, url: Any, status: Any, headers: Any = None, body: Any = None,
               text: Optional[str] = None, *, digest: Any = None,
               now: Optional[float] = None) -> Verdict:
        """Record one response and return its verdict.

        ``status``: 2xx (a page; give its ``body``, its extracted ``text``,
        or a ``digest`` of either: 16 bytes or 32 hex digits) or 304 (after a
        conditional request for a known URL).  ``now``: the fetch time
        (default: the clock).  Bad input raises ValueError/TypeError naming it;
        an unparseable Last-Modified or Content-Length is counted in
        ``stats`` and ignored.
        """
        fetch = {"url": url, "status": status, "headers": headers, "body": body, "text": text,
                 "digest": digest, "time": now}
        return self.record_many([fetch])[0]

    def record_many(self, fetches: Iterable[Mapping[str, Any]]) -> List[Verdict]:
        """Record a batch of responses in one transaction; returns their
        verdicts in order.  Each fetch is a mapping with ``url``, ``status``,
        and optionally ``headers``, ``body``, ``text``, ``digest`` and
        ``time`` (as for :meth:`record`).  Every fetch is checked before
        anything is recorded."""
        if isinstance(fetches, Mapping):
            raise TypeError("record_many takes an iterable of fetches (mappings), not one "
                            "mapping; use record() for one")
        with paused_gc():
            return self._record_many(fetches)

    def _record_many(self, fetches: Iterable[Mapping[str, Any]]) -> List[Verdict]:
        clock = time.time()
        batch = parse_columns(fetches, clock, self.key, self.canonical)
        if not batch.key:
            return []
        keys = batch.key
        stored = self.store.read_pages(keys)
        if 304 in batch.status:
            index = stored.index
            for i, (status, key) in enumerate(zip(batch.status, keys)):
                # known: stored, or fetched earlier in the batch
                if status == 304 and key not in index and keys.index(key) == i:
                    raise ValueError(f"fetches[{i}] ({key}): a 304 for a URL the state has "
                                     f"no version of (was the request conditional?)")
        simhashes = simhashes_of(batch.text)
        # what the batch counts (lies, bad dates and lengths, verdicts): added
        # to self.stats once it is recorded
        counts: Counter[str] = Counter()
        if isinstance(self.policy, ChangeRatePolicy) and len(set(keys)) == len(keys):
            # Distinct pages (nearly every batch): an array operation a field.
            done = compare_columns(batch, simhashes, stored, k=self.k,
                                   near_duplicate_is_change=self.near_duplicate_is_change,
                                   stats=counts)
        else:
            # A page fetched twice in the batch, or Nutch's policy: fetch by
            # fetch, each seeing what the ones before it left.
            done = compare_rows(batch, simhashes, stored, k=self.k,
                                near_duplicate_is_change=self.near_duplicate_is_change,
                                nutch=isinstance(self.policy, NutchPolicy), stats=counts)
        pages, verdicts, hosts, host_of, deltas, old_rates, nutch_rows = done
        # Rates and due times, with each host's pooled rate (its stored sums
        # plus this batch's) as the prior.
        host_stats = self.store.get_hosts(hosts, HOST_RATE_FIELDS)
        none = [0.0] * len(HOST_RATE_FIELDS)
        sums = (np.array([host_stats.get(h, none) for h in hosts], dtype=np.float64)
                .reshape(len(hosts), len(HOST_RATE_FIELDS)) + deltas[:, H_RATE])
        host_rates = self._host_rates(sums)
        num = pages.num
        rates = estimate_rate(num["changes"], num["t_changed"], num["t_unchanged"],
                              num["fetches"], host_rates[host_of],
                              getattr(self.policy, "prior_weight", PRIOR_WEIGHT))
        num["rate"] = rates
        if nutch_rows is not None and isinstance(self.policy, NutchPolicy):
            for i, key in enumerate(pages.keys):
                old_interval, was_changed, at, lm = nutch_rows[key]
                modified = parse_http_date(lm) if (was_changed and lm) else None
                num["interval"][i], num["due_at"][i] = self.policy.next(
                    old_interval, was_changed, at, modified)
        else:
            assert isinstance(self.policy, ChangeRatePolicy)
            num["interval"] = self.policy.intervals(rates, self._mu)
            num["due_at"] = num["last_fetched"] + num["interval"]
        # Pages per rate bin: the new rates in, the replaced ones out.
        net = np.bincount(hist_bin(rates), minlength=HIST_BINS)
        if len(old_rates):
            net -= np.bincount(hist_bin(old_rates), minlength=HIST_BINS)
        hist = {b: d for b, d in enumerate(net.tolist()) if d}
        self.store.write_pages(pages, {h: d for h, d in zip(hosts, deltas.tolist()) if any(d)},
                               hist)
        self._remember_host_rates(dict(zip(hosts, host_rates.tolist())))
        counts.update(verdict.value for verdict in verdicts)
        self.stats.update(counts)
        return verdicts

    # ------------------------------------------------------------ scheduling

    def _solve_mu(self, budget: float) -> Optional[float]:
        """The Lagrange multiplier that spends ``budget`` fetches per second
        over the estimated rates (the rate histogram); None before any page."""
        assert isinstance(self.policy, ChangeRatePolicy)
        counts = self.store.histogram()
        if counts.sum() > 0:
            return solve_mu(hist_rates(), budget, self.policy.min_interval,
                            self.policy.max_interval, counts)
        return None

    def _update_mu(self, budget: float) -> None:
        """Solve mu for ``budget`` (see _solve_mu), and save it."""
        mu = self._solve_mu(budget)
        if mu is not None:
            self._mu = mu
            self.store.set_meta({"mu": mu})

    def due(self, now: Optional[float] = None, limit: int = 1000, *,
            per_host: Optional[int] = None, lease: Optional[float] = None,
            fill: bool = False) -> List[str]:
        """Up to ``limit`` URLs to fetch now, best first.

        With the change-rate policy they are the URLs whose scheduled time
        has come, ranked by the expected freshness gained by fetching them now
        (a page that changes faster than it can be kept fresh gains little);
        with Nutch's, the most overdue first.  ``per_host``: at most that many
        URLs of one host.  ``lease``: push the returned URLs' due time ``lease``
        seconds ahead, so a second call before they are recorded does not
        return them again.  ``fill``: when fewer than ``limit`` URLs are due,
        top up with those due soonest (a crawler with spare capacity).
        """
        if now is None:
            now = time.time()
        if isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now):
            raise ValueError(f"now must be a finite number of seconds, got {now!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"limit must be an integer >= 0, got {limit!r}")
        if per_host is not None and (isinstance(per_host, bool) or not isinstance(per_host, int)
                                     or per_host < 1):
            raise ValueError(f"per_host must be an integer >= 1 or None, got {per_host!r}")
        if lease is not None and (isinstance(lease, bool) or not isinstance(lease, (int, float))
                                  or not lease > 0 or not math.isfinite(lease)):
            raise ValueError(f"lease must be a positive number of seconds or None, got "
                             f"{lease!r}")
        if limit == 0:
            return []
        with paused_gc():
            return self._due(now, limit, per_host, lease, fill)

    def _due(self, now: float, limit: int, per_host: Optional[int], lease: Optional[float],
             fill: bool) -> List[str]:
        # Everything is read (and checked) before anything is written: the
        # scheduler's settings are saved once the URLs are chosen.
        policy = self.policy
        settings: Dict[str, float] = {}
        if isinstance(policy, ChangeRatePolicy):
            budget = None if policy.budget_per_day is None else policy.budget_per_day / 86400.0
            if budget is None:
                meta = self.store.get_meta()
                last = meta.get("last_due")
                estimate = meta.get("budget")
                if last is not None and now > last:
                    observed = limit / (now - last)
                    estimate = observed if estimate is None else 0.8 * estimate + 0.2 * observed
                settings = {"last_due": now, **({} if estimate is None
                                                 else {"budget": estimate})}
                budget = estimate
            if budget is not None:
                mu = self._solve_mu(budget)
                if mu is not None:
                    settings["mu"] = mu
        # The window: the pages due earliest, a few more than asked for (many
        # more with a per-host cap, which skips some).  Not more: reading
        # 4 x limit rows to rank them costs more than recording the batch.
        wanted = limit * 8 + 64 if per_host is not None else 2 * limit + 64
        chosen: List[str] = []
        per: Dict[str, int] = {}
        seen: Set[str] = set()
        for until in ((now, float("inf")) if fill else (now,)):
            candidates = self.store.due_window(float(until), wanted + len(seen))
            if seen:
                candidates = candidates.subset([i for i, url in enumerate(candidates.keys)
                                                if url not in seen])
            ranked_urls, ranked_hosts = self._ranked(candidates, now)
            if per_host is None:
                chosen.extend(ranked_urls[:limit - len(chosen)])
            else:
                for url, host in zip(ranked_urls, ranked_hosts):
                    if per.get(host, 0) >= per_host:
                        continue
                    per[host] = per.get(host, 0) + 1
                    chosen.append(url)
                    if len(chosen) >= limit:
                        break
            if len(chosen) >= limit:
                break
            if fill:  # the next pass reads these again: skip them
                seen.update(candidates.keys)
        if settings:
            self.store.set_meta(settings)
            self._mu = settings.get("mu", self._mu)
        if lease is not None and chosen:
            self.store.set_due([(url, now + lease) for url in chosen])
        return chosen

    def _remember_host_rates(self, rates: Mapping[str, float]) -> None:
        cache = self._host_rate_cache
        if len(cache) + len(rates) > HOST_RATE_CACHE_SIZE:
            cache.clear()
        now = time.monotonic()
        for host, rate in rates.items():
            cache[host] = (rate, now)

    def _ranked(self, candidates: Pages, now: float) -> Tuple[List[str], List[str]]:
        """Candidates best first, their URLs and their hosts: by expected
        freshness gain now (rates re-estimated with their hosts' current
        pooled rates) for the change-rate policy, most overdue first for
        Nutch's."""
        if not len(candidates):
            return [], []
        urls, host_of = candidates.keys, candidates.host
        if not isinstance(self.policy, ChangeRatePolicy):
            return urls, host_of
        cache = self._host_rate_cache
        fresh = time.monotonic() - HOST_RATE_TTL
        host_rate: Dict[str, float] = {}
        missing = []
        for host in dict.fromkeys(host_of):
            hit = cache.get(host)
            if hit is not None and hit[1] >= fresh:
                host_rate[host] = hit[0]
            else:
                missing.append(host)
        if missing:
            stats = self.store.get_hosts(missing, HOST_RATE_FIELDS)
            none = [0.0] * len(HOST_RATE_FIELDS)
            read = dict(zip(missing, self._host_rates(
                np.array([stats.get(h, none) for h in missing], dtype=np.float64)).tolist()))
            self._remember_host_rates(read)
            host_rate.update(read)
        num = candidates.num
        rates = estimate_rate(num["changes"], num["t_changed"], num["t_unchanged"],
                              num["fetches"],
                              np.fromiter(map(host_rate.__getitem__, host_of), np.float64,
                                          len(host_of)),
                              self.policy.prior_weight)
        gains = marginal(rates, now - num["last_fetched"])
        order = np.argsort(-gains, kind="stable").tolist()
        return [urls[i] for i in order], [host_of[i] for i in order]

    def count_due(self, now: Optional[float] = None) -> int:
        """How many URLs are due at ``now``."""
        return self.store.count_due(time.time() if now is None else float(now))


__all__ = ["RecrawlState", "Verdict", "PageState", "parse_http_date", "LIE_MIN", "LIE_SHARE"]
