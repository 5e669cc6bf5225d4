"""Incremental re-crawling: HTTP validators, change verdicts and a schedule.

* :class:`RecrawlState` keeps, per canonical URL, the validators (ETag,
  Last-Modified, Content-Length), a content digest, a SimHash, the fetch
  history and a change-rate estimate; ``record`` returns a :class:`Verdict`
  and ``due`` says what to fetch next under a budget.
* Policies: :class:`ChangeRatePolicy` (Cho & Garcia-Molina's estimator and
  freshness-optimal allocation, the default) and :class:`NutchPolicy`
  (Nutch's AdaptiveFetchSchedule).
* Stores: :class:`SQLiteRecrawlStore` (embedded default) and
  :class:`RedisRecrawlStore`.

See docs/recrawl.md.
"""

from typing import TYPE_CHECKING, Dict

from crawldedup._lazy import lazy_names

# Imported on first use (PEP 562), so that the command line, which lists the
# re-crawl subcommands, does not load SQLite and the URL canonicalization to
# run another command.
_HOMES: Dict[str, str] = {
    "ChangeRatePolicy": "crawldedup.recrawl.schedule",
    "NutchPolicy": "crawldedup.recrawl.schedule",
    "PageLinks": "crawldedup.recrawl.links",
    "PageState": "crawldedup.recrawl.state",
    "RecrawlState": "crawldedup.recrawl.state",
    "Verdict": "crawldedup.recrawl.state",
    "parse_http_date": "crawldedup.recrawl.state",
    "RecrawlStore": "crawldedup.recrawl.stores",
    "RedisRecrawlStore": "crawldedup.recrawl.redis_store",
    "SQLiteRecrawlStore": "crawldedup.recrawl.stores",
    "open_recrawl_store": "crawldedup.recrawl.stores",
}

if TYPE_CHECKING:
    from crawldedup.recrawl.links import PageLinks
    from crawldedup.recrawl.redis_store import RedisRecrawlStore
    from crawldedup.recrawl.schedule import ChangeRatePolicy, NutchPolicy
    from crawldedup.recrawl.state import PageState, RecrawlState, Verdict, parse_http_date
    from crawldedup.recrawl.stores import RecrawlStore, SQLiteRecrawlStore, open_recrawl_store


__all__ = ["RecrawlState", "Verdict", "PageState", "PageLinks", "ChangeRatePolicy", "NutchPolicy",
           "RecrawlStore", "SQLiteRecrawlStore", "RedisRecrawlStore", "open_recrawl_store",
           "parse_http_date"]

__getattr__, __dir__ = lazy_names(__name__, _HOMES, __all__)
