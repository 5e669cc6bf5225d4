"""RotatingBloomFilter: forgetting on schedule, refresh on sight, batch == sequence, files.

Time is a fake clock advanced by hand: the filter reads it through the
injectable ``clock`` at every call, so nothing here sleeps.
"""

import copy
import datetime
import json
import math
import os
import pickle
import struct
import subprocess
import sys
import textwrap
import time
import zlib
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

import crawldedup
from conftest import examples
from crawldedup import BloomFilter, CorruptFileError, CrawldedupError, IncompatibleFilterError
from crawldedup.formats import files as _files
from implementations import subclass

# the kernel the environment chose: it sizes the hypothesis tests (whose
# settings are fixed before the api fixture says which kernel a run has)
PURE = crawldedup.IMPLEMENTATION == "reference"


def pure(api):
    """The slow pure-Python kernels: some sizes are smaller with them."""
    return api.IMPLEMENTATION == "reference"


HEADER = 4096
STATE = struct.Struct("<QdddQQQQdQQQQ")  # docs/format.md, "Rotating Bloom filter file"
STATE_BYTES = 4096
COUNTS_AT = 128


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self, now=0.0):
        self.now = float(now)

    def __call__(self):
        return self.now


def keys(prefix, n, start=0):
    return [f"https://example.com/{prefix}/{i}" for i in range(start, start + n)]


def normal(key):
    return key.encode() if isinstance(key, str) else bytes(key)


# ---------------------------------------------------------------- arguments

def test_defaults_and_parameters(api):
    clock = FakeClock(123.5)
    rf = api.RotatingBloomFilter(1000, clock=clock)
    assert (rf.capacity, rf.error_rate, rf.generations, rf.rotate_every, rf.rotate_at_fill,
            rf.seed, rf.layout) == (1000, 0.01, 2, None, None, 0, "standard")
    assert rf.clock is clock and rf.fill_limit is None
    assert rf.rotations == 0 and rf.last_rotation == 123.5 and rf.next_rotation is None
    assert len(rf.filters) == 2 and all(type(f) is api.BloomFilter for f in rf.filters)
    for f in rf.filters:
        # Each generation at error_rate / generations: the union bound keeps
        # the false-positive rate over all of them below error_rate.
        assert (f.capacity, f.error_rate, f.seed, f.layout) == (1000, 0.005, 0, "standard")
        assert f.insert_count == 0
    assert rf.nbytes == sum(f.nbytes for f in rf.filters)
    assert rf.fill_ratio == 0.0 and rf.estimated_count() == 0 and rf.estimated_error_rate == 0.0
    assert api.RotatingBloomFilter(10).clock is time.time


def test_parameters_given(api):
    rf = api.RotatingBloomFilter(500, 0.03, 3, rotate_every=datetime.timedelta(hours=1),
                             rotate_at_fill=0.25, seed=7, layout="blocked", clock=FakeClock())
    assert (rf.capacity, rf.error_rate, rf.generations, rf.rotate_every, rf.rotate_at_fill,
            rf.seed, rf.layout) == (500, 0.03, 3, 3600.0, 0.25, 7, "blocked")
    assert rf.fill_limit == 125 and rf.next_rotation == 3600.0
    assert {(f.error_rate, f.seed, f.layout) for f in rf.filters} == {(0.01, 7, "blocked")}
    assert type(api.RotatingBloomFilter(1000, generations=np.int64(4)).generations) is int
    with pytest.raises(TypeError, match="capacity must be an integer, not float"):
        api.RotatingBloomFilter(1e3)
    assert api.RotatingBloomFilter(10, rotate_every=5).rotate_every == 5.0


@pytest.mark.parametrize("kwargs,error,message", [
    ({"capacity": 0}, ValueError, r"capacity must be at least 1, got 0"),
    ({"capacity": -3}, ValueError, r"capacity must be at least 1"),
    ({"capacity": 1.5}, TypeError, r"capacity must be an integer, not float"),
    ({"capacity": "10"}, TypeError, r"capacity must be an integer, not str"),
    ({"capacity": True}, TypeError, r"capacity must be an integer, not bool"),
    ({"error_rate": 0}, ValueError, r"error_rate must be in the open interval \(0, 1\), got 0"),
    ({"error_rate": 1}, ValueError, r"error_rate must be in the open interval \(0, 1\)"),
    ({"error_rate": float("nan")}, ValueError, r"error_rate must be in the open interval"),
    ({"error_rate": "0.1"}, TypeError, r"error_rate must be a number in \(0, 1\), not str"),
    ({"generations": 1}, ValueError, r"generations must be an integer in \[2, 64\], got 1"),
    ({"generations": 0}, ValueError, r"generations must be an integer in \[2, 64\], got 0"),
    ({"generations": 65}, ValueError, r"generations must be an integer in \[2, 64\], got 65"),
    ({"generations": 2.0}, TypeError, r"generations must be an integer in \[2, 64\], not float"),
    ({"generations": "3"}, TypeError, r"generations must be an integer in \[2, 64\], not str"),
    ({"generations": True}, TypeError, r"generations must be an integer in \[2, 64\], not bool"),
    ({"rotate_every": 0}, ValueError,
     r"rotate_every must be None or a positive, finite number of seconds, got 0"),
    ({"rotate_every": -60}, ValueError, r"rotate_every must be None or a positive, finite"),
    ({"rotate_every": float("inf")}, ValueError, r"rotate_every must be None or a positive"),
    ({"rotate_every": float("nan")}, ValueError, r"rotate_every must be None or a positive"),
    ({"rotate_every": datetime.timedelta(0)}, ValueError, r"rotate_every must be None"),
    ({"rotate_every": "60"}, TypeError,
     r"rotate_every must be None or a positive, finite number of seconds, not str"),
    ({"rotate_every": True}, TypeError, r"rotate_every must be .* not bool"),
    ({"rotate_at_fill": 0}, ValueError,
     r"rotate_at_fill must be None or in the interval \(0, 1\], got 0"),
    ({"rotate_at_fill": 1.01}, ValueError, r"rotate_at_fill must be None or in the interval"),
    ({"rotate_at_fill": -0.5}, ValueError, r"rotate_at_fill must be None or in the interval"),
    ({"rotate_at_fill": float("nan")}, ValueError, r"rotate_at_fill must be None or in"),
    ({"rotate_at_fill": "half"}, TypeError,
     r"rotate_at_fill must be None or a number in \(0, 1\], not str"),
    ({"rotate_at_fill": True}, TypeError, r"rotate_at_fill must be .* not bool"),
    ({"seed": -1}, ValueError, r"seed must be in \[0, 2\*\*32\)"),
    ({"seed": 2 ** 32}, ValueError, r"seed must be in \[0, 2\*\*32\)"),
    ({"seed": "1"}, TypeError, r"seed must be an int"),
    ({"layout": "zigzag"}, ValueError, r"layout must be 'standard' or 'blocked'"),
    ({"clock": 12.0}, TypeError, r"clock must be a callable returning seconds"),
    ({"error_rate": 1e-18, "generations": 64}, ValueError,
     r"each of the 64 generations is sized for error_rate / generations = 1.56e-20: "
     r".*hash functions"),
])
def test_bad_arguments(api, kwargs, error, message):
    args = {"capacity": 100, **kwargs}
    with pytest.raises(error, match=message):
        api.RotatingBloomFilter(**args)


