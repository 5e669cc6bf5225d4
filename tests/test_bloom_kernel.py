"""BloomBits, the storage kernel, in both implementations, against each other
and against a plain set."""

import math
import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

keys = st.one_of(st.binary(max_size=40), st.text(max_size=12).filter(
    lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s)))


def make(impl, m, k, seed=0):
    bits = impl.BloomBits()
    bits._init_bits(m, k, seed)
    return bits


@given(batch=st.lists(keys, max_size=60), probes=st.lists(keys, max_size=30),
       m=st.integers(1, 2000), k=st.integers(1, 64), seed=st.integers(0, 2 ** 32 - 1))
def test_core_and_reference_set_identical_bits(core, reference, batch, probes, m, k, seed):
    a, b = make(core, m, k, seed), make(reference, m, k, seed)
    half = len(batch) // 2
    singles_a = [a.add(key) for key in batch[:half]]
    singles_b = [b.add(key) for key in batch[:half]]
    assert singles_a == singles_b
    assert a.add_many(batch[half:]).tolist() == b.add_many(batch[half:]).tolist()
    assert bytes(a._bits_view()) == bytes(b._bits_view())
    assert a._popcount() == b._popcount()
    assert a.insert_count == b.insert_count
    assert a.contains_many(probes).tolist() == b.contains_many(probes).tolist()
    assert [p in a for p in probes] == [p in b for p in probes]


@given(batch=st.lists(keys, max_size=80), m=st.integers(1, 5000), k=st.integers(1, 20))
def test_bits_are_exactly_the_hash_indices(impl, batch, m, k):
    bits = make(impl, m, k)
    bits.add_many(batch)
    expected = set()
    for key in batch:
        expected.update(impl.hash_indices(key, k, m))
    view = bytes(bits._bits_view())
    got = {i for i in range(len(view) * 8) if view[i >> 3] >> (i & 7) & 1}
    assert got == expected
    assert bits._popcount() == len(expected)


@given(batch=st.lists(keys, max_size=80))
def test_no_false_negatives_and_add_reports_newness(impl, batch):
    bits = make(impl, 1 << 16, 7)
    seen = set()
    for key in batch:
        norm = key.encode() if isinstance(key, str) else key
        fresh = bits.add(key)
        if norm in seen:
            assert fresh is False
        seen.add(norm)
        assert key in bits
    assert bits.contains_many(batch).all()


def test_batch_marks_repeats_inside_one_call(impl):
    bits = make(impl, 10_000, 5)
    out = bits.add_many(["a", "b", "a", b"a", "c", "b"])
    assert out.dtype == np.bool_
    assert out.tolist() == [True, True, False, False, True, False]
    assert bits.insert_count == 3


def test_batch_accepts_any_iterable(impl):
    bits = make(impl, 10_000, 5)
    assert bits.add_many(iter(["x", "y"])).tolist() == [True, True]
    assert bits.contains_many(k for k in ("x", "z")).tolist() == [True, False]
    assert bits.contains_many(np.array(["x", "y"])).tolist() == [True, True]
    assert bits.contains_many([bytearray(b"x"), memoryview(b"y")]).tolist() == [True, True]
    assert bits.add_many([]).shape == (0,)


def test_batch_rejects_a_single_string(impl):
    bits = make(impl, 1000, 3)
    with pytest.raises(TypeError, match="not a single str"):
        bits.add_many("https://example.com/")
    with pytest.raises(TypeError, match="not a single bytes"):
        bits.contains_many(b"abc")


def test_bad_key_in_a_long_batch_stops_there(impl):
    # Documented contract: keys before the bad one may have been added, the
    # bad one and those after it are not.
    bits = make(impl, 1 << 16, 3)
    keys = [f"k{i}" for i in range(3000)]
    with pytest.raises(TypeError, match=r"keys\[2000\]"):
        bits.add_many(keys[:2000] + [None] + keys[2000:])
    assert not bits.contains_many(keys[2000:]).any()


def test_bad_key_in_batch_changes_nothing(impl):
    bits = make(impl, 1000, 3)
    with pytest.raises(TypeError, match=r"keys\[2\].*int"):
        bits.add_many(["a", "b", 3, "d"])
    assert bits._popcount() == 0 and bits.insert_count == 0
    with pytest.raises(UnicodeEncodeError):
        bits.add_many(["a", "\udc80"])
    assert bits._popcount() == 0


def test_must_be_initialised_once(impl):
    bits = impl.BloomBits()
    with pytest.raises(RuntimeError, match="before _init_bits"):
        bits.add("x")
    with pytest.raises(RuntimeError):
        "x" in bits
    bits._init_bits(100, 3)
    with pytest.raises(RuntimeError, match="already"):
        bits._init_bits(100, 3)


