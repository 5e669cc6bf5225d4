"""URL deduplication and Bloom filter building on Spark."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, List, Optional, Tuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from crawldedup.bloom.filter import BloomFilter
from crawldedup.fingerprint import canonicalize_url, url_fingerprints
from crawldedup.spark._common import check_df, column_type

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["dedup_urls", "build_bloom", "url_keys"]

_CHUNK = 65536


def _check_flags(canonical: Any, strip_tracking: Any) -> None:
    if not isinstance(canonical, bool):
        raise TypeError(f"canonical must be a bool, not {type(canonical).__name__}")
    if not isinstance(strip_tracking, bool):
        raise TypeError(f"strip_tracking must be a bool, not {type(strip_tracking).__name__}")
    if strip_tracking and not canonical:
        raise ValueError("strip_tracking=True needs canonical=True")


def url_keys(urls: List[str], canonical: bool, strip_tracking: bool) -> List[bytes]:
    """The keys of ``crawldedup urls`` for urls: the URL itself (UTF-8), or
    with ``canonical`` its canonical form (without tracking parameters with
    ``strip_tracking``); a URL that cannot be canonicalized is its own key."""
    if not canonical:
        return [u.encode("utf-8", "surrogatepass") for u in urls]
    out = []
    for u in urls:
        try:
            out.append(canonicalize_url(u, strip_params=strip_tracking or None).encode("utf-8"))
        except ValueError:
            out.append(u.encode("utf-8", "surrogatepass"))
    return out


def _fingerprints(urls: List[str], canonical: bool, strip_tracking: bool) -> List[bytes]:
    """16-byte MD5 of each URL's key: url_fingerprint for canonical URLs."""
    if canonical and not strip_tracking:
        try:
            return url_fingerprints(urls)
        except ValueError:
            pass  # some URL cannot be canonicalized: one at a time below
    return [hashlib.md5(key).digest() for key in url_keys(urls, canonical, strip_tracking)]


def _fingerprint_udf(canonical: bool, strip_tracking: bool) -> Callable[[pd.Series], pd.Series]:
    import pandas as pd

    def fingerprints(urls: pd.Series) -> pd.Series:
        missing = urls.isna().to_numpy()
        values = urls.tolist()
        present = [v for v, m in zip(values, missing) if not m]
        fps = iter(_fingerprints(present, canonical, strip_tracking))
        return pd.Series([None if m else next(fps) for m in missing], dtype=object)
    # pandas_udf reads these hints; pandas is no module global here (the
    # workers of the other functions do without it)
    fingerprints.__annotations__ = {"urls": pd.Series, "return": pd.Series}
    return fingerprints


def dedup_urls(df: DataFrame, url_col: str, canonical: bool = True,
               strip_tracking: bool = False, *,
               fp_col: str = "url_fingerprint") -> DataFrame:
    """One row per URL of df.

    Each URL gets a 16-byte fingerprint, ``fp_col`` (BinaryType): with
    ``canonical`` the compiled :func:`crawldedup.url_fingerprint` (MD5 of the
    canonical URL; with ``strip_tracking`` without tracking parameters),
    otherwise the MD5 of the URL as given.  Rows are grouped by that column
    (the shuffle key is 16 bytes, whatever the URL's length) and the row with
    the smallest URL of each group is kept (the smallest row as a whole when
    the columns can be ordered).  A URL that cannot be canonicalized is its
    own key, as in ``crawldedup urls --canonical``.  Rows whose URL is null
    are kept as they are.  The result has df's columns and ``fp_col``.
    """
    # pyspark's stubs leave out this public re-export of pyspark.sql.pandas.functions.
    from pyspark.sql.functions import pandas_udf  # type: ignore[attr-defined]

    check_df(df)
    dtype = column_type(df, url_col, "url_col")
    if not isinstance(dtype, T.StringType):
        raise TypeError(f"url_col: column {url_col!r} is {dtype.simpleString()}, not a string")
    _check_flags(canonical, strip_tracking)
    if not isinstance(fp_col, str) or not fp_col or fp_col in df.columns:
        raise ValueError(f"fp_col must be a new column name, got {fp_col!r}")
    udf = pandas_udf(_fingerprint_udf(canonical, strip_tracking),
                     T.BinaryType())
    with_fp = df.withColumn(fp_col, udf(F.col(url_col)))
    others = [c for c in df.columns if c != url_col]
    orderable = all(_orderable(df.schema[c].dataType) for c in others)
    row = F.struct(F.col(url_col), *[F.col(c) for c in others])
    if orderable:
        best = F.min(row)
    else:
        best = F.min_by(row, F.col(url_col))
    kept = (with_fp.where(F.col(fp_col).isNotNull()).groupBy(fp_col)
            .agg(best.alias("_row"))
            .select(*[F.col("_row")[c].alias(c) for c in [url_col] + others], fp_col)
            .select(*df.columns, fp_col))
    return kept.unionByName(with_fp.where(F.col(fp_col).isNull()))


