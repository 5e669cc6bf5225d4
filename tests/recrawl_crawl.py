"""One Scrapy crawl of a list of URLs, run as a process by the re-crawl tests
(a Twisted reactor cannot be started twice in one process).

    python recrawl_crawl.py '{"urls": [...], "settings": {...}}'

prints {"parsed": [[url, verdict], ...], "stats": {...}} as JSON.
"""

import json
import sys

import scrapy
from scrapy.crawler import CrawlerProcess


def main() -> None:
    config = json.loads(sys.argv[1])
    parsed = []
    stats = {}

    class Pages(scrapy.Spider):
        name = "pages"
        start_urls = config["urls"]

        def parse(self, response):
            parsed.append([response.url, response.meta.get("crawldedup_verdict")])

        def closed(self, reason):
            stats.update({k: v for k, v in self.crawler.stats.get_stats().items()
                          if k.startswith(("crawldedup/", "downloader/response_status"))})

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
    process.crawl(Pages)
    process.start()
    print(json.dumps({"parsed": sorted(parsed), "stats": stats}))


if __name__ == "__main__":
    main()
