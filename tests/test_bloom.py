"""BloomFilter, the public class, on each kernel (the ``api`` fixture)."""

import math
import pickle
import warnings

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from conftest import examples, platform_lacks
from crawldedup import IncompatibleFilterError, optimal_parameters
from implementations import subclass

# ---------------------------------------------------------------- sizing

@pytest.mark.parametrize("n,p", [(1, 0.5), (1000, 0.01), (1_000_000, 0.01),
                                 (100_000_000, 0.01), (12_345, 0.001), (10, 1e-9)])
def test_parameters_are_the_optimum(api, n, p):
    m, k = optimal_parameters(n, p)
    exact = -n * math.log(p) / math.log(2) ** 2
    assert exact <= m < exact + 1  # well within 1% of the optimum
    assert k == max(1, round(m / n * math.log(2)))
    bf = api.BloomFilter(n, p) if m < 1 << 28 else None
    if bf is not None:
        assert (bf.num_bits, bf.num_hashes) == (m, k)


def test_known_size(api):
    bf = api.BloomFilter(1_000_000, 0.01)
    assert (bf.num_bits, bf.num_hashes) == (9_585_059, 7)
    assert bf.capacity == 1_000_000 and bf.error_rate == 0.01
    assert bf.nbytes == 1_198_136


@pytest.mark.parametrize("capacity,message", [
    (0, "capacity must be at least 1"), (-5, "capacity must be at least 1")])
def test_bad_capacity_values(api, capacity, message):
    with pytest.raises(ValueError, match=message):
        api.BloomFilter(capacity)


@pytest.mark.parametrize("capacity", ["1000", 1.5, None, True])
def test_bad_capacity_types(api, capacity):
    with pytest.raises(TypeError, match="capacity must be an integer"):
        api.BloomFilter(capacity)


def test_float_capacity_is_refused(api):
    # a count is an int (numpy integers too); 1e6 is a float, refused
    with pytest.raises(TypeError, match="capacity must be an integer, not float"):
        api.BloomFilter(1e6)
    assert api.BloomFilter(np.int64(500)).capacity == 500


@pytest.mark.parametrize("rate", [0, 1, -0.1, 1.5, float("nan"), float("inf")])
def test_bad_error_rates(api, rate):
    with pytest.raises(ValueError, match=r"error_rate must be in the open interval \(0, 1\)"):
        api.BloomFilter(100, rate)


def test_error_rate_too_small_for_64_hashes(api):
    with pytest.raises(ValueError, match="error_rate must be at least 1e-19"):
        api.BloomFilter(100, 1e-30)
    with pytest.raises(TypeError, match="error_rate must be a number"):
        api.BloomFilter(100, "0.01")


def test_too_many_bits(api):
    with pytest.raises(ValueError, match="at most 2\\*\\*62"):
        optimal_parameters(10 ** 20, 1e-10)


def test_seed_argument(api):
    a, b = api.BloomFilter(1000, seed=1), api.BloomFilter(1000, seed=2)
    a.add("x")
    b.add("x")
    assert a.seed == 1 and bytes(a._bits_view()) != bytes(b._bits_view())
    with pytest.raises(ValueError, match="seed"):
        api.BloomFilter(1000, seed=-1)
    with pytest.raises(TypeError, match="seed"):
        api.BloomFilter(1000, seed="1")


# ---------------------------------------------------------------- behaviour

def test_add_and_contains(api):
    bf = api.BloomFilter(1000)
    assert bf.add("https://example.com/") is True
    assert bf.add("https://example.com/") is False
    assert bf.add(b"https://example.com/") is False  # str is its UTF-8 bytes
    assert "https://example.com/" in bf
    assert "https://example.com/x" not in bf
    assert bf.insert_count == 1


def test_chinese_and_emoji_keys(api):
    bf = api.BloomFilter(1000)
    assert bf.add("http://news.sina.com.cn/新闻/排行")
    assert "http://news.sina.com.cn/新闻/排行".encode("utf-8") in bf
    assert bf.add("🙈") and "🙈" in bf


def test_batch_calls_return_numpy_bools(api):
    bf = api.BloomFilter(1000)
    new = bf.add_many(["a", "b", "a"])
    assert isinstance(new, np.ndarray) and new.dtype == np.bool_
    assert new.tolist() == [True, True, False]
    assert bf.contains_many(("a", "b", "c")).tolist() == [True, True, False]


