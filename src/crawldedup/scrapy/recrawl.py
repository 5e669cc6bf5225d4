"""RecrawlMiddleware: incremental re-crawling for Scrapy.

A downloader middleware.  For a URL it fetched before, it adds
``If-None-Match`` / ``If-Modified-Since`` to the request (the validators its
host has not been caught lying about); it records every response in a
:class:`~crawldedup.recrawl.RecrawlState`, tags ``response.meta
["crawldedup_verdict"]`` (``"new"``, ``"not_modified"``, ``"unchanged"``,
``"near_duplicate"``, ``"changed"``) and can drop the responses that bring
nothing new before any callback sees them, start URLs included.

In ``settings.py``::

    DOWNLOADER_MIDDLEWARES = {"crawldedup.scrapy.RecrawlMiddleware": 580}
    CRAWLDEDUP_RECRAWL_STATE = "recrawl.db"   # or "redis://host:6379/0"
    CRAWLDEDUP_RECRAWL_DROP = True            # drop 304s and unchanged pages

Priority 580 puts it below HttpCompressionMiddleware (590) and
RedirectMiddleware (600): it sees decompressed bodies of final responses.

Settings:

* ``CRAWLDEDUP_RECRAWL_STATE``: SQLite path or Redis URL (default
  ``recrawl.db``); ``CRAWLDEDUP_RECRAWL_PREFIX``: Redis key prefix.
* ``CRAWLDEDUP_RECRAWL_DROP``: False (default), True (drop ``not_modified``
  and ``unchanged``), or a list of verdicts to drop (e.g. add
  ``"near_duplicate"``).  A dropped response raises IgnoreRequest: the
  request's errback gets it, nothing is logged as an error.
* ``CRAWLDEDUP_RECRAWL_HEAD``: the seed's HEAD strategy for known pages
  without usable validators: a HEAD first, the GET only when the
  Content-Length differs (an unchanged page is then dropped).  A HEAD is
  sent only when it pays on average: when the chance that the page changed
  since its last fetch (from its change rate) is below ``1 - HEAD_BYTES /
  Content-Length``; otherwise the GET goes out at once (stat
  ``.../head_skipped``).
* ``CRAWLDEDUP_RECRAWL_TEXT``: digest and SimHash of the page's visible text
  instead of its bytes (so a changed script or timestamp in the markup is
  not a change).
* ``CRAWLDEDUP_RECRAWL_POLICY``: ``"change-rate"`` (default) or ``"nutch"``.

Stats: ``crawldedup/recrawl/<verdict>``, ``.../conditional`` (requests given
validators), ``.../head``, ``.../head_skipped``, ``.../dropped``,
``.../errors``.  A request with
``meta["crawldedup_recrawl"] = False`` is left alone.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Optional, Set

from crawldedup._extras import install_hint

try:
    from scrapy import signals
    from scrapy.exceptions import IgnoreRequest, NotConfigured
except ImportError:  # pragma: no cover - exercised without scrapy installed
    raise ImportError(f"crawldedup.scrapy needs Scrapy: {install_hint('scrapy')}") from None

from crawldedup.recrawl import ChangeRatePolicy, NutchPolicy, RecrawlState, Verdict

logger = logging.getLogger(__name__)

DEFAULT_DROP = ("not_modified", "unchanged")
#: What a HEAD answer costs, in bytes (status line and headers; 150 to 400 on
#: common servers).  HEAD then GET costs that much more than the GET alone
#: when the page changed, and saves the body when it did not.
HEAD_BYTES = 300
_VERDICTS = {v.value for v in Verdict}


def _drop_setting(value: Any) -> Set[str]:
    if value in (None, False, "", "0", "False", "false"):
        return set()
    if value in (True, "1", "True", "true"):
        return set(DEFAULT_DROP)
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    chosen = {str(v) for v in value}
    unknown = chosen - _VERDICTS
    if unknown:
        raise ValueError(f"CRAWLDEDUP_RECRAWL_DROP: unknown verdicts {sorted(unknown)} "
                         f"(choose from {sorted(_VERDICTS)})")
    if "new" in chosen or "changed" in chosen:
        raise ValueError("CRAWLDEDUP_RECRAWL_DROP cannot drop 'new' or 'changed' pages")
    return chosen


def head_pays(rate: float, age: float, content_length: int) -> bool:
    """Whether a HEAD before the GET saves bytes on average for a page of
    ``content_length`` bytes, changing ``rate`` times a second, fetched
    ``age`` seconds ago: HEAD_BYTES + p * length < length, p being the chance
    of a change since (Poisson: 1 - exp(-rate * age)).

    >>> head_pays(1 / 86400, 3600, 8000)      # changes daily, fetched an hour ago
    True
    >>> head_pays(1 / 60, 3600, 8000)         # changes every minute
    False
    >>> head_pays(1 / 86400, 3600, 200)       # the HEAD costs more than the page
    False
    """
    changed = -math.expm1(-max(rate, 0.0) * max(age, 0.0))
    return HEAD_BYTES + changed * content_length < content_length


class RecrawlMiddleware:
    """Conditional requests, change verdicts and dropping of unchanged pages."""

    def __init__(self, state: RecrawlState, *, drop: Any = False, head: bool = False,
                 text: bool = False, stats: Any = None) -> None:
        self.state = state
        self.drop = _drop_setting(drop)
        self.head = bool(head)
        self.text = bool(text)
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Any) -> "RecrawlMiddleware":
        settings = crawler.settings
        if not settings.getbool("CRAWLDEDUP_RECRAWL_ENABLED", True):
            raise NotConfigured("CRAWLDEDUP_RECRAWL_ENABLED is off")
        where = settings.get("CRAWLDEDUP_RECRAWL_STATE", "recrawl.db")
        policy_name = settings.get("CRAWLDEDUP_RECRAWL_POLICY", "change-rate")
        if policy_name == "nutch":
            policy: Any = NutchPolicy()
        elif policy_name == "change-rate":
            budget = settings.getfloat("CRAWLDEDUP_RECRAWL_BUDGET", 0.0) or None
            policy = ChangeRatePolicy(budget_per_day=budget)
        else:
            raise ValueError(f"CRAWLDEDUP_RECRAWL_POLICY must be 'change-rate' or 'nutch', "
                             f"got {policy_name!r}")
        options = {}
        if isinstance(where, str) and where.startswith(("redis://", "rediss://", "unix://")):
            options["prefix"] = settings.get("CRAWLDEDUP_RECRAWL_PREFIX", "crawldedup:recrawl")
        state = RecrawlState(where, policy=policy, **options)
        middleware = cls(state, drop=settings.get("CRAWLDEDUP_RECRAWL_DROP", False),
                         head=settings.getbool("CRAWLDEDUP_RECRAWL_HEAD", False),
                         text=settings.getbool("CRAWLDEDUP_RECRAWL_TEXT", False),
                         stats=crawler.stats)
        crawler.signals.connect(middleware.spider_closed, signal=signals.spider_closed)
        return middleware

    def spider_closed(self, spider: Any = None) -> None:
        self.state.close()

    def _inc(self, name: str, count: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"crawldedup/recrawl/{name}", count)

    # ------------------------------------------------------------ requests

    def process_request(self, request: Any, spider: Any = None) -> Optional[Any]:
        meta = request.meta
        if meta.get("crawldedup_recrawl") is False or request.method not in ("GET", "HEAD"):
            return None
        if meta.get("crawldedup_head_for"):
            return None  # our HEAD: sent as is
        try:
            headers = self.state.conditional_headers(request.url)
        except (ValueError, TypeError):
            return None
        if headers:
            added = False
            for name, value in headers.items():
                if name not in request.headers:
                    request.headers[name] = value
                    added = True
            if added:
                meta["crawldedup_conditional"] = True
                self._inc("conditional")
            return None
        if (self.head and request.method == "GET" and not meta.get("crawldedup_head_done")):
            page = self.state.get(request.url)
            if page is not None and page.content_length is not None:
                if not head_pays(page.rate, time.time() - page.last_fetched,
                                 page.content_length):
                    self._inc("head_skipped")
                    return None
                self._inc("head")
                return request.replace(method="HEAD", dont_filter=True,
                                       meta={**meta, "crawldedup_head_for": "GET"})
        return None

    # ----------------------------------------------------------- responses

    def process_response(self, request: Any, response: Any, spider: Any = None) -> Any:
        meta = request.meta
        if meta.get("crawldedup_recrawl") is False:
            return response
        if meta.get("crawldedup_head_for"):
            return self._after_head(request, response)
        status = response.status
        if not (200 <= status < 300 or status == 304) or request.method != "GET":
            return response
        if status == 304 and not meta.get("crawldedup_conditional"):
            return response  # not an answer to our validators
        try:
            if status == 304:
                verdict = self.state.record(request.url, 304, response.headers)
            elif self.text and hasattr(response, "xpath"):
                text = " ".join(t.strip() for t in response.xpath(
                    "//body//text()[not(ancestor::script) and not(ancestor::style)]").getall()
                    if t.strip())
                verdict = self.state.record(request.url, status, response.headers, text=text)
            else:
                verdict = self.state.record(request.url, status, response.headers,
                                            body=response.body)
        except (ValueError, TypeError) as exc:
            self._inc("errors")
            logger.warning("crawldedup: cannot record %s: %s", request.url, exc)
            return response
        return self._verdict(request, response, verdict)

    def _verdict(self, request: Any, response: Any, verdict: Verdict) -> Any:
        request.meta["crawldedup_verdict"] = verdict.value
        self._inc(verdict.value)
        if verdict.value in self.drop:
            self._inc("dropped")
            raise IgnoreRequest(f"crawldedup: {verdict.value}: {request.url}")
        return response

    def _after_head(self, request: Any, response: Any) -> Any:
        if 200 <= response.status < 300:
            try:
                unchanged = self.state.head_says_unchanged(request.url, response.headers)
            except (ValueError, TypeError) as exc:
                self._inc("errors")
                logger.warning("crawldedup: bad HEAD answer for %s: %s", request.url, exc)
                unchanged = False
            if unchanged:
                # The HEAD answered as a 304 would have: record it as one.
                verdict = self.state.record(request.url, 304, {})
                request.meta["crawldedup_verdict"] = verdict.value
                self._inc(verdict.value)
                self._inc("dropped")
                raise IgnoreRequest(f"crawldedup: HEAD says unchanged: {request.url}")
        meta = {k: v for k, v in request.meta.items() if k != "crawldedup_head_for"}
        meta["crawldedup_head_done"] = True
        return request.replace(method=request.meta["crawldedup_head_for"], dont_filter=True,
                               meta=meta)


__all__ = ["RecrawlMiddleware", "head_pays", "HEAD_BYTES"]
