"""MinHash on Spark (local[2]): minhash_column equals minhash_many, and
minhash_near_duplicates equals MinHashIndex.pairs() on the same rows."""

import numpy as np
import pytest

from crawldedup import MinHashIndex, minhash_many
from spark_fixtures import spark  # noqa: F401  (the session fixture)


def planted(n, seed, k=32, values=3):
    """Signatures from a small alphabet (many shared bands), a tenth of them
    copies of another (identical signatures)."""
    rng = np.random.default_rng(seed)
    sigs = rng.integers(0, values, (n, k), dtype=np.uint64).astype(np.uint32)
    for i in range(0, n, 10):
        sigs[i] = sigs[(i * 7 + 3) % n]
    return sigs


def sig_frame(spark, ids, sigs, id_type="long"):  # noqa: F811
    rows = [(i, bytes(s.astype("<u4").tobytes())) for i, s in zip(ids, sigs)]
    return spark.createDataFrame(rows, f"id {id_type}, sig binary")


def expand(rows):
    """MinHashIndex.pairs() semantics from minhash_near_duplicates' rows:
    (rep_a, rep_b, j) for every member of a's group times every member of
    b's, and every pair inside a group at 1.0."""
    groups = {}
    for a, b, j in rows:
        if j == 1.0:
            groups.setdefault(a, [a]).append(b)
    out = set()
    for members in groups.values():
        for x in range(len(members)):
            for y in range(x + 1, len(members)):
                p, q = members[x], members[y]
                out.add((min(p, q), max(p, q), 1.0))
    for a, b, j in rows:
        if j != 1.0:
            for p in groups.get(a, [a]):
                for q in groups.get(b, [b]):
                    out.add((min(p, q), max(p, q), j))
    return out


def test_minhash_column_equals_local(spark):  # noqa: F811
    from crawldedup.spark import minhash_column
    texts = ["the quick brown fox jumps over the lazy dog", "", "网页去重的一个例子", None,
             "Ünïcödé text here and there", "x"]
    df = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "id long, text string")
    got = {r["id"]: r["mh"] for r in minhash_column(df, "text", "mh", num_perm=64,
                                                    shingle=3).collect()}
    for i, t in enumerate(texts):
        if t is None:
            assert got[i] is None
        else:
            mine = np.frombuffer(got[i], dtype="<u4")
            assert mine.tolist() == minhash_many([t], 64, shingle=3)[0].tolist()


@pytest.mark.parametrize("shape", [(0.5, None, None), (None, 8, 4), (0.8, None, None)])
def test_pairs_equal_the_local_index(spark, shape):  # noqa: F811
    from crawldedup.spark import minhash_near_duplicates
    threshold, bands, rows = shape
    threshold = threshold or 0.8          # with bands and rows it only sets the floor
    ids = list(range(0, 1200, 2))
    sigs = planted(len(ids), seed=3)
    df = sig_frame(spark, ids, sigs)
    for floor in (None, 0.0):
        got = [tuple(r) for r in minhash_near_duplicates(
            df, "id", "sig", threshold, num_perm=32, bands=bands, rows=rows,
            min_jaccard=floor, num_partitions=3).collect()]
        assert len(got) == len(set(got)) and all(a < b for a, b, _ in got)
        index = MinHashIndex(threshold, 32, bands=bands, rows=rows)
        index.add_many(ids, sigs)
        local = set(index.pairs(min_jaccard=threshold if floor is None else floor))
        assert expand(got) == local
        assert len(local) > 20


def test_string_ids_nulls_and_featureless(spark):  # noqa: F811
    from crawldedup.spark import minhash_near_duplicates
    sigs = planted(200, seed=5, k=16)
    names = [f"doc-{i:04d}" for i in range(200)]
    df = sig_frame(spark, names, sigs, id_type="string")
    empty = np.full(16, 2**32 - 1, dtype=np.uint32).tobytes()
    extra = spark.createDataFrame([("null-sig", None), (None, b"\0" * 64), ("e1", empty),
                                   ("e2", empty)], "id string, sig binary")
    both = df.unionByName(extra)
    rows = [tuple(r) for r in minhash_near_duplicates(both, "id", "sig", 0.5, num_perm=16,
                                                      min_jaccard=0.0).collect()]
    index = MinHashIndex(0.5, 16)
    index.add_many(names, sigs)
    assert expand(rows) == set(index.pairs())
    with_empty = [tuple(r) for r in minhash_near_duplicates(
        both, "id", "sig", 0.5, num_perm=16, min_jaccard=0.0,
        include_featureless=True).collect()]
    assert ("e1", "e2", 1.0) in with_empty


def test_bad_input(spark):  # noqa: F811
    from crawldedup.spark import minhash_column, minhash_near_duplicates
    df = sig_frame(spark, [1, 2], planted(2, seed=1, k=16))
    with pytest.raises(ValueError, match="64 bytes, not 128"):
        minhash_near_duplicates(df, "id", "sig", num_perm=16 * 2).collect()
    with pytest.raises(TypeError, match="binary"):
        minhash_near_duplicates(df, "sig", "id", num_perm=16)
    with pytest.raises(ValueError, match="both bands and rows"):
        minhash_near_duplicates(df, "id", "sig", num_perm=16, bands=4)
    with pytest.raises(ValueError, match="threshold"):
        minhash_near_duplicates(df, "id", "sig", 1.5, num_perm=16)
    dup = sig_frame(spark, [1, 1], planted(2, seed=1, k=16))
    with pytest.raises(ValueError, match="more than once"):
        minhash_near_duplicates(dup, "id", "sig", num_perm=16)
    texts = spark.createDataFrame([(1, "a")], "id long, text string")
    with pytest.raises(ValueError, match="num_perm"):
        minhash_column(texts, "text", num_perm=0)
    with pytest.raises(TypeError, match="not a string"):
        minhash_column(texts, "id")
