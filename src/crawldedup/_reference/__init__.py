"""The pure-Python twin of ``crawldedup._core``: the specification, executable.

Every function and class here computes exactly what its compiled namesake
computes, bit for bit, in short and obviously correct Python.  The package uses
it instead of the core when ``CRAWLDEDUP_PURE_PYTHON=1`` (slow, but importable
without a compiler); the test suite runs every kernel test against both.

One module per part of the core, named as the part:

=============  ===========================  ==========================================
module         core part                    holds
=============  ===========================  ==========================================
``bloom``      ``src/_core_bloom.pxi``      key access, MurmurHash3, bit positions,
                                            ``BloomBits``, the batch switches
``simhash``    ``src/_core_simhash.pxi``    SimHash, Hamming distances, leonsim
``minhash``    ``src/_core_minhash.pxi``    MinHash signatures
``lsh``        ``src/_core_lsh.pxi``        ``BandTable``, band keys (MinHash LSH)
``index``      ``src/_core_index.pxi``      ``HammingIndex``
``url``        ``src/_core_url.pxi``        the URL fast path and fingerprints
``fpset``      ``src/_core_fpset.pxi``      ``FingerprintTable``, ``fp_hash``
``resp``       ``src/_core_resp.pxi``       ``bloom_resp`` (Redis BITFIELD commands)
``lines``      ``src/_core_lines.pxi``      ``split_lines``, ``line_hashes``
``jsonl``      ``src/_core_jsonl.pxi``      ``jsonl_documents`` (near-dups' reader)
``runs``       ``src/_core_runs.pxi``       ``run_find``, ``run_merge``, ``run_sort``
                                            (DiskStore's sorted runs)
=============  ===========================  ==========================================

This module exports what the compiled module exports to the package: the
names ``crawldedup._kernel`` takes, and the two that users of
``_kernel.impl`` reach (``bloom_resp``, ``_set_prefetching``).
"""

from crawldedup._reference.bloom import (
                                         MAX_NUM_HASHES,
                                         MAX_SEED,
                                         BloomBits,
                                         _set_batch_threads,
                                         _set_prefetching,
                                         check_keys,
                                         hash64,
                                         hash128,
                                         hash_indices,
                                         holds_objects,
                                         nbytes_for,
                                         objects_error,
)
from crawldedup._reference.fpset import FP_MAX_DIGEST_SIZE, FingerprintTable, fp_hash
from crawldedup._reference.index import MAX_HAMMING_K, HammingIndex, hamming_blocks
from crawldedup._reference.jsonl import jsonl_documents
from crawldedup._reference.lines import (
                                         gather_spans,
                                         line_hashes,
                                         line_spans,
                                         span_digests,
                                         span_hashes,
                                         span_key_hashes,
                                         split_lines,
)
from crawldedup._reference.lsh import BandTable, lsh_agree, lsh_keys
from crawldedup._reference.minhash import (
                                         minhash_hashes,
                                         minhash_keys,
                                         minhash_sha1,
                                         minhash_text,
                                         minhash_texts,
                                         minhash_version,
)
from crawldedup._reference.resp import bloom_resp
from crawldedup._reference.runs import run_find, run_merge, run_sort
from crawldedup._reference.simhash import (
                                         MAX_NGRAM,
                                         TOKENIZER_AUTO,
                                         TOKENIZER_CHARS,
                                         TOKENIZER_WORDS,
                                         hamming_many,
                                         leonsim_features,
                                         leonsim_text,
                                         lower_text,
                                         md5_digest,
                                         simhash_hashes,
                                         simhash_text,
                                         simhash_texts,
)
from crawldedup._reference.url import (
                                         canonicalize_url_fast,
                                         canonicalize_urls_fast,
                                         request_fingerprint_fast,
                                         request_fingerprints_fast,
                                         url_digests_fast,
                                         url_digests_packed,
                                         url_fingerprint_fast,
                                         url_fingerprints_fast,
)

IMPLEMENTATION = "reference"

__all__ = [
    "IMPLEMENTATION",
    # bloom (_core_bloom.pxi)
    "BloomBits", "check_keys", "hash128", "hash64", "hash_indices", "nbytes_for",
    "holds_objects", "objects_error",
    "MAX_NUM_HASHES", "MAX_SEED", "_set_batch_threads", "_set_prefetching",
    # simhash
    "TOKENIZER_AUTO", "TOKENIZER_WORDS", "TOKENIZER_CHARS", "MAX_NGRAM", "simhash_text",
    "simhash_texts", "simhash_hashes", "hamming_many", "md5_digest", "lower_text",
    "leonsim_text", "leonsim_features",
    # minhash
    "minhash_text", "minhash_texts", "minhash_keys", "minhash_sha1", "minhash_hashes",
    "minhash_version",
    # lsh
    "BandTable", "lsh_keys", "lsh_agree",
    # index
    "HammingIndex", "MAX_HAMMING_K", "hamming_blocks",
    # url
    "canonicalize_url_fast", "url_fingerprint_fast", "request_fingerprint_fast",
    "url_fingerprints_fast", "request_fingerprints_fast", "canonicalize_urls_fast",
    "url_digests_fast", "url_digests_packed",
    # fpset
    "FingerprintTable", "fp_hash", "FP_MAX_DIGEST_SIZE",
    # resp, lines
    "bloom_resp", "split_lines", "line_hashes", "line_spans", "span_digests", "gather_spans",
    "span_hashes", "span_key_hashes",
    # jsonl
    "jsonl_documents",
    # runs
    "run_find",
    "run_merge",
    "run_sort",
]
