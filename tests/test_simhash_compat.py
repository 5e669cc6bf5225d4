"""crawldedup.compat.simhash against the `simhash` package 2.1.x itself."""

import hashlib
import logging
import re

import numpy as np
import pytest
import simhash as leonsim
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from conftest import examples
from crawldedup.compat import simhash as compat
from test_simhash_kernel import texts

F_VALUES = st.sampled_from([8, 16, 24, 32, 56, 64, 72, 96, 128])
small_ints = st.integers(min_value=-3, max_value=255)   # the package overflows above 255
feature_names = st.one_of(st.text(max_size=6), st.sampled_from(["你好", "😀", "𠀀", "", "a"]))


def outcome(fn):
    """The value fn computes, or the type of the exception it raises."""
    try:
        return ("value", fn().value)
    except Exception as exc:  # noqa: BLE001 - comparing failures too
        return ("error", type(exc))


def same(*args, **kwargs):
    ours = outcome(lambda: compat.Simhash(*args, **kwargs))
    theirs = outcome(lambda: leonsim.Simhash(*args, **kwargs))
    assert ours == theirs, (args, kwargs)
    return ours


@given(texts, F_VALUES)
def test_text(text, f):
    assert same(text, f=f)[0] == "value"


@pytest.mark.parametrize("text", ["", " ", "   ", "\t\n", "a", "ab", "abc", "abcd", "abcde",
                                  "How are you? I am fine. Thanks.", "你好，世界！", "😀😀😀",
                                  "İstanbul", "ΟΔΟΣ", "Straße", "𠀀𠀁𠀂𠀃𠀄", "a_b-c", "鿌鿍鿎"])
@pytest.mark.parametrize("f", [8, 64, 128])
def test_text_examples(text, f):
    assert same(text, f=f)[0] == "value"


def test_empty_and_whitespace_texts_hash_the_empty_window():
    empty = int.from_bytes(hashlib.md5(b"").digest()[8:], "big")
    assert compat.Simhash("").value == compat.Simhash("  \n").value == empty


@given(st.lists(feature_names, max_size=30), F_VALUES)
def test_feature_list(features, f):
    same(features, f=f)


@given(st.lists(st.tuples(feature_names, small_ints), max_size=30), F_VALUES)
def test_weighted_features(pairs, f):
    same(pairs, f=f)
    same(dict(pairs), f=f)
    same([list(p) for p in pairs], f=f)


@given(st.lists(st.one_of(feature_names, st.tuples(feature_names, small_ints),
                          st.tuples(feature_names, st.booleans())), max_size=30))
def test_mixed_features_reuse_the_last_weight(items):
    same(items)


@given(st.lists(st.tuples(feature_names, st.floats(min_value=-100, max_value=100)),
                max_size=20), st.sampled_from([32, 64, 128]))
def test_float_weights(pairs, f):
    same(pairs, f=f)


@given(st.lists(st.tuples(feature_names, st.integers(-3, 255).map(np.int64)), max_size=20))
def test_numpy_weights(pairs):
    same(pairs)


def test_large_weights_are_exact_where_the_package_overflows():
    # simhash 2.1.x multiplies a uint8 bit array by the weight; NumPy 2 raises
    # OverflowError above 255, NumPy 1 (and we) compute the weighted sum.
    pairs = [("a", 1000), ("b", 300), ("c", 400)]
    digests = {k: int.from_bytes(hashlib.md5(k.encode()).digest()[8:], "big") for k, _ in pairs}
    expected = 0
    for j in range(64):
        on = sum(w for k, w in pairs if digests[k] >> j & 1)
        if 2 * on > 1700:
            expected |= 1 << j
    assert compat.Simhash(pairs).value == expected
    text = "ab" * 400   # "abab" and "baba" occur ~400 times each
    windows = ["abab"] * 399 + ["baba"] * 398
    assert compat.Simhash(text).value == compat.Simhash(windows).value
    # the same weight spelled as repetition is accepted by the package too
    assert compat.Simhash(text).value == leonsim.Simhash(windows).value


