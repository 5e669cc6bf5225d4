"""crawldedup on Apache Spark: SimHash, exact near-duplicate pairs, clusters,
URL deduplication, Bloom filter building and WARC/WET input over DataFrames.

``pip install 'crawldedup[spark]'`` brings pyspark, pyarrow and pandas (and
``crawldedup[warc]`` the WARC reader).  Spark does the scheduling, the
shuffles and the fault tolerance; crawldedup's compiled kernels run inside
Arrow-batched pandas UDFs and ``mapInPandas`` over whole partitions, so no
row goes through a per-row Python function.

Fingerprints are stored as Spark ``LongType`` (signed 64-bit): the column
holds the same 64 bits as the unsigned fingerprint, so a fingerprint of
2**63 or more appears as that value minus 2**64 (two's complement).
:func:`to_signed` and :func:`to_unsigned` convert one value; on numpy arrays
``fps.view(np.int64)`` and ``values.view(np.uint64)`` do the same.  See
docs/spark.md.
"""

from __future__ import annotations

try:
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"crawldedup.spark needs pyspark, pyarrow and pandas ({exc}): "
                      f"pip install 'crawldedup[spark]'") from exc

from crawldedup.spark._components import clusters
from crawldedup.spark._near import (near_duplicates, simhash_column, to_signed,
                                    to_unsigned)
from crawldedup.spark._urls import build_bloom, dedup_urls
from crawldedup.spark._warc import read_warc

__all__ = ["build_bloom", "clusters", "dedup_urls", "near_duplicates", "read_warc",
           "simhash_column", "to_signed", "to_unsigned"]
