"""crawldedup on Spark (local[2]) against the local index and against text-dedup.

Part 1, overhead: N fingerprints (default 10,000,000) with planted near
duplicates, k = 3: ``SimhashIndex.pairs()`` in this process against
``crawldedup.spark.near_duplicates`` on local[2] (same pairs checked), with
Spark's own metrics (its REST API on a loopback port): time and shuffle bytes
of each stage, shuffle bytes per fingerprint per pigeonhole block.

Part 2, end to end: D documents (default 50,000) of benchmarks/simhash_corpus.py
(English and Chinese, 1%, 3% and 10% edited copies planted, same-topic and
unrelated pairs) as JSON lines, clustered by

* ``crawldedup near-dups --format clusters`` (a subprocess; the median of
  three runs),
* Spark local[2], each measurement in a fresh process and JVM, in a session
  that is up and has run one trivial job: ``simhash_jsonl`` and
  ``near_duplicates`` (the pairs brought to the driver), and in another
  process the same and ``clusters``; each run twice, the second time with
  the JVM and the Python workers warm,
* text-dedup's SimHash script, ``python -m text_dedup.simhash``, run by the
  Python of a separate virtualenv that has it (``--textdedup-python``;
  ``pip install text-dedup`` there), with its defaults and 2 processes;

and the recall of each on the planted pairs (a pair is found when both
documents end up in one cluster).

    python benchmarks/compare_spark.py                      # both parts
    python benchmarks/compare_spark.py --n 1000000 --docs 5000
    python benchmarks/compare_spark.py --skip-overhead --textdedup-python VENV/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Dict, List, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


# The driver JVM's options in part 2 (--java-options): by default its JIT stops at C1,
# the quick compiler.  A job of seconds on two cores spends much of its time
# in code the JVM runs once or a few times, and the optimizing C2 compiler's
# threads take cores from the job meanwhile: docs/benchmarks/spark.md measures it.
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


def spark_session(partitions: int, ui_port: int, java_options: str = JAVA_OPTIONS):
    from pyspark.sql import SparkSession

    import crawldedup
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    root = os.path.dirname(os.path.dirname(os.path.abspath(crawldedup.__file__)))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    spark = (SparkSession.builder.master("local[2]").appName("crawldedup-bench")
             .config("spark.driver.memory", "6g")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "true")
             .config("spark.ui.port", str(ui_port))
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(partitions))
             .config("spark.sql.adaptive.enabled", "false")
             .config("spark.sql.execution.arrow.pyspark.enabled", "true")
             .config("spark.driver.extraJavaOptions", java_options)
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def stages(spark) -> List[dict]:
    """Completed stages from Spark's REST API (the UI on the loopback port)."""
    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages?status=complete"
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.load(r)


def jobs(spark) -> List[dict]:
    """Spark's jobs so far, from its REST API."""
    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/jobs"
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.load(r)


def stage_table(before: List[dict], after: List[dict]) -> Tuple[List[dict], int]:
    seen = {(s["stageId"], s["attemptId"]) for s in before}
    new = [s for s in after if (s["stageId"], s["attemptId"]) not in seen]
    new.sort(key=lambda s: s["stageId"])
    return new, sum(s.get("shuffleWriteBytes", 0) for s in new)


def print_stages(new: List[dict]) -> None:
    print(f"  {'stage':>5} {'s (wall)':>9} {'task s':>8} {'shuffle write MB':>17} "
          f"{'records':>12}  name")
    for s in new:
        wall = (_ts(s.get("completionTime")) - _ts(s.get("submissionTime")))
        print(f"  {s['stageId']:>5} {wall:>9.1f} {s.get('executorRunTime', 0) / 1000:>8.1f} "
              f"{s.get('shuffleWriteBytes', 0) / 1e6:>17.1f} "
              f"{s.get('shuffleWriteRecords', 0):>12,}  {s['name'][:60]}")


