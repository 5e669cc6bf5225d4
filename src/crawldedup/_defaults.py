"""The defaults that several parts of crawldedup share, in one place: the
library's classes, the command line and the Scrapy components read them
from here."""

#: A Bloom filter's false-positive rate when none is given: the ``error_rate``
#: of BloomFilter, ScalableBloomFilter, RotatingBloomFilter,
#: RedisBloomFilter and Spark's build_bloom, and ``crawldedup urls
#: --error-rate``.
ERROR_RATE = 0.01
#: The keys a new state is sized for when none is given: ``crawldedup urls
#: --capacity`` and the Scrapy duplicate filter's ``CRAWLDEDUP_CAPACITY``.
CAPACITY = 10_000_000
#: The Scrapy duplicate filter's ``CRAWLDEDUP_ERROR_RATE``: stricter than
#: ERROR_RATE, as a false positive there drops a request, and the page and
#: every page reached only through it go uncrawled.
SCRAPY_ERROR_RATE = 0.001
