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

from crawldedup.recrawl.schedule import ChangeRatePolicy, NutchPolicy
from crawldedup.recrawl.state import PageState, RecrawlState, Verdict, parse_http_date
from crawldedup.recrawl.stores import (
                                       RecrawlStore,
                                       RedisRecrawlStore,
                                       SQLiteRecrawlStore,
                                       open_recrawl_store,
)

__all__ = ["RecrawlState", "Verdict", "PageState", "ChangeRatePolicy", "NutchPolicy",
           "RecrawlStore", "SQLiteRecrawlStore", "RedisRecrawlStore", "open_recrawl_store",
           "parse_http_date"]