def test_bad_keys(api):
    bf = api.BloomFilter(1000)
    for key in (1, None, 2.5, ["a"]):
        with pytest.raises(TypeError, match="key must be str or bytes-like"):
            bf.add(key)
        with pytest.raises(TypeError, match="key must be str or bytes-like"):
            key in bf  # noqa: B015
    with pytest.raises(TypeError, match="not a single str"):
        bf.add_many("abc")


def test_update_merges_filters_and_iterables(api):
    a, b = api.BloomFilter(1000), api.BloomFilter(1000)
    a.add("1")
    b.add("2")
    a.update(b, ["3", "4"])
    assert a.contains_many(["1", "2", "3", "4"]).all()
    with pytest.raises(IncompatibleFilterError, match="capacity 1000 != 2000"):
        a.update(api.BloomFilter(2000))


def test_union_and_intersection(api):
    a, b = api.BloomFilter(1000), api.BloomFilter(1000)
    a.add_many(["1", "2"])
    b.add_many(["2", "3"])
    u, i = a | b, a & b
    assert u.contains_many(["1", "2", "3"]).all()
    assert "2" in i and "1" not in i and "3" not in i
    assert "3" not in a  # operands unchanged
    a |= b
    assert a == u
    a &= i
    assert "2" in a and "1" not in a
    assert u.estimated_count() == 3 and u.insert_count == 3


@pytest.mark.parametrize("other", [dict(capacity=1000, error_rate=0.001), dict(capacity=999),
                                   dict(capacity=1000, seed=9)])
def test_incompatible_operands(api, other):
    other = api.BloomFilter(**other)
    a = api.BloomFilter(1000)
    for op in (lambda: a | other, lambda: a & other):
        with pytest.raises(IncompatibleFilterError):
            op()
    with pytest.raises(IncompatibleFilterError):
        a |= other
    with pytest.raises(IncompatibleFilterError):
        a &= other
    assert (a == other) is False and a != other


def test_operators_with_other_types(api):
    a = api.BloomFilter(10)
    with pytest.raises(TypeError):
        a | {"x"}
    assert (a == "x") is False
    with pytest.raises(TypeError):
        hash(a)


def test_equality_copy_clear(api):
    a = api.BloomFilter(1000)
    a.add_many(["x", "y"])
    b = a.copy()
    assert a == b and b.insert_count == 2
    b.add("z")
    assert a != b and "z" not in a
    b.clear()
    assert b.fill_ratio == 0 and b.insert_count == 0 and "x" not in b


def test_fill_ratio_and_estimates(api):
    bf = api.BloomFilter(10_000, 0.01)
    bf.add_many([f"k{i}" for i in range(10_000)])
    assert 0.45 < bf.fill_ratio < 0.55
    assert abs(bf.estimated_count() - 10_000) < 300
    assert 0.005 < bf.estimated_error_rate < 0.02


def test_saturated_filter_has_finite_estimate(api):
    bf = api.BloomFilter(1, 0.5)
    bf.add_many([str(i) for i in range(200)])
    assert bf.fill_ratio == 1.0
    assert bf.estimated_count() > 0


def test_repr(api):
    text = repr(api.BloomFilter(1000, 0.01))
    assert text.startswith("BloomFilter(capacity=1000, error_rate=0.01, num_bits=9586")


# ---------------------------------------------------------------- round trips