@pytest.mark.parametrize("m,k", [(0, 3), (-1, 3), (2 ** 62 + 1, 3), (100, 0), (100, 65)])
def test_init_ranges(impl, m, k):
    with pytest.raises(ValueError):
        impl.BloomBits()._init_bits(m, k)


def test_external_buffer_is_used_in_place(impl):
    buf = bytearray(16)
    bits = impl.BloomBits()
    bits._init_bits(100, 4, 0, buf)
    bits.add("x")
    assert any(buf)
    with pytest.raises(ValueError, match="needed"):
        impl.BloomBits()._init_bits(1000, 4, 0, bytearray(8))
    with pytest.raises(TypeError, match="writable"):
        impl.BloomBits()._init_bits(64, 4, 0, b"\x00" * 8)


def test_or_and_equal(impl):
    a, b = make(impl, 4096, 4), make(impl, 4096, 4)
    a.add_many(["1", "2"])
    b.add_many(["2", "3"])
    union = make(impl, 4096, 4)
    union._or_from(a)
    union._or_from(b)
    assert union.contains_many(["1", "2", "3"]).all()
    a._and_from(b)
    assert "2" in a
    with pytest.raises(ValueError):
        a._or_from(make(impl, 4097, 4))


def test_threads_adding_at_once_lose_nothing(core):
    bits = make(core, 1 << 20, 7)
    groups = [[f"t{t}-{i}" for i in range(20_000)] for t in range(4)]

    def batches(group):
        for start in range(0, len(group), 1000):
            bits.add_many(group[start:start + 1000])

    def singles(group):
        for key in group:
            bits.add(key)

    # Batch writers set bits without the GIL while single adds hold it: the
    # writers' lock protocol must keep every bit of every thread.
    threads = [threading.Thread(target=batches if t % 2 else singles, args=(g,))
               for t, g in enumerate(groups)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for group in groups:
        assert bits.contains_many(group).all()


def test_threads_adding_one_key_at_once_are_told_new_once(impl):
    # Eight threads add the same keys at once, in single adds and batches,
    # with thread switches forced as often as the interpreter allows: of
    # those adding a key, exactly one is told it is new, and the insert
    # count is the number of keys (the twin's writers exclude each other,
    # as the core's do).
    import sys
    keys = [f"k{i}" for i in range(2_000)]
    bits = make(impl, 1 << 24, 7)  # far from full: no false positives here
    told = np.zeros((8, len(keys)), dtype=np.int64)
    start = threading.Barrier(8)

    def adder(t):
        start.wait()
        if t % 2:
            for at in range(0, len(keys), 50):
                told[t, at:at + 50] = bits.add_many(keys[at:at + 50])
        else:
            told[t] = [bits.add(key) for key in keys]

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=adder, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(switch)
    assert (told.sum(axis=0) == 1).all()
    assert bits.insert_count == len(keys)


def fpr_filter(core, n, p):
    m = math.ceil(-n * math.log(p) / math.log(2) ** 2)
    k = max(1, round(m / n * math.log(2)))
    return make(core, m, k)


@pytest.mark.parametrize("p,absent", [(0.1, 200_000), (0.01, 200_000), (0.001, 1_000_000)])
def test_false_positive_rate_at_capacity(core, p, absent):
    # The rate is a property of hash + derivation, identical in both kernels
    # (see test_core_and_reference_set_identical_bits); the compiled one is fast.
    n = 200_000
    bits = fpr_filter(core, n, p)
    bits.add_many([f"https://site{i % 977}.example/item/{i}" for i in range(n)])
    probes = [f"https://site{i % 977}.example/other/{i}" for i in range(absent)]
    rate = bits.contains_many(probes).mean()
    assert rate <= 1.1 * p, rate
    assert rate >= 0.5 * p, rate  # an implausibly low rate means the test is broken


@pytest.mark.parametrize("layout", ["standard", "blocked"])
def test_prefetch_switch_changes_no_answer(impl, layout):
    # Filters above the size where batches touch lines first (4 MiB), with
    # the benchmark switch on and off: the same answers and the same bits.
    keys = [f"https://example.com/{i}" for i in range(3000)]
    others = [f"https://example.org/{i}" for i in range(3000)]
    made = []
    for enabled in (True, False):
        previous = impl._set_prefetching(enabled)
        try:
            bits = impl.BloomBits()
            bits._init_bits(8 << 23, 7, layout=layout)
            added = bits.add_many(keys[:2000])
            found = bits.contains_many(keys + others)
        finally:
            assert impl._set_prefetching(previous) is enabled
        made.append((added.tolist(), found.tolist(), bytes(bits._bits_view())))
    assert made[0] == made[1]
    assert all(made[0][0]) and all(made[0][1][:2000])


# Batches hash plain keys two at a time (the blocks the two have in common in
# one loop): keys of every length, in any order and mix of types, must land
# on the same bits as when added one by one.
long_keys = st.one_of(
    st.binary(max_size=200),
    st.text(alphabet=st.characters(max_codepoint=127), max_size=200),
    st.text(max_size=40).filter(lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s)),
    st.builds(bytearray, st.binary(max_size=70)))


