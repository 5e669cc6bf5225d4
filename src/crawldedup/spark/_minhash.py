"""MinHash signatures and LSH near-duplicate pairs on Spark.

A signature is stored as a BinaryType value: its num_perm uint32 values,
little-endian (4 * num_perm bytes), the values of
:func:`crawldedup.minhash`.

minhash_near_duplicates runs in two shuffles, as near_duplicates does for
SimHash:

1. identical signatures: the rows are partitioned by signature and each
   group of equal signatures gets its smallest id as representative.  Every
   other member is linked to it by one (representative, member, 1.0) pair;
2. bands: each representative goes out b times, keyed by (band number,
   band key) -- the band keys of MinHashIndex.  Two signatures whose values
   in some band are equal meet in the partition of that band's key.  Inside
   a partition, the rows of each key are compared band value by band value
   (a collision of two keys makes no pair), and a pair is kept only by the
   first band whose values the two share, so each pair comes out of exactly
   one partition and no global distinct is needed.  Its estimated Jaccard
   similarity is computed there, and pairs below ``min_jaccard`` dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Tuple

import numpy as np
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from crawldedup._kernel import lsh_keys
from crawldedup.near.lsh import lsh_parameters, min_agree
from crawldedup.near.minhash import EMPTY_VALUE, _num_perm, minhash_many
from crawldedup.spark._common import check_df, check_id_type, check_partitions, column_type

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = ["minhash_column", "minhash_near_duplicates"]


def _minhash_udf(num_perm: int, shingle: Any, tokenizer: Any,
                 seed: int) -> Callable[[pd.Series], pd.Series]:
    import pandas as pd

    def signatures(texts: pd.Series) -> pd.Series:
        missing = texts.isna().to_numpy()
        values = texts.tolist()
        if missing.any():
            values = ["" if m else v for v, m in zip(values, missing)]
        sigs = minhash_many(values, num_perm, shingle=shingle, tokenizer=tokenizer, seed=seed)
        raw = sigs.astype("<u4", copy=False)
        out = [row.tobytes() for row in raw]
        if missing.any():
            out = [None if m else v for v, m in zip(out, missing)]
        return pd.Series(out, dtype=object)
    signatures.__annotations__ = {"texts": pd.Series, "return": pd.Series}
    return signatures


def minhash_column(df: DataFrame, text_col: str, out_col: str = "minhash", *,
                   num_perm: int = 128, shingle: Any = 5, tokenizer: Any = "auto",
                   seed: int = 1) -> DataFrame:
    """df with a column ``out_col`` (BinaryType) holding the MinHash
    signature of ``text_col``: the values of :func:`crawldedup.minhash` with
    the same ``num_perm``, ``shingle``, ``tokenizer`` and ``seed``, as
    ``num_perm`` little-endian uint32 (``np.frombuffer(value, "<u4")``).  A
    null text gives a null signature.

    The signatures are computed by :func:`crawldedup.minhash_many` on Arrow
    batches (a pandas UDF), with the GIL released for each batch.
    """
    from pyspark.sql.functions import pandas_udf  # type: ignore[attr-defined]

    check_df(df)
    dtype = column_type(df, text_col, "text_col")
    if not isinstance(dtype, T.StringType):
        raise TypeError(f"text_col: column {text_col!r} is {dtype.simpleString()}, not a string")
    if not isinstance(out_col, str) or not out_col:
        raise ValueError(f"out_col must be a non-empty column name, got {out_col!r}")
    n = _num_perm(num_perm)
    minhash_many(["check the options"], n, shingle=shingle, tokenizer=tokenizer, seed=seed)
    udf = pandas_udf(_minhash_udf(n, shingle, tokenizer, seed), T.BinaryType())
    return df.withColumn(out_col, udf(F.col(text_col)))


def _signatures(values: Any, num_perm: int) -> np.ndarray:
    """The (n, num_perm) uint32 signatures of a column of binary values."""
    raw = b"".join(values)
    return np.frombuffer(raw, dtype="<u4").astype(np.uint32).reshape(-1, num_perm)


def _band_rows(num_perm: int, bands: int,
               rows: int) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function that sends each row out once per band, keyed
    by (band number, band key)."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        for batch in batches:
            if not batch.num_rows:
                continue
            sig_col = batch.column("sig")
            sigs = _signatures(sig_col.to_pylist(), num_perm)
            keys = lsh_keys(sigs, bands, rows).view(np.int64)       # (n, bands)
            n = batch.num_rows
            band = np.tile(np.arange(bands, dtype=np.int32), n)
            take = np.repeat(np.arange(n), bands)
            yield pa.RecordBatch.from_arrays(
                [pa.array(band), pa.array(keys.reshape(-1)),
                 batch.column("id").take(pa.array(take)), sig_col.take(pa.array(take))],
                ["band", "key", "id", "sig"])
    return run


def _bucket_pairs(num_perm: int, bands: int, rows: int,
                  min_agree: int) -> Callable[[Iterator[pa.RecordBatch]],
                                              Iterator[pa.RecordBatch]]:
    """The mapInArrow function of the band stage (whole partitions)."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        full = [b for b in batches if b.num_rows]
        if not full:
            return
        table = pa.Table.from_batches(full)
        band = table.column("band").to_numpy()
        keys = table.column("key").to_numpy()
        ids = table.column("id").to_numpy(zero_copy_only=False)
        sigs = _signatures(table.column("sig").to_pylist(), num_perm)
        del table
        order = np.lexsort((keys, band))
        band, keys = band[order], keys[order]
        starts = np.flatnonzero(np.concatenate([[True], (band[1:] != band[:-1])
                                                | (keys[1:] != keys[:-1])]))
        ends = np.append(starts[1:], len(order))
        out_a, out_b, out_j = [], [], []
        by_band = sigs.reshape(len(sigs), -1)[:, :bands * rows].reshape(len(sigs), bands, rows)
        for s, e in zip(starts.tolist(), ends.tolist()):
            if e - s < 2:
                continue
            j = int(band[s])
            members = order[s:e]
            x, y = np.triu_indices(len(members), 1)
            ma, mb = members[x], members[y]
            equal = (by_band[ma] == by_band[mb]).all(axis=2)         # (pairs, bands)
            # the values of this band, and of no band before it, are shared
            keep = equal[:, j] & ~equal[:, :j].any(axis=1)
            agree = np.count_nonzero(sigs[ma] == sigs[mb], axis=1)
            keep &= agree >= min_agree
            if not keep.any():
                continue
            ia, ib = ids[ma[keep]], ids[mb[keep]]
            swap = ib < ia
            out_a.append(np.where(swap, ib, ia))
            out_b.append(np.where(swap, ia, ib))
            out_j.append(agree[keep] / num_perm)
        if out_a:
            yield pa.RecordBatch.from_arrays(
                [pa.array(np.concatenate(out_a)), pa.array(np.concatenate(out_b)),
                 pa.array(np.concatenate(out_j))], ["a", "b", "jaccard"])
    return run


