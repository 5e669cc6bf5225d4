"""crawldedup.spark on a real local[2] Spark: the same answers as one process.

One session for the whole run (tests/spark_fixtures.py); each test runs few
jobs on small data, except the skew tests, which are the point.
"""

import json
import random

import numpy as np
import pytest

import crawldedup
from crawldedup import BloomFilter, SimhashIndex, simhash
from crawldedup.cli import main as cli_main
from spark_fixtures import spark  # noqa: F401  (the session fixture)

# pyspark 4.x warns that it does not fully support pandas 3 (the API used here works).
pytestmark = pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support pandas:FutureWarning")

WORDS = ("crawler news market river city price model data search page world team report "
         "policy energy water music travel health school science season growth budget region "
         "storm bridge museum garden harbor village island").split()


# ---------------------------------------------------------------- helpers

def planted_fps(n, seed, k_max=9):
    """n random 64-bit fingerprints with planted near duplicates (1 to k_max
    bits from another one), exact copies, and a few that share blocks."""
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    for i in range(n // 5, n):
        if rng.random() < 0.35:
            src = fps[rng.integers(0, i)]
            flips = rng.choice(64, size=int(rng.integers(0, k_max + 1)), replace=False)
            mask = np.uint64(0)
            for b in flips.tolist():
                mask |= np.uint64(1 << b)
            fps[i] = src ^ mask
    ids = rng.permutation(n).astype(np.int64) * 3 + 7  # ids unrelated to positions
    return ids, fps


def brute_force(ids, fps, k):
    out = set()
    for i in range(len(fps)):
        d = np.bitwise_count(fps[i] ^ fps[i + 1:])
        for j in np.flatnonzero(d <= k).tolist():
            a, b = int(ids[i]), int(ids[i + 1 + j])
            out.add((min(a, b), max(a, b), int(d[j])))
    return out


def expand(rows):
    """SimhashIndex.pairs() semantics from near_duplicates' rows: each
    (rep_a, rep_b, d) for every member of a's group times every member of
    b's, and every pair inside a group at distance 0."""
    groups = {}
    for a, b, d in rows:
        if d == 0:
            groups.setdefault(a, [a]).append(b)
    out = set()
    for members in groups.values():
        for x in range(len(members)):
            for y in range(x + 1, len(members)):
                p, q = members[x], members[y]
                out.add((min(p, q), max(p, q), 0))
    for a, b, d in rows:
        if d:
            for p in groups.get(a, [a]):
                for q in groups.get(b, [b]):
                    out.add((min(p, q), max(p, q), d))
    return out


def fp_frame(spark, ids, fps, id_type="long"):  # noqa: F811
    import pandas as pd
    pdf = pd.DataFrame({"id": ids if id_type == "long" else [f"doc-{i:08d}" for i in ids],
                        "fp": fps.view(np.int64)})
    return spark.createDataFrame(pdf, f"id {id_type}, fp long")


def union_find_clusters(pairs):
    parent = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {x: find(x) for x in list(parent)}


# ---------------------------------------------------------------- the workers' Python

def test_a_worker_python_without_the_modules_is_refused_before_any_job(spark, tmp_path,  # noqa: F811
                                                                      monkeypatch):
    """Workers on a Python that lacks numpy and pyarrow (a bare venv, as
    `python3` from PATH is when PYSPARK_PYTHON is unset), on which a job
    fails deep in a worker with ModuleNotFoundError.  crawldedup.spark's
    functions refuse at once, before any job, naming the fix.  The tests' own worker
    Python passes, and the answer is kept for the session."""
    import subprocess
    import sys

    from crawldedup.spark import (
        WorkerPythonError,
        _common,
        check_workers,
        simhash_column,
        simhash_jsonl,
    )
    sc = spark.sparkContext
    check_workers(spark)  # the normal configuration passes
    assert _common._checked[(sc.applicationId, sc.pythonExec)] is None
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")],
                   check=True)
    bare = str(tmp_path / "bare" / "bin" / "python")
    # The tests' PYTHONPATH leads the workers to the installed packages (in
    # CI, the venv's site-packages): without it, as a user's environment
    # has it, the bare venv has no numpy or pyarrow.  What a job's worker
    # on it would meet (a job cannot show it here: the session's Python
    # workers, started by earlier tests, are reused):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    lacks = subprocess.run([bare, "-c", "import pyarrow"], capture_output=True, text=True)
    assert lacks.returncode != 0 and "No module named 'pyarrow'" in lacks.stderr
    df = spark.createDataFrame([(1, "a b c")], "id long, text string")
    path = tmp_path / "docs.jsonl"
    path.write_text('{"id": 1, "text": "a b c"}\n')
    saved = sc.pythonExec
    sc.pythonExec = bare  # what PYSPARK_PYTHON=<bare> gives when the session starts
    try:
        jobs = set(sc.statusTracker().getJobIdsForGroup())
        for call in (lambda: simhash_column(df, "text", "fp"),
                     lambda: simhash_jsonl(spark, str(path))):
            with pytest.raises(WorkerPythonError) as info:
                call()
            message = str(info.value)
            assert bare in message and "cannot import numpy" in message
            assert "pyarrow" in message and "PYSPARK_PYTHON" in message
        assert set(sc.statusTracker().getJobIdsForGroup()) == jobs  # no job was sent
        assert _common._checked[(sc.applicationId, bare)] == message
    finally:
        sc.pythonExec = saved
        monkeypatch.undo()
    assert simhash_column(df, "text", "fp").count() == 1