@pytest.mark.parametrize("value,error,message", [
    (float("nan"), ValueError, r"clock\(\) returned nan, not a finite number of seconds"),
    (float("inf"), ValueError, r"clock\(\) returned inf"),
    ("noon", TypeError, r"clock\(\) must return a number of seconds, not str"),
    (None, TypeError, r"clock\(\) must return a number of seconds, not NoneType"),
])
def test_a_clock_that_does_not_tell_seconds_is_refused(api, value, error, message):
    with pytest.raises(error, match=message):
        api.RotatingBloomFilter(10, clock=lambda: value)
    times = [0.0]
    rf = api.RotatingBloomFilter(10, rotate_every=1, clock=lambda: times[0])
    times[0] = value
    with pytest.raises(error, match=message):
        rf.add("k")


# ---------------------------------------------------------------- rotation by time

@pytest.mark.parametrize("layout", ["standard", "blocked"])
@pytest.mark.parametrize("generations", [2, 3, 4])
def test_a_key_is_seen_until_its_generation_rotates_out(api, generations, layout):
    clock = FakeClock(100.0)
    rf = api.RotatingBloomFilter(400, 0.01, generations, rotate_every=10, clock=clock,
                                 layout=layout)
    periods = generations + 3
    batches = [keys(f"p{j}", 40) for j in range(periods)]

    def check(now_rotations, added):
        assert "probe" not in rf  # a lookup: it does the rotations due
        assert rf.rotations == now_rotations
        for i in range(added):  # batch i went in at rotation count i
            seen = rf.contains_many(batches[i])
            if now_rotations - i < generations:  # its generation is still there
                assert seen.all(), (i, now_rotations)
            else:
                assert seen.sum() <= 2, (i, now_rotations)  # false positives only

    for j in range(periods):
        clock.now = 100.0 + 10 * j  # exactly on the boundary: rotation j is due
        check(j, j)
        clock.now += 5
        rf.add_many(batches[j])
        check(j, j + 1)
        clock.now = 100.0 + 10 * (j + 1) - 1e-9
        check(j, j + 1)
    for j in range(periods, periods + generations + 1):
        clock.now = 100.0 + 10 * j
        check(j, periods)
    assert rf.last_rotation == 100.0 + 10 * (periods + generations)


def test_lookups_rotate_too(api):
    clock = FakeClock()
    rf = api.RotatingBloomFilter(100, 0.01, 2, rotate_every=10, clock=clock)
    rf.add("k")
    clock.now = 20.0
    assert "k" not in rf and rf.rotations == 2
    rf.add("k")
    clock.now = 40.0
    assert not rf.contains_many(["k"]).any() and rf.rotations == 4


def test_refresh_on_sight_keeps_a_regularly_seen_key(api):
    clock = FakeClock()
    rf = api.RotatingBloomFilter(100, 0.01, 2, rotate_every=10, clock=clock)
    assert rf.add("regular") is True
    assert rf.add_many(["batched", "once", "looked-at"]).tolist() == [True, True, True]
    for period in range(1, 12):
        clock.now = 10.0 * period + 3
        assert rf.add("regular") is False  # seen: an older generation had it...
        assert "regular" in rf.filters[-1]  # ...and now the newest has it too
        assert rf.add_many(["batched", "batched"]).tolist() == [False, False]
        assert "batched" in rf.filters[-1]
        # Only looked at, never added again: forgotten after two rotations.
        assert ("looked-at" in rf) is (period < 2)
        assert ("once" in rf) is (period < 2)
    assert rf.rotations == 11


def test_a_key_refreshed_from_an_older_generation_lives_on(api):
    clock = FakeClock()
    rf = api.RotatingBloomFilter(100, 0.01, 3, rotate_every=10, clock=clock)
    rf.add("k")
    clock.now = 25.0  # two rotations: k is in the oldest generation
    assert rf.rotate_if_due() == 2
    assert "k" in rf.filters[0] and "k" not in rf.filters[-1]
    assert rf.add("k") is False
    assert "k" in rf.filters[-1]
    clock.now = 45.0  # two more: the oldest copy is gone, the refreshed one is not
    assert "k" in rf and rf.rotations == 4 and "k" in rf.filters[0]
    clock.now = 55.0
    assert "k" not in rf


@pytest.mark.parametrize("generations", [2, 3, 4])
def test_a_long_pause_rotates_at_most_generations_times_on_schedule(api, generations):
    clock = FakeClock(1000.0)
    rf = api.RotatingBloomFilter(100, 0.01, generations, rotate_every=60, clock=clock)
    old = keys("old", 30)
    rf.add_many(old)
    clock.now = 1000.0 + 60 * 1000 + 7.5  # a crawler back after 1000 periods
    assert rf.rotate_if_due() == generations
    assert rf.rotations == generations
    assert rf.last_rotation == 1000.0 + 60 * 1000  # the boundary, not "now"
    assert rf.next_rotation == 1000.0 + 60 * 1001
    assert all(f.insert_count == 0 for f in rf.filters)
    assert not rf.contains_many(old).any()
    assert rf.rotate_if_due() == 0
    clock.now = 1000.0 + 60 * 1001
    assert rf.rotate_if_due() == 1 and rf.last_rotation == 1000.0 + 60 * 1001


def test_a_short_pause_rotates_once_per_period(api):
    clock = FakeClock(0.0)
    rf = api.RotatingBloomFilter(100, 0.01, 4, rotate_every=60, clock=clock)
    recent = keys("recent", 30)
    rf.add_many(recent)
    clock.now = 150.0  # 2.5 periods
    assert rf.add("x") is True
    assert rf.rotations == 2 and rf.last_rotation == 120.0 and rf.next_rotation == 180.0
    assert rf.contains_many(recent).all()
    clock.now = 239.0
    assert rf.contains_many(recent).all() and rf.rotations == 3
    clock.now = 240.0
    assert not rf.contains_many(recent).any() and rf.rotations == 4