@pytest.mark.parametrize("value", [0, 1, -5, 2**64 + 3, True, np.uint64(7)])
def test_int_values_are_kept_as_given(value):
    assert compat.Simhash(value).value == leonsim.Simhash(value).value
    assert compat.Simhash(compat.Simhash(value)).value == compat.Simhash(value).value


def test_custom_hashfunc_bytes_and_int():
    def sha(x):
        return hashlib.sha1(x).digest()

    def as_int(x):
        return int.from_bytes(hashlib.sha256(x).digest(), "little")

    for hf in (sha, as_int):
        for value in ["custom hash functions take the slow path", ["a", "b", "b"],
                      [("a", 60), ("b", 2)], {"x": 3, "y": 1.5}]:
            for f in (32, 64, 128):
                same(value, f=f, hashfunc=hf)


@pytest.mark.parametrize("reg", [r"\w+", r"[a-z]+", re.compile(r"\w", re.UNICODE),
                                 re.compile(r"[\w\u4e00-\u9fcc]+", re.ASCII), r"(\w)(\w)"])
def test_custom_reg(reg):
    for text in ["Custom reg, 你好 world_1", "", "ABC def"]:
        same(text, reg=reg)


def test_default_reg_spelled_explicitly_is_the_fast_path():
    text = "Explicit default reg 你好"
    ours = compat.Simhash(text, reg=re.compile(r"[\w\u4e00-\u9fcc]+"))
    assert ours.value == leonsim.Simhash(text).value


@pytest.mark.parametrize("f", [0, 136, 256, 12])
def test_unusual_f(f):
    for value in ["some text here", ["a", "b"], [("a", 2.5)]]:
        same(value, f=f)


def test_subclass_overriding_tokenize():
    class Words(compat.Simhash):
        def _tokenize(self, content):
            return content.lower().split()

    class TheirWords(leonsim.Simhash):
        def _tokenize(self, content):
            return content.lower().split()

    text = "Tokenized by words not by windows words"
    assert Words(text).value == TheirWords(text).value != compat.Simhash(text).value


def test_str_subclass_and_bad_types():
    class Text(str):
        pass

    assert compat.Simhash(Text("Abc Def")).value == leonsim.Simhash(Text("Abc Def")).value
    with pytest.raises(TypeError, match="value must be str"):
        compat.Simhash(1.5)
    with pytest.raises(TypeError):
        compat.Simhash(None)
    with pytest.raises(ValueError, match="multiple of 8"):
        compat.Simhash("a", f=10)
    with pytest.raises(Exception):
        leonsim.Simhash(1.5)   # the package raises a bare Exception here


def test_errors_match_the_package():
    for value in [[1, 2], [b"bytes"], [("a", 1, 2)], b"abc", ["\ud800"], [("a", "w")]]:
        ours, theirs = outcome(lambda: compat.Simhash(value)), \
            outcome(lambda: leonsim.Simhash(value))
        assert ours == theirs, value
        assert ours[0] == "error"


@given(texts, texts, st.sampled_from([8, 64, 128]))
def test_distance_and_equality(a, b, f):
    x, y = compat.Simhash(a, f=f), compat.Simhash(b, f=f)
    p, q = leonsim.Simhash(a, f=f), leonsim.Simhash(b, f=f)
    assert x.distance(y) == p.distance(q)
    assert (x == y) == (p == q)


def test_distance_masks_to_f_and_checks_f():
    assert compat.Simhash(-1, f=8).distance(compat.Simhash(0, f=8)) == 8
    with pytest.raises(AssertionError):
        compat.Simhash(1, f=8).distance(compat.Simhash(1, f=16))
    with pytest.raises(TypeError):
        hash(compat.Simhash(1))   # __eq__ without __hash__, like the package