def _ts(text) -> float:
    from datetime import datetime
    if not text:
        return 0.0
    return datetime.strptime(text.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


# ---------------------------------------------------------------- part 1

def planted(n: int, seed: int = 1) -> Tuple[np.ndarray, np.ndarray]:
    """n random fingerprints; 10% are copies of an earlier one with 1 to 3
    bits flipped, 0.1% exact copies."""
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    idx = np.flatnonzero(rng.random(n) < 0.10)
    idx = idx[idx > 0]
    src = (rng.random(len(idx)) * idx).astype(np.int64)
    flips = np.zeros(len(idx), dtype=np.uint64)
    for _ in range(3):
        bit = rng.integers(0, 64, size=len(idx)).astype(np.uint64)
        use = rng.random(len(idx)) < 0.7
        flips ^= np.where(use, np.uint64(1) << bit, np.uint64(0))
    flips[flips == 0] = np.uint64(1)
    fps[idx] = fps[src] ^ flips
    same = np.flatnonzero(rng.random(n) < 0.001)
    same = same[same > 0]
    fps[same] = fps[same - 1]
    ids = np.arange(n, dtype=np.int64)
    return ids, fps


def expand_count(a: np.ndarray, b: np.ndarray, d: np.ndarray) -> Tuple[int, set]:
    """The pairs near_duplicates' rows stand for (see its docstring)."""
    groups: Dict[int, List[int]] = {}
    for x, y in zip(a[d == 0].tolist(), b[d == 0].tolist()):
        groups.setdefault(x, [x]).append(y)
    out = set()
    for members in groups.values():
        for i in range(len(members)):
            for j in range(i + 1, len(members)):
                p, q = members[i], members[j]
                out.add((min(p, q), max(p, q), 0))
    for x, y, z in zip(a[d > 0].tolist(), b[d > 0].tolist(), d[d > 0].tolist()):
        for p in groups.get(x, [x]):
            for q in groups.get(y, [y]):
                out.add((min(p, q), max(p, q), z))
    return len(out), out


def overhead(args, tmp: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from crawldedup import SimhashIndex
    from crawldedup.spark import near_duplicates

    n, k = args.n, 3
    print(f"\n== Part 1: {n:,} fingerprints, k = {k}, local SimhashIndex.pairs() vs "
          f"Spark local[2] near_duplicates ==")
    t = time.perf_counter()
    ids, fps = planted(n)
    path = os.path.join(tmp, "fps.parquet")
    pq.write_table(pa.table({"id": ids, "fp": fps.view(np.int64)}), path,
                   row_group_size=1 << 20)
    print(f"data: {time.perf_counter() - t:.1f} s to make and write {path}")

    t0 = time.perf_counter()
    index = SimhashIndex(k)
    index.add_many(ids, fps)
    t1 = time.perf_counter()
    a, b, d = index._core.pairs()  # the arrays pairs() iterates over
    t2 = time.perf_counter()
    local = set(zip(a.tolist(), b.tolist(), d.tolist()))
    local_build, local_pairs = t1 - t0, t2 - t1
    del index

    t = time.perf_counter()
    # a long job: the JVM's default JIT (C2 pays off over minutes)
    spark = spark_session(args.partitions, args.ui_port, "")
    start = time.perf_counter() - t
    df = spark.read.parquet(path)
    before = stages(spark)
    out = os.path.join(tmp, "pairs.parquet")
    t = time.perf_counter()
    near_duplicates(df, "id", "fp", k=k, num_partitions=args.partitions,
                    check_ids=False).write.mode("overwrite").parquet(out)
    spark_time = time.perf_counter() - t
    new, shuffle = stage_table(before, stages(spark))
    t = time.perf_counter()
    near_duplicates(df, "id", "fp", k=k, num_partitions=args.partitions,
                    check_ids=True).write.format("noop").mode("overwrite").save()
    spark_checked = time.perf_counter() - t
    got = pq.read_table(out)
    ga = got.column("a").to_numpy()
    gb = got.column("b").to_numpy()
    gd = got.column("distance").to_numpy()
    count, expanded = expand_count(ga, gb, gd)
    same = expanded == local
    blocks = n * (k + 1)

    print(f"\n  {'':44} {'seconds':>9} {'ratio':>7}")
    print(f"  {'local SimhashIndex: add_many':44} {local_build:>9.2f}")
    print(f"  {'local SimhashIndex: pairs()':44} {local_pairs:>9.2f}")
    print(f"  {'local total':44} {local_build + local_pairs:>9.2f} {1.0:>7.1f}")
    print(f"  {'Spark near_duplicates (parquet in and out)':44} {spark_time:>9.2f} "
          f"{spark_time / (local_build + local_pairs):>7.1f}")
    print(f"  {'Spark near_duplicates, check_ids=True':44} {spark_checked:>9.2f} "
          f"{spark_checked / (local_build + local_pairs):>7.1f}")
    print(f"  {'(Spark session start, not counted)':44} {start:>9.2f}")
    print(f"\n  pairs: local {len(local):,}, Spark rows {len(ga):,} standing for {count:,}; "
          f"equal: {same}")
    print(f"  shuffle written: {shuffle / 1e6:,.1f} MB = {shuffle / n:.1f} bytes per fingerprint "
          f"= {shuffle / blocks:.1f} bytes per fingerprint per block (target <= 64)")
    print_stages(new)
    spark.stop()
    if not same:
        raise SystemExit("Spark and local pairs differ")


# ---------------------------------------------------------------- part 2

def recall_table(corpus, clusters_of: Dict[str, Dict[int, int]]) -> None:
    names = list(clusters_of)
    print(f"  {'planted pairs':26} {'n':>6} " + " ".join(f"{n:>14}" for n in names))

    def found(pairs, rep):
        return sum(1 for i, j in pairs if rep.get(i, i) == rep.get(j, j))

    rows = [(f"near {lang} {int(rate * 100)}% edits", pairs)
            for (lang, rate), pairs in sorted(corpus.near.items())]
    everything = [p for _, pairs in rows for p in pairs]
    rows.append(("near, all", everything))
    rows += [(f"same topic {lang} (false)", p) for lang, p in sorted(corpus.same_topic.items())]
    rows += [(f"unrelated {lang} (false)", p) for lang, p in sorted(corpus.unrelated.items())]
    for label, pairs in rows:
        cells = " ".join(f"{found(pairs, clusters_of[name]) / len(pairs):>14.3f}"
                         for name in names)
        print(f"  {label:26} {len(pairs):>6} {cells}")


def spark_child(args) -> None:
    """One Spark measurement in a fresh process (a fresh JVM: a SparkSession
    stopped and started again in one process keeps its JVM warm): start a
    session, run one trivial job, then the pipeline twice, printing one JSON
    line.  --spark-child pairs: JSON lines to fingerprints to near_duplicates,
    the pairs brought to the driver as Arrow; clusters: the same and clusters."""
    from crawldedup.spark import clusters as spark_clusters
    from crawldedup.spark import near_duplicates, simhash_column, simhash_jsonl
    t = time.perf_counter()
    spark = spark_session(args.partitions_e2e, args.ui_port, args.java_options)
    start = time.perf_counter() - t
    t = time.perf_counter()
    spark.range(10).collect()  # the first job starts the executor's machinery
    first = time.perf_counter() - t
    runs = []
    result = None
    for attempt in ("first", "again"):
        before = {j["jobId"] for j in jobs(spark)}
        load = os.getloadavg()[0]
        t = time.perf_counter()
        # one job reads the file and fingerprints it on the executors (byte
        # ranges; the texts never enter the JVM), computes the pairs and, for
        # clusters, contracts each partition and runs a large-star/small-star
        # round with its star test; one more job reads the answer
        if args.spark_json_reader:
            fps = simhash_column(spark.read.schema("id long, text string").json(args.path),
                                 "text", "fp")
        else:
            fps = simhash_jsonl(spark, args.path)
        pairs = near_duplicates(fps, "id", "fp", k=3, num_partitions=args.partitions_e2e,
                                check_ids=False)
        if args.spark_child == "pairs":
            got = pairs.toArrow()  # Arrow, not a Row object per pair
        else:
            got = spark_clusters(pairs, num_partitions=args.partitions_e2e).toArrow()
        seconds = time.perf_counter() - t
        new_jobs = sorted((j for j in jobs(spark) if j["jobId"] not in before),
                          key=lambda j: j["jobId"])
        runs.append({
            "seconds": seconds, "load": [load, os.getloadavg()[0]], "rows": got.num_rows,
            "jobs": [[j["jobId"], _ts(j["completionTime"]) - _ts(j["submissionTime"]),
                      len(j["stageIds"]), j["numTasks"], j["name"][:50]] for j in new_jobs]})
        if result is None:
            result = got
        elif args.spark_child == "clusters" and not got.equals(result):
            raise SystemExit("the second run gave other clusters")
    out = {"start": start, "first": first, "runs": runs,
           "input_partitions": fps.rdd.getNumPartitions()}
    if args.spark_child == "clusters":
        out["clusters"] = [result.column("id").to_pylist(),
                           result.column("representative").to_pylist()]
    spark.stop()
    print("RESULT " + json.dumps(out))


def _identity(batches):
    yield from batches


def startup_child(args) -> None:
    """What a fresh JVM pays once: the first job, the first job with Python
    workers, the first job with Arrow batches (each timed twice)."""
    t = time.perf_counter()
    spark = spark_session(args.partitions_e2e, args.ui_port, args.java_options)
    out = {"session start": time.perf_counter() - t, "load": os.getloadavg()[0]}
    sc = spark.sparkContext
    steps = [("trivial job", lambda: spark.range(10).collect()),
             ("Python workers (an RDD map)",
              lambda: sc.parallelize([1, 2], 2).map(lambda x: x).collect()),
             ("Arrow (a mapInArrow of 10 rows)",
              lambda: spark.range(10, numPartitions=2).mapInArrow(_identity, "id long").collect())]
    for name, step in steps:
        for attempt in ("first", "again"):
            t = time.perf_counter()
            step()
            out[f"{name}, {attempt}"] = time.perf_counter() - t
    spark.stop()
    print("RESULT " + json.dumps(out))


def run_spark_child(args, path: str, mode: str) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--spark-child", mode, "--path", path,
           "--partitions-e2e", str(args.partitions_e2e), "--ui-port", str(args.ui_port),
           f"--java-options={args.java_options}"]
    if args.spark_json_reader:
        cmd.append("--spark-json-reader")
    run = subprocess.run(cmd, capture_output=True)
    lines = [x for x in run.stdout.decode().splitlines() if x.startswith("RESULT ")]
    if run.returncode != 0 or not lines:
        print(run.stderr.decode()[-3000:])
        raise SystemExit(f"the Spark run ({mode}) failed")
    return json.loads(lines[-1][len("RESULT "):])


def print_jobs(label: str, child: dict, run: dict) -> None:
    in_jobs = sum(j[1] for j in run["jobs"])
    print(f"  Spark {label}: {len(run['jobs'])} jobs, {sum(j[2] for j in run['jobs'])} stages, "
          f"{sum(j[3] for j in run['jobs'])} tasks, {in_jobs:.1f} s in jobs, "
          f"{run['seconds'] - in_jobs:.1f} s on the driver around them "
          f"({child['input_partitions']} input partitions, load {run['load'][0]:.1f}"
          f"-{run['load'][1]:.1f})")
    for job_id, took, stages_, tasks, name in run["jobs"]:
        print(f"    job {job_id:>3} {took:>6.2f} s {stages_:>3} stages {tasks:>4} tasks  {name}")


def end_to_end(args, tmp: str) -> None:
    from simhash_corpus import quality_corpus

    n_base = args.docs // 10
    corpus = quality_corpus(n_base=n_base, n_topics=n_base // 2)
    docs = corpus.docs
    print(f"\n== Part 2: {len(docs):,} documents (simhash_corpus.quality_corpus("
          f"n_base={n_base}, n_topics={n_base // 2})), k = 3 ==")
    path = os.path.join(tmp, "docs.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for i, text in enumerate(docs):
            f.write(json.dumps({"id": i, "text": text}, ensure_ascii=False) + "\n")
    # name -> (seconds, load average before, load average after)
    times: Dict[str, Tuple[float, float, float]] = {}
    clusters: Dict[str, Dict[int, int]] = {}

    # crawldedup near-dups: the median of three runs (the first one also
    # reads the package's files into the page cache), the same output each time
    load = os.getloadavg()[0]
    took = []
    outputs = set()
    for _ in range(3):
        t = time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "crawldedup", "near-dups", path,
                              "--format", "clusters"], capture_output=True, check=True)
        took.append(time.perf_counter() - t)
        outputs.add(run.stdout)
    if len(outputs) != 1:
        raise SystemExit("crawldedup near-dups gave different output in its three runs")
    print("  crawldedup CLI, three runs: " + ", ".join(f"{x:.2f} s" for x in took))
    times["crawldedup CLI"] = (sorted(took)[1], load, os.getloadavg()[0])
    rep: Dict[int, int] = {}
    for line in run.stdout.decode().splitlines():
        c = json.loads(line)
        for m in c["members"]:
            rep[m] = c["representative"]
    clusters["crawldedup CLI"] = rep

    # Spark, each in a fresh process and JVM: fingerprints and pairs, then
    # fingerprints, pairs and clusters
    startup = run_spark_child(args, path, "startup")
    print(f"  Spark's driver JVM options: {args.java_options or '(the JVM defaults)'}")
    print(f"  Spark's one-time costs in a fresh JVM (load {startup.pop('load'):.1f}): " +
          ", ".join(f"{k} {v:.2f} s" for k, v in startup.items()))
    pairs_child = run_spark_child(args, path, "pairs")
    full_child = run_spark_child(args, path, "clusters")
    clusters["Spark local[2]"] = dict(zip(*full_child["clusters"]))
    for label, child in (("fingerprints + pairs", pairs_child),
                         ("fingerprints + pairs + clusters", full_child)):
        print(f"  Spark {label}: session start {child['start']:.1f} s and first job "
              f"{child['first']:.1f} s (not counted)")
        print_jobs(label + ", first run", child, child["runs"][0])
        print_jobs(label + ", again", child, child["runs"][1])
    print(f"  Spark pairs: {pairs_child['runs'][0]['rows']:,} rows; clusters: "
          f"{full_child['runs'][0]['rows']:,} nodes")

    def row(child: dict, i: int) -> Tuple[float, float, float]:
        r = child["runs"][i]
        return (r["seconds"], r["load"][0], r["load"][1])

    # the JVM start is not in these rows (a Spark job runs in a session that
    # is up); the last Spark row counts it, for comparison with the
    # processes of the others, whose figures include their interpreter start
    times["Spark fp + pairs"] = row(pairs_child, 0)
    times["Spark fp + pairs + clusters"] = row(full_child, 0)
    times["Spark fp + pairs, again"] = row(pairs_child, 1)
    times["Spark fp + pairs + clusters, again"] = row(full_child, 1)
    s, a, b = row(full_child, 0)
    times["Spark fp + pairs + clusters + session start"] = (
        s + full_child["start"] + full_child["first"], a, b)

    # text-dedup
    if args.textdedup_python:
        out = os.path.join(tmp, "td-out")
        load = os.getloadavg()[0]
        t = time.perf_counter()
        run = subprocess.run([args.textdedup_python, "-m", "text_dedup.simhash",
                              "--path", "json", "--data_files", path, "--split", "train",
                              "--cache_dir", os.path.join(tmp, "td-cache"),
                              "--output", out, "--column", "text", "--num_proc", "2",
                              "--debug"], capture_output=True, cwd=tmp)
        times["text-dedup"] = (time.perf_counter() - t, load, os.getloadavg()[0])
        if run.returncode != 0:
            print(run.stderr.decode()[-3000:])
            raise SystemExit("text-dedup failed")
        dump = subprocess.run([args.textdedup_python, "-c",
                               "import json, pickle, sys; uf = pickle.load(open(sys.argv[1], "
                               "'rb')); print(json.dumps({i: uf.find(i) for i in uf.parent}))",
                               os.path.join(out, "uf.pkl")], capture_output=True, check=True)
        clusters["text-dedup"] = {int(i): r for i, r in json.loads(dump.stdout).items()}
        # text-dedup's SimHash script starts no Spark (datasets.map on 2
        # processes); its figure includes its interpreter start and imports
        t = time.perf_counter()
        subprocess.run([args.textdedup_python, "-c", "import text_dedup.simhash"],
                       capture_output=True, check=True, cwd=tmp)
        print(f"  text-dedup: starting Python and importing text_dedup.simhash takes "
              f"{time.perf_counter() - t:.1f} s of its time")
    else:
        print("  text-dedup: not run (give --textdedup-python)")

    base = times.get("text-dedup", (0.0, 0.0, 0.0))[0]
    print(f"\n  {'':44} {'seconds':>8} {'x faster than text-dedup':>25} {'load 1-min':>11}")
    for name, (sec, before, after) in times.items():
        ratio = f"{base / sec:>25.1f}" if base else f"{'-':>25}"
        print(f"  {name:44} {sec:>8.2f} {ratio} {before:>5.1f}-{after:<5.1f}")
    print()
    recall_table(corpus, clusters)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--docs", type=int, default=50_000)
    parser.add_argument("--partitions", type=int, default=16)
    # 50,000 documents are 200,000 block rows: one partition per core
    parser.add_argument("--partitions-e2e", type=int, default=2)
    parser.add_argument("--ui-port", type=int, default=4747)
    parser.add_argument("--textdedup-python", default=(
        "/work/venv-textdedup/bin/python" if os.path.exists("/work/venv-textdedup/bin/python")
        else None))
    parser.add_argument("--java-options", default=JAVA_OPTIONS,
                        help="part 2: the driver JVM's options (spark.driver.extraJavaOptions; "
                             f"default {JAVA_OPTIONS!r}: --java-options= gives the JVM's "
                             "defaults)")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--skip-e2e", action="store_true")
    parser.add_argument("--spark-json-reader", action="store_true",
                        help="end to end: read the documents with spark.read.json and "
                             "simhash_column instead of simhash_jsonl")
    # internal: one Spark measurement of part 2 in a fresh process
    parser.add_argument("--spark-child", choices=("pairs", "clusters", "startup"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.spark_child == "startup":
        startup_child(args)
        return
    if args.spark_child:
        spark_child(args)
        return
    print("command: python " + " ".join(sys.argv))
    with tempfile.TemporaryDirectory(prefix="crawldedup-spark-bench-") as tmp:
        if not args.skip_overhead:
            overhead(args, tmp)
        if not args.skip_e2e:
            end_to_end(args, tmp)


if __name__ == "__main__":
    main()
