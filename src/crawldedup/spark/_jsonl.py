"""SimHash fingerprints of JSON lines files, read and fingerprinted on the
executors in one pass: the texts never enter the JVM.

Reading JSON lines with Spark's reader and then calling simhash_column
parses every line in the JVM, converts every text to Arrow and sends it to a
Python worker, which only needs it for the fingerprint.  Here each task
opens its byte range of a file in Python (as read_warc and cc-pyspark do),
parses its lines and fingerprints them with the compiled simhash_texts, and
only (id, fingerprint) goes back to Spark, as Arrow batches.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from typing import Any, Iterable, Iterator, List, Optional, Tuple, Union

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from crawldedup.near.simhash import simhash_many
from crawldedup.spark._common import check_workers

__all__ = ["simhash_jsonl"]

# Rows per Arrow batch a task hands back (16 bytes each).
_BATCH = 1 << 16
# The smallest byte range worth a task of its own.
_MIN_SPLIT = 1 << 20
# Ranges per core by default: texts differ in cost per byte (one byte range
# of the benchmark's corpus holds twice the documents of another), and a core
# that drew cheap ranges takes another instead of waiting for the slow one.
_RANGES_PER_CORE = 4


def _splits(names: List[str], parts: int) -> List[Tuple[str, int, int]]:
    """(path, start, end) byte ranges: a gzip file is one range (it cannot
    be split), a plain file ranges of about total / parts bytes."""
    sizes = [os.path.getsize(n) for n in names]
    step = max(_MIN_SPLIT, -(-sum(sizes) // parts))
    out = []
    for name, size in zip(names, sizes):
        if name.endswith(".gz") or size <= step:
            out.append((name, 0, -1))
            continue
        out.extend((name, start, min(size, start + step)) for start in range(0, size, step))
    return out


def _lines(path: str, start: int, end: int) -> Iterator[Tuple[int, bytes]]:
    """(offset, line) of the lines that start in [start, end) (end -1: to
    the end of the file), as Hadoop's line reader splits a file: a range
    past the first skips the line it begins in, which belongs to the range
    before it."""
    if end < 0:
        with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
            offset = 0
            for line in f:
                yield offset, line
                offset += len(line)
        return
    with open(path, "rb") as f:
        offset = start
        if start:
            f.seek(start - 1)
            offset += len(f.readline()) - 1
        while offset < end:
            line = f.readline()
            if not line:
                return
            yield offset, line
            offset += len(line)


def _document(line: bytes, id_field: str, text_field: str, string_ids: bool) -> Tuple[Any, str]:
    """(id, text) of one line; ValueError saying why it is not a document."""
    doc = json.loads(line)
    if not isinstance(doc, dict):
        raise ValueError(f"a JSON {type(doc).__name__}, not an object")
    text = doc.get(text_field)
    if not isinstance(text, str):
        raise ValueError(f"no string field {text_field!r}")
    ident = doc.get(id_field)
    if string_ids:
        if not isinstance(ident, str):
            raise ValueError(f"field {id_field!r} is not a string")
    elif isinstance(ident, bool) or not isinstance(ident, int) or not -2**63 <= ident < 2**63:
        raise ValueError(f"field {id_field!r} is not a 64-bit integer")
    return ident, text


def _task(splits: List[Tuple[str, int, int]], id_field: str, text_field: str,
          string_ids: bool, tokenizer: Any, ngram: Any) -> Any:
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        id_type = pa.string() if string_ids else pa.int64()

        def batch(ids: List[Any], texts: List[str]) -> Any:
            fps = simhash_many(texts, tokenizer=tokenizer, ngram=ngram).view(np.int64)
            return pa.RecordBatch.from_arrays([pa.array(ids, id_type), pa.array(fps)],
                                              ["id", "fp"])

        for numbers in batches:
            for number in numbers.column(0).to_pylist():
                path, start, end = splits[number]
                ids: List[Any] = []
                texts: List[str] = []
                try:
                    for offset, line in _lines(path, start, end):
                        if not line.strip():
                            continue
                        try:
                            ident, text = _document(line, id_field, text_field, string_ids)
                        except ValueError as exc:  # json's errors are ValueErrors too
                            # on the executor's log, like read_warc's; the job goes on
                            sys.stderr.write(f"crawldedup: skipped the line at offset {offset} "
                                             f"of {path}: {exc}\n")
                            continue
                        ids.append(ident)
                        texts.append(text)
                        if len(ids) == _BATCH:
                            yield batch(ids, texts)
                            ids, texts = [], []
                except OSError as exc:
                    sys.stderr.write(f"crawldedup: cannot read {path}: {exc}\n")
                if ids:
                    yield batch(ids, texts)
    return run


def simhash_jsonl(spark: Any, paths: Union[str, Iterable[str]], *, id_field: str = "id",
                  text_field: str = "text", id_type: str = "bigint", tokenizer: Any = "auto",
                  ngram: Any = None, num_partitions: Optional[int] = None) -> DataFrame:
    """A DataFrame (id, fp) of the documents of JSON lines files (one
    object per line, plain or ``.gz``): ``fp`` (bigint) is
    :func:`crawldedup.simhash` of the object's ``text_field`` with the same
    ``tokenizer`` and ``ngram``, stored signed as by
    :func:`simhash_column`, and ``id`` its ``id_field``, a bigint or, with
    ``id_type="string"``, a string.

    The same fingerprints as ``simhash_column(spark.read.json(paths),
    text_field)``, in one pass: each task reads a byte range of a file in
    Python (a line belongs to the range it starts in; a ``.gz`` file is one
    range), parses its lines and fingerprints them with the compiled
    tokenizer, and only 16 bytes per document go back to Spark.  About
    ``num_partitions`` ranges (default 4 per core, ``spark.sparkContext.defaultParallelism``,
    none under 1 MB).  ``paths`` are files every executor can open.

    A line that is not such an object (not JSON, no string text, an id of
    the wrong type) is skipped and written to the executor's standard error
    with its file and byte offset, as :func:`read_warc` does with damaged
    records; blank lines are skipped silently.  FileNotFoundError on the
    driver for a path that does not exist here.
    """
    from pyspark.sql import SparkSession

    if not isinstance(spark, SparkSession):
        raise TypeError(f"spark must be a SparkSession, not {type(spark).__name__}")
    check_workers(spark)
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    try:
        names = [os.fspath(p) for p in paths]
    except TypeError:
        raise TypeError("paths must be a path or an iterable of paths") from None
    names = [n[len("file://"):] if isinstance(n, str) and n.startswith("file://") else n
             for n in names]
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"paths must hold str paths, not {type(name).__name__}")
        if not os.path.isfile(name):
            raise FileNotFoundError(f"paths: no such file {name!r}")
    for arg, value in (("id_field", id_field), ("text_field", text_field)):
        if not isinstance(value, str):
            raise TypeError(f"{arg} must be a str, not {type(value).__name__}")
    if id_type not in ("bigint", "string"):
        raise ValueError(f"id_type must be 'bigint' or 'string', got {id_type!r}")
    if num_partitions is not None and (isinstance(num_partitions, bool)
                                       or not isinstance(num_partitions, int)
                                       or num_partitions < 1):
        raise ValueError(f"num_partitions must be None or an int >= 1, got {num_partitions!r}")
    simhash_many(["check the options"], tokenizer=tokenizer, ngram=ngram)  # bad options raise here
    splits = _splits(names, num_partitions
                     or _RANGES_PER_CORE * spark.sparkContext.defaultParallelism)
    schema = T.StructType([
        T.StructField("id", T.StringType() if id_type == "string" else T.LongType(), False),
        T.StructField("fp", T.LongType(), False)])
    run = _task(splits, id_field, text_field, id_type == "string", tokenizer, ngram)
    return spark.range(len(splits), numPartitions=max(1, len(splits))).mapInArrow(run, schema)