def test_attributes():
    s = compat.Simhash("abc", f=32)
    assert (s.f, s.f_bytes, s.reg, s.hashfunc_returns_int) == (32, 4, r"[\w\u4e00-\u9fcc]+",
                                                                False)
    assert s.log is logging.getLogger("simhash")
    assert s._tokenize("ABCDE") == leonsim.Simhash("x")._tokenize("ABCDE")
    assert compat.Simhash.large_weight_cutoff == 50 and compat.Simhash.batch_size == 200
    s.build_by_features(["x", "y"])
    assert s.value == leonsim.Simhash(["x", "y"], f=32).value


# ------------------------------------------------------------------ the index

def pair(value, f):
    return compat.Simhash(value, f=f), leonsim.Simhash(value, f=f)


@pytest.mark.parametrize("k", [0, 1, 2, 3, 5])
@pytest.mark.parametrize("f", [32, 64])
def test_index_keys_offsets_and_queries(k, f):
    rng = np.random.default_rng(k * 100 + f)
    values = [int(v) for v in rng.integers(0, 2**f - 1, size=60, dtype=np.uint64)]
    values += [v ^ (1 << int(rng.integers(f))) for v in values[:30]]  # near copies
    ours = compat.SimhashIndex([(str(i), pair(v, f)[0]) for i, v in enumerate(values)], f=f, k=k)
    theirs = leonsim.SimhashIndex([(str(i), pair(v, f)[1]) for i, v in enumerate(values)],
                                  f=f, k=k)
    assert ours.offsets == theirs.offsets
    assert ours.bucket_size() == theirs.bucket_size()
    assert ours._bucket_snapshot() == dict(theirs.bucket)
    for v in values[:40]:
        a, b = pair(v ^ 1, f)
        assert list(ours.get_keys(a)) == list(theirs.get_keys(b))
        assert sorted(ours.get_near_dups(a)) == sorted(theirs.get_near_dups(b))
    assert ours.bucket_size() == theirs.bucket_size()   # queries create empty buckets too
    assert ours._bucket_snapshot() == dict(theirs.bucket)
    # The package's attribute itself, and queries after it (Python sets now).
    assert dict(ours.bucket) == dict(theirs.bucket)
    for v in values[:10]:
        a, b = pair(v ^ 2, f)
        assert sorted(ours.get_near_dups(a)) == sorted(theirs.get_near_dups(b))
    assert dict(ours.bucket) == dict(theirs.bucket)


class IndexMachine(RuleBasedStateMachine):
    """Random add/delete/query sequences against the package's index."""

    def __init__(self):
        super().__init__()
        self.ours = compat.SimhashIndex([], f=64, k=3)
        self.theirs = leonsim.SimhashIndex([], f=64, k=3)
        self.added = []

    fps = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([0, 1, 3, 2**63, 2**64 - 1]))

    @rule(obj_id=st.one_of(st.integers(0, 20), st.text(max_size=4)), fp=fps)
    def add(self, obj_id, fp):
        self.ours.add(obj_id, compat.Simhash(fp))
        self.theirs.add(obj_id, leonsim.Simhash(fp))
        self.added.append((obj_id, fp))

    @precondition(lambda self: self.added)
    @rule(data=st.data())
    def delete(self, data):
        obj_id, fp = data.draw(st.sampled_from(self.added))
        self.ours.delete(obj_id, compat.Simhash(fp))
        self.theirs.delete(obj_id, leonsim.Simhash(fp))

    @rule(fp=fps, flips=st.lists(st.integers(0, 63), max_size=5))
    def query(self, fp, flips):
        for bit in flips:
            fp ^= 1 << bit
        assert sorted(self.ours.get_near_dups(compat.Simhash(fp))) == \
            sorted(self.theirs.get_near_dups(leonsim.Simhash(fp)))

    @precondition(lambda self: self.added)
    @rule(data=st.data(), flips=st.lists(st.integers(0, 63), max_size=5))
    def query_near_added(self, data, flips):
        _, fp = data.draw(st.sampled_from(self.added))
        self.query(fp, flips)

    @invariant()
    def same_buckets(self):
        assert self.ours.bucket_size() == self.theirs.bucket_size()
        assert self.ours._bucket_snapshot() == dict(self.theirs.bucket)