@given(batch=st.lists(long_keys, max_size=50), layout=st.sampled_from(["standard", "blocked"]),
       seed=st.integers(0, 2 ** 32 - 1), k=st.integers(1, 12))
def test_batches_of_long_mixed_keys_set_the_bits_of_single_adds(core, reference, batch, layout,
                                                                seed, k):
    one_by_one = core.BloomBits()
    one_by_one._init_bits(4096, k, seed, layout=layout)
    batched = core.BloomBits()
    batched._init_bits(4096, k, seed, layout=layout)
    twin = reference.BloomBits()
    twin._init_bits(4096, k, seed, layout=layout)
    for key in batch:
        one_by_one.add(key)
    batched.add_many(batch)
    twin.add_many(batch)
    assert bytes(batched._bits_view()) == bytes(one_by_one._bits_view())
    assert bytes(batched._bits_view()) == bytes(twin._bits_view())
    assert batched.contains_many(batch).all()
    assert batched.contains_many(tuple(batch)).all()
    # Lookups of absent keys too (the blocked layout's lookups keep a key's
    # line, not its positions: a different code path from adds).
    probes = [bytes([len(batch) % 256]) + b"/absent/" + str(i).encode() * i for i in range(60)]
    assert batched.contains_many(probes).tolist() == twin.contains_many(probes).tolist()
    assert batched.contains_many(probes).tolist() == [p in one_by_one for p in probes]


# Lookup batches of 32,768 keys or more are cut into slices looked up on
# several threads; they read ASCII str and bytes keys, and leave any other
# key to the calling thread (a batch where 64 spread samples find one stays
# there whole).  Whatever the number of threads, the answers are those of
# single lookups.
@pytest.mark.parametrize("layout,k", [("standard", 7), ("blocked", 7), ("blocked", 1),
                                      ("standard", 1)])
def test_threaded_lookups_equal_single_lookups(core, layout, k):
    import crawldedup
    bits = core.BloomBits()
    bits._init_bits(1 << 20 if layout == "blocked" else 1_000_003, k, 9, layout=layout)
    added = [f"https://example.com/{i}" for i in range(0, 60000, 2)]
    bits.add_many(added)
    n = 70000
    keys = [f"https://example.com/{i}" if i % 3 else f"https://example.com/{i}".encode()
            for i in range(n)]
    # a few keys of other kinds, away from the sampled positions
    rare = {5: "https://例え.jp/5", 777: bytearray(b"https://example.com/776"),
            33333: memoryview(b"https://example.com/33332"), 69998: "https://例え.jp/x"}
    assert not any(p % (n // 64) == 0 for p in rare)
    for p, key in rare.items():
        keys[p] = key
    mixed = [f"https://例え.jp/{i}" if i % 5 == 0 else key for i, key in enumerate(keys)]
    previous = crawldedup.set_threads(None)
    try:
        for batch in (keys, mixed):
            expect = [key in bits for key in batch]
            assert any(expect) and not all(expect)
            for threads in (None, 2, 3, 1):
                crawldedup.set_threads(threads)
                assert bits.contains_many(batch).tolist() == expect
                assert bits.contains_many(tuple(batch)).tolist() == expect
                assert bits.contains_many(iter(batch)).tolist() == expect
        crawldedup.set_threads(None)
        bad = keys[:40000] + [12345] + keys[40000:]
        with pytest.raises(TypeError, match=r"keys\[40000\]"):
            bits.contains_many(bad)
    finally:
        crawldedup.set_threads(previous)


def test_set_threads_arguments(impl):
    import crawldedup
    previous = crawldedup.set_threads(3)
    try:
        assert crawldedup.set_threads(None) == 3
        assert crawldedup.set_threads(1) is None
        for bad in (0, -2, True, 1.5, "2"):
            with pytest.raises(ValueError, match="threads"):
                crawldedup.set_threads(bad)
        with pytest.raises(TypeError):
            impl._set_batch_threads(1.5)
        with pytest.raises(ValueError):
            impl._set_batch_threads(-1)
    finally:
        crawldedup.set_threads(previous)