def test_a_clock_that_goes_back_does_not_rotate(api):
    clock = FakeClock(100.0)
    rf = api.RotatingBloomFilter(100, 0.01, 2, rotate_every=10, clock=clock)
    rf.add("k")
    clock.now = 50.0
    assert "k" in rf and rf.rotations == 0 and rf.next_rotation == 110.0


def test_a_tiny_period_with_a_huge_jump_forgets_everything(api):
    clock = FakeClock(0.0)
    rf = api.RotatingBloomFilter(100, 0.01, 3, rotate_every=1e-300, clock=clock)
    rf.add("k")
    clock.now = 1e15  # 1e315 periods: more than any count
    assert rf.rotate_if_due() == 3 and "k" not in rf
    # Periods shorter than the clock's resolution: every look forgets all.
    assert rf.last_rotation <= clock.now <= rf.next_rotation


@settings(max_examples=examples(0.67 if PURE else 1.3), deadline=None)
@given(start=st.floats(-1e6, 2e9), every=st.floats(1e-3, 1e5),
       steps=st.lists(st.floats(0, 3), min_size=1, max_size=25))
def test_catching_up_at_once_lands_on_the_same_boundary(api, start, every, steps):
    busy_clock, idle_clock = FakeClock(start), FakeClock(start)
    busy = api.RotatingBloomFilter(10, 0.1, 3, rotate_every=every, clock=busy_clock)
    idle = api.RotatingBloomFilter(10, 0.1, 3, rotate_every=every, clock=idle_clock)
    for step in steps:
        busy_clock.now += step * every
        busy.rotate_if_due()
        assert busy.last_rotation <= busy_clock.now < busy.next_rotation
    idle_clock.now = busy_clock.now
    idle.rotate_if_due()
    # Rotations stay on the period boundaries however often the filter looks.
    assert (idle.last_rotation, idle.next_rotation) == (busy.last_rotation, busy.next_rotation)
    assert idle.rotations == min(busy.rotations, 3)


# ---------------------------------------------------------------- rotation by fill or on request

def test_rotation_by_fill(api):
    clock = FakeClock(5.0)
    rf = api.RotatingBloomFilter(100, 0.01, 2, rotate_at_fill=0.5, clock=clock)
    assert rf.fill_limit == 50
    first = keys("a", 50)
    assert rf.add_many(first[:49]).all() and rf.rotations == 0
    assert rf.add_many(first[:49]).sum() == 0 and rf.rotations == 0  # repeats do not fill
    clock.now = 9.0
    assert rf.add(first[49]) is True
    assert rf.rotations == 1 and rf.last_rotation == 9.0 and rf.next_rotation is None
    older, newest = rf.filters
    assert older.insert_count == 50 and newest.insert_count == 0
    # A refreshed key takes room in the newest generation.
    assert rf.add_many(first).sum() == 0
    assert rf.rotations == 2 and rf.filters[0].insert_count == 50
    assert rf.contains_many(first).all()


def test_every_generation_stops_at_the_fill_limit(api):
    rf = api.RotatingBloomFilter(10, 0.01, 3, rotate_at_fill=1.0, clock=FakeClock())
    assert rf.fill_limit == 10
    assert rf.add_many(keys("k", 35)).all()
    assert rf.rotations == 3
    assert [f.insert_count for f in rf.filters] == [10, 10, 5]
    tiny = api.RotatingBloomFilter(10, 0.01, 2, rotate_at_fill=0.01, clock=FakeClock())
    assert tiny.fill_limit == 1
    tiny.add_many(keys("k", 5))
    assert tiny.rotations == 5


def test_a_fill_rotation_restarts_the_schedule(api):
    clock = FakeClock(0.0)
    rf = api.RotatingBloomFilter(10, 0.01, 2, rotate_every=10, rotate_at_fill=0.5, clock=clock)
    clock.now = 7.0
    rf.add_many(keys("k", 5))
    assert rf.rotations == 1 and rf.last_rotation == 7.0 and rf.next_rotation == 17.0
    clock.now = 16.0
    assert rf.rotate_if_due() == 0
    clock.now = 27.5  # due at 17 and 27
    assert rf.rotate_if_due() == 2 and rf.last_rotation == 27.0


def test_explicit_rotate(api):
    clock = FakeClock(0.0)
    rf = api.RotatingBloomFilter(100, 0.01, 3, clock=clock)
    rf.add("a")
    clock.now = 3.0
    rf.rotate()
    assert rf.rotations == 1 and rf.last_rotation == 3.0 and rf.next_rotation is None
    assert "a" in rf.filters[1] and rf.filters[2].insert_count == 0
    rf.rotate()
    assert "a" in rf
    rf.rotate()
    assert "a" not in rf and rf.rotations == 3
    assert rf.rotate_if_due() == 0


def test_explicit_rotate_does_the_due_timed_ones_first(api):
    clock = FakeClock(0.0)
    rf = api.RotatingBloomFilter(100, 0.01, 4, rotate_every=10, clock=clock)
    rf.add("a")
    clock.now = 25.0
    rf.rotate()
    assert rf.rotations == 3 and rf.last_rotation == 25.0 and rf.next_rotation == 35.0
    assert "a" in rf
    rf.rotate()
    assert "a" not in rf


# ---------------------------------------------------------------- keys

def test_add_and_contains(api):
    rf = api.RotatingBloomFilter(1000, 0.01, 3, clock=FakeClock())
    assert rf.add("https://example.com/") is True
    assert rf.add("https://example.com/") is False
    assert "https://example.com/" in rf and "https://example.com/x" not in rf
    assert rf.add("新闻".encode()) is True and "新闻" in rf  # a str is its UTF-8 bytes
    assert rf.add(bytearray(b"b")) is True and memoryview(b"b") in rf


def test_batch_calls_return_numpy_bools(api):
    rf = api.RotatingBloomFilter(1000, clock=FakeClock())
    out = rf.add_many(iter(["a", "b", "a"]))
    assert out.dtype == np.bool_ and out.tolist() == [True, True, False]
    got = rf.contains_many(("a", "c"))
    assert got.dtype == np.bool_ and got.tolist() == [True, False]
    assert rf.add_many([]).shape == (0,) and rf.contains_many([]).shape == (0,)