# ---------------------------------------------------------------- simhash

def test_simhash_column_equals_local(spark):  # noqa: F811
    from crawldedup.spark import simhash_column, to_unsigned
    texts = ["the quick brown fox", "", "网页去重 的 一个 例子", "a" * 1000, None,
             "Ünïcödé text here", "x y z"]
    df = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "id long, text string")
    got = {r["id"]: r["fp"] for r in simhash_column(df, "text", "fp", ngram=2).collect()}
    for i, t in enumerate(texts):
        if t is None:
            assert got[i] is None
        else:
            assert to_unsigned(got[i]) == simhash(t, ngram=2)


def _jsonl_lines():
    """Documents of every size as JSON lines, and lines that are not documents."""
    rng = random.Random(5)
    lines, docs = [], {}
    for i in range(60):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(0, 40)))
        if i % 7 == 3:
            text += " 网页去重的一个例子"
        docs[i * 11] = text
        lines.append(json.dumps({"id": i * 11, "text": text, "url": "x" * rng.randrange(90)},
                                ensure_ascii=i % 2 == 0))
    lines[10:10] = ["", "not json", '{"id": 5}', '{"id": true, "text": "t"}', "[1, 2]",
                    '{"id": 2.5, "text": "t"}', "   "]
    return lines, docs


def test_jsonl_byte_ranges_hold_every_line_once():
    from crawldedup.spark._jsonl import _lines
    data = b"".join(line.encode() + b"\n" for line in _jsonl_lines()[0]) + b'{"id": 1}'  # no \n
    import tempfile
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as f:
        f.write(data)
        f.flush()
        whole = [line for _, line in _lines(f.name, 0, -1)]
        assert b"".join(whole) == data
        for step in list(range(1, 40)) + [97, 500, len(data) - 1, len(data), len(data) + 9]:
            got = [(offset, line) for start in range(0, len(data), step)
                   for offset, line in _lines(f.name, start, min(len(data), start + step))]
            assert [line for _, line in got] == whole, step
            assert all(data[o:o + len(line)] == line for o, line in got)


