"""The Spark session of the Spark tests: one real local[2] session for the
whole run (a JVM start takes seconds), small shuffles, no UI, quiet logs.

Skips when pyspark or Java is missing, unless CRAWLDEDUP_REQUIRE_SERVICES is
set (CI), where it fails instead.
"""

import os
import shutil
import sys

import pytest


def _unavailable(message):
    if os.environ.get("CRAWLDEDUP_REQUIRE_SERVICES"):
        pytest.fail(message + " (CRAWLDEDUP_REQUIRE_SERVICES is set)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def spark():
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
        from pyspark.sql import SparkSession
    except ImportError as exc:
        _unavailable(f"pyspark is not installed: {exc}")
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        _unavailable("Spark needs Java and there is no `java` here")
    import crawldedup

    # The Python workers run this interpreter and import the crawldedup the
    # tests import (the worktree's or the installed wheel).
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(crawldedup.__file__)))
    paths = [package_root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    session = (SparkSession.builder.master("local[2]")
               .appName("crawldedup-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.driver.memory", "1g")
               # C1 only: see JAVA_OPTIONS in benchmarks/compare_spark.py
               .config("spark.driver.extraJavaOptions",
                       "-Dlog4j.rootLogger=ERROR -XX:TieredStopAtLevel=1")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    session.range(1).collect()  # the first job starts the executors' machinery
    yield session
    session.stop()
