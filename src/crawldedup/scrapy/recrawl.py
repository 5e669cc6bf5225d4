"""RecrawlMiddleware: incremental re-crawling for Scrapy.

A downloader middleware.  For a URL it fetched before, it adds
``If-None-Match`` / ``If-Modified-Since`` to the request (the validators its
host has not been caught lying about); it records every response in a
:class:`~crawldedup.recrawl.RecrawlState`, tags ``response.meta
["crawldedup_verdict"]`` (``"new"``, ``"not_modified"``, ``"unchanged"``,
``"near_duplicate"``, ``"changed"``) and can drop the responses that bring
nothing new before any callback sees them, start URLs included.

A page that is not parsed again (a 304, or a page dropped as unchanged)
still leads somewhere: the middleware keeps, with the digest of each
version that reached the callbacks, the requests the callbacks made from
it, and for a page not parsed again hands its response to a callback that
makes them again.  So a link-following spider reaches the changed pages
behind unchanged ones.  A known page with no requests kept from its
version (recorded by another client, its callback never finished, requests
that cannot be kept) is fetched without validators and parsed again.

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
  ``"near_duplicate"``).  A dropped response whose callbacks made requests
  last time goes to a callback that makes them again; one whose callbacks
  made none raises IgnoreRequest: the request's errback gets it, nothing is
  logged as an error.
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
* ``CRAWLDEDUP_RECRAWL_LINKS``: keep and replay the callbacks' requests
  (default True; False: a page not parsed again leads nowhere, for spiders
  whose start requests are every URL wanted).
* ``CRAWLDEDUP_RECRAWL_BODIES``: keep each parsed version's body too (zlib)
  and hand the callbacks that kept version, status 200, flag
  ``crawldedup_kept``, for a page answered 304, so that they extract items
  from every page, unchanged ones included (default False; not with a
  ``CRAWLDEDUP_RECRAWL_DROP`` that drops ``not_modified``).
* ``CRAWLDEDUP_RECRAWL_REFRESH``: this crawl sends no validators and drops
  nothing, so every page is parsed and its requests kept anew (after the
  spider's callbacks changed what they yield).

Stats: ``crawldedup/recrawl/<verdict>``, ``.../conditional`` (requests given
validators), ``.../head``, ``.../head_skipped``, ``.../dropped``,
``.../errors``; ``.../replayed`` (pages not parsed again whose kept
requests were made), ``.../links_replayed`` (those requests),
``.../links_kept`` and ``.../links_unkept`` (pages whose requests were
kept, or could not be), ``.../no_links`` (known pages fetched without
validators for want of kept requests) and ``.../kept_for_links``
(unchanged pages parsed again for the same reason), ``.../from_kept``
(304s handed to the callbacks as their kept version).  A request with
``meta["crawldedup_recrawl"] = False`` is left alone.
"""

from __future__ import annotations

import base64
import functools
import inspect
import json
import logging
import math
import time
from typing import (
    Any,
    AsyncIterator,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Set,
)

from crawldedup._extras import install_hint

try:
    from scrapy import Request, signals
    from scrapy.exceptions import IgnoreRequest, NotConfigured
    from scrapy.http import FormRequest, Headers, JsonRequest
    from scrapy.responsetypes import responsetypes
    from scrapy.utils.misc import warn_on_generator_with_return_value
except ImportError:  # pragma: no cover - exercised without scrapy installed
    raise ImportError(f"crawldedup.scrapy needs Scrapy: {install_hint('scrapy')}") from None

from crawldedup.recrawl import ChangeRatePolicy, NutchPolicy, PageLinks, RecrawlState, Verdict

logger = logging.getLogger(__name__)

DEFAULT_DROP = ("not_modified", "unchanged")
#: What a HEAD answer costs, in bytes (status line and headers; 150 to 400 on
#: common servers).  HEAD then GET costs that much more than the GET alone
#: when the page changed, and saves the body when it did not.
HEAD_BYTES = 300
_VERDICTS = {v.value for v in Verdict}
#: Meta keys that Scrapy and crawldedup set on a request on its way (not
#: what a callback asked for): left out of a kept request.
_TRANSIENT_META = frozenset({
    "depth", "download_slot", "download_latency", "download_timeout", "download_maxsize",
    "download_warnsize", "redirect_times", "redirect_ttl", "redirect_urls",
    "redirect_reasons", "retry_times", "proxy", "_auth_proxy"})
