#!/usr/bin/env python3
"""MinHash near-duplicate clusters end to end: crawldedup's command line and
Spark job against text-dedup's MinHash scripts, on the same JSON lines.

The documents: ``--docs`` (default 100,000) of about 1,000 characters, half
English and half Chinese (benchmarks/simhash_corpus.py's speed corpus,
every 10th a 3% edit of another), written as ``{"id": i, "text": ...}``
lines (and, for text-dedup's Spark script, as a Parquet file; not timed).
Threshold 0.8, num_perm 128, 5-gram shingles for everyone.

* ``crawldedup near-dups --method minhash --format clusters`` (a process of
  its own; its figure includes the interpreter's start);
* text-dedup's ``python -m text_dedup.minhash`` (``--num_proc 2``), run by
  the Python of a virtualenv that has it (``--textdedup-python``;
  ``pip install text-dedup`` there);
* crawldedup on Spark local[2] in a process of its own (the JVM start
  included): read the JSON lines, ``minhash_column``,
  ``minhash_near_duplicates``, ``clusters``, the clusters brought to the
  driver; its clusters are checked equal to the command line's;
* text-dedup's ``python -m text_dedup.minhash_spark`` on the Parquet file
  (local[2]; the JVM start included).  It needs the graphframes package
  and its jar, which Spark fetches from Maven Central.  Where neither can
  be had, ``--textdedup-spark-until-components`` runs it with a stand-in
  graphframes module that ends the process when the script reaches its
  connected components: the time to there (reading, MinHash, bands, the
  edges and vertices written out) is a lower bound of the script's time,
  and the ratio against it a lower bound of the real one.

Each is run ``--rounds`` times (default 2) and keeps its best time
(text-dedup's Spark script once).

    python benchmarks/compare_minhash_e2e.py --textdedup-python VENV/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SPARK_CHILD = r"""
import json, os, sys, time
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").appName("crawldedup-minhash")
         .config("spark.driver.memory", "6g").config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "8")
         .config("spark.sql.execution.arrow.pyspark.enabled", "true")
         .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
from crawldedup.spark import clusters, minhash_column, minhash_near_duplicates
docs = spark.read.json(sys.argv[1], schema="id long, text string")
signed = minhash_column(docs, "text", "sig")
pairs = minhash_near_duplicates(signed, "id", "sig", 0.8, check_ids=False)
rows = clusters(pairs).collect()
print(json.dumps({r["id"]: r["representative"] for r in rows}))
spark.stop()
"""

# The stand-in for graphframes (--textdedup-spark-until-components): the
# script imports GraphFrame at its start and calls connectedComponents()
# once its edges and vertices are counted; the process ends there.
GRAPHFRAMES_STAND_IN = r"""
import os
import sys


class GraphFrame:
    def __init__(self, vertices, edges):
        pass

    def connectedComponents(self):
        sys.stdout.write("reached connected components\n")
        sys.stdout.flush()
        os._exit(0)