def test_bad_keys(api):
    rf = api.RotatingBloomFilter(100, clock=FakeClock())
    with pytest.raises(TypeError):
        rf.add(12)
    with pytest.raises(TypeError):
        12 in rf  # noqa: B015
    with pytest.raises(TypeError, match="single str"):
        rf.add_many("abc")
    with pytest.raises(TypeError, match="single bytes"):
        rf.contains_many(b"abc")
    with pytest.raises(TypeError, match=r"keys\[1\]"):
        rf.contains_many(["a", 5])
    with pytest.raises(TypeError, match=r"keys\[1\]"):
        rf.add_many(["a", None])


def test_update_takes_iterables_of_keys(api):
    rf = api.RotatingBloomFilter(100, clock=FakeClock())
    rf.update(["a", "b"], iter(["c"]))
    assert rf.contains_many(["a", "b", "c"]).all()
    for other in (api.BloomFilter(100), api.RotatingBloomFilter(100)):
        with pytest.raises(TypeError, match="update takes iterables of keys"):
            rf.update(other)


def test_copy_clear_and_equality(api):
    clock = FakeClock()
    rf = api.RotatingBloomFilter(100, 0.01, 3, rotate_every=10, rotate_at_fill=0.5, clock=clock)
    rf.add_many(keys("k", 70))
    clone = rf.copy()
    assert clone == rf and clone is not rf and clone.clock is clock
    assert copy.copy(rf) == rf and copy.deepcopy(rf) == rf
    clone.add("new")
    assert clone != rf and "new" not in rf
    clone = rf.copy()
    clone.rotate()
    assert clone != rf  # same bits moved around, another rotation count
    clone = rf.copy()
    clock.now = 11.0
    clone.rotate_if_due()
    assert clone != rf
    rf.rotate_if_due()
    assert clone == rf
    rf.clear()
    assert not rf.contains_many(keys("k", 70)).any()
    assert rf.rotations == 2 and rf.last_rotation == 10.0 and rf.next_rotation == 20.0
    assert all(f.insert_count == 0 for f in rf.filters)


@pytest.mark.parametrize("args,kwargs", [
    ((100, 0.01, 2), {}), ((200, 0.01, 3), {}),
    ((100, 0.02, 3), {}), ((100, 0.01, 4), {}),
    ((100, 0.01, 3), dict(rotate_every=10)),
    ((100, 0.01, 3), dict(rotate_at_fill=0.5)),
    ((100, 0.01, 3), dict(seed=1)),
    ((100, 0.01, 3), dict(layout="blocked")),
])
def test_other_parameters_are_unequal(api, args, kwargs):
    other = api.RotatingBloomFilter(*args, **kwargs)
    rf = api.RotatingBloomFilter(100, 0.01, 3, clock=lambda: other.last_rotation)
    assert rf != other and not rf == other


def test_comparisons_with_other_types_never_raise(api):
    rf = api.RotatingBloomFilter(100, 0.01)
    for other in (None, 1, "x", api.BloomFilter(100, 0.005), object()):
        assert rf != other and not rf == other
    with pytest.raises(TypeError):
        hash(rf)


def test_other_clock_same_state_is_equal(api):
    a = api.RotatingBloomFilter(100, 0.01, 2, rotate_every=10, clock=FakeClock(5.0))
    b = api.RotatingBloomFilter(100, 0.01, 2, rotate_every=10, clock=lambda: 5.0)
    assert a == b


def test_repr(api):
    rf = api.RotatingBloomFilter(1000, 0.01, 3, rotate_every=60, clock=FakeClock(30.0))
    assert repr(rf) == ("RotatingBloomFilter(capacity=1000, error_rate=0.01, generations=3, "
                        "rotate_every=60.0, rotate_at_fill=None, rotations=0, "
                        "last_rotation=30.0)")
    rf = api.RotatingBloomFilter(10, rotate_at_fill=0.5, layout="blocked", clock=FakeClock())
    assert "rotate_at_fill=0.5, layout='blocked'" in repr(rf)


def test_estimates(api):
    clock = FakeClock()
    rf = api.RotatingBloomFilter(2000, 0.01, 2, rotate_every=10, clock=clock)
    rf.add_many(keys("a", 1000))
    clock.now = 10.0
    rf.add_many(keys("a", 1000))  # refreshed: in both generations now
    rf.add_many(keys("b", 500))
    older, newest = rf.filters
    assert older.insert_count == 1000 and 1495 <= newest.insert_count <= 1500
    assert rf.insert_count == older.insert_count + newest.insert_count
    assert abs(rf.estimated_count() - 1500) < 75  # the union: a key counts once
    assert rf.fill_ratio == newest.fill_ratio
    expected = 1 - (1 - older.estimated_error_rate) * (1 - newest.estimated_error_rate)
    assert rf.estimated_error_rate == pytest.approx(expected)
    assert 0 < rf.estimated_error_rate < 0.01


def test_the_false_positive_rate_stays_within_error_rate_with_every_generation_full(api):
    rf = api.RotatingBloomFilter(1000, 0.01, 3, rotate_at_fill=1.0, clock=FakeClock())
    rf.add_many(keys("in", 2999))
    counts = [f.insert_count for f in rf.filters]
    assert counts[:2] == [1000, 1000] and 990 <= counts[2] < 1000 and rf.rotations == 2
    probes = keys("out", 10_000)
    rate = rf.contains_many(probes).mean()
    assert rate < 0.01 * 1.25, rate  # about 1 - (1 - 0.01/3)**3 = 0.0099


# ---------------------------------------------------------------- batch == sequence

SMALL_KEYS = st.one_of(st.sampled_from(keys("s", 40)), st.binary(max_size=2))


@settings(max_examples=examples(0.5 if PURE else 1.3), deadline=None)
@given(generations=st.integers(2, 4), capacity=st.integers(1, 25),
       error_rate=st.sampled_from([0.01, 0.3]),
       fill=st.one_of(st.none(), st.floats(0.05, 1.0)),
       window=st.sampled_from([1, 3, 4096]),
       steps=st.lists(st.tuples(st.lists(SMALL_KEYS, max_size=40),
                                st.sampled_from([0.0, 0.0, 4.0, 10.0, 25.0, 1000.0]),
                                st.booleans()), max_size=8))
def test_add_many_is_a_sequence_of_add(api, generations, capacity, error_rate, fill, window, steps):
    clock = FakeClock()
    one = api.RotatingBloomFilter(capacity, error_rate, generations, rotate_every=10,
                              rotate_at_fill=fill, clock=clock)
    many = one.copy()
    members = sys.modules["crawldedup.bloom.members"]  # api's
    with mock.patch.object(members, "MIN_WINDOW", window):
        for batch, advance, rotate in steps:
            clock.now += advance
            if rotate:
                one.rotate()
                many.rotate()
            one.rotate_if_due()  # add_many reads the clock even for no keys
            expected = [one.add(key) for key in batch]
            got = many.add_many(batch)
            assert got.dtype == np.bool_ and got.tolist() == expected
            assert many == one


