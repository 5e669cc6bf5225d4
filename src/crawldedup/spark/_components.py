"""Connected components of a pair DataFrame on Spark: the alternating
large-star / small-star algorithm of Kiveris, Lattanzi, Mirrokni, Rastogi and
Vassilvitskii, "Connected Components in MapReduce and Beyond" (SoCC 2014),
after a local contraction of each partition.

Writing N(x) for the neighbours of node x and m(S) for the smallest node of S:

* large-star: for every node x, each neighbour y > x is linked to
  m(N(x) + {x}), the smallest node of x's closed neighbourhood;
* small-star: for every node x, x and each neighbour y < x are linked to
  m({y in N(x): y < x} + {x}).

Both keep the components, and alternating them turns each component into a
star around its smallest node in O(log^2 n) rounds.  Spark does the
shuffles: the edges are partitioned by node, so that a partition holds the
whole neighbourhood of each of its nodes, and ``mapInArrow`` runs the
neighbourhood step of a whole partition in numpy (no Python loop over rows,
no window functions for Catalyst to plan and compile).

* **Local contraction first.**  The first stage partitions the pairs by
  node and replaces the edges of each partition by stars: the partition's
  own connected components (numpy min-label propagation with pointer
  jumping), each node linked to the smallest node of its local component.
  Every edge stays inside a star, and every star lies inside a component,
  so the components are those of the pairs.  Near-duplicate components are
  small, and after the contraction they are mostly stars already.
* **The star test rides along.**  The large-star stage sees the whole
  neighbourhood of each node, so it also counts the nodes that break the
  star shape (two smaller neighbours, or a smaller and a larger one) and
  writes, for each node x, the candidate (x, m(N(x) + {x})).  When no
  partition counts a bad node, the edges were stars around their smallest
  nodes and the candidates are the answer.  The stage's output is a lazy
  ``localCheckpoint``; the driver collects the per-partition counts (one
  row per partition), which is the one job of the round and fills the
  checkpoint, so the answer is read from there and the plan of the next
  round starts from it.
* A round is thus one job: small-star (one shuffle, by node), large-star
  and the test (one shuffle, by node).  The first job runs the pairs, the
  contraction, a large-star and a round; nothing is collected to the
  driver but one count per partition and round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Optional, Tuple

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from crawldedup.spark._common import check_df, check_id_type, check_partitions

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["clusters"]

# The kinds of rows of a large-star stage's output.
_EDGE, _ANSWER, _BAD = 0, 1, 2

Stage = Callable[[Iterator["pa.RecordBatch"]], Iterator["pa.RecordBatch"]]


def _read(batches: Iterator[pa.RecordBatch]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(names, x, y) of a partition of rows (x, y): the distinct nodes in
    order, and each row's ends as indexes into them (order-preserving codes,
    so comparing codes compares ids, for integers and strings alike)."""
    import pyarrow as pa

    full = [b for b in batches if b.num_rows]
    if not full:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    table = pa.Table.from_batches(full)
    x = table.column(0).to_numpy(zero_copy_only=False)
    y = table.column(1).to_numpy(zero_copy_only=False)
    n = len(x)
    del table
    names, codes = np.unique(np.concatenate([x, y]), return_inverse=True)
    codes = codes.astype(np.int64).reshape(-1)
    return names, codes[:n], codes[n:]


def _distinct(x: np.ndarray, y: np.ndarray, n: int) -> Tuple[np.ndarray, np.ndarray]:
    """The distinct rows (x, y) of codes below n, sorted by x then y."""
    if not len(x):
        return x, y
    key = np.unique(x * n + y)  # n is at most 2 * rows of one partition: no overflow
    return key // n, key % n