@pytest.mark.parametrize("gz", [False, True])
def test_simhash_jsonl_equals_local(spark, tmp_path, monkeypatch, gz):  # noqa: F811
    import gzip

    from crawldedup.spark import _jsonl, simhash_column, simhash_jsonl, to_unsigned
    lines, docs = _jsonl_lines()
    path = tmp_path / ("docs.jsonl.gz" if gz else "docs.jsonl")
    data = "\n".join(lines).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    monkeypatch.setattr(_jsonl, "_MIN_SPLIT", 1)  # many small byte ranges
    df = simhash_jsonl(spark, str(path), num_partitions=9)
    assert df.rdd.getNumPartitions() == (1 if gz else 9)
    got = {r["id"]: to_unsigned(r["fp"]) for r in df.collect()}
    assert got == {i: simhash(t) for i, t in docs.items()}
    if not gz:  # the same as Spark's own reader and simhash_column
        spark_df = spark.read.schema("id long, text string").json(str(path))
        spark_df = spark_df.where("text is not null and id is not null")
        same = simhash_column(spark_df, "text", "fp", ngram=3).select("id", "fp")
        ours = simhash_jsonl(spark, str(path), ngram=3)
        assert {tuple(r) for r in same.collect()} == {tuple(r) for r in ours.collect()}
    strings = tmp_path / "strings.jsonl"
    strings.write_text('{"u": "a", "body": "one two"}\n{"u": 3, "body": "x"}\n')
    rows = simhash_jsonl(spark, [strings], id_field="u", text_field="body",
                         id_type="string").collect()
    assert [(r["id"], to_unsigned(r["fp"])) for r in rows] == [("a", simhash("one two"))]
    with pytest.raises(FileNotFoundError, match="no such file"):
        simhash_jsonl(spark, str(tmp_path / "missing.jsonl"))
    with pytest.raises(ValueError, match="id_type"):
        simhash_jsonl(spark, str(path), id_type="int")
    with pytest.raises(ValueError, match="num_partitions"):
        simhash_jsonl(spark, str(path), num_partitions=0)
    with pytest.raises(TypeError, match="SparkSession"):
        simhash_jsonl(None, str(path))


def test_signed_convention():
    from crawldedup.spark import to_signed, to_unsigned
    for v in (0, 1, 2**63 - 1, 2**63, 2**64 - 1):
        s = to_signed(v)
        assert -(2**63) <= s < 2**63 and to_unsigned(s) == v
        assert np.array([v], dtype=np.uint64).view(np.int64)[0] == s
    with pytest.raises(ValueError, match="fp"):
        to_signed(2**64)
    with pytest.raises(TypeError, match="value"):
        to_unsigned("1")


# ---------------------------------------------------------------- pairs

def test_near_duplicates_equal_local_pairs_and_brute_force(spark):  # noqa: F811
    from functools import reduce

    from pyspark.sql import functions as F

    from crawldedup.spark import near_duplicates
    ids, fps = planted_fps(1000, seed=11)
    df = fp_frame(spark, ids, fps)
    # every k in one job: the union of the nine results, tagged with k
    parts = [near_duplicates(df, "id", "fp", k=k, num_partitions=3, check_ids=False)
             .withColumn("k", F.lit(k)) for k in range(0, 9)]
    by_k = {k: [] for k in range(0, 9)}
    for r in reduce(lambda x, y: x.unionByName(y), parts).collect():
        by_k[r["k"]].append((r["a"], r["b"], r["distance"]))
    for k, rows in by_k.items():
        assert len(rows) == len(set(rows)), f"k={k}: a pair came out twice"
        assert all(a < b for a, b, _ in rows)
        index = SimhashIndex(k)
        index.add_many(ids, fps)
        local = set(index.pairs())
        assert expand(rows) == local == brute_force(ids, fps, k), f"k={k}"
        # the components are those of pairs()
        assert union_find_clusters((a, b) for a, b, _ in rows) == \
            union_find_clusters((a, b) for a, b, _ in local)


def test_near_duplicates_string_ids_and_nulls(spark):  # noqa: F811
    from crawldedup.spark import near_duplicates
    ids, fps = planted_fps(400, seed=5, k_max=4)
    df = fp_frame(spark, ids, fps, id_type="string")
    extra = spark.createDataFrame([("null-fp", None), (None, 5)], "id string, fp long")
    rows = [tuple(r) for r in near_duplicates(df.unionByName(extra), "id", "fp", k=3,
                                              num_partitions=2).collect()]
    names = [f"doc-{i:08d}" for i in ids]
    index = SimhashIndex(3)
    index.add_many(names, fps)
    local = {(min(a, b), max(a, b), d) for a, b, d in index.pairs()}
    assert expand(rows) == local
    assert all(a < b for a, b, _ in rows)


def test_near_duplicates_with_empty_partitions(spark):  # noqa: F811
    """More partitions than block keys: the empty ones give no rows."""
    from crawldedup.spark import near_duplicates
    df = spark.createDataFrame([(1, 5), (2, 7), (3, 5)], "id long, fp long")
    assert sorted(tuple(r) for r in near_duplicates(df, "id", "fp", k=3,
                                                    num_partitions=16).collect()) == [
        (1, 2, 1), (1, 3, 0)]
    assert near_duplicates(df.where("id < 0"), "id", "fp", k=3,
                           num_partitions=3).collect() == []