#: Request classes kept as a plain Request with the same method, headers and
#: body (what they add is how they build those).
_PLAIN_REQUESTS = (Request, FormRequest, JsonRequest)


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


def _method_name(spider: Any, func: Any) -> Optional[str]:
    """The name under which ``func`` is a method of ``spider``, or None."""
    target = getattr(func, "__func__", None)
    if target is None or getattr(func, "__self__", None) is not spider:
        return None
    name = getattr(target, "__name__", None)
    if not isinstance(name, str) or getattr(getattr(spider, name, None), "__func__",
                                            None) is not target:
        return None
    return name


def _json_exact(value: Any) -> bool:
    """Whether ``value`` comes back equal from JSON (no tuples, no non-str
    keys, nothing JSON cannot hold)."""
    try:
        return bool(json.loads(json.dumps(value, allow_nan=False)) == value)
    except (TypeError, ValueError):
        return False


def request_to_link(request: Any, spider: Any) -> Optional[List[Any]]:
    """A request a callback made, as a link (crawldedup.recrawl.links) from
    which :func:`link_to_request` makes the same request again; None when it
    cannot be kept: a callback or errback that is not a method of
    ``spider``, meta or cb_kwargs that JSON does not carry exactly, or a
    request class other than Request, FormRequest and JsonRequest."""
    if type(request) not in _PLAIN_REQUESTS:
        return None
    callback = None
    if request.callback is not None:
        callback = _method_name(spider, request.callback)
        if callback is None:
            return None
    options: Dict[str, Any] = {}
    if request.errback is not None:
        options["errback"] = _method_name(spider, request.errback)
        if options["errback"] is None:
            return None
    if request.method != "GET":
        options["method"] = request.method
    if request.body:
        options["body"] = base64.b64encode(request.body).decode("ascii")
    if request.headers:
        options["headers"] = {name.decode("latin-1"): [v.decode("latin-1") for v in values]
                              for name, values in request.headers.items()}
    meta = {k: v for k, v in request.meta.items()
            if k not in _TRANSIENT_META and not k.startswith(("crawldedup_", "_"))}
    if meta:
        if not _json_exact(meta):
            return None
        options["meta"] = meta
    if request.cb_kwargs:
        if not _json_exact(request.cb_kwargs):
            return None
        options["cb_kwargs"] = dict(request.cb_kwargs)
    if request.priority:
        options["priority"] = request.priority
    if request.dont_filter:
        options["dont_filter"] = True
    return [request.url, callback, options] if options else [request.url, callback]


def link_to_request(link: List[Any], spider: Any) -> Any:
    """The request a link (from :func:`request_to_link`) was made from.
    ValueError names a callback the spider no longer has, or a damaged link."""
    url, callback, options = link[0], link[1], (link[2] if len(link) > 2 else {})

    def method(name: Optional[str]) -> Any:
        if name is None:
            return None
        found = getattr(spider, name, None)
        if not callable(found):
            raise ValueError(f"the spider has no method {name!r} (a request kept from an "
                             f"earlier crawl of {url})")
        return found
    try:
        body = base64.b64decode(options["body"], validate=True) if "body" in options else None
        return Request(url, callback=method(callback), errback=method(options.get("errback")),
                       method=options.get("method", "GET"), headers=options.get("headers"),
                       body=body, meta=options.get("meta"), cb_kwargs=options.get("cb_kwargs"),
                       priority=options.get("priority", 0),
                       dont_filter=bool(options.get("dont_filter", False)))
    except (TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"the request kept for {url!r} is damaged: {exc}") from None


class _Page(NamedTuple):
    """A page whose callback runs: what keeping its requests needs."""

    url: str
    digest: bytes
    spider: Any
    body: Optional[bytes]
    headers: Optional[Dict[str, str]]


