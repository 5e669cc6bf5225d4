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

from typing import TYPE_CHECKING, Dict

from crawldedup import _moved
from crawldedup._kernel import IMPLEMENTATION, hash64, hash128, hash_indices, set_threads
from crawldedup._lazy import lazy_names
from crawldedup._version import __version__
from crawldedup.errors import (
    CorruptDatabaseError,
    CorruptFileError,
    CorruptStateError,
    CrawldedupError,
    IncompatibleFilterError,
    StoreLockedError,
    StoreUnavailableError,
)
from crawldedup.near.simhash import hamming, hamming_many, simhash, simhash_features, simhash_many

_moved.install()  # the module paths of earlier releases (pickles name them)

# The other public names, each from the module that defines it, imported when
# first used (PEP 562): the command line's Bloom mode never loads the URL
# canonicalization (w3lib), the index or the stores it does not use.
_HOMES: Dict[str, str] = {
    "BloomFilter": "crawldedup.bloom.filter",
    "optimal_parameters": "crawldedup.bloom.filter",
    "DEFAULT_TRACKING_PARAMS": "crawldedup.fingerprint",
    "CanonicalUrl": "crawldedup.fingerprint",
    "UrlRule": "crawldedup.fingerprint",
    "UrlRules": "crawldedup.fingerprint",
    "canonicalize_url": "crawldedup.fingerprint",
    "canonicalize_urls": "crawldedup.fingerprint",
    "request_fingerprint": "crawldedup.fingerprint",
    "request_fingerprints": "crawldedup.fingerprint",
    "url_fingerprint": "crawldedup.fingerprint",
    "url_fingerprints": "crawldedup.fingerprint",
    "FingerprintSet": "crawldedup.exact.fpset",
    "DiskStore": "crawldedup.exact.disk",
    "SimhashIndex": "crawldedup.near.index",
    "MinHashIndex": "crawldedup.near.lsh",
    "minhash": "crawldedup.near.minhash",
    "minhash_many": "crawldedup.near.minhash",
    "jaccard": "crawldedup.near.minhash",
    "NearDuplicates": "crawldedup.near.stream",
    "RotatingBloomFilter": "crawldedup.bloom.rotating",
    "ScalableBloomFilter": "crawldedup.bloom.scalable",
    "SQLiteStore": "crawldedup.exact.stores",
    "SQLStore": "crawldedup.exact.stores",
}

if TYPE_CHECKING:
    from crawldedup.bloom.filter import BloomFilter, optimal_parameters
    from crawldedup.bloom.rotating import RotatingBloomFilter
    from crawldedup.bloom.scalable import ScalableBloomFilter
    from crawldedup.exact.disk import DiskStore
    from crawldedup.exact.fpset import FingerprintSet
    from crawldedup.exact.stores import SQLiteStore, SQLStore
    from crawldedup.fingerprint import (
        DEFAULT_TRACKING_PARAMS,
        CanonicalUrl,
        UrlRule,
        UrlRules,
        canonicalize_url,
        canonicalize_urls,
        request_fingerprint,
        request_fingerprints,
        url_fingerprint,
        url_fingerprints,
    )
    from crawldedup.near.index import SimhashIndex
    from crawldedup.near.lsh import MinHashIndex
    from crawldedup.near.minhash import jaccard, minhash, minhash_many
    from crawldedup.near.stream import NearDuplicates


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
    "DiskStore",
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
    "MinHashIndex",
    "NearDuplicates",
    "SimhashIndex",
    "hamming",
    "hamming_many",
    "jaccard",
    "minhash",
    "minhash_many",
    "simhash",
    "simhash_features",
    "simhash_many",
    # hashing
    "hash64",
    "hash128",
    "hash_indices",
    # errors
    "CorruptDatabaseError",
    "CorruptFileError",
    "CorruptStateError",
    "CrawldedupError",
    "IncompatibleFilterError",
    "StoreLockedError",
    "StoreUnavailableError",
    "__version__",
]

__getattr__, __dir__ = lazy_names(__name__, _HOMES, __all__)
