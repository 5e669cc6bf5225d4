"""Argument checks of the Bloom filter family (and the boolean options of
the other public calls), each written once.

Every check returns the value in its canonical type, or raises TypeError for
a value of the wrong type and ValueError for one out of range, naming the
argument and the accepted range.
"""

from __future__ import annotations

import datetime
import math
import numbers
from typing import Any, Optional, cast

import numpy as np

from crawldedup._kernel import MAX_SEED
from crawldedup._types import Clock

MIN_GENERATIONS = 2
MAX_GENERATIONS = 64


def check_generations(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"generations must be an integer in [{MIN_GENERATIONS}, "
                        f"{MAX_GENERATIONS}], not {type(value).__name__}")
    value = int(value)
    if not MIN_GENERATIONS <= value <= MAX_GENERATIONS:
        raise ValueError(f"generations must be an integer in [{MIN_GENERATIONS}, "
                         f"{MAX_GENERATIONS}], got {value}")
    return cast(int, value)


def positive_seconds(name: str, value: Any, kinds: str, values: str) -> float:
    """A duration (a number of seconds or a timedelta) as positive, finite
    seconds; the errors say ``{name} must be {kinds}`` (a wrong type) and
    ``{name} must be {values}`` (out of range)."""
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {kinds}, not {type(value).__name__}")
    seconds = float(value)
    if not (seconds > 0.0 and math.isfinite(seconds)):
        raise ValueError(f"{name} must be {values}, got {value!r}")
    return seconds


def check_rotate_every(value: Any) -> Optional[float]:
    if value is None:
        return None
    must = "None or a positive, finite number of seconds"
    return positive_seconds("rotate_every", value, must, must)


def check_rotate_at_fill(value: Any) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"rotate_at_fill must be None or a number in (0, 1], "
                        f"not {type(value).__name__}")
    fraction = float(value)
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"rotate_at_fill must be None or in the interval (0, 1], got {value!r}")
    return fraction


def check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, not {type(seed).__name__}")
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    return seed


def check_clock(clock: Any) -> Clock:
    if not callable(clock):
        raise TypeError(f"clock must be a callable returning seconds, like time.time, "
                        f"not {type(clock).__name__}")
    return clock  # type: ignore[no-any-return]


def fill_limit(capacity: int, rotate_at_fill: Optional[float]) -> Optional[int]:
    if rotate_at_fill is None:
        return None
    return max(1, math.ceil(capacity * rotate_at_fill))


def _whole(name: str, value: Any, must: str) -> int:
    """value as an int: an integral number (int, numpy integers), never a
    bool or a float (``1e6`` is refused, not rounded: a count is written as
    an int); TypeError saying ``{name} must be {must}`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be {must}, not {type(value).__name__}")
    return int(value)


def check_flag(name: str, value: Any) -> bool:
    """A boolean option: True or False (a numpy bool too); anything else,
    ``"x"`` or ``1`` included, is a TypeError naming the option."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be True or False, not {type(value).__name__}")


def check_capacity(value: Any) -> int:
    capacity = _whole("capacity", value, "an integer")
    if capacity < 1:
        raise ValueError(f"capacity must be at least 1, got {capacity}")
    return capacity


def check_initial_capacity(value: Any) -> int:
    capacity = _whole("initial_capacity", value, "an integer >= 1")
    if capacity < 1:
        raise ValueError(f"initial_capacity must be at least 1, got {capacity}")
    return capacity


def check_growth(value: Any) -> int:
    growth = _whole("growth", value, "an integer >= 2")
    if not 2 <= growth < 2 ** 64:
        raise ValueError(f"growth must be an integer in [2, 2**64), got {growth}")
    return growth


def check_open_unit(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number in (0, 1), not {type(value).__name__}")
    x = float(value)
    if not 0.0 < x < 1.0:
        raise ValueError(f"{name} must be in the open interval (0, 1), got {value!r}")
    return x


def check_error_rate(value: Any) -> float:
    return check_open_unit("error_rate", value)