def minhash_near_duplicates(df: DataFrame, id_col: str, sig_col: str, threshold: float = 0.8,
                            *, num_perm: int = 128, bands: Optional[int] = None,
                            rows: Optional[int] = None,
                            weights: Tuple[float, float] = (0.5, 0.5),
                            min_jaccard: Optional[float] = None,
                            num_partitions: Optional[int] = None, check_ids: bool = True,
                            include_featureless: bool = False) -> DataFrame:
    """Every pair of rows whose MinHash signatures share a band's values and
    whose estimated Jaccard similarity is at least ``min_jaccard`` (default:
    the threshold; 0 keeps every LSH candidate), as a DataFrame (a, b,
    jaccard) with a < b (ids of ``id_col``).

    ``sig_col`` is a BinaryType column of signatures of ``num_perm`` values
    (as made by :func:`minhash_column`); ``id_col`` an integer or string
    column of unique ids.  The bands and rows are those of
    ``MinHashIndex(threshold, num_perm, bands=, rows=, weights=)``.  Rows
    whose id or signature is null take no part, nor, unless
    ``include_featureless``, rows of a document without shingles (every
    value 2**32 - 1).

    **Identical signatures** form a group whose representative is its
    smallest id: the result holds one pair (representative, member, 1.0)
    per other member, and the pairs between different signatures only
    between representatives.  Expanded that way it is exactly
    ``MinHashIndex(...).pairs(min_jaccard)`` over the same rows, and its
    connected components (:func:`clusters`) are the components of those
    pairs.

    ``num_partitions``: the partitions of both shuffles (default
    ``spark.sql.shuffle.partitions``).  ``check_ids`` first runs a job that
    raises ValueError if an id repeats.
    """
    check_df(df)
    t, n, _, b, r = lsh_parameters(threshold, num_perm, bands, rows, weights)
    floor = min_agree(t if min_jaccard is None else min_jaccard, n)
    if not isinstance(include_featureless, bool):
        raise TypeError(f"include_featureless must be a bool, not "
                        f"{type(include_featureless).__name__}")
    id_type = check_id_type(df, id_col, "id_col")
    sig_type = column_type(df, sig_col, "sig_col")
    if not isinstance(sig_type, T.BinaryType):
        raise TypeError(f"sig_col: column {sig_col!r} is {sig_type.simpleString()}; signatures "
                        f"must be a binary column, see minhash_column")
    parts = check_partitions(num_partitions, df)
    base = (df.select(F.col(id_col).cast(T.LongType() if not isinstance(id_type, T.StringType)
                                         else id_type).alias("id"),
                      F.col(sig_col).alias("sig"))
            .where(F.col("id").isNotNull() & F.col("sig").isNotNull()))
    bad = base.where(F.length("sig") != 4 * n).select("id", F.length("sig")).first()
    if bad is not None:
        raise ValueError(f"sig_col: the signature of id {bad[0]!r} is {bad[1]} bytes, not "
                         f"{4 * n} ({n} values); give the num_perm it was made with")
    if not include_featureless:
        empty = bytes.fromhex("%08x" % EMPTY_VALUE) * n
        base = base.where(F.col("sig") != F.lit(bytearray(empty)))
    if check_ids:
        dup = base.groupBy("id").count().where(F.col("count") > 1).select("id").first()
        if dup is not None:
            raise ValueError(f"id_col: id {dup[0]!r} appears more than once in column "
                             f"{id_col!r}; ids must be unique")
    out_type = T.StringType() if isinstance(id_type, T.StringType) else T.LongType()
    schema = T.StructType([T.StructField("a", out_type, False),
                           T.StructField("b", out_type, False),
                           T.StructField("jaccard", T.DoubleType(), False)])
    grouped = (base.repartition(parts, "sig")
               .withColumn("rep", F.min("id").over(Window.partitionBy("sig"))))
    links = (grouped.where(F.col("id") != F.col("rep"))
             .select(F.col("rep").alias("a"), F.col("id").alias("b"),
                     F.lit(1.0).cast(T.DoubleType()).alias("jaccard")))
    reps = grouped.where(F.col("id") == F.col("rep")).select("id", "sig")
    band_schema = T.StructType([T.StructField("band", T.IntegerType(), False),
                                T.StructField("key", T.LongType(), False),
                                T.StructField("id", out_type, False),
                                T.StructField("sig", T.BinaryType(), False)])
    exploded = reps.mapInArrow(_band_rows(n, b, r), band_schema)
    pairs = (exploded.repartition(parts, "band", "key")
             .mapInArrow(_bucket_pairs(n, b, r, floor), schema))
    return links.unionByName(pairs)