def test_a_bucket_of_a_million_equal_fingerprints(spark):  # noqa: F811
    from pyspark.sql import functions as F

    from crawldedup.spark import near_duplicates, to_signed
    c = 0x0123456789ABCDEF
    n = 1_000_000
    same = spark.range(n).select(F.col("id"), F.lit(to_signed(c)).alias("fp"))
    near = spark.createDataFrame([(n + j, to_signed(c ^ (1 << (7 * j)))) for j in range(9)],
                                 "id long, fp long")
    result = near_duplicates(same.unionByName(near), "id", "fp", k=3, num_partitions=4,
                             check_ids=False)
    # one job: the links counted, the other pairs collected
    link = F.col("distance") == 0
    (r,) = result.agg(
        F.sum(link.cast("long")).alias("links"),
        F.min(F.when(link, F.col("a"))).alias("min_a"),
        F.max(F.when(link, F.col("a"))).alias("max_a"),
        F.countDistinct(F.when(link, F.col("b"))).alias("distinct_b"),
        F.collect_list(F.when(~link, F.struct("a", "b", "distance"))).alias("others")).collect()
    # the group is a star around its smallest id: n - 1 links, not n^2 / 2 pairs
    assert r["links"] == r["distinct_b"] == n - 1
    assert r["min_a"] == r["max_a"] == 0
    others = {tuple(x) for x in r["others"]}
    expected = {(0, n + j, 1) for j in range(9)} | {(n + i, n + j, 2) for i in range(9)
                                                    for j in range(i + 1, 9)}
    assert others == expected


