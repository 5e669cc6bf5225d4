"""crawldedup: have I seen this URL, request or page before?

Stable MurmurHash3 hashing and Bloom filters with a compiled core, for crawlers
and corpus deduplication.

>>> import crawldedup
>>> bf = crawldedup.BloomFilter(capacity=1_000_000, error_rate=0.01)
>>> bf.add("https://example.com/")
True
>>> "https://example.com/" in bf
True
"""

from crawldedup._kernel import IMPLEMENTATION, hash64, hash128, hash_indices
from crawldedup.bloom import BloomFilter, optimal_parameters
from crawldedup.rotating import RotatingBloomFilter
from crawldedup.scalable import ScalableBloomFilter
from crawldedup.errors import CorruptFileError, CrawldedupError, IncompatibleFilterError
from crawldedup.errors import StoreUnavailableError
from crawldedup.fpset import FingerprintSet
from crawldedup.stores import SQLiteStore, SQLStore

from crawldedup._version import __version__

__all__ = [
    "IMPLEMENTATION",
    "BloomFilter",
    "FingerprintSet",
    "RotatingBloomFilter",
    "ScalableBloomFilter",
    "SQLiteStore",
    "SQLStore",
    "CorruptFileError",
    "CrawldedupError",
    "IncompatibleFilterError",
    "StoreUnavailableError",
    "hash64",
    "hash128",
    "hash_indices",
    "optimal_parameters",
    "__version__",
]
