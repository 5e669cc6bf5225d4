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
hash128 = impl.hash128
hash64 = impl.hash64
hash_indices = impl.hash_indices
nbytes_for = impl.nbytes_for
MAX_NUM_HASHES: int = impl.MAX_NUM_HASHES
MAX_SEED: int = impl.MAX_SEED
FingerprintTable = impl.FingerprintTable
fp_hash = impl.fp_hash
FP_MAX_DIGEST_SIZE: int = impl.FP_MAX_DIGEST_SIZE

__all__ = ["IMPLEMENTATION", "PURE_PYTHON", "BloomBits", "hash128", "hash64", "hash_indices",
           "nbytes_for", "MAX_NUM_HASHES", "MAX_SEED",
           "FingerprintTable", "fp_hash", "FP_MAX_DIGEST_SIZE"]
