"""Connected components of a pair DataFrame on Spark: the alternating
large-star / small-star algorithm of Kiveris, Lattanzi, Mirrokni, Rastogi and
Vassilvitskii, "Connected Components in MapReduce and Beyond" (SoCC 2014).

The edges are kept as (u, v) with v < u.  Writing N(x) for the neighbours of
node x and m(S) for the smallest node of S:

* large-star: for every node x, each neighbour y > x is linked to
  m(N(x) + {x}), the smallest node of x's closed neighbourhood;
* small-star: for every node x, x and each neighbour y < x are linked to
  m({y in N(x): y < x} + {x}).

Both keep the components, and alternating them turns each component into a
star around its smallest node in O(log^2 n) rounds (in practice a handful).
The loop stops when the edges are such stars: no node has two smaller
neighbours and no centre has a smaller neighbour.  Each round is a few
shuffles of 16 bytes per edge (for integer ids) and one small job for the
test; the edges are checkpointed (``localCheckpoint``) so the plans stay
short.  Nothing is collected to the driver.
"""

from __future__ import annotations

from typing import Optional

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from crawldedup.spark._common import check_df, check_id_type

__all__ = ["clusters"]


def _large_star(edges: DataFrame) -> DataFrame:
    both = edges.select(F.col("u").alias("x"), F.col("v").alias("y")).unionByName(
        edges.select(F.col("v").alias("x"), F.col("u").alias("y")))
    low = both.groupBy("x").agg(F.min("y").alias("m"))
    low = low.select("x", F.least(F.col("x"), F.col("m")).alias("m"))
    return (both.where(F.col("y") > F.col("x")).join(low, "x")
            .select(F.col("y").alias("u"), F.col("m").alias("v")).distinct())


def _small_star(edges: DataFrame) -> DataFrame:
    low = edges.groupBy("u").agg(F.min("v").alias("m"))
    leaves = (edges.join(low, "u").select(F.col("v").alias("u"), F.col("m").alias("v"))
              .where(F.col("u") != F.col("v")))
    centre = low.select(F.col("u"), F.col("m").alias("v"))
    return leaves.unionByName(centre).distinct()


def _is_star_forest(edges: DataFrame) -> bool:
    """True when every node has at most one smaller neighbour and no node
    with a smaller neighbour has a larger one (one job, one shuffle)."""
    ends = edges.select(F.col("u").alias("node"), F.lit(1).alias("up"),
                        F.lit(0).alias("down")).unionByName(
        edges.select(F.col("v").alias("node"), F.lit(0).alias("up"), F.lit(1).alias("down")))
    bad = (ends.groupBy("node").agg(F.sum("up").alias("up"), F.sum("down").alias("down"))
           .where((F.col("up") > 1) | ((F.col("up") > 0) & (F.col("down") > 0))))
    return not bad.limit(1).count()


def clusters(pairs_df: DataFrame, a_col: str = "a", b_col: str = "b", *,
             max_rounds: Optional[int] = 200) -> DataFrame:
    """Connected components of the graph whose edges are the rows (a, b) of
    pairs_df, as a DataFrame (id, representative): one row per node that
    appears in a pair, the representative being the smallest id of its
    component (the representative's own row included).  With ids numbered in
    the order documents are read this is ``crawldedup near-dups --format
    clusters``: its ``members`` lists grouped by ``representative``.

    ``a_col`` and ``b_col`` are integer or string columns of the same type;
    rows with a null end are ignored.  RuntimeError if the components have
    not settled after ``max_rounds`` rounds (None: no limit).
    """
    check_df(pairs_df, "pairs_df")
    ta = check_id_type(pairs_df, a_col, "a_col")
    tb = check_id_type(pairs_df, b_col, "b_col")
    if type(ta) is not type(tb):
        raise TypeError(f"a_col and b_col must have the same type, got {ta.simpleString()} "
                        f"and {tb.simpleString()}")
    if max_rounds is not None and (isinstance(max_rounds, bool) or not isinstance(max_rounds, int)
                                   or max_rounds < 1):
        raise ValueError(f"max_rounds must be None or an int >= 1, got {max_rounds!r}")
    a, b = F.col(a_col), F.col(b_col)
    edges = (pairs_df.where(a.isNotNull() & b.isNotNull())
             .select(F.greatest(a, b).alias("u"), F.least(a, b).alias("v")))
    # a self-pair (a, a) makes a one-node component
    selfs = edges.where(F.col("u") == F.col("v")).select(F.col("u").alias("id"))
    edges = edges.where(F.col("u") != F.col("v")).distinct().localCheckpoint()
    rounds = 0
    while not _is_star_forest(edges):
        rounds += 1
        if max_rounds is not None and rounds > max_rounds:
            raise RuntimeError(f"clusters: the components did not settle in {max_rounds} rounds")
        previous = edges
        edges = _small_star(_large_star(edges)).localCheckpoint()
        previous.unpersist()
    members = edges.select(F.col("u").alias("id"), F.col("v").alias("representative"))
    centres = edges.select(F.col("v").alias("id"), F.col("v").alias("representative"))
    lone = selfs.join(edges.select(F.col("u").alias("id")), "id", "left_anti").join(
        edges.select(F.col("v").alias("id")), "id", "left_anti").select(
        "id", F.col("id").alias("representative"))
    return members.unionByName(centres).unionByName(lone).distinct()
