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

from crawldedup._kernel import IMPLEMENTATION, hash64, hash128, hash_indices, set_threads
from crawldedup.bloom import BloomFilter, optimal_parameters
from crawldedup.errors import (CorruptFileError, CrawldedupError, IncompatibleFilterError,
                               StoreUnavailableError)
from crawldedup.fingerprint import (DEFAULT_TRACKING_PARAMS, CanonicalUrl, UrlRule, UrlRules,
                                    canonicalize_url, canonicalize_urls, request_fingerprint,
                                    request_fingerprints,
                                    url_fingerprint, url_fingerprints)
from crawldedup.fpset import FingerprintSet
from crawldedup.index import SimhashIndex
from crawldedup.rotating import RotatingBloomFilter
from crawldedup.scalable import ScalableBloomFilter
from crawldedup.simhash import hamming, hamming_many, simhash, simhash_features, simhash_many
from crawldedup.stores import SQLiteStore, SQLStore

from crawldedup._version import __version__

__all__ = [
    "IMPLEMENTATION",
    "set_threads",
    # Bloom filters
    "BloomFilter",
    "RotatingBloomFilter",
    "ScalableBloomFilter",
    "optimal_parameters",
    # exact fingerprints
    "DEFAULT_TRACKING_PARAMS",
    "CanonicalUrl",
    "FingerprintSet",
    "SQLiteStore",
    "SQLStore",
    "UrlRule",
    "UrlRules",
    "canonicalize_url",
    "canonicalize_urls",
    "request_fingerprint",
    "request_fingerprints",
    "url_fingerprint",
    "url_fingerprints",
    # near duplicates
    "SimhashIndex",
    "hamming",
    "hamming_many",
    "simhash",
    "simhash_features",
    "simhash_many",
    # hashing
    "hash64",
    "hash128",
    "hash_indices",
    # errors
    "CorruptFileError",
    "CrawldedupError",
    "IncompatibleFilterError",
    "StoreUnavailableError",
    "__version__",
]