def test_a_block_value_shared_by_a_tenth_of_the_data(spark):  # noqa: F811
    from crawldedup.spark import near_duplicates
    rng = np.random.default_rng(3)
    # the pure-Python twin scans a shared bucket quadratically: a smaller run
    n = 60_000 if crawldedup.IMPLEMENTATION != "reference" else 5_000
    fps = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    shared = rng.choice(n, size=n // 10, replace=False)
    # a tenth of the data has the same top 16 bits (block 0 of k = 3)
    fps[shared] = (fps[shared] & np.uint64(0x0000FFFFFFFFFFFF)) | np.uint64(0xBEEF << 48)
    # near duplicates inside the shared bucket and elsewhere
    for i in range(0, n // 10, 10):
        src, dst = int(shared[i]), int(shared[i + 1])
        fps[dst] = fps[src] ^ np.uint64(1 << int(rng.integers(0, 48)))
    for i in range(0, 200):
        fps[n - 1 - i] = fps[i] ^ np.uint64((1 << int(rng.integers(0, 64))) |
                                            (1 << int(rng.integers(0, 64))))
    ids = np.arange(n, dtype=np.int64)
    rows = {tuple(r) for r in near_duplicates(fp_frame(spark, ids, fps), "id", "fp", k=3,
                                              num_partitions=4, check_ids=False).collect()}
    index = SimhashIndex(3)
    index.add_many(ids, fps)
    local = set(index.pairs())
    assert len(local) >= n // 200
    assert expand(rows) == local


def test_near_duplicates_bad_input(spark):  # noqa: F811
    from crawldedup.spark import near_duplicates, simhash_column
    df = spark.createDataFrame([(1, 5, "a", 1.5), (1, 6, "b", 2.5)],
                               "id long, fp long, text string, f double")
    with pytest.raises(ValueError, match="id_col.*nope"):
        near_duplicates(df, "nope", "fp")
    with pytest.raises(TypeError, match="fp_col.*double"):
        near_duplicates(df, "id", "f")
    with pytest.raises(TypeError, match="id_col.*double"):
        near_duplicates(df, "f", "fp")
    with pytest.raises(ValueError, match="k must be in"):
        near_duplicates(df, "id", "fp", k=9)
    with pytest.raises(ValueError, match="num_partitions"):
        near_duplicates(df, "id", "fp", num_partitions=0)
    with pytest.raises(ValueError, match="id 1 appears more than once"):
        near_duplicates(df, "id", "fp")
    with pytest.raises(TypeError, match="DataFrame"):
        near_duplicates([(1, 2)], "id", "fp")
    with pytest.raises(TypeError, match="text_col.*bigint"):
        simhash_column(df, "fp")
    with pytest.raises(ValueError, match="tokenizer"):
        simhash_column(df, "text", tokenizer="nonsense")


# ---------------------------------------------------------------- clusters

def corpus_lines(n_base=60, seed=4):
    rng = random.Random(seed)
    lines = []
    for _ in range(n_base):
        words = [rng.choice(WORDS) + str(rng.randrange(40)) for _ in range(120)]
        lines.append(" ".join(words))
        for _ in range(rng.randrange(3)):
            edited = list(words)
            for _ in range(rng.randint(0, 2)):
                edited[rng.randrange(len(edited))] = rng.choice(WORDS)
            lines.append(" ".join(edited))
    rng.shuffle(lines)
    return lines


def test_clusters_equal_the_cli(spark, tmp_path, capsys):  # noqa: F811
    from crawldedup.spark import clusters, near_duplicates, simhash_column
    lines = corpus_lines()
    path = tmp_path / "docs.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert cli_main(["near-dups", "--lines", "--format", "clusters", str(path)]) == 0
    cli = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(cli) >= 10
    # ids are line numbers, so "earliest" is "smallest"
    df = spark.createDataFrame([(i + 1, t) for i, t in enumerate(lines)], "id long, text string")
    pairs = near_duplicates(simhash_column(df, "text", "fp"), "id", "fp", k=3, num_partitions=3)
    got = {}
    for r in clusters(pairs).collect():
        got.setdefault(r["representative"], []).append(r["id"])
    assert {rep: sorted(m) for rep, m in got.items()} == \
        {c["representative"]: c["members"] for c in cli}


@pytest.mark.parametrize("include", [False, True])
def test_featureless_documents_as_the_cli(spark, tmp_path, capsys, include):  # noqa: F811
    """Empty and punctuation-only documents (fingerprint 0): left out by
    near_duplicates and by `near-dups` alike, or, with include_featureless /
    --include-featureless, paired (one cluster) by both; the pairs and the
    clusters are the same."""
    from crawldedup.spark import clusters, near_duplicates, simhash_column
    featureless = ["", "   ", "!!!", "... --- ...", "\u3002\uff01", "\t()[]{}"] * 5
    texts = corpus_lines(n_base=20) + featureless
    random.Random(8).shuffle(texts)
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"id": i + 1, "text": t}) + "\n"
                            for i, t in enumerate(texts)), encoding="utf-8")
    blank = {i + 1 for i, t in enumerate(texts) if not t.strip("!.-\u3002\uff01\t()[]{} ")}
    assert len(blank) == len(featureless)
    flags = ["--include-featureless"] if include else []
    assert cli_main(["near-dups", *flags, str(path)]) == 0
    cli_pairs = {(p["a"], p["b"], p["distance"])
                 for p in map(json.loads, capsys.readouterr().out.splitlines())}
    assert cli_main(["near-dups", "--format", "clusters", *flags, str(path)]) == 0
    cli_clusters = {c["representative"]: c["members"]
                    for c in map(json.loads, capsys.readouterr().out.splitlines())}

    df = spark.createDataFrame(list(enumerate(texts, 1)), "id long, text string")
    pairs = near_duplicates(simhash_column(df, "text", "fp"), "id", "fp", k=3,
                            num_partitions=3, include_featureless=include).cache()
    rows = [tuple(r) for r in pairs.collect()]
    got = {}
    for r in clusters(pairs).collect():
        got.setdefault(r["representative"], []).append(r["id"])
    pairs.unpersist()
    assert expand(rows) == {(min(a, b), max(a, b), d) for a, b, d in cli_pairs}
    assert {rep: sorted(m) for rep, m in got.items()} == cli_clusters
    in_pairs = {x for a, b, _ in rows for x in (a, b)}
    if include:  # all of them in one cluster of their own
        assert sorted(blank) in cli_clusters.values()
    else:
        assert not blank & in_pairs
    assert len(cli_clusters) >= 10


def test_include_featureless_must_be_a_bool(spark):  # noqa: F811
    from crawldedup.spark import near_duplicates
    df = spark.createDataFrame([(1, 0)], "id long, fp long")
    with pytest.raises(TypeError, match="include_featureless must be a bool"):
        near_duplicates(df, "id", "fp", include_featureless=1)