def _orderable(dtype: T.DataType) -> bool:
    if isinstance(dtype, (T.MapType, T.VariantType if hasattr(T, "VariantType") else T.MapType)):
        return False
    if isinstance(dtype, T.ArrayType):
        return _orderable(dtype.elementType)
    if isinstance(dtype, T.StructType):
        return all(_orderable(f.dataType) for f in dtype.fields)
    return True


def _partition_filter(params: Tuple[Any, ...], canonical: bool,
                      strip_tracking: bool) -> Callable[[Iterable[Any]], Iterator[bytes]]:
    capacity, error_rate, layout, seed = params

    def build(rows: Iterable[Any]) -> Iterator[bytes]:

        bf = BloomFilter(capacity, error_rate, layout=layout, seed=seed)
        chunk: List[str] = []
        for row in rows:
            url = row[0]
            if url is None:
                continue
            chunk.append(url)
            if len(chunk) >= _CHUNK:
                bf.add_many(url_keys(chunk, canonical, strip_tracking))
                chunk = []
        if chunk:
            bf.add_many(url_keys(chunk, canonical, strip_tracking))
        yield bf.to_bytes()
    return build


def _merge(a: bytes, b: bytes) -> bytes:

    left = BloomFilter.from_bytes(a)
    left |= BloomFilter.from_bytes(b)
    return left.to_bytes()


def build_bloom(df: DataFrame, url_col: str, capacity: int, error_rate: float = 0.01, *,
                layout: str = "standard", seed: int = 0, canonical: bool = False,
                strip_tracking: bool = False, depth: Optional[int] = 2) -> Any:
    """A :class:`crawldedup.BloomFilter` holding every URL of ``url_col``.

    Each partition builds a filter with the same parameters (``capacity``,
    ``error_rate``, ``layout``, ``seed``) and the filters are merged with
    ``|`` in a tree (``depth`` levels, on the executors), so the driver
    receives one filter.  Its bits are those of a filter built in one
    process from the same URLs, in any order; its ``insert_count`` is
    ``estimated_count()``, as after any ``|`` (a merged filter cannot know
    how many keys were new).  Keys are those of ``crawldedup urls``: the URL
    as UTF-8, or its canonical form with ``canonical`` (``--canonical``; and
    ``strip_tracking``, ``--strip-tracking``), so a saved result is a
    ``--state`` file for ``crawldedup urls`` with the same options.  Null
    URLs are skipped.
    """

    check_df(df)
    dtype = column_type(df, url_col, "url_col")
    if not isinstance(dtype, T.StringType):
        raise TypeError(f"url_col: column {url_col!r} is {dtype.simpleString()}, not a string")
    _check_flags(canonical, strip_tracking)
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise ValueError(f"depth must be an int >= 1, got {depth!r}")
    empty = BloomFilter(capacity, error_rate, layout=layout, seed=seed)  # checks the parameters
    params = (empty.capacity, empty.error_rate, empty.layout, empty.seed)
    rdd = df.select(url_col).rdd.mapPartitions(_partition_filter(params, canonical,
                                                                  strip_tracking))
    if rdd.getNumPartitions() == 0:
        merged = empty
    else:
        merged = BloomFilter.from_bytes(rdd.treeReduce(_merge, depth=depth or 2))
    # Normalize as any merge does (even of one partition), so the file is the
    # same whatever the partitioning.
    merged |= empty
    return merged