def test_pickle_round_trip(api):
    bf = api.BloomFilter(5000, 0.001, seed=3)
    bf.add_many([f"u{i}" for i in range(100)])
    clone = pickle.loads(pickle.dumps(bf, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(clone) is api.BloomFilter
    assert clone == bf and clone.insert_count == 100 and clone.seed == 3
    assert clone.contains_many([f"u{i}" for i in range(100)]).all()


def test_bytes_round_trip(api):
    bf = api.BloomFilter(3000)
    bf.add_many(["a", "b"])
    data = bf.to_bytes()
    assert len(data) == 4096 + bf.nbytes
    assert api.BloomFilter.from_bytes(data) == bf
    assert api.BloomFilter.from_bytes(bytearray(data)) == bf


def test_save_and_load(api, tmp_path):
    bf = api.BloomFilter(10_000, 0.01)
    bf.add_many([f"https://e.com/{i}" for i in range(5000)])
    path = tmp_path / "seen.bloom"
    bf.save(path)
    loaded = api.BloomFilter.load(path)
    assert loaded == bf and loaded.insert_count == 5000
    assert loaded.capacity == 10_000 and loaded.error_rate == 0.01
    bf.save(str(path))  # str paths too, and overwriting
    assert api.BloomFilter.load(str(path)) == bf
    assert [p.name for p in tmp_path.iterdir()] == ["seen.bloom"]


def test_subclass_round_trips_keep_the_class(api, tmp_path):
    Mine = subclass(api.BloomFilter, __name__)
    m = Mine(100)
    m.add("x")
    assert type(m.copy()) is Mine
    assert type(pickle.loads(pickle.dumps(m))) is Mine
    m.save(tmp_path / "m")
    assert type(Mine.load(tmp_path / "m")) is Mine


# ---------------------------------------------------------------- state machine

key_strategy = st.one_of(
    st.text(alphabet="abcdef/:.%中文", max_size=8),
    st.binary(max_size=8),
)


def normal(key):
    return key.encode() if isinstance(key, str) else bytes(key)


class BloomAgainstSet(RuleBasedStateMachine):
    """A BloomFilter and a set, side by side: never a false negative, ``add``
    is False for every key already added, and false positives stay rare."""

    def __init__(self, api):
        super().__init__()
        self.BloomFilter = api.BloomFilter

    @initialize()
    def start(self):
        self.bf = self.BloomFilter(2000, 0.01)
        self.model = set()
        self.fresh_adds = 0
        self.false_news = 0

    def _add_one(self, key, reported_new):
        if normal(key) in self.model:
            assert reported_new is False
        else:
            self.fresh_adds += 1
            self.false_news += not reported_new
            self.model.add(normal(key))

    @rule(key=key_strategy)
    def add(self, key):
        self._add_one(key, self.bf.add(key))

    @rule(batch=st.lists(key_strategy, max_size=20))
    def add_many(self, batch):
        for key, new in zip(batch, self.bf.add_many(batch).tolist()):
            self._add_one(key, new)

    @rule(batch=st.lists(key_strategy, max_size=20))
    def contains_many(self, batch):
        got = self.bf.contains_many(batch).tolist()
        for key, present in zip(batch, got):
            if normal(key) in self.model:
                assert present

    @rule()
    def round_trip(self):
        self.bf = self.BloomFilter.from_bytes(self.bf.to_bytes())

    @rule()
    def copy_and_merge(self):
        other = self.BloomFilter(2000, 0.01)
        other |= self.bf
        assert other == self.bf
        self.bf = other

    @invariant()
    def no_false_negatives(self):
        if self.model:
            assert self.bf.contains_many(list(self.model)).all()

    def teardown(self):
        # At most 2000 keys at 1%: a false "not new" should be rare.
        if self.fresh_adds >= 50:
            assert self.false_news <= max(3, 0.05 * self.fresh_adds)


def test_bloom_against_set(api):
    run_state_machine_as_test(lambda: BloomAgainstSet(api), settings=settings(
        max_examples=examples(0.2), stateful_step_count=40, deadline=None))


def test_large_filters_round_trip(api, tmp_path):
    # From 1 MiB of bits on, storage is lazily zeroed mapped memory.
    bf = api.BloomFilter(2_000_000, 0.01)
    assert bf.nbytes > 1 << 20
    keys = [f"https://e.com/{i}" for i in range(50_000)]
    bf.add_many(keys)
    assert bf.copy() == bf
    bf.save(tmp_path / "big")
    loaded = api.BloomFilter.load(tmp_path / "big")
    assert loaded == bf and loaded.contains_many(keys).all()
    union = loaded | api.BloomFilter(2_000_000, 0.01)
    assert union == bf


@platform_lacks(not hasattr(__import__("os"), "fork"), "needs fork")
def test_forked_child_has_its_own_copy(api):
    import os
    bf = api.BloomFilter(2_000_000, 0.01)
    bf.add("parent")
    with warnings.catch_warnings():
        # 3.12+ warns that forking a process with threads (numpy's BLAS pool
        # here) may deadlock; the child only touches the filter and exits.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # child: add, report, and leave without running pytest's teardown
        bf.add("child")
        os._exit(0 if "child" in bf and "parent" in bf else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert "child" not in bf and "parent" in bf