def test_clusters_of_a_graph_equal_union_find(spark):  # noqa: F811
    from crawldedup.spark import clusters
    rng = random.Random(9)
    labels = list(range(1000, 1016))
    rng.shuffle(labels)
    edges = [(labels[i], labels[i + 1]) for i in range(15)]  # a path with shuffled labels
    edges += [(rng.randrange(100), rng.randrange(100)) for _ in range(60)]
    edges += [(7000, 7000)]  # a self pair: a component of one
    df = spark.createDataFrame(edges, "a long, b long")
    got = {r["id"]: r["representative"] for r in clusters(df).collect()}
    expected = union_find_clusters(edges)
    assert got == expected
    strings = spark.createDataFrame([("b", "a"), ("c", "b"), ("x", "y")], "a string, b string")
    assert {tuple(r) for r in clusters(strings).collect()} == {
        ("a", "a"), ("b", "a"), ("c", "a"), ("x", "x"), ("y", "x")}
    with pytest.raises(TypeError, match="same type"):
        clusters(spark.createDataFrame([("a", 1)], "a string, b long"))


@pytest.mark.parametrize("parts", [1, 3, 8])
def test_clusters_that_need_rounds_equal_union_find(spark, parts):  # noqa: F811
    """A long path, a cycle, a star around its largest node and random edges
    with shuffled labels: the contraction of each partition leaves work for
    the large-star / small-star rounds, the more so with more partitions."""
    from crawldedup.spark import clusters
    rng = random.Random(parts)
    labels = rng.sample(range(10**6), 400)
    edges = [(labels[i], labels[i + 1]) for i in range(199)]
    edges += [(labels[200 + i], labels[200 + (i + 1) % 50]) for i in range(50)]
    hub = max(labels[260:300])
    edges += [(hub, x) for x in labels[260:300] if x != hub]
    edges += [(rng.choice(labels[300:]), rng.choice(labels[300:])) for _ in range(80)]
    edges += [(b, a) for a, b in edges[:30]] + edges[30:40]  # reversed and repeated
    edges += [(labels[399], labels[399]), (5, 5)]  # self pairs
    expected = union_find_clusters(edges)
    df = spark.createDataFrame(edges + [(None, 3), (4, None)], "a long, b long")
    rows = clusters(df, num_partitions=parts).collect()
    assert len(rows) == len(expected)
    assert {r["id"]: r["representative"] for r in rows} == expected
    name = "n{:07d}".format  # zero-padded: string order is number order
    named = spark.createDataFrame([(name(a), name(b)) for a, b in edges], "a string, b string")
    got = {r["id"]: r["representative"] for r in clusters(named, num_partitions=parts).collect()}
    assert got == {name(x): name(r) for x, r in expected.items()}
    assert clusters(df.where("a < 0"), num_partitions=parts).collect() == []


def test_clusters_bad_arguments(spark):  # noqa: F811
    from crawldedup.spark import clusters
    df = spark.createDataFrame([(1, 2)], "a long, b long")
    for bad in (0, -1, True, 1.5):
        with pytest.raises((TypeError, ValueError)):
            clusters(df, num_partitions=bad)
        with pytest.raises(ValueError, match="max_rounds"):
            clusters(df, max_rounds=bad)
    with pytest.raises(ValueError, match="no column"):
        clusters(df, "x", "b")


# ---------------------------------------------------------------- URLs

URLS = ["http://Example.com/a?b=2&a=1", "http://example.com/a?a=1&b=2", "http://example.com/a",
        "http://example.com/a#frag", "https://example.com/a", "http://example.com/a?utm_source=x",
        "http://shop.example/item?id=7&spm=a.b", "http://shop.example/item?id=7", None,
        "http://[::1/broken", "not a url", "http://例子.测试/路径?q=一", "http://example.com:80/a"]


def local_dedup(urls, canonical, strip):
    from crawldedup.spark._urls import _fingerprints
    present = [u for u in urls if u is not None]
    best = {}
    for u, fp in zip(present, _fingerprints(present, canonical, strip)):
        if fp not in best or u < best[fp]:
            best[fp] = u
    return best