TestIndexMachine = IndexMachine.TestCase
TestIndexMachine.settings = settings(max_examples=examples(1 / 6), stateful_step_count=30,
                                     deadline=None)  # 50 under the ci profile


def test_index_logs_like_the_package(caplog):
    fps = [compat.Simhash(i << 40) for i in range(205)]  # same low bits: one big bucket
    with caplog.at_level(logging.DEBUG, logger="simhash"):
        index = compat.SimhashIndex([(str(i), s) for i, s in enumerate(fps)], k=2)
        caplog.clear()
        index.get_near_dups(compat.Simhash(0))
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("Big bucket found. key:0:0, len:205") for m in messages), messages
    assert any(m.startswith("key:") for m in messages)
    ours_log = logging.getLogger("mine")
    with caplog.at_level(logging.INFO, logger="mine"):
        compat.SimhashIndex([("a", compat.Simhash(1))], log=ours_log)
    assert [r.getMessage() for r in caplog.records if r.name == "mine"] == [
        "Initializing 1 data.", "1/1"]


def test_64_bit_index_runs_in_the_core_until_bucket_is_used():
    module = compat
    index = compat.SimhashIndex([("a", compat.Simhash(5))], k=3)
    assert isinstance(index._store, module._CoreBuckets)
    index.get_near_dups(compat.Simhash(4))
    assert isinstance(index._store, module._CoreBuckets)
    index.bucket["4:0"].add("6,b")  # as with the package, a change to bucket counts
    assert isinstance(index._store, module._Buckets)
    assert sorted(index.get_near_dups(compat.Simhash(4))) == ["a", "b"]
    assert isinstance(compat.SimhashIndex([], f=32)._store, module._Buckets)
    assert isinstance(compat.SimhashIndex([], k=9)._store, module._Buckets)


class FarDistance(compat.Simhash):
    def distance(self, another):
        return 0  # everything in a shared bucket is a near duplicate


def test_a_custom_distance_takes_the_bucket_path():
    pairs_ = [(str(i), (i << 48) | 7) for i in range(5)]
    ours = compat.SimhashIndex([(i, compat.Simhash(v)) for i, v in pairs_], k=3)
    theirs = leonsim.SimhashIndex([(i, leonsim.Simhash(v)) for i, v in pairs_], k=3)

    class TheirFar(leonsim.Simhash):
        def distance(self, another):
            return 0
    assert sorted(ours.get_near_dups(FarDistance(7))) == \
        sorted(theirs.get_near_dups(TheirFar(7))) == ["0", "1", "2", "3", "4"]


def test_index_checks_f():
    index = compat.SimhashIndex([], f=64)
    with pytest.raises(AssertionError):
        index.add("x", compat.Simhash(1, f=32))
    with pytest.raises(AssertionError):
        index.get_near_dups(compat.Simhash(1, f=32))


# ---- issue 11, item 23: memory never grows with a feature's weight ----------------

