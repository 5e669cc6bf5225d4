"""The one place that knows there are two implementations of the kernels.

Wrappers import kernels from here.  The compiled ``crawldedup._core`` is used
unless ``CRAWLDEDUP_PURE_PYTHON=1`` (read once, at import), in which case the
pure-Python twin ``crawldedup._reference`` is.  Type checkers see the twin.
"""

import os
from typing import TYPE_CHECKING

PURE_PYTHON = os.environ.get("CRAWLDEDUP_PURE_PYTHON", "") == "1"

if TYPE_CHECKING or PURE_PYTHON:
    from crawldedup import _reference as impl
else:
    from crawldedup import _core as impl  # type: ignore[no-redef]

IMPLEMENTATION: str = impl.IMPLEMENTATION
BloomBits = impl.BloomBits
check_keys = impl.check_keys
holds_objects = impl.holds_objects
objects_error = impl.objects_error
hash128 = impl.hash128
hash64 = impl.hash64
hash_indices = impl.hash_indices
nbytes_for = impl.nbytes_for
MAX_NUM_HASHES: int = impl.MAX_NUM_HASHES
MAX_SEED: int = impl.MAX_SEED
# simhash
TOKENIZER_AUTO: int = impl.TOKENIZER_AUTO
TOKENIZER_WORDS: int = impl.TOKENIZER_WORDS
TOKENIZER_CHARS: int = impl.TOKENIZER_CHARS
MAX_NGRAM: int = impl.MAX_NGRAM
simhash_text = impl.simhash_text
simhash_texts = impl.simhash_texts
simhash_hashes = impl.simhash_hashes
hamming_many = impl.hamming_many
md5_digest = impl.md5_digest
lower_text = impl.lower_text
leonsim_text = impl.leonsim_text
leonsim_features = impl.leonsim_features

# threads of the batch calls
_set_batch_threads = impl._set_batch_threads


def set_threads(n: "int | None" = None) -> "int | None":
    """Cap the threads that crawldedup's large batch calls start.

    ``contains_many`` of 32,768 keys or more (Bloom filters) and
    ``SimhashIndex.query_many`` of 8,192 queries or more cut the batch into
    slices searched at once on several threads: by default as many as the
    CPUs the process may use.  ``set_threads(1)`` keeps every batch on the
    calling thread (for one crawler process per core, say), ``set_threads(n)``
    allows at most n, ``set_threads(None)`` restores the default.  Results
    never depend on it.  Returns the previous setting.
    """
    if n is None:
        n = 0
    elif isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"threads must be None or an int >= 1, got {n!r}")
    previous = _set_batch_threads(n)
    return previous or None


# index
HammingIndex = impl.HammingIndex
MAX_HAMMING_K: int = impl.MAX_HAMMING_K
hamming_blocks = impl.hamming_blocks

__all__ = ["IMPLEMENTATION", "PURE_PYTHON", "BloomBits", "hash128", "hash64", "hash_indices",
           "nbytes_for", "MAX_NUM_HASHES", "MAX_SEED",
           "TOKENIZER_AUTO", "TOKENIZER_WORDS", "TOKENIZER_CHARS", "MAX_NGRAM", "simhash_text",
           "simhash_texts", "simhash_hashes", "hamming_many", "md5_digest", "lower_text",
           "leonsim_text", "leonsim_features", "HammingIndex", "MAX_HAMMING_K", "hamming_blocks"]

# ---- url ----
canonicalize_url_fast = impl.canonicalize_url_fast
url_fingerprint_fast = impl.url_fingerprint_fast
request_fingerprint_fast = impl.request_fingerprint_fast
url_fingerprints_fast = impl.url_fingerprints_fast
request_fingerprints_fast = impl.request_fingerprints_fast
canonicalize_urls_fast = impl.canonicalize_urls_fast
url_digests_fast = impl.url_digests_fast
url_digests_packed = impl.url_digests_packed
__all__ += ["canonicalize_url_fast", "url_fingerprint_fast", "request_fingerprint_fast",
            "url_fingerprints_fast", "request_fingerprints_fast", "canonicalize_urls_fast",
            "url_digests_fast", "url_digests_packed"]

# ---- fpset ----
FingerprintTable = impl.FingerprintTable
fp_hash = impl.fp_hash
FP_MAX_DIGEST_SIZE: int = impl.FP_MAX_DIGEST_SIZE
__all__ += ["FingerprintTable", "fp_hash", "FP_MAX_DIGEST_SIZE"]

# ---- lines ----
split_lines = impl.split_lines
line_hashes = impl.line_hashes
line_spans = impl.line_spans
span_digests = impl.span_digests
gather_spans = impl.gather_spans
span_hashes = impl.span_hashes
span_key_hashes = impl.span_key_hashes
__all__ += ["split_lines", "line_hashes", "line_spans", "span_digests", "gather_spans",
            "span_hashes", "span_key_hashes"]
# The chosen module itself, for kernels only one wrapper uses (redis.bloom).
__all__ += ["impl"]
