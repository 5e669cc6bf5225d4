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
from crawldedup.simhash import hamming, hamming_many, simhash, simhash_features, simhash_many
from crawldedup.index import SimhashIndex
from crawldedup.fingerprint import (DEFAULT_TRACKING_PARAMS, CanonicalUrl, UrlRule, UrlRules,
                                     canonicalize_url, request_fingerprint, request_fingerprints,
                                     url_fingerprint, url_fingerprints)
from crawldedup.errors import CorruptFileError, CrawldedupError, IncompatibleFilterError

from crawldedup._version import __version__

__all__ = [
    "IMPLEMENTATION",
    "BloomFilter",
    "RotatingBloomFilter",
    "ScalableBloomFilter",
    "SimhashIndex",
    "CorruptFileError",
    "CrawldedupError",
    "IncompatibleFilterError",
    "DEFAULT_TRACKING_PARAMS",
    "CanonicalUrl",
    "UrlRule",
    "UrlRules",
    "canonicalize_url",
    "hash64",
    "hash128",
    "hash_indices",
    "hamming",
    "hamming_many",
    "optimal_parameters",
    "simhash",
    "simhash_features",
    "simhash_many",
    "request_fingerprint",
    "request_fingerprints",
    "url_fingerprint",
    "url_fingerprints",
    "__version__",
]