def weighted_model(items, f=64):
    """The package's value by its definition, in Python ints: a feature's
    bits count its weight (a str feature takes the previous pair's weight;
    a weight <= 0 on the repeated path counts 0), bit j is set when its sum
    is above half the total weight."""
    sums, total, w = [0] * f, 0, 1
    for item in items:
        large = False
        if not isinstance(item, str):
            item, w = item
            large = w > 50
        total += w
        h = int.from_bytes(hashlib.md5(item.encode()).digest()[-(f // 8):], "big")
        for j in range(f):
            if h >> (f - 1 - j) & 1:
                sums[j] += w if large else max(w, 0)
    return int("".join("1" if 2 * s > total else "0" for s in sums), 2)


@pytest.mark.parametrize("items", [
    [("a", 2**31), "b"],
    [("a", 2**40), "b", "c", ("d", 3), "e"],
    [("a", -2**31), "b", ("c", 1)],
    [("x", 2**59), "y"],
    [("a", 2**31), "b"] * 150,   # past the package's batch of 200
])
def test_huge_reused_weights_take_no_memory(items):
    import tracemalloc
    tracemalloc.start()
    try:
        value = compat.Simhash(items).value
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20   # the package repeats "b"'s digest 2**31 times: 16 GiB
    assert value == weighted_model(items)


def test_weight_past_the_index_range_raises_as_the_package():
    # The package's digest * w raises OverflowError past sys.maxsize, and
    # TypeError for a float weight reused by a str feature.
    for items in ([("a", 2**70), "b"], [("a", 2**62), "b"]):
        with pytest.raises(OverflowError):
            compat.Simhash(items)
    for items in ([("a", 2.5), "b"], [("a", 60), "b", ("c", 1.5), "d"]):
        assert outcome(lambda: compat.Simhash(items)) == outcome(lambda: leonsim.Simhash(items))
        assert outcome(lambda: compat.Simhash(items))[0] == "error"


@given(st.lists(st.one_of(feature_names, st.tuples(feature_names, st.integers(-300, 3000)),
                          st.tuples(feature_names, st.booleans())), max_size=25),
       st.sampled_from([8, 32, 64, 128]))
def test_reused_weights_equal_the_package(items, f):
    # Weights up to 3,000 reused by str features (the package repeats their
    # digests; affordable at this size), on the exact path (a custom hashfunc
    # equal to the default sends every feature there).
    items = [i for i in items if isinstance(i, str) or not (i[1] is not True and i[1] is not False
                                                            and i[1] > 50)]   # large pairs: NumPy 2
    def md5(x):
        return hashlib.md5(x).digest()
    same(items, f=f, hashfunc=md5)
    same(items, f=f)


@given(st.lists(st.one_of(feature_names, st.tuples(feature_names, st.integers(-5, 400))),
                max_size=25),
       st.integers(0, 16), st.sampled_from([32, 64, 128]))
def test_short_custom_digests_equal_the_package(items, size, f):
    # A custom hashfunc returning fewer bytes than f/8: the package cuts the
    # joined repeated digests into rows of f bits across features (or fails
    # to when they do not fill whole rows); the weighted sum does the same.
    def short(x):
        return hashlib.sha256(x).digest()[:size]
    items = [i for i in items if isinstance(i, str) or i[1] <= 50]
    same(items, f=f, hashfunc=short)


def test_leonsim_kernel_bounds_weights(impl):
    # The core sums weights in int64: both implementations refuse sums that
    # could overflow instead of answering wrong, and never allocate by weight.
    big = np.array([2**61, 2**61], dtype=np.int64)
    with pytest.raises(OverflowError):
        impl.leonsim_features(["a", "b"], big, 2**62)
    with pytest.raises(OverflowError):
        impl.leonsim_features(["a"], np.array([1], dtype=np.int64), 2**62 + 1)
    ok = np.array([2**61, -2**61, 2**61 - 1], dtype=np.int64)
    assert impl.leonsim_features(["a", "b", "c"], ok, 2**61 - 1) == \
        weighted_model([("a", 2**61), ("b", -2**61), ("c", 2**61 - 1)])


@pytest.mark.parametrize("first", ["crawldedup.compat.simhash", "crawldedup.compat._simhash_index"])
def test_either_path_imports_first(first):
    """The module and the path its index half had in 0.1.0 (pickles name
    it) import in either order and give the same classes."""
    import subprocess
    import sys
    code = (f"import {first}; from crawldedup.compat.simhash import Simhash, SimhashIndex; "
            f"print(SimhashIndex([('a', Simhash('x y z'))], k=3).get_near_dups(Simhash('x y z')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "['a']", done.stderr