def _both_ways(u: np.ndarray, v: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Rows (x, y) for both directions of the edges (u, v); a self-loop (u, u),
    which keeps a node without other edges, once."""
    loop = u == v
    return (np.concatenate([u, v[~loop]]), np.concatenate([v, u[~loop]]))


def _batch(names: np.ndarray, x: np.ndarray, y: np.ndarray, id_type: Any) -> pa.RecordBatch:
    import pyarrow as pa

    return pa.RecordBatch.from_arrays([pa.array(names[x], id_type), pa.array(names[y], id_type)],
                                      ["x", "y"])


def _contract(id_type: Any) -> Stage:
    """The first stage: the rows (x, y) of a partition (both directions of
    the pairs, grouped by x) replaced by stars over the partition's own
    components, as rows (x, y) in both directions."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        names, x, y = _read(batches)
        if not len(names):
            return
        label = np.arange(len(names), dtype=np.int64)
        while True:
            low = np.minimum(label[x], label[y])
            new = label.copy()
            np.minimum.at(new, x, low)
            np.minimum.at(new, y, low)
            new = new[new]  # pointer jumping: a label's label is as good
            if np.array_equal(new, label):
                break
            label = new
        # each label is a node of the same local component, never above the
        # node itself; at the fixpoint every edge's ends share it, so it is
        # the component's smallest node
        nodes = np.arange(len(names), dtype=np.int64)
        keep = label != nodes
        # a node whose only edges are self-loops keeps a self-loop
        alone = np.ones(len(names), dtype=bool)
        alone[x[x != y]] = False
        u = np.concatenate([nodes[keep], nodes[alone]])
        v = np.concatenate([label[keep], nodes[alone]])
        yield _batch(names, *_both_ways(u, v), id_type)
    return run


def _large_star(id_type: Any, schema_names: List[str]) -> Stage:
    """Large-star over a partition of rows (x, y) grouped by x (both
    directions of every edge), with the star test and the candidates."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        names, x, y = _read(batches)
        bad = 0
        if len(names):
            x, y = _distinct(x, y, len(names))
            starts = np.flatnonzero(np.r_[True, x[1:] != x[:-1]])
            xs = x[starts]
            # rows are sorted by y within x: the first is the smallest neighbour
            low = np.minimum(xs, y[starts])
            smaller = np.add.reduceat((y < x).astype(np.int64), starts)
            larger = np.add.reduceat((y > x).astype(np.int64), starts)
            bad = int(np.count_nonzero((smaller > 1) | ((smaller > 0) & (larger > 0))))
            group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(x)]))
            up = y > x
            alone = (smaller == 0) & (larger == 0)  # a self-loop only
            u = np.concatenate([y[up], xs[alone]])
            v = np.concatenate([low[group[up]], xs[alone]])
            u, v = _distinct(u, v, len(names))
            for kind, a, b in ((_EDGE, u, v), (_ANSWER, xs, low)):
                yield pa.RecordBatch.from_arrays(
                    [pa.array(np.full(len(a), kind, dtype=np.int8)),
                     pa.array(names[a], id_type), pa.array(names[b], id_type),
                     pa.nulls(len(a), pa.int64())], schema_names)
        yield pa.RecordBatch.from_arrays(
            [pa.array([_BAD], pa.int8()), pa.nulls(1, id_type), pa.nulls(1, id_type),
             pa.array([bad], pa.int64())], schema_names)
    return run


def _small_star(id_type: Any) -> Stage:
    """Small-star over a partition of edges (u, v), v <= u, grouped by u;
    rows (x, y) in both directions for the next large-star."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        names, u, v = _read(batches)
        if not len(names):
            return
        u, v = _distinct(u, v, len(names))
        starts = np.flatnonzero(np.r_[True, u[1:] != u[:-1]])
        low = np.repeat(v[starts], np.diff(np.r_[starts, len(u)]))  # v <= u: m of u
        leaf = v != low
        a = np.concatenate([v[leaf], u[starts]])
        b = np.concatenate([low[leaf], v[starts]])
        x, y = _both_ways(a, b)
        x, y = _distinct(x, y, len(names))
        yield _batch(names, x, y, id_type)
    return run


def clusters(pairs_df: DataFrame, a_col: str = "a", b_col: str = "b", *,
             max_rounds: Optional[int] = 200,
             num_partitions: Optional[int] = None) -> DataFrame:
    """Connected components of the graph whose edges are the rows (a, b) of
    pairs_df, as a DataFrame (id, representative): one row per node that
    appears in a pair, the representative being the smallest id of its
    component (the representative's own row included).  With ids numbered in
    the order documents are read this is ``crawldedup near-dups --format
    clusters``: its ``members`` lists grouped by ``representative``.

    ``a_col`` and ``b_col`` are integer or string columns of the same type;
    rows with a null end are ignored.  ``num_partitions`` is the number of
    partitions of the shuffles (default ``spark.sql.shuffle.partitions``).
    Each round is one Spark job; RuntimeError if the components have not
    settled after ``max_rounds`` rounds (None: no limit).  The result reads
    the last round's local checkpoint.
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
    parts = check_partitions(num_partitions, pairs_df)
    import pyarrow as pa

    strings = isinstance(ta, T.StringType)
    id_type = T.StringType() if strings else T.LongType()
    arrow_type = pa.string() if strings else pa.int64()
    rows = T.StructType([T.StructField("x", id_type, False), T.StructField("y", id_type, False)])
    names = ["kind", "a", "b", "bad"]
    out = T.StructType([T.StructField("kind", T.ByteType(), False),
                        T.StructField("a", id_type, True), T.StructField("b", id_type, True),
                        T.StructField("bad", T.LongType(), True)])
    a, b = F.col(a_col).cast(id_type), F.col(b_col).cast(id_type)
    # both directions in one projection: a union of two would compute pairs_df twice
    given = (pairs_df.where(a.isNotNull() & b.isNotNull())
             .select(F.explode(F.array(F.struct(a.alias("x"), b.alias("y")),
                                       F.struct(b.alias("x"), a.alias("y")))).alias("e"))
             .select("e.x", "e.y"))
    def large_star(rows_df: DataFrame) -> DataFrame:
        return rows_df.repartition(parts, "x").mapInArrow(_large_star(arrow_type, names), out)

    def small_star(state_df: DataFrame) -> DataFrame:
        edges = state_df.where(F.col("kind") == _EDGE).select(F.col("a").alias("x"),
                                                              F.col("b").alias("y"))
        return edges.repartition(parts, "x").mapInArrow(_small_star(arrow_type), rows)

    contracted = given.repartition(parts, "x").mapInArrow(_contract(arrow_type), rows)
    # The first job goes on to a second large-star without stopping for the
    # first one's test: after the contraction a node that two partitions
    # linked to two different stars breaks the test, and small-star is what
    # joins such stars.  A round more than needed changes nothing.
    state = large_star(small_star(large_star(contracted))).localCheckpoint(eager=False)
    rounds, previous = 0, None
    while True:
        # the round's job: it fills the checkpoint, and brings one row a partition
        bad = sum(r[0] for r in state.where(F.col("kind") == _BAD).select("bad").collect())
        if previous is not None:
            previous.unpersist()  # read by the job above, not needed again
        if not bad:
            break
        rounds += 1
        if max_rounds is not None and rounds > max_rounds:
            raise RuntimeError(f"clusters: the components did not settle in {max_rounds} rounds")
        previous = state
        state = large_star(small_star(state)).localCheckpoint(eager=False)
    return state.where(F.col("kind") == _ANSWER).select(F.col("a").alias("id"),
                                                        F.col("b").alias("representative"))