"""


def write_docs(n: int, folder: str) -> str:
    from simhash_corpus import speed_corpus
    path = os.path.join(folder, "docs.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for i, text in enumerate(speed_corpus(n, seed=29)):
            f.write(json.dumps({"id": i, "text": text}, ensure_ascii=False) + "\n")
    return path


def timed(cmd: List[str], cwd: str, env: Dict[str, str] = None) -> tuple:
    t = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, cwd=cwd, env=env)
    took = time.perf_counter() - t
    if run.returncode != 0:
        sys.stderr.write(run.stderr.decode("utf-8", "replace")[-3000:])
        raise SystemExit(f"failed: {' '.join(cmd[:4])}")
    return took, run.stdout


def cli_groups(stdout: bytes) -> Dict[int, int]:
    out = {}
    for line in stdout.decode().splitlines():
        c = json.loads(line)
        for m in c["members"]:
            out[m] = c["representative"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--textdedup-python", help="the Python of a virtualenv with text-dedup")
    ap.add_argument("--skip-spark", action="store_true")
    ap.add_argument("--skip-textdedup-spark", action="store_true",
                    help="leave out text-dedup's Spark script (it needs the graphframes "
                         "package's jar, which Spark fetches from Maven Central)")
    ap.add_argument("--textdedup-spark-until-components", action="store_true",
                    help="time text-dedup's Spark script up to its connected components "
                         "(a lower bound), with a stand-in for graphframes")
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cd-minhash-e2e-")
    path = write_docs(args.docs, tmp)
    times: Dict[str, float] = {}
    results: Dict[str, object] = {"documents": args.docs}

    def keep(name: str, took: float) -> None:
        times[name] = min(times.get(name, float("inf")), took)

    groups = None
    for _ in range(args.rounds):
        took, out = timed([sys.executable, "-m", "crawldedup", "near-dups", "--method",
                           "minhash", "--format", "clusters", path], tmp)
        keep("crawldedup near-dups --method minhash", took)
        groups = cli_groups(out)
        if args.textdedup_python:
            took, _ = timed([args.textdedup_python, "-m", "text_dedup.minhash", "--path", "json",
                             "--data_files", path, "--split", "train", "--cache_dir",
                             os.path.join(tmp, "td-cache"), "--output",
                             os.path.join(tmp, "td-out"), "--column", "text", "--num_proc", "2",
                             "--num_perm", "128", "--ngram", "5", "--threshold", "0.8"], tmp)
            keep("text-dedup text_dedup.minhash --num_proc 2", took)
    if not args.skip_spark:
        child = os.path.join(tmp, "spark_child.py")
        Path(child).write_text(SPARK_CHILD)
        for _ in range(args.rounds):
            took, out = timed([sys.executable, child, path], tmp)
            keep("crawldedup Spark local[2] (JVM start included)", took)
            spark_groups = {int(k): v for k, v in json.loads(out).items()}
            assert groups is not None
            # a document the command line put in no cluster is alone
            mine = {d: r for d, r in groups.items()}
            assert {d: spark_groups[d] for d in mine} == mine, "Spark's clusters differ"
            assert set(spark_groups) == set(mine)
        results["Spark clusters equal the command line's"] = True
        if args.textdedup_python and not args.skip_textdedup_spark:
            import pyarrow.json as pj
            import pyarrow.parquet as pq
            folder = os.path.join(tmp, "parquet")
            os.makedirs(folder)
            pq.write_table(pj.read_json(path), os.path.join(folder, "docs.parquet"))
            env = dict(os.environ, PYSPARK_SUBMIT_ARGS="--master local[2] pyspark-shell",
                       PYSPARK_PYTHON=args.textdedup_python)
            name = "text-dedup text_dedup.minhash_spark (JVM start included)"
            if args.textdedup_spark_until_components:
                stand_in = os.path.join(tmp, "stand-in", "graphframes")
                os.makedirs(stand_in)
                Path(stand_in, "__init__.py").write_text(GRAPHFRAMES_STAND_IN)
                env["PYTHONPATH"] = os.path.dirname(stand_in)
                name = ("text-dedup text_dedup.minhash_spark up to its connected components "
                        "(a lower bound; JVM start included)")
            took, out = timed([args.textdedup_python, "-m", "text_dedup.minhash_spark",
                               "--input", folder, "--output", os.path.join(tmp, "tds-out"),
                               "--column", "text", "--threshold", "0.8", "--num_perm", "128",
                               "--ngram_size", "5", "--checkpoint_dir",
                               os.path.join(tmp, "ckpt")], tmp, env)
            if args.textdedup_spark_until_components:
                assert b"reached connected components" in out, "the stand-in was not reached"
            keep(name, took)
    results["seconds"] = times
    td = times.get("text-dedup text_dedup.minhash --num_proc 2")
    if td:
        results["near-dups vs text-dedup"] = td / times["crawldedup near-dups --method minhash"]
    ours = times.get("crawldedup Spark local[2] (JVM start included)")
    for name, took in times.items():
        if ours and name.startswith("text-dedup text_dedup.minhash_spark"):
            results["Spark vs text-dedup Spark" + (" (at least)" if "lower bound" in name
                                                   else "")] = took / ours
    print(json.dumps(results, indent=2))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "minhash_e2e.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
