"""SimHash fingerprints and exact near-duplicate pairs on Spark.

near_duplicates runs in two shuffles:

1. identical fingerprints: the rows are partitioned by fingerprint and each
   group of equal fingerprints gets its smallest id as representative (a
   window minimum, in the JVM).  Every other member is linked to it by one
   (representative, member, 0) pair, so a group of n equal fingerprints costs
   n - 1 pairs, not n (n - 1) / 2;
2. pigeonhole blocks: each representative goes out k + 1 times, keyed by
   (block number, block value) -- the blocks of SimhashIndex: block 0 the
   highest bits, the first 64 % (k + 1) blocks one bit wider.  Two
   fingerprints within distance k agree on at least one block, so they meet
   in the partition of that block's key.  Inside a partition, the rows of
   each block number go into one compiled HammingIndex and its pairs()
   self-join finds every pair within k among them; a pair is kept only by
   the first block on which its fingerprints agree, so each pair comes out of
   exactly one partition and no global distinct is needed.  A block value
   shared by many fingerprints lands in one partition but never becomes a
   quadratic loop: the index splits big buckets itself (docs/simhash-index.md).
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, cast

import numpy as np
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from crawldedup._kernel import HammingIndex, hamming_blocks
from crawldedup.near.index import _check_k  # the same k SimhashIndex takes
from crawldedup.near.simhash import simhash_many
from crawldedup.spark._common import check_df, check_id_type, check_partitions, column_type

if TYPE_CHECKING:  # the workers of near_duplicates never import pandas (a second a worker)
    import pandas as pd
    import pyarrow as pa

__all__ = ["simhash_column", "near_duplicates", "to_signed", "to_unsigned", "blocks"]



def to_signed(fp: int) -> int:
    """The LongType value that stores 64-bit fingerprint fp (same bits).

    >>> to_signed(2**64 - 1), to_signed(5)
    (-1, 5)
    """
    if isinstance(fp, bool) or not isinstance(fp, (int, np.integer)):
        raise TypeError(f"fp must be an int, not {type(fp).__name__}")
    v = operator.index(fp)
    if not 0 <= v < 1 << 64:
        raise ValueError(f"fp must be in [0, 2**64), got {v}")
    return v - (1 << 64) if v >= 1 << 63 else v


def to_unsigned(value: int) -> int:
    """The 64-bit fingerprint stored as LongType value (same bits).

    >>> to_unsigned(-1) == 2**64 - 1
    True
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"value must be an int, not {type(value).__name__}")
    v = operator.index(value)
    if not -(1 << 63) <= v < 1 << 63:
        raise ValueError(f"value must be a signed 64-bit integer, got {v}")
    return v + (1 << 64) if v < 0 else v


# (shift, width) of the k + 1 pigeonhole blocks, as SimhashIndex cuts them.
blocks = hamming_blocks


# ---------------------------------------------------------------- simhash

def _simhash_udf(tokenizer: Any, ngram: Any) -> Callable[[pd.Series], pd.Series]:
    import pandas as pd

    def fingerprints(texts: pd.Series) -> pd.Series:
        missing = texts.isna().to_numpy()
        values = texts.tolist()
        if missing.any():
            values = ["" if m else v for v, m in zip(values, missing)]
        fps = simhash_many(values, tokenizer=tokenizer, ngram=ngram).view(np.int64)
        if missing.any():
            out = pd.array(fps, dtype="Int64")
            out[missing] = pd.NA
            return pd.Series(out)
        return pd.Series(fps)
    # pandas_udf reads these hints; pandas is no module global here (the
    # workers of the other functions do without it)
    fingerprints.__annotations__ = {"texts": pd.Series, "return": pd.Series}
    return fingerprints


def simhash_column(df: DataFrame, text_col: str, out_col: str = "simhash", *,
                   tokenizer: Any = "auto", ngram: Any = None) -> DataFrame:
    """df with a column ``out_col`` (LongType) holding the SimHash of
    ``text_col``: the value of :func:`crawldedup.simhash` with the same
    ``tokenizer`` and ``ngram``, its 64 bits stored signed (see
    :func:`to_unsigned`).  A null text gives a null fingerprint.

    The fingerprints are computed by :func:`crawldedup.simhash_many` on
    Arrow batches (a pandas UDF), with the GIL released for each batch.
    """
    # pyspark's stubs leave out this public re-export of pyspark.sql.pandas.functions.
    from pyspark.sql.functions import pandas_udf  # type: ignore[attr-defined]

    check_df(df)
    dtype = column_type(df, text_col, "text_col")
    if not isinstance(dtype, T.StringType):
        raise TypeError(f"text_col: column {text_col!r} is {dtype.simpleString()}, not a string")
    if not isinstance(out_col, str) or not out_col:
        raise ValueError(f"out_col must be a non-empty column name, got {out_col!r}")
    simhash_many(["check the options"], tokenizer=tokenizer, ngram=ngram)  # bad options raise here
    udf = pandas_udf(_simhash_udf(tokenizer, ngram), T.LongType())
    return df.withColumn(out_col, udf(F.col(text_col)))


# ---------------------------------------------------------------- pairs

