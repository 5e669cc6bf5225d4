"""WARC/WET files as a DataFrame of (uri, text), in the manner of cc-pyspark."""

from __future__ import annotations

import os
import sys
from typing import Any, Iterable, Iterator, List, Optional, Tuple, Union

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from crawldedup.spark._common import check_workers
from crawldedup.warc import WarcProblem, iter_warc

__all__ = ["read_warc"]

_DOCS = T.StructType([T.StructField("uri", T.StringType(), True),
                      T.StructField("text", T.StringType(), True)])
_ALL = T.StructType(_DOCS.fields + [T.StructField("path", T.StringType(), False),
                                    T.StructField("offset", T.LongType(), False),
                                    T.StructField("error", T.StringType(), True)])


def _rows(include_errors: bool) -> Any:
    def rows(path: str) -> Iterator[Tuple[Any, ...]]:
        try:
            items = iter_warc(path)
            for item in items:
                if isinstance(item, WarcProblem):
                    # on the executor's log, like a crawler's; the job goes on
                    sys.stderr.write(f"crawldedup: skipped a damaged record in {item}\n")
                    if include_errors:
                        yield (None, None, item.path, item.offset, item.reason)
                    continue
                if include_errors:
                    yield (item.uri, item.text, item.path, item.offset, None)
                else:
                    yield (item.uri, item.text)
        except OSError as exc:
            sys.stderr.write(f"crawldedup: cannot read {path}: {exc}\n")
            if include_errors:
                yield (None, None, path, 0, f"cannot read the file: {exc}")
    return rows


def read_warc(spark: Any, paths: Union[str, Iterable[str]], *,
              include_errors: bool = False,
              num_partitions: Optional[int] = None) -> DataFrame:
    """The documents of WARC/WET files (.warc, .warc.gz, .wet.gz) as a
    DataFrame (uri, text): one row per response or conversion record, as
    :func:`crawldedup.warc.iter_warc` reads them (HTML reduced to text).

    ``paths`` are files every executor can open (local paths on local or
    shared file systems), one task per file by default (``num_partitions``
    to group them).  Damaged records are skipped and never stop the job;
    each is written to the executor's standard error with its file and
    offset, and with ``include_errors=True`` the DataFrame has three more
    columns, (path, offset, error), and one row per damaged record whose
    uri and text are null and error says what is wrong (the documents'
    rows have a null error).  FileNotFoundError on the driver for a path
    that does not exist here.
    """
    from pyspark.sql import SparkSession

    if not isinstance(spark, SparkSession):
        raise TypeError(f"spark must be a SparkSession, not {type(spark).__name__}")
    check_workers(spark)
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    try:
        names: List[str] = [os.fspath(p) for p in paths]
    except TypeError:
        raise TypeError("paths must be a path or an iterable of paths") from None
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"paths must hold str paths, not {type(name).__name__}")
        if "://" not in name and not os.path.exists(name):
            raise FileNotFoundError(f"paths: no such file {name!r}")
    names = [n[len("file://"):] if n.startswith("file://") else n for n in names]
    if num_partitions is not None and (isinstance(num_partitions, bool)
                                       or not isinstance(num_partitions, int)
                                       or num_partitions < 1):
        raise ValueError(f"num_partitions must be None or an int >= 1, got {num_partitions!r}")
    parts = num_partitions or max(1, len(names))
    sc = spark.sparkContext
    rdd = sc.parallelize(names, parts).flatMap(_rows(include_errors))
    return spark.createDataFrame(rdd, _ALL if include_errors else _DOCS)