def test_a_large_batch_near_the_fill_limit_is_a_sequence_of_add(api):
    # The default look-ahead window, several fill rotations inside one batch,
    # repeats, refreshes from older generations.
    one = api.RotatingBloomFilter(1500, 0.01, 3, rotate_at_fill=0.5, clock=FakeClock())
    batch = keys("x", 2500) + keys("x", 1200, start=1000) + keys("y", 1500)
    one.add_many(keys("x", 600, start=2000))
    many = one.copy()
    expected = [one.add(key) for key in batch]
    got = many.add_many(batch)
    assert got.tolist() == expected and many == one
    assert one.rotations >= 4


# ---------------------------------------------------------------- state machine

class RotatingAgainstModel(RuleBasedStateMachine):
    """A RotatingBloomFilter beside a model that remembers, per key, a
    rotation count at or before its last add.  A key whose model count is
    within ``generations`` of the filter's rotation count must be seen; add
    must never call such a key new."""

    def __init__(self, api):
        super().__init__()
        self.RotatingBloomFilter = api.RotatingBloomFilter

    @initialize(generations=st.integers(2, 4),
                fill=st.one_of(st.none(), st.sampled_from([0.2, 0.5, 1.0])),
                layout=st.sampled_from(["standard", "blocked"]))
    def start(self, generations, fill, layout):
        self.clock = FakeClock(1000.0)
        self.rf = self.RotatingBloomFilter(30, 0.01, generations, rotate_every=10,
                                      rotate_at_fill=fill, layout=layout, clock=self.clock)
        self.generations = generations
        self.model = {}

    def in_window(self, key, rotations):
        added = self.model.get(normal(key))
        return added is not None and rotations - added < self.generations

    def rotations_after_tick(self):
        """The rotation count a call made now sees after its timed rotations."""
        if self.clock.now < self.rf.next_rotation:
            return self.rf.rotations
        probe = self.rf.copy()
        probe.rotate_if_due()
        return probe.rotations

    def record(self, batch, answers, before):
        # Keys later in a batch may go in after fill rotations: `before` is
        # a lower bound of their rotation count, and `after` an upper bound of
        # the count when their answer was given.
        after = self.rf.rotations
        for key, new in zip(batch, answers):
            if new:
                assert not self.in_window(key, after), key
            self.model[normal(key)] = before

    @rule(key=SMALL_KEYS)
    def add(self, key):
        before = self.rotations_after_tick()
        self.record([key], [self.rf.add(key)], before)

    @rule(batch=st.lists(SMALL_KEYS, max_size=30))
    def add_many(self, batch):
        before = self.rotations_after_tick()
        self.record(batch, self.rf.add_many(batch).tolist(), before)

    @rule(batch=st.lists(SMALL_KEYS, max_size=30))
    def contains_many(self, batch):
        got = self.rf.contains_many(batch).tolist()
        for key, present in zip(batch, got):
            if self.in_window(key, self.rf.rotations):
                assert present, key
            assert (key in self.rf) is present

    @rule(seconds=st.sampled_from([0.5, 3.0, 9.99, 10.0, 15.0, 25.0, 1e4]))
    def advance(self, seconds):
        self.clock.now += seconds

    @rule()
    def rotate(self):
        self.rf.rotate()

    @rule()
    def round_trip(self):
        data = self.rf.to_bytes()
        self.rf = self.RotatingBloomFilter.from_bytes(data, clock=self.clock)
        assert pickle.loads(pickle.dumps(self.rf)) == self.rf

    @rule()
    def copy(self):
        self.rf = self.rf.copy()

    @invariant()
    def no_false_negatives(self):
        remembered = list(self.model)
        if remembered:
            present = self.rf.contains_many(remembered)
            rotations = self.rf.rotations
            for key, seen in zip(remembered, present.tolist()):
                if self.in_window(key, rotations):
                    assert seen, key


def test_rotating_against_model(api):
    run_state_machine_as_test(lambda: RotatingAgainstModel(api), settings=settings(
        max_examples=examples(0.2 if PURE else 0.5), stateful_step_count=40, deadline=None))


# ---------------------------------------------------------------- round trips

def populated(layout="standard", clock=None, api=crawldedup):
    """A filter with a fill rotation, timed rotations and keys in every generation."""
    clock = clock or FakeClock(50.0)
    rf = api.RotatingBloomFilter(200, 0.01, 3, rotate_every=10, rotate_at_fill=0.5, layout=layout,
                             clock=clock)
    rf.add_many(keys("a", 150))  # one fill rotation at the 100th key, at t = 50
    clock.now = 63.0  # one timed rotation, at 60
    rf.add_many(keys("b", 30))
    assert rf.rotations == 2 and rf.last_rotation == 60.0
    return rf


