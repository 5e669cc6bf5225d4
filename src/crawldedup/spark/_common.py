"""Argument checks shared by the Spark functions, and the check that Spark's
Python workers can run them."""

from __future__ import annotations

import json
import operator
import os
import subprocess
import sys
import threading
from typing import Any, Dict, Optional, Tuple

from pyspark import SparkFiles
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from crawldedup._version import __version__
from crawldedup.errors import CrawldedupError

INTEGRAL_TYPES = (T.LongType, T.IntegerType, T.ShortType, T.ByteType)


class WorkerPythonError(CrawldedupError, RuntimeError):
    """The Python that Spark starts for its workers cannot run crawldedup's
    Spark functions (a module missing, another Python version, another
    crawldedup); raised before any job is sent, with the fix."""


# What the workers of crawldedup.spark import: the compiled kernels (through
# their selector), numpy and pyarrow, and pandas for the pandas UDFs (the
# modules crawldedup[spark] installs).
WORKER_MODULES = ("numpy", "pyarrow", "pandas", "crawldedup._kernel")
# Run by the workers' Python: which of the modules in argv it cannot import,
# its version and crawldedup's.
_PROBE = """
import json, sys
missing = []
for name in sys.argv[1:]:
    try:
        __import__(name)
    except Exception as exc:
        missing.append("%s (%s: %s)" % (name, type(exc).__name__, exc))
crawldedup = sys.modules.get("crawldedup")
print(json.dumps({"python": "%d.%d" % sys.version_info[:2], "executable": sys.executable,
                  "missing": missing, "crawldedup": getattr(crawldedup, "__version__", None)}))
"""
# Seconds the probe may take (a cold import of pandas and pyarrow on a busy
# machine takes a few); past that the workers are not judged.
_PROBE_TIMEOUT = 120
# (application id, worker Python) -> None when it can run the functions,
# else the message of the error.
_checked: Dict[Tuple[str, str], Optional[str]] = {}
_checked_lock = threading.Lock()

_FIX = ("Start the Spark session with PYSPARK_PYTHON set to a Python that has "
        "crawldedup[spark] installed, e.g. os.environ['PYSPARK_PYTHON'] = sys.executable "
        "before SparkSession.builder...getOrCreate() (PySpark reads it when the session "
        "starts), or export PYSPARK_PYTHON=/path/to/venv/bin/python; with spark-submit, "
        "--conf spark.pyspark.python=/path/to/venv/bin/python")


def check_workers(session: Any) -> None:
    """Raise :class:`WorkerPythonError` when the Python that Spark runs for
    its workers cannot run crawldedup's functions; checked once per session
    and worker Python, by running that Python once on the driver's machine.

    PySpark names the workers' Python when the session starts
    (``sparkContext.pythonExec``: ``PYSPARK_PYTHON``, which spark-submit
    sets from ``spark.pyspark.python``, else ``python3`` from ``PATH``).
    Without the check, a missing module surfaces as a ``ModuleNotFoundError``
    deep in a failed task of the first job.  A session without a
    SparkContext (Spark Connect) is not checked."""
    try:
        sc = session.sparkContext
        python_exec = str(sc.pythonExec)
        key = (str(sc.applicationId), python_exec)
    except Exception:  # noqa: BLE001 - Spark Connect: no context, nothing to resolve
        return
    with _checked_lock:
        if key not in _checked:
            _checked[key] = _probe(sc, python_exec)
        problem = _checked[key]
    if problem is not None:
        raise WorkerPythonError(problem)


def _probe(sc: Any, python_exec: str) -> Optional[str]:
    """None when python_exec can run the workers, else what is wrong."""
    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in dict(getattr(sc, "environment", {}) or {}).items()})
    includes = list(getattr(sc, "_python_includes", None) or [])
    if includes:  # files shipped with addPyFile / --py-files, as the workers see them
        root = SparkFiles.getRootDirectory()
        paths = [os.path.join(root, name) for name in includes]
        env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [env.get("PYTHONPATH")] if p])
    where = (f"Spark's Python workers run {python_exec!r} (PYSPARK_PYTHON when the session "
             f"started; python3 from PATH when it was unset)")
    try:
        conf = sc.getConf().get("spark.pyspark.python", None)
    except Exception:  # noqa: BLE001 - only for the message
        conf = None
    if conf and conf != python_exec:
        where += (f"; spark.pyspark.python = {conf!r} is set, but only spark-submit turns it "
                  f"into PYSPARK_PYTHON, which PySpark reads")
    try:
        run = subprocess.run([python_exec, "-c", _PROBE, *WORKER_MODULES], env=env,
                             capture_output=True, text=True, timeout=_PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None
    except OSError as exc:
        return f"{where}, which cannot be started ({exc}). {_FIX}."
    try:
        found = json.loads(run.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return (f"{where}, which failed (exit status {run.returncode}): "
                f"{run.stderr.strip()[-500:]!r}. {_FIX}.")
    resolved = "" if found["executable"] == python_exec else f", that is {found['executable']!r}"
    who = f"{where}{resolved} (Python {found['python']})"
    driver = "%d.%d" % sys.version_info[:2]
    if found["missing"]:
        return (f"{who}, which cannot import {', '.join(found['missing'])}: the first job of "
                f"crawldedup.spark would fail in its workers. {_FIX}.")
    if found["python"] != driver:
        return (f"{who}, but the driver runs Python {driver}: PySpark needs the same "
                f"version on both. {_FIX}.")
    if found["crawldedup"] != __version__:
        return (f"{who}, which imports crawldedup {found['crawldedup']}, but the driver "
                f"runs crawldedup {__version__}: the workers must run the same crawldedup. "
                f"{_FIX}.")
    return None


def check_df(df: Any, name: str = "df") -> DataFrame:
    """df, when it is a DataFrame whose session's workers can run
    crawldedup's functions (:func:`check_workers`)."""
    if not isinstance(df, DataFrame):
        raise TypeError(f"{name} must be a pyspark.sql.DataFrame, not {type(df).__name__}")
    check_workers(df.sparkSession)
    return df


def column_type(df: DataFrame, col: Any, name: str) -> T.DataType:
    """The type of top-level column col of df; ValueError naming the argument
    when there is no such column."""
    if not isinstance(col, str):
        raise TypeError(f"{name} must be a column name (str), not {type(col).__name__}")
    for field in df.schema.fields:
        if field.name == col:
            return field.dataType
    raise ValueError(f"{name}: the DataFrame has no column {col!r} "
                     f"(columns: {', '.join(df.columns)})")


def check_id_type(df: DataFrame, col: str, name: str) -> T.DataType:
    dtype = column_type(df, col, name)
    if not isinstance(dtype, INTEGRAL_TYPES + (T.StringType,)):
        raise TypeError(f"{name}: column {col!r} is {dtype.simpleString()}; ids must be an "
                        f"integer or string column")
    return dtype


def check_partitions(num_partitions: Optional[int], df: DataFrame) -> int:
    if num_partitions is None:
        conf = df.sparkSession.conf.get("spark.sql.shuffle.partitions") or "200"
        return max(1, int(conf))
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, int):
        raise TypeError(f"num_partitions must be None or an int, not "
                        f"{type(num_partitions).__name__}")
    n = operator.index(num_partitions)
    if n < 1:
        raise ValueError(f"num_partitions must be >= 1, got {n}")
    return n
