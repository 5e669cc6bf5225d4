"""crawldedup on Apache Spark: SimHash and exact near-duplicate pairs, MinHash
and LSH pairs, clusters, URL deduplication, Bloom filter building and
WARC/WET input over DataFrames.

``pip install 'crawldedup[spark]'`` brings pyspark, pyarrow and pandas (and
``crawldedup[warc]`` the WARC reader).  Spark does the scheduling, the
shuffles and the fault tolerance; crawldedup's compiled kernels run inside
Arrow-batched pandas UDFs and ``mapInArrow`` over whole partitions, so no
row goes through a per-row Python function.

Fingerprints are stored as Spark ``LongType`` (signed 64-bit): the column
holds the same 64 bits as the unsigned fingerprint, so a fingerprint of
2**63 or more appears as that value minus 2**64 (two's complement).
:func:`to_signed` and :func:`to_unsigned` convert one value; on numpy arrays
``fps.view(np.int64)`` and ``values.view(np.uint64)`` do the same.  See
docs/spark.md.

Each function first checks, once per session, that the Python Spark runs
for its workers can import what they need (:func:`check_workers`), and
raises :class:`WorkerPythonError` naming the fix (``PYSPARK_PYTHON``)
before any job is sent.
"""

from __future__ import annotations

import importlib.util

from crawldedup._extras import install_hint

# Found, not imported: the Python workers of a job import this package to run
# its functions, and those that need no pandas should not pay a second for it.
if any(importlib.util.find_spec(name) is None for name in ("pyspark", "pyarrow", "pandas")):
    raise ImportError(  # pragma: no cover - depends on the environment
        "crawldedup.spark needs pyspark, pyarrow and pandas (missing: " + ", ".join(
            n for n in ("pyspark", "pyarrow", "pandas") if importlib.util.find_spec(n) is None)
        + "): " + install_hint("spark"))

from crawldedup.spark._common import WorkerPythonError, check_workers
from crawldedup.spark._components import clusters
from crawldedup.spark._jsonl import simhash_jsonl
from crawldedup.spark._minhash import minhash_column, minhash_near_duplicates
from crawldedup.spark._near import near_duplicates, simhash_column, to_signed, to_unsigned
from crawldedup.spark._urls import build_bloom, dedup_urls
from crawldedup.spark._warc import read_warc

__all__ = ["WorkerPythonError", "build_bloom", "check_workers", "clusters", "dedup_urls",
           "minhash_column", "minhash_near_duplicates", "near_duplicates", "read_warc",
           "simhash_column", "simhash_jsonl", "to_signed", "to_unsigned"]
