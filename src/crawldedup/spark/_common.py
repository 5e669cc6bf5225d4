"""Argument checks shared by the Spark functions."""

from __future__ import annotations

import operator
from typing import Any, Optional

from pyspark.sql import DataFrame
from pyspark.sql import types as T

INTEGRAL_TYPES = (T.LongType, T.IntegerType, T.ShortType, T.ByteType)


def check_df(df: Any, name: str = "df") -> DataFrame:
    if not isinstance(df, DataFrame):
        raise TypeError(f"{name} must be a pyspark.sql.DataFrame, not {type(df).__name__}")
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
