"""One Scrapy crawl of a list of URLs, run as a process by the re-crawl tests
(a Twisted reactor cannot be started twice in one process).

    python recrawl_crawl.py '{"urls": [...], "settings": {...}}'

prints {"parsed": [[url, verdict], ...], "versions": {url: "v2", ...},
"stats": {...}} as JSON: the pages that reached the callback, their verdicts,
and the version each showed (from the benchmark pages' ``<h1>Page N vK</h1>``).

Options of the config besides urls and settings: ``follow`` (the start URLs
are index pages: their links are followed, and they are not parsed
themselves), ``crawl`` (the usual link-following spider: every page is
parsed and every link on it followed, so the pages are discovered from the
start URLs), ``callback`` with ``crawl`` (``"async"``: the callback is an
asynchronous generator; ``"lambda"``: the links are followed with a lambda
as their callback, which a re-crawl state cannot keep; ``"crawlspider"``:
a CrawlSpider whose one rule follows every link) and ``items`` (the
callback yields an item a page, which scrapy-deltafetch needs to remember a
page).
"""

import json
import re
import sys

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule


def main() -> None:
    config = json.loads(sys.argv[1])
    parsed = []
    versions = {}
    stats = {}
    finished = []
    follow = config.get("follow", False)
    crawl = config.get("crawl", False)
    kind = config.get("callback", "sync")
    items = config.get("items", False)
    title = re.compile(rb"<h1>Page \d+ (v\d+)</h1>")

    class Pages(scrapy.Spider):
        name = "pages"
        start_urls = config["urls"]

        def parse(self, response):
            yield from self.parse_page(response)

        async def parse_async(self, response):
            for result in self.parse_page(response):
                yield result

        def parse_page(self, response):
            if follow and response.url in config["urls"]:
                for href in response.css("a::attr(href)").getall():
                    yield response.follow(href, callback=self.parse)
                return
            parsed.append([response.url, response.meta.get("crawldedup_verdict")])
            found = title.search(response.body)
            versions[response.url] = found.group(1).decode() if found else None
            if items:
                yield {"url": response.url}
            if crawl:
                callback = {"sync": self.parse, "async": self.parse_async,
                            "lambda": lambda r: self.parse(r)}[kind]
                for href in response.css("a::attr(href)").getall():
                    yield response.follow(href, callback=callback)

        def closed(self, reason):
            finished.append(reason)
            stats.update({k: v for k, v in self.crawler.stats.get_stats().items()
                          if k.startswith(("crawldedup/", "downloader/response_status"))})

    class Rules(CrawlSpider):
        name = "rules"
        start_urls = config["urls"]
        rules = (Rule(LinkExtractor(), callback="parse_item", follow=True),)

        def parse_start_url(self, response):
            return self.parse_item(response)

        def parse_item(self, response):
            parsed.append([response.url, response.meta.get("crawldedup_verdict")])
            found = title.search(response.body)
            versions[response.url] = found.group(1).decode() if found else None
            return []

        closed = Pages.closed

    settings = {
        "LOG_LEVEL": "ERROR",
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "RETRY_ENABLED": False,
        "COOKIES_ENABLED": False,
        "CONCURRENT_REQUESTS": 8,
        "DOWNLOAD_DELAY": 0,
        **config["settings"],
    }
    process = CrawlerProcess(settings)
    process.crawl(Rules if crawl and kind == "crawlspider" else Pages)
    process.start()
    if not finished:  # Scrapy logs why a crawl did not start, and exits 0
        sys.exit("the crawl did not run (see Scrapy's log above)")
    print(json.dumps({"parsed": sorted(parsed), "versions": versions, "stats": stats}))


if __name__ == "__main__":
    main()