class RecrawlMiddleware:
    """Conditional requests, change verdicts, dropping of unchanged pages,
    and the requests of the pages not parsed again."""

    def __init__(self, state: RecrawlState, *, drop: Any = False, head: bool = False,
                 text: bool = False, links: bool = True, bodies: bool = False,
                 refresh: bool = False, stats: Any = None, crawler: Any = None) -> None:
        self.state = state
        self.drop = _drop_setting(drop)
        self.head = bool(head)
        self.text = bool(text)
        self.links = bool(links) or bool(bodies)
        self.bodies = bool(bodies)
        self.refresh = bool(refresh)
        if self.bodies and "not_modified" in self.drop:
            raise ValueError("CRAWLDEDUP_RECRAWL_BODIES hands the callbacks the kept version of "
                             "a page answered 304, and CRAWLDEDUP_RECRAWL_DROP drops those "
                             "('not_modified'): choose one")
        if self.links and not state.store.keeps_links:
            raise ValueError(f"CRAWLDEDUP_RECRAWL_LINKS replays the requests of the pages not "
                             f"parsed again, and the state's store "
                             f"({type(state.store).__name__}) keeps no links: set "
                             f"CRAWLDEDUP_RECRAWL_LINKS = False, or use a store that does")
        self.stats = stats
        self.crawler = crawler

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
                         links=settings.getbool("CRAWLDEDUP_RECRAWL_LINKS", True),
                         bodies=settings.getbool("CRAWLDEDUP_RECRAWL_BODIES", False),
                         refresh=settings.getbool("CRAWLDEDUP_RECRAWL_REFRESH", False),
                         stats=crawler.stats, crawler=crawler)
        crawler.signals.connect(middleware.spider_closed, signal=signals.spider_closed)
        return middleware

    def spider_closed(self, spider: Any = None) -> None:
        self.state.close()

    def _inc(self, name: str, count: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"crawldedup/recrawl/{name}", count)

    def _spider(self, spider: Any) -> Any:
        if spider is None and self.crawler is not None:
            return self.crawler.spider
        return spider

    def _kept_links(self, url: str, page: Any = False) -> Optional[PageLinks]:
        """The requests kept from the version of ``url`` the state holds
        (``page``, read when not given), or None when there are none to
        replay (none kept, kept from another version, or they could not be
        kept)."""
        if page is False:
            page = self.state.get(url)
        if page is None or page.digest is None:
            return None
        kept = self.state.get_links(url)
        if kept is None or kept.links is None or kept.digest != page.digest \
                or (self.bodies and kept.body is None):
            return None
        return kept

    # ------------------------------------------------------------ requests

    def process_request(self, request: Any, spider: Any = None) -> Optional[Any]:
        meta = request.meta
        if meta.get("crawldedup_recrawl") is False or request.method not in ("GET", "HEAD"):
            return None
        if meta.get("crawldedup_head_for"):
            return None  # our HEAD: sent as is
        if self.refresh:
            return None  # every page fetched and parsed again
        try:
            headers = self.state.conditional_headers(request.url)
        except (ValueError, TypeError):
            return None
        if self.links and request.method == "GET":
            page = self.state.get(request.url)
            if page is not None and self._kept_links(request.url, page) is None:
                # The page's callbacks must run again for its requests: a
                # validator would bring a 304, and nothing to follow.
                self._inc("no_links")
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
            return self._after_head(request, response, spider)
        status = response.status
        if not (200 <= status < 300 or status == 304) or request.method != "GET":
            return response
        if status == 304 and not meta.get("crawldedup_conditional"):
            return response  # not an answer to our validators
        try:
            # what can be replayed if the page is not parsed: read before the
            # record moves the digest on (a near duplicate)
            kept = self._kept_links(request.url) if self.links else None
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
        return self._verdict(request, response, verdict, kept, status == 304, spider)

    def _verdict(self, request: Any, response: Any, verdict: Verdict,
                 kept: Optional[PageLinks], not_modified: bool, spider: Any) -> Any:
        request.meta["crawldedup_verdict"] = verdict.value
        self._inc(verdict.value)
        dropped = verdict.value in self.drop and not self.refresh
        if self.bodies and not_modified and not dropped and kept is not None:
            return self._kept_response(request, response, kept)
        if self.links and (dropped or not_modified):
            if kept is not None:
                return self._replay_response(request, response, verdict, kept, dropped)
            if not not_modified:
                # Nothing kept to follow from this version: the callbacks
                # parse it again, and their requests are kept this time.
                self._inc("kept_for_links")
                return self._capture_response(request, response, spider)
        if dropped:
            self._inc("dropped")
            raise IgnoreRequest(f"crawldedup: {verdict.value}: {request.url}")
        if self.links and not not_modified:
            return self._capture_response(request, response, spider)
        return response

    def _after_head(self, request: Any, response: Any, spider: Any) -> Any:
        if 200 <= response.status < 300:
            kept = None
            try:
                kept = self._kept_links(request.url) if self.links else None
                unchanged = self.state.head_says_unchanged(request.url, response.headers)
            except (ValueError, TypeError) as exc:
                self._inc("errors")
                logger.warning("crawldedup: bad HEAD answer for %s: %s", request.url, exc)
                unchanged = False
            if unchanged and (kept is not None or not self.links):
                # The HEAD answered as a 304 would have: record it as one.
                verdict = self.state.record(request.url, 304, {})
                request.meta["crawldedup_verdict"] = verdict.value
                self._inc(verdict.value)
                if kept is not None and self.bodies and "not_modified" not in self.drop:
                    meta = {k: v for k, v in request.meta.items() if k != "crawldedup_head_for"}
                    return self._kept_response(request.replace(
                        method=request.meta["crawldedup_head_for"], meta=meta), response, kept)
                if kept is not None:
                    return self._replay_response(request, response, verdict, kept, True)
                self._inc("dropped")
                raise IgnoreRequest(f"crawldedup: HEAD says unchanged: {request.url}")
        meta = {k: v for k, v in request.meta.items() if k != "crawldedup_head_for"}
        meta["crawldedup_head_done"] = True
        return request.replace(method=request.meta["crawldedup_head_for"], dont_filter=True,
                               meta=meta)

    # --------------------------------------------------- links of pages

    def _kept_response(self, request: Any, response: Any, kept: PageLinks) -> Any:
        """The kept version of a page answered 304 (or judged unchanged by a
        HEAD), as the response its callbacks get: status 200, the kept
        body and Content-Type, the validators of the answer, flag
        ``crawldedup_kept``."""
        assert kept.body is not None
        headers = Headers(kept.headers or {})
        for name in (b"ETag", b"Last-Modified"):
            if name in response.headers:
                headers[name] = response.headers[name]
        cls = responsetypes.from_args(headers=headers, url=request.url, body=kept.body)
        self._inc("from_kept")
        return cls(url=request.url, status=200, headers=headers, body=kept.body,
                   request=request, flags=["crawldedup_kept"])

    def _replay_response(self, request: Any, response: Any, verdict: Verdict,
                         kept: PageLinks, dropped: bool) -> Any:
        """The response of a page that is not parsed again, handed to a
        callback that makes the requests kept from its version; or
        IgnoreRequest, as before, when it made none."""
        assert kept.links is not None
        if dropped:
            self._inc("dropped")
        if verdict is Verdict.NEAR_DUPLICATE:
            # the requests carry over to the near duplicate's digest
            page = self.state.get(request.url)
            if page is not None and page.digest is not None:
                self.state.set_links(request.url, page.digest, kept.links)
        if not kept.links:  # it made none: as without links
            if dropped:
                raise IgnoreRequest(f"crawldedup: {verdict.value}: {request.url}")
            return response
        self._inc("replayed")
        request.callback = functools.partial(self._replay, kept.links)
        if response.status == 304:  # not an error to HttpErrorMiddleware
            request.meta["handle_httpstatus_list"] = [304]
        return response

    def _replay(self, links: List[List[Any]], response: Any, **kwargs: Any) -> List[Any]:
        """The callback of a page not parsed again: its kept requests.  (A
        list, not a generator: Scrapy reads the source of every generator
        callback it is given, here a new one a page.)"""
        spider = self._spider(None)
        made = []
        for link in links:
            try:
                made.append(link_to_request(link, spider))
            except ValueError as exc:
                self._inc("errors")
                logger.warning("crawldedup: %s", exc)
        self._inc("links_replayed", len(made))
        return made

    def _capture_response(self, request: Any, response: Any, spider: Any) -> Any:
        """The response, its callback wrapped so that the requests it makes
        are kept with the digest of this version."""
        spider = self._spider(spider)
        page = self.state.get(request.url)
        if spider is None or page is None or page.digest is None:
            return response
        callback = request.callback
        if callback is None:
            callback = getattr(spider, "_parse", None) or spider.parse
        if hasattr(spider, "settings"):  # Scrapy's check of the callback, now the wrapper's
            warn_on_generator_with_return_value(spider, callback)
        body = headers = None
        if self.bodies:
            body = response.body
            kind = response.headers.get(b"Content-Type")
            headers = {} if kind is None else {"Content-Type": kind.decode("latin-1")}
        request.callback = functools.partial(self._capture, callback,
                                             _Page(request.url, page.digest, spider, body,
                                                   headers))
        return response

    def _capture(self, callback: Callable[..., Any], page: _Page, response: Any,
                 **kwargs: Any) -> Any:
        """The page's own callback; the requests it makes are kept once it
        has finished, as it made them (before the spider middlewares add
        their headers and meta)."""
        output = callback(response, **kwargs)
        if output is None:
            self._keep(page, [])
            return None
        if hasattr(output, "__aiter__"):
            return self._tee_async(output, page)
        if hasattr(output, "addCallback"):  # a Deferred (deprecated): not followed
            self._keep(page, None)
            return output
        if inspect.isawaitable(output):
            return self._await_then_keep(output, page)
        if isinstance(output, (dict, str, bytes)) or not hasattr(output, "__iter__"):
            self._keep(page, _links_of([output], page.spider))
            return output
        return self._tee(output, page)

    def _tee(self, output: Iterable[Any], page: _Page) -> Iterator[Any]:
        links: Optional[List[List[Any]]] = []
        for result in output:
            links = _add_link(links, result, page.spider)
            yield result
        self._keep(page, links)  # only once the callback has finished

    async def _tee_async(self, output: AsyncIterator[Any], page: _Page) -> AsyncIterator[Any]:
        links: Optional[List[List[Any]]] = []
        async for result in output:
            links = _add_link(links, result, page.spider)
            yield result
        self._keep(page, links)

    async def _await_then_keep(self, output: Any, page: _Page) -> Any:
        result = await output
        if result is None:
            self._keep(page, [])
            return None
        if isinstance(result, (dict, str, bytes)) or not hasattr(result, "__iter__"):
            result = [result]
        results = list(result)
        self._keep(page, _links_of(results, page.spider))
        return results

    def _keep(self, page: _Page, links: Optional[List[List[Any]]]) -> None:
        """Keep a page's requests (None: they cannot be kept, so the page is
        parsed again next time)."""
        self.state.set_links(page.url, page.digest, links,
                             page.body if links is not None else None, page.headers)
        self._inc("links_kept" if links is not None else "links_unkept")


def _add_link(links: Optional[List[List[Any]]], result: Any,
              spider: Any) -> Optional[List[List[Any]]]:
    """``links`` with ``result`` added when it is a request (None once a
    request cannot be kept)."""
    if links is not None and isinstance(result, Request):
        link = request_to_link(result, spider)
        if link is None:
            return None
        links.append(link)
    return links


def _links_of(results: Iterable[Any], spider: Any) -> Optional[List[List[Any]]]:
    links: Optional[List[List[Any]]] = []
    for result in results:
        links = _add_link(links, result, spider)
    return links


__all__ = ["RecrawlMiddleware", "head_pays", "HEAD_BYTES", "request_to_link",
           "link_to_request"]
