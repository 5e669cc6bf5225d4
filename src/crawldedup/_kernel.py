"""The one place that knows there are two implementations of the kernels.

Wrappers import kernels from here.  The compiled ``crawldedup._core`` is used
unless ``CRAWLDEDUP_PURE_PYTHON=1`` (read once, at import), in which case the
pure-Python twin ``crawldedup._reference`` is.  Type checkers see the twin.
``impl`` is the chosen module itself, for kernels that only one wrapper
uses (``bloom_resp``, for the Redis Bloom filter).
"""

import os
from typing import TYPE_CHECKING

PURE_PYTHON = os.environ.get("CRAWLDEDUP_PURE_PYTHON", "") == "1"

# The names are those of the twin's __all__, which the core defines too
# (test_architecture checks it).
if TYPE_CHECKING or PURE_PYTHON:
    from crawldedup import _reference as _chosen
    from crawldedup._reference import *  # noqa: F403
else:
    from crawldedup import _core as _chosen  # type: ignore[no-redef]
    from crawldedup._core import *  # type: ignore[assignment]  # noqa: F403

impl = _chosen


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
    previous = _chosen._set_batch_threads(n)
    return previous or None