@pytest.mark.parametrize("canonical,strip", [(True, False), (True, True), (False, False)])
def test_dedup_urls_equals_a_local_pass(spark, canonical, strip):  # noqa: F811
    from crawldedup.spark import dedup_urls
    urls = URLS * 3
    df = spark.createDataFrame([(u, i) for i, u in enumerate(urls)], "url string, n long")
    rows = dedup_urls(df, "url", canonical=canonical, strip_tracking=strip).collect()
    kept = {bytes(r["url_fingerprint"]): r["url"] for r in rows if r["url"] is not None}
    assert kept == local_dedup(urls, canonical, strip)
    assert sum(r["url"] is None for r in rows) == 3  # null URLs kept as they are
    if canonical and not strip:
        for fp, url in kept.items():
            try:
                assert fp == crawldedup.url_fingerprint(url)
            except ValueError:
                pass


def test_dedup_urls_bad_input(spark):  # noqa: F811
    from crawldedup.spark import dedup_urls
    df = spark.createDataFrame([("http://a/", 1)], "url string, n long")
    with pytest.raises(TypeError, match="url_col.*bigint"):
        dedup_urls(df, "n")
    with pytest.raises(ValueError, match="strip_tracking"):
        dedup_urls(df, "url", canonical=False, strip_tracking=True)
    with pytest.raises(ValueError, match="fp_col"):
        dedup_urls(df, "url", fp_col="n")


@pytest.mark.parametrize("layout", ["standard", "blocked"])
def test_build_bloom_is_byte_identical_to_a_local_build(spark, tmp_path, layout,  # noqa: F811
                                                         capfdbinary):
    from crawldedup.spark import build_bloom
    urls = [f"http://site{i % 97}.example/page/{i}?q={i % 13}" for i in range(4000)]
    df = spark.createDataFrame([(u,) for u in urls] + [(None,)], "url string").repartition(5)
    merged = build_bloom(df, "url", capacity=10_000, error_rate=0.001, layout=layout)
    local = BloomFilter(10_000, 0.001, layout=layout)
    local.add_many(urls)
    assert merged.to_bytes() != local.to_bytes()  # the header's count differs until ...
    local |= BloomFilter(10_000, 0.001, layout=layout)  # ... a merge, as build_bloom does
    assert merged.to_bytes() == local.to_bytes()
    # the saved filter is a state for `crawldedup urls`: every URL is seen
    state = tmp_path / "seen.bloom"
    merged.save(state)
    listing = tmp_path / "urls.txt"
    listing.write_text("\n".join(urls[:500] + ["http://new.example/"]) + "\n")
    capfdbinary.readouterr()
    assert cli_main(["urls", str(listing), "--state", str(state)]) == 0
    assert capfdbinary.readouterr().out == b"http://new.example/\n"


def test_build_bloom_canonical_keys(spark):  # noqa: F811
    from crawldedup.spark import build_bloom
    df = spark.createDataFrame([(u,) for u in URLS], "url string")
    merged = build_bloom(df, "url", capacity=1000, canonical=True, strip_tracking=True)
    assert crawldedup.canonicalize_url("http://example.com/a?utm_source=x",
                                       strip_params=True) in merged
    from crawldedup.spark._urls import url_keys
    present = [u for u in URLS if u is not None]
    keys = url_keys(present, True, True)
    assert b"http://[::1/broken" in keys  # a URL that cannot be canonicalized is its own key
    assert all(key in merged for key in keys)
    with pytest.raises(ValueError, match="capacity"):
        build_bloom(df, "url", capacity=0)


# ---------------------------------------------------------------- WARC

def test_read_warc_gives_the_local_documents(spark, tmp_path):  # noqa: F811
    from crawldedup.spark import read_warc
    from crawldedup.warc import WarcProblem, iter_warc
    from test_warc import damaged_archives
    paths = damaged_archives(tmp_path)
    local_docs, local_problems = set(), set()
    for p in paths:
        for item in iter_warc(p):
            if isinstance(item, WarcProblem):
                local_problems.add((item.path, item.offset, item.reason))
            else:
                local_docs.add((item.uri, item.text))
    assert len(local_docs) >= 6 and len(local_problems) >= 3
    docs = {tuple(r) for r in read_warc(spark, [str(p) for p in paths]).collect()}
    assert docs == local_docs
    rows = read_warc(spark, [str(p) for p in paths], include_errors=True).collect()
    assert {(r["path"], r["offset"], r["error"]) for r in rows if r["error"]} == local_problems
    assert {(r["uri"], r["text"]) for r in rows if not r["error"]} == local_docs
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_warc(spark, [str(tmp_path / "missing.warc.gz")])