@pytest.mark.parametrize("layout", ["standard", "blocked"])
@pytest.mark.parametrize("how", ["save", "bytes"])
@pytest.mark.parametrize("pause", [0.0, 4.0, 7.0, 10.0, 26.5, 1e6])
def test_a_reloaded_filter_rotates_as_if_it_had_stayed_up(api, tmp_path, layout, how, pause):
    clock = FakeClock(50.0)
    rf = populated(layout, clock, api=api)
    if how == "save":
        rf.save(tmp_path / "seen.rbf")
        loaded = api.RotatingBloomFilter.load(tmp_path / "seen.rbf", clock=clock)
    else:
        loaded = api.RotatingBloomFilter.from_bytes(rf.to_bytes(), clock=clock)
    assert loaded == rf and loaded.clock is clock
    assert (loaded.last_rotation, loaded.next_rotation) == (60.0, 70.0)
    clock.now += pause  # the crawler was down for a while
    assert loaded.add("z") == rf.add("z")
    assert loaded == rf
    assert loaded.contains_many(keys("a", 150)).tolist() == rf.contains_many(
        keys("a", 150)).tolist()
    assert loaded.rotations == 2 + min(3, int((63.0 + pause - 60.0) // 10))


def test_save_and_load(api, tmp_path):
    rf = populated(api=api)
    path = tmp_path / "seen.rbf"
    rf.save(path)
    loaded = api.RotatingBloomFilter.load(str(path), clock=rf.clock)
    assert loaded == rf and loaded.contains_many(keys("b", 30)).all()
    rf.add("more")
    rf.save(str(path))  # overwriting, str paths
    assert api.RotatingBloomFilter.load(path, clock=rf.clock) == rf
    assert [p.name for p in tmp_path.iterdir()] == ["seen.rbf"]
    assert api.RotatingBloomFilter.load(path).clock is time.time


def test_pickle_round_trip_drops_the_clock(api):
    rf = api.RotatingBloomFilter(100, 0.01, 2, seed=3, clock=FakeClock(10.0))
    rf.add_many(keys("k", 20))
    clone = pickle.loads(pickle.dumps(rf, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(clone) is api.RotatingBloomFilter and clone == rf and clone.seed == 3
    assert clone.clock is time.time and clone.contains_many(keys("k", 20)).all()
    # With a schedule, the real clock is far past a fake time of 10 s: the
    # first use rotates everything out, on the period boundaries.
    timed = populated(api=api)
    clone = pickle.loads(pickle.dumps(timed))
    assert clone == timed
    before = time.time()
    assert "x" not in clone
    assert clone.rotations == 2 + 3
    assert clone.last_rotation <= time.time() and clone.next_rotation > before
    assert (clone.last_rotation - 60.0) % 10 == 0


def test_bytes_round_trip(api):
    rf = populated(api=api)
    data = rf.to_bytes()
    assert api.RotatingBloomFilter.from_bytes(data, clock=rf.clock) == rf
    assert api.RotatingBloomFilter.from_bytes(bytearray(data), clock=rf.clock) == rf
    assert api.RotatingBloomFilter.from_bytes(memoryview(data), clock=rf.clock) == rf
    with pytest.raises(TypeError, match="clock must be a callable"):
        api.RotatingBloomFilter.from_bytes(data, clock=None)


def test_subclass_round_trips_keep_the_class(api, tmp_path):
    Mine = subclass(api.RotatingBloomFilter, __name__)
    m = Mine(100, clock=FakeClock())
    m.add("x")
    assert type(m.copy()) is Mine
    assert type(pickle.loads(pickle.dumps(m))) is Mine
    m.save(tmp_path / "m")
    assert type(Mine.load(tmp_path / "m")) is Mine


def slot_bytes(f):
    return -(-f.nbytes // 4096) * 4096


def test_file_layout_is_as_documented(api):
    rf = populated(api=api)
    data = rf.to_bytes()
    assert data[:8] == b"\x89CRDDUP\n"
    version, kind, algo, layout, header_size, flags = struct.unpack_from("<HHHHII", data, 8)
    assert (version, kind, algo, layout, header_size, flags) == (1, 3, 1, 0, 4096, 0)
    seed, m, k, cap, rate, count, off, size, crc = struct.unpack_from("<QQQQdQQQI", data, 24)
    newest = rf.filters[-1]
    assert (seed, m, k, cap, rate) == (0, newest.num_bits, newest.num_hashes, 200, 0.01)
    assert count == sum(f.insert_count for f in rf.filters) == rf.insert_count
    assert (off, len(data)) == (4096, off + size)
    assert crc == zlib.crc32(data[off:], zlib.crc32(data[:88] + b"\0\0\0\0" + data[92:off]))
    assert not any(data[96:4096])
    fields = STATE.unpack_from(data, off)
    assert fields[:8] == (3, 10.0, 0.5, 50.0, 1, 2, 2, 0)  # saved: newest in the last slot
    assert fields[0 + 3] + fields[4] * fields[1] == rf.last_rotation
    counts = struct.unpack_from("<3Q", data, off + COUNTS_AT)
    assert list(counts) == [f.insert_count for f in rf.filters]
    assert not any(data[off + STATE.size:off + COUNTS_AT])
    assert not any(data[off + COUNTS_AT + 24:off + STATE_BYTES])
    slot = slot_bytes(newest)
    assert slot % 4096 == 0 and size == STATE_BYTES + 3 * slot
    for index, member in enumerate(rf.filters):  # oldest first, each in a page-aligned slot
        at = off + STATE_BYTES + index * slot
        assert data[at:at + member.nbytes] == bytes(member._bits_view())
        assert not any(data[at + member.nbytes:at + slot])
    unscheduled = api.RotatingBloomFilter(10, 0.1, 2, clock=FakeClock(-2.5)).to_bytes()
    every, fill, epoch, periods = struct.unpack_from("<dddQ", unscheduled, 4096 + 8)
    assert math.isnan(every) and math.isnan(fill) and (epoch, periods) == (-2.5, 0)


# ---------------------------------------------------------------- damaged files

def sample(api=crawldedup):
    clock = FakeClock(100.0)
    rf = api.RotatingBloomFilter(30, 0.01, 3, rotate_every=10, rotate_at_fill=0.9, clock=clock)
    rf.add_many(keys("x", 20))
    clock.now = 112.0  # a timed rotation at 110, then one by fill at the 27th key
    rf.add_many(keys("y", 32))
    assert [f.insert_count for f in rf.filters] == [20, 27, 5] and rf.rotations == 2
    assert rf.last_rotation == 112.0
    return rf


SAMPLE = sample()
GOOD = SAMPLE.to_bytes()
N = len(GOOD)
MEMBER_RATE = 0.01 / 3
SLOT = slot_bytes(SAMPLE.filters[0])
NBYTES = SAMPLE.filters[0].nbytes
BITS = [bytes(f._bits_view()) for f in SAMPLE.filters]
COUNTS = [f.insert_count for f in SAMPLE.filters]
NAN = float("nan")


def craft(generations=3, every=10.0, fill=0.9, epoch=112.0, periods=0, rotations=2, newest=2,
          sequence=0, pending=(0.0, 0, 0, 0, 0), counts=None, slots=None, extra=b"",
          slot_size=None, **header):
    """A file with the given state block, slots and header fields, sealed."""
    counts = COUNTS if counts is None else counts
    slots = BITS if slots is None else slots
    slot_size = SLOT if slot_size is None else slot_size
    state = bytearray(STATE_BYTES)
    STATE.pack_into(state, 0, generations, every, fill, epoch, periods, rotations, newest,
                    sequence, *pending)
    for index, value in enumerate(counts):
        struct.pack_into("<Q", state, COUNTS_AT + 8 * index, value)
    payload = bytes(state)
    for bits in slots:
        payload += bits + bytes(slot_size - len(bits))
    payload += extra
    newest_filter = SAMPLE.filters[-1]
    fields = dict(kind=3, hash_algorithm=1, layout=0, flags=0, seed=0,
                  num_bits=newest_filter.num_bits, num_hashes=newest_filter.num_hashes,
                  capacity=30, error_rate=0.01, insert_count=sum(counts),
                  payload_size=len(payload))
    fields.update(header)
    head = _files.Header(**fields)
    head.checksum = _files.checksum(head, payload)
    return bytes(head.pack()) + payload


def seal(payload, **header):
    fields = dict(kind=3, hash_algorithm=1, layout=0, flags=0, seed=0, num_bits=1,
                  num_hashes=1, capacity=30, error_rate=0.01, insert_count=0,
                  payload_size=len(payload))
    fields.update(header)
    head = _files.Header(**fields)
    head.checksum = _files.checksum(head, payload)
    return bytes(head.pack()) + payload


def reseal(data):
    """Rewrite the header's checksums so that only the deliberate fault remains."""
    fields = struct.unpack_from("<8sHHHHIIQQQQdQQQII", data, 0)
    head = _files.Header(
        version=fields[1], kind=fields[2], hash_algorithm=fields[3], layout=fields[4],
        flags=fields[6], seed=fields[7], num_bits=fields[8], num_hashes=fields[9],
        capacity=fields[10], error_rate=fields[11], insert_count=fields[12],
        payload_size=fields[14])
    payload = bytes(data[HEADER:])
    head.checksum = _files.checksum(head, payload)
    return bytes(head.pack()) + payload


def flip(data, offset, bit=0):
    data = bytearray(data)
    data[offset] ^= 1 << bit
    return bytes(data)


def member(capacity=30, error_rate=MEMBER_RATE, **kwargs):
    return BloomFilter(capacity, error_rate, **kwargs).to_bytes()


def padded_bit_set():
    # A bit past num_bits in the last word of slot 1.
    bits = bytearray(BITS[1])
    tail = SAMPLE.filters[0].num_bits % 64
    assert tail, "the sample's bit count must leave padding bits"
    bits[-1] |= 0x80
    return [BITS[0], bytes(bits), BITS[2]]


CASES = {
    "empty": (b"", CorruptFileError, "empty"),
    "text": (b"https://example.com/\n" * 300, CorruptFileError, "signature"),
    "header only": (GOOD[:HEADER], CorruptFileError, "truncated"),
    "last byte cut": (GOOD[:-1], CorruptFileError, "truncated"),
    "trailing junk": (GOOD + b"\0", CorruptFileError, "unexpected bytes"),
    "flip in state": (flip(GOOD, HEADER + 3), CorruptFileError, "checksum"),
    "flip in a generation": (flip(GOOD, HEADER + STATE_BYTES + 5, 2), CorruptFileError,
                             "checksum"),
    "future version": (reseal(GOOD[:8] + struct.pack("<H", 2) + GOOD[10:]),
                       IncompatibleFilterError, "version 2"),
    "a Bloom filter": (member(), CorruptFileError,
                       "holds a Bloom filter, not a rotating Bloom filter"),
    "kind 9": (craft(kind=9), CorruptFileError, "holds a kind 9"),
    "other hash": (craft(hash_algorithm=4), CorruptFileError, "hash algorithm"),
    "other layout id": (craft(layout=5), CorruptFileError, "layout id 5"),
    "flags": (craft(flags=2), CorruptFileError, "flags"),
    "big seed": (craft(seed=2 ** 40), CorruptFileError, "seed"),
    "zero capacity": (craft(capacity=0), CorruptFileError, "capacity 0"),
    "bad error rate": (craft(error_rate=1.5), CorruptFileError, "error_rate 1.5"),
    "header num_bits": (craft(num_bits=1000), CorruptFileError, "num_bits 1000"),
    "header insert count": (craft(insert_count=33), CorruptFileError,
                            "insert count 33 in the header"),
    "state block cut": (seal(bytes(10)), CorruptFileError,
                        "payload of 10 bytes, shorter than the 4096-byte state block"),
    "1 generation": (craft(generations=1), CorruptFileError, r"generations 1 outside \[2, 64\]"),
    "65 generations": (craft(generations=65), CorruptFileError, "generations 65 outside"),
    "more generations than stored": (craft(generations=4, newest=3), CorruptFileError,
                                     "num_bits .* do not match"),
    "fewer generations than stored": (craft(generations=2, newest=1, counts=COUNTS[:2]),
                                      CorruptFileError,
                                      "num_bits .* do not match"),
    "a slot missing": (craft(slots=BITS[:2], counts=COUNTS[:2] + [0]), CorruptFileError,
                       "3 generations of .* bits take"),
    "slots not page-aligned": (craft(slot_size=NBYTES), CorruptFileError,
                               "3 generations of .* bits take"),
    "bits past a slot's bits": (craft(slots=[BITS[0], BITS[1] + b"\x01", BITS[2]]),
                                CorruptFileError, "slot 1: bytes past its bits are set"),
    "padding bit set": (craft(slots=padded_bit_set()), CorruptFileError,
                        "slot 1: padding bits past num_bits"),
    "negative period": (craft(every=-10.0), CorruptFileError, "rotate_every -10.0"),
    "infinite period": (craft(every=float("inf")), CorruptFileError, "rotate_every inf"),
    "zero period": (craft(every=0.0), CorruptFileError, "rotate_every 0.0"),
    "fill 0": (craft(fill=0.0), CorruptFileError, "rotate_at_fill 0.0 outside"),
    "fill 1.5": (craft(fill=1.5), CorruptFileError, "rotate_at_fill 1.5 outside"),
    "nan epoch": (craft(epoch=NAN), CorruptFileError, "epoch nan"),
    "infinite epoch": (craft(epoch=float("-inf")), CorruptFileError, "epoch -inf"),
    "periods without a period": (craft(every=NAN, periods=1), CorruptFileError,
                                 "1 timed rotation periods without rotate_every"),
    "too many periods": (craft(periods=2 ** 60), CorruptFileError, "rotation periods"),
    "schedule past the end of time": (craft(epoch=1.7e308, every=1e308, periods=0),
                                      CorruptFileError, "not a finite time"),
    "newest slot out of range": (craft(newest=3), CorruptFileError,
                                 "newest generation slot 3, not below 3"),
    "rotation in progress dropping none": (craft(sequence=1, pending=(120.0, 0, 2, 2, 0)),
                                           CorruptFileError, "drops 0 generations"),
    "rotation in progress dropping too many": (craft(sequence=1, pending=(120.0, 0, 6, 2, 4)),
                                               CorruptFileError, "drops 4 generations"),
    "rotation in progress to the wrong slot": (craft(sequence=1, pending=(120.0, 0, 3, 2, 1)),
                                               CorruptFileError, "does not follow"),
    "rotation in progress with a bad epoch": (craft(sequence=1, pending=(NAN, 0, 3, 0, 1)),
                                              CorruptFileError,
                                              "the rotation in progress: epoch nan"),
    "bytes after the slots": (craft(extra=b"\0" * 5000), CorruptFileError,
                              "3 generations of .* bits take"),
}


def junk_in_state_block():
    state = bytearray(craft())
    state[HEADER + 110] = 1  # between the pending rotation and the counts
    return reseal(bytes(state))


CASES["junk in the state block"] = (junk_in_state_block(), CorruptFileError,
                                    "unused bytes of the state block are set")


def test_the_crafted_file_is_otherwise_valid(api):
    assert api.RotatingBloomFilter.from_bytes(craft(), clock=SAMPLE.clock) == sample(api)


def test_slots_are_a_ring_starting_after_the_newest(api):
    # The same filter with its slots rotated by one: newest in slot 0.
    ring = craft(newest=0, slots=[BITS[2], BITS[0], BITS[1]],
                 counts=[COUNTS[2], COUNTS[0], COUNTS[1]])
    assert api.RotatingBloomFilter.from_bytes(ring, clock=SAMPLE.clock) == sample(api)


def test_a_rotation_left_half_done_is_finished_on_load(api):
    # A writer killed while rotating: the pending fields say what it was
    # doing (drop the oldest slot, 0, and make it the newest).
    half = craft(sequence=1, pending=(120.0, 0, 3, 0, 1), flags=_files.FLAG_DIRTY)
    rf = api.RotatingBloomFilter.from_bytes(half, clock=FakeClock(121.0))
    expected = sample(api)
    expected._clock = FakeClock(120.0)
    expected.rotate()
    assert rf == expected
    assert [f.insert_count for f in rf.filters] == [27, 5, 0]
    assert rf.last_rotation == 120.0 and rf.rotations == 3


def test_a_dirty_file_loads_without_its_checksum(api):
    # A stale insert count and no checksum, as a killed writer leaves them.
    dirty = craft(flags=_files.FLAG_DIRTY, insert_count=0)
    dirty = dirty[:88] + b"\0\0\0\0" + dirty[92:]
    assert api.RotatingBloomFilter.from_bytes(dirty, clock=SAMPLE.clock) == sample(api)
    with pytest.raises(CorruptFileError, match="checksum"):
        api.RotatingBloomFilter.from_bytes(craft(insert_count=0)[:88] + b"\0\0\0\0"
                                           + craft()[92:])


@pytest.mark.parametrize("how", ["load", "from_bytes"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_damaged_file_is_refused_by_name(api, tmp_path, case, how):
    data, error, pattern = CASES[case]
    path = tmp_path / "state.rbf"
    path.write_bytes(data)
    with pytest.raises(error, match=pattern) as info:
        if how == "load":
            api.RotatingBloomFilter.load(path)
        else:
            api.RotatingBloomFilter.from_bytes(data)
    if how == "load" and error is CorruptFileError:
        assert info.value.path == str(path) and str(path) in str(info.value)


LOADER = textwrap.dedent("""
    import json, sys
    from crawldedup import CrawldedupError
    from crawldedup.bloom.rotating import RotatingBloomFilter
    out = []
    for path in sys.argv[1:]:
        try:
            RotatingBloomFilter.load(path)
        except CrawldedupError as exc:
            out.append(type(exc).__name__)
        else:
            out.append("loaded")
    print(json.dumps(out))
""")


def test_damaged_files_do_not_crash_a_fresh_process(api, tmp_path):
    names = sorted(CASES)
    paths = []
    for i, name in enumerate(names):
        paths.append(str(tmp_path / f"{i}.rbf"))
        with open(paths[-1], "wb") as f:
            f.write(CASES[name][0])
    env = dict(os.environ, CRAWLDEDUP_PURE_PYTHON="1" if pure(api) else "0")
    run = subprocess.run([sys.executable, "-c", LOADER, *paths], capture_output=True,
                         text=True, timeout=120, env=env)
    assert run.returncode == 0, f"loader died: {run.returncode} {run.stderr[-2000:]}"
    assert json.loads(run.stdout) == [CASES[name][1].__name__ for name in names]


def test_a_rotating_file_given_to_bloom_filter_says_what_it_holds(api, tmp_path):
    path = tmp_path / "state.rbf"
    SAMPLE.save(path)
    with pytest.raises(CorruptFileError, match="holds a rotating Bloom filter, not a Bloom"):
        api.BloomFilter.load(path)


def test_missing_file_is_an_os_error(api, tmp_path):
    with pytest.raises(FileNotFoundError):
        api.RotatingBloomFilter.load(tmp_path / "nope")


@settings(max_examples=examples(0.5 if PURE else 1), deadline=None)
@given(offset=st.integers(0, N - 1), bit=st.integers(0, 7))
def test_any_single_bit_flip_is_detected(api, offset, bit):
    with pytest.raises((CorruptFileError, IncompatibleFilterError)):
        api.RotatingBloomFilter.from_bytes(flip(GOOD, offset, bit))


@settings(max_examples=examples(0.5 if PURE else 1), deadline=None)
@given(cut=st.integers(0, N - 1))
def test_any_truncation_is_detected(api, cut):
    with pytest.raises(CorruptFileError):
        api.RotatingBloomFilter.from_bytes(GOOD[:cut])


@settings(max_examples=examples(0.33), deadline=None)
@given(cut=st.integers(HEADER, N - 1), data=st.data())
def test_any_truncation_with_a_resealed_header_is_detected(api, cut, data):
    # A cut file whose header was rewritten to announce the cut length and
    # re-checksummed: the payload itself must be found inconsistent.
    head = bytearray(GOOD[:HEADER])
    struct.pack_into("<Q", head, 80, cut - HEADER)
    damaged = reseal(bytes(head) + GOOD[HEADER:cut])
    with pytest.raises(CrawldedupError) as info:
        api.RotatingBloomFilter.from_bytes(damaged)
    assert isinstance(info.value, (CorruptFileError, IncompatibleFilterError))


def test_failed_save_keeps_the_previous_file(api, tmp_path):
    path = tmp_path / "state.rbf"
    SAMPLE.save(path)
    before = path.read_bytes()

    class Exploding(api.RotatingBloomFilter):
        __slots__ = ()

        def _write(self, f):
            f.write(b"partial garbage")
            raise OSError("disk full (simulated)")

    bad = Exploding.from_bytes(GOOD)
    with pytest.raises(OSError, match="disk full"):
        bad.save(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.rbf"]
