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
neighbours and no centre has a smaller neighbour.  Each round is one job of
four shuffles of 16 bytes per edge (for integer ids): the two minimums are
window functions rather than a group-by and a join, and the star test is
the job that fills the round's lazy ``localCheckpoint`` (so the plans stay
short without a job of their own).  Nothing is collected to the driver.
"""

from __future__ import annotations

from typing import Optional

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from crawldedup.spark._common import check_df, check_id_type

__all__ = ["clusters"]


def _large_star(edges: DataFrame) -> DataFrame:
    """Each neighbour y > x of every node x linked to m(N(x) + {x}).  The
    minimum is a window over x's edges, so the step is one shuffle (by x);
    its output may repeat an edge, which small-star does not mind."""
    both = edges.select(F.col("u").alias("x"), F.col("v").alias("y")).unionByName(
        edges.select(F.col("v").alias("x"), F.col("u").alias("y")))
    low = F.least(F.col("x"), F.min("y").over(Window.partitionBy("x")))
    return (both.select("x", "y", low.alias("m")).where(F.col("y") > F.col("x"))
            .select(F.col("y").alias("u"), F.col("m").alias("v")))


def _small_star(edges: DataFrame) -> DataFrame:
    """x and each neighbour y < x linked to m({y < x in N(x)} + {x}): one
    shuffle by u for the window minimum, one for the distinct edges."""
    low = edges.select("u", "v", F.min("v").over(Window.partitionBy("u")).alias("m"))
    leaves = low.where(F.col("v") != F.col("m")).select(F.col("v").alias("u"), "m")
    centre = low.select("u", "m")
    return leaves.unionByName(centre).select("u", F.col("m").alias("v")).distinct()


def _is_star_forest(edges: DataFrame) -> bool:
    """True when every node has at most one smaller neighbour and no node
    with a smaller neighbour has a larger one (one job, one shuffle).  It is
    the first job to read ``edges``, so it also fills their lazy checkpoint."""
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
    # one lazy checkpoint of the distinct edges, self-pairs (a, a) included:
    # the first star test fills it, and the result reads the self-pairs
    # from it instead of computing pairs_df again
    given = (pairs_df.where(a.isNotNull() & b.isNotNull())
             .select(F.greatest(a, b).alias("u"), F.least(a, b).alias("v"))
             .distinct().localCheckpoint(eager=False))
    edges = given.where(F.col("u") != F.col("v"))
    rounds = 0
    while not _is_star_forest(edges):
        rounds += 1
        if max_rounds is not None and rounds > max_rounds:
            raise RuntimeError(f"clusters: the components did not settle in {max_rounds} rounds")
        previous = edges
        edges = _small_star(_large_star(edges)).localCheckpoint(eager=False)
        previous.unpersist()
    # a self-pair (a, a) makes a one-node component unless a is in a bigger
    # one, whose representative is smaller than a: the minimum picks it
    return (edges.select(F.col("u").alias("id"), F.col("v").alias("representative"))
            .unionByName(edges.select(F.col("v").alias("id"), F.col("v").alias("representative")))
            .unionByName(given.where(F.col("u") == F.col("v"))
                         .select(F.col("u").alias("id"), F.col("u").alias("representative")))
            .groupBy("id").agg(F.min("representative").alias("representative")))