def _bucket_pairs(k: int) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function of the block stage (whole partitions)."""
    shapes = blocks(k)

    def block(f: np.ndarray, t: int) -> np.ndarray:
        shift, width = shapes[t]
        return cast(np.ndarray, (f >> np.uint64(shift)) & np.uint64((1 << width) - 1))

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        full = [b for b in batches if b.num_rows]
        if not full:  # an empty partition: more partitions than block keys
            return
        table = pa.Table.from_batches(full)
        keys = table.column("key").to_numpy()
        fps = table.column("fp").to_numpy().view(np.uint64)
        ids = table.column("id").to_numpy(zero_copy_only=False)
        del table
        tables = keys >> 32
        for t in np.unique(tables).tolist():
            sel = np.flatnonzero(tables == t)
            if len(sel) < 2:
                continue
            f = np.ascontiguousarray(fps[sel])
            index = HammingIndex(k)
            index.add_many(np.arange(len(f), dtype=np.uint64), f)
            a, b, d = index.pairs()
            if not len(a):
                continue
            a = a.astype(np.intp)
            b = b.astype(np.intp)
            fa, fb = f[a], f[b]
            # the first block on which the two agree must be this one
            keep = block(fa, t) == block(fb, t)
            for earlier in range(t):
                keep &= block(fa, earlier) != block(fb, earlier)
            if not keep.any():
                continue
            mine = ids[sel]
            ia, ib = mine[a[keep]], mine[b[keep]]
            swap = ib < ia
            yield pa.RecordBatch.from_arrays(
                [pa.array(np.where(swap, ib, ia)), pa.array(np.where(swap, ia, ib)),
                 pa.array(d[keep].astype(np.int32))], ["a", "b", "distance"])
    return run


def near_duplicates(df: DataFrame, id_col: str, fp_col: str, k: int = 3, *,
                    num_partitions: Optional[int] = None,
                    check_ids: bool = True, include_featureless: bool = False) -> DataFrame:
    """Every pair of rows whose fingerprints are within Hamming distance k,
    as a DataFrame (a, b, distance) with a < b (ids of ``id_col``).

    ``fp_col`` is a LongType column of 64-bit fingerprints (as made by
    :func:`simhash_column`); ``id_col`` an integer or string column of unique
    ids.  Rows whose id or fingerprint is null take no part.

    **Featureless documents**: rows whose fingerprint is 0 take no part
    either, unless ``include_featureless`` is True.  Every document without
    features (empty, or only spaces and punctuation: no word character) has
    fingerprint 0, so all of them would form one cluster of documents that
    share nothing (and, very rarely, a document whose features' hashes
    cancel out gets 0 too).  The same rule and option as ``crawldedup
    near-dups`` (``--include-featureless``).

    **Identical fingerprints** form a group whose representative is its
    smallest id.  The result holds, for each group, one pair
    (representative, member, 0) per other member, and the pairs between
    different fingerprints only between representatives: (rep_a, rep_b, d)
    stands for every member of a's group against every member of b's group.
    Expanded that way it is exactly ``SimhashIndex(k).pairs()`` over the
    same rows (those of fingerprint 0 left out, by default), and its
    connected components (:func:`clusters`) are exactly the components of
    ``pairs()``.  Without equal fingerprints it *is*
    ``pairs()``.

    ``num_partitions`` is the number of partitions of both shuffles (default
    ``spark.sql.shuffle.partitions``); each holds about (k + 1) n /
    num_partitions rows of 32 bytes in the block stage.  ``check_ids``
    first runs a job that raises ValueError if an id repeats.
    """
    check_df(df)
    k = _check_k(k)
    if not isinstance(include_featureless, bool):
        raise TypeError(f"include_featureless must be a bool, not "
                        f"{type(include_featureless).__name__}")
    id_type = check_id_type(df, id_col, "id_col")
    fp_type = column_type(df, fp_col, "fp_col")
    if not isinstance(fp_type, T.LongType):
        raise TypeError(f"fp_col: column {fp_col!r} is {fp_type.simpleString()}; fingerprints "
                        f"must be a bigint (LongType) column, see simhash_column")
    parts = check_partitions(num_partitions, df)
    base = (df.select(F.col(id_col).cast(T.LongType() if not isinstance(id_type, T.StringType)
                                         else id_type).alias("id"),
                      F.col(fp_col).alias("fp"))
            .where(F.col("id").isNotNull() & F.col("fp").isNotNull()))
    if not include_featureless:
        base = base.where(F.col("fp") != 0)
    if check_ids:
        dup = base.groupBy("id").count().where(F.col("count") > 1).select("id").first()
        if dup is not None:
            raise ValueError(f"id_col: id {dup[0]!r} appears more than once in column "
                             f"{id_col!r}; ids must be unique")
    out_type = T.StringType() if isinstance(id_type, T.StringType) else T.LongType()
    schema = T.StructType([T.StructField("a", out_type, False),
                           T.StructField("b", out_type, False),
                           T.StructField("distance", T.IntegerType(), False)])
    grouped = (base.repartition(parts, "fp")
               .withColumn("rep", F.min("id").over(Window.partitionBy("fp"))))
    links = (grouped.where(F.col("id") != F.col("rep"))
             .select(F.col("rep").alias("a"), F.col("id").alias("b"),
                     F.lit(0).cast(T.IntegerType()).alias("distance")))
    if k == 0:
        return links
    reps = grouped.where(F.col("id") == F.col("rep")).select("fp", "id")
    keys = [F.shiftrightunsigned(F.col("fp"), shift).bitwiseAND(F.lit((1 << width) - 1))
            .bitwiseOR(F.lit(t << 32).cast(T.LongType()))
            for t, (shift, width) in enumerate(blocks(k))]
    exploded = reps.select(F.explode(F.array(*keys)).alias("key"), "fp", "id")
    pairs = exploded.repartition(parts, "key").mapInArrow(_bucket_pairs(k), schema)
    return links.unionByName(pairs)
