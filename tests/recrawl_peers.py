"""Adapters for the re-crawl benchmark's peers (benchmarks/recrawl_bytes.py).

scrapy-deltafetch 2.1.0 defines only a synchronous process_spider_output,
and Scrapy 2.13 and later refuse to start a crawl with such a spider
middleware ("doesn't support asynchronous spider output").
:class:`DeltaFetchAsync` adds the asynchronous twin, which runs the peer's
own method on each result, so the peer decides exactly as it would.
"""

from scrapy_deltafetch import DeltaFetch


class DeltaFetchAsync(DeltaFetch):
    async def process_spider_output_async(self, response, result, spider):
        async for each in result:
            for out in self.process_spider_output(response, [each], spider):
                yield out
