"""FingerprintTable, the kernel of FingerprintSet: the compiled core against
its pure-Python twin, and each against a plain Python set."""

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import examples

_MASK = (1 << 64) - 1


def fmix(k):
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK
    k ^= k >> 33
    return k


def canonical(keys):
    """The documented canonical order, written independently of both kernels."""
    def order(d):
        acc = 0
        words = []
        for i in range(0, len(d), 8):
            w = int.from_bytes(d[i:i + 8], "little")
            words.append(w)
            acc = fmix(acc ^ w)
        return (acc, *words)
    return b"".join(sorted(set(keys), key=order))


def colliding_pair(w0, w0b, w1b):
    """Two 16-byte digests with the same 64-bit hash h (and so the same home
    slot at every table size): w1 = fmix(w0) ^ fmix(w0b) ^ w1b."""
    w1 = fmix(w0) ^ fmix(w0b) ^ w1b
    return (w0.to_bytes(8, "little") + w1.to_bytes(8, "little"),
            w0b.to_bytes(8, "little") + w1b.to_bytes(8, "little"))


# Digests drawn to hit the edges: all-zero, all-0xff, few distinct values
# (many repeats), every length.
def digests(ds):
    return st.one_of(
        st.binary(min_size=ds, max_size=ds),
        st.sampled_from([bytes(ds), b"\xff" * ds, b"\x00" * (ds - 1) + b"\x01"]),
        st.integers(0, 40).map(lambda i: i.to_bytes(ds, "little") if ds > 1
                               else bytes([i])))


@st.composite
def digest_lists(draw, max_size=300):
    ds = draw(st.sampled_from([1, 2, 7, 8, 9, 16, 20, 32, 64]))
    return ds, draw(st.lists(digests(ds), max_size=max_size))


def test_hash_vectors(impl):
    # Frozen: files and iteration order depend on it (docs/fpset.md).
    assert impl.fp_hash(bytes(16)) == 0
    assert impl.fp_hash(b"\x01" + bytes(15)) == fmix(fmix(1))
    assert impl.fp_hash(bytes(range(16))) == fmix(
        fmix(int.from_bytes(bytes(range(8)), "little")) ^ int.from_bytes(bytes(range(8, 16)),
                                                                          "little"))
    assert impl.fp_hash(b"abc") == fmix(int.from_bytes(b"abc", "little"))
    with pytest.raises(ValueError):
        impl.fp_hash(b"")
    with pytest.raises(ValueError):
        impl.fp_hash(bytes(65))
    with pytest.raises(TypeError):
        impl.fp_hash("abc")


@given(digest_lists())
def test_add_sequence_matches_python_set(impl, case):
    ds, keys = case
    table = impl.FingerprintTable(ds)
    model = set()
    for key in keys:
        assert table.add(key) == (key not in model)
        model.add(key)
        assert key in table
    assert len(table) == len(model)
    assert table.to_bytes() == canonical(keys)
    assert table.contains_many(keys).all()


@given(digest_lists(), st.data())
def test_core_and_reference_agree(core, reference, case, data):
    ds, keys = case
    probes = data.draw(st.lists(digests(ds), max_size=50))
    a, b = core.FingerprintTable(ds), reference.FingerprintTable(ds)
    cut = data.draw(st.integers(0, len(keys)))
    # Single adds, then a batch: both paths, growth in both.
    assert [a.add(k) for k in keys[:cut]] == [b.add(k) for k in keys[:cut]]
    assert a.add_many(keys[cut:]).tolist() == b.add_many(keys[cut:]).tolist()
    assert a.contains_many(probes).tolist() == b.contains_many(probes).tolist()
    assert [p in a for p in probes] == [p in b for p in probes]
    assert len(a) == len(b)
    assert a.to_bytes() == b.to_bytes()


@given(digest_lists())
def test_batch_results_match_single_adds(impl, case):
    ds, keys = case
    one, many = impl.FingerprintTable(ds), impl.FingerprintTable(ds)
    singles = [one.add(k) for k in keys]
    batch = many.add_many(keys)
    assert batch.dtype == np.bool_
    assert batch.tolist() == singles
    assert one.to_bytes() == many.to_bytes()


@given(st.lists(st.tuples(st.integers(0, _MASK), st.integers(0, _MASK),
                          st.integers(0, _MASK)), max_size=30))
def test_equal_hashes_are_ordered_by_words(impl, triples):
    keys = []
    for w0, w0b, w1b in triples:
        keys.extend(colliding_pair(w0, w0b, w1b))
    for a, b in zip(keys[::2], keys[1::2]):
        assert impl.fp_hash(a) == impl.fp_hash(b)
    table = impl.FingerprintTable(16)
    table.add_many(keys)
    assert len(table) == len(set(keys))
    assert table.to_bytes() == canonical(keys)
    assert table.contains_many(keys).all()


@given(digest_lists())
def test_load_round_trip_and_order_check(impl, case):
    ds, keys = case
    table = impl.FingerprintTable(ds)
    table.add_many(keys)
    data = table.to_bytes()
    again = impl.FingerprintTable(ds)
    again.load(data)
    assert again.to_bytes() == data and len(again) == len(set(keys))
    assert again.contains_many(keys).all()
    if len(set(keys)) >= 2:
        swapped = data[ds:2 * ds] + data[:ds] + data[2 * ds:]
        with pytest.raises(ValueError, match="canonical order"):
            impl.FingerprintTable(ds).load(swapped)
        with pytest.raises(ValueError, match="canonical order"):
            impl.FingerprintTable(ds).load(data[:ds] + data)  # a repeat


def test_load_rejects_bad_input(impl):
    with pytest.raises(ValueError, match="whole number"):
        impl.FingerprintTable(16).load(bytes(17))
    with pytest.raises(ValueError, match="canonical order"):
        impl.FingerprintTable(4).load(bytes(8))  # two all-zero digests
    table = impl.FingerprintTable(4)
    table.add(b"abcd")
    table.load(b"")
    assert len(table) == 0


def test_growth_keeps_everything(impl):
    n = 20_000 if impl.IMPLEMENTATION == "core" else 3_000
    rng = np.random.default_rng(7)
    keys = [rng.bytes(16) for _ in range(n)]
    table = impl.FingerprintTable(16)
    # Single adds interleaved with lookups of earlier keys: the lookups run
    # while a growth is moving the old table over.
    for i, key in enumerate(keys):
        assert table.add(key)
        assert keys[i // 2] in table
        assert len(table) == i + 1
    assert table.contains_many(keys).all()
    assert not table.contains_many([rng.bytes(16) for _ in range(1000)]).any()
    assert table.to_bytes() == canonical(keys)
    if impl.IMPLEMENTATION == "core":
        # About 16 / load bytes per digest, the load between 3/5 and 9/10.
        assert 16 * n / 0.95 <= table.nbytes <= 16 * n / 0.55


def test_numpy_inputs(impl):
    rng = np.random.default_rng(3)
    raw = rng.bytes(16 * 100) + bytes(16)
    arr = np.frombuffer(raw, dtype="S16")
    table = impl.FingerprintTable(16)
    assert table.add_many(arr).all()
    # Digests ending in NUL bytes keep them (numpy's S items would not).
    assert table.contains(bytes(16))
    grid = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 16)
    assert table.contains_many(grid).all()
    assert not table.add_many(grid[::-1]).any()
    assert not table.add_many(arr[::2]).any()  # non-contiguous view
    with pytest.raises(ValueError, match="S16"):
        table.add_many(np.zeros(3, dtype="S8"))
    with pytest.raises(ValueError, match="columns"):
        table.add_many(np.zeros((3, 8), dtype=np.uint8))
    with pytest.raises(TypeError, match="dtype"):
        table.contains_many(np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match="1-D"):
        table.add_many(np.zeros((2, 2), dtype="S16"))
    assert table.add_many(np.zeros(0, dtype="S16")).shape == (0,)


def test_bad_arguments(impl):
    for bad in (0, 65, -1):
        with pytest.raises(ValueError, match="digest_size"):
            impl.FingerprintTable(bad)
    for bad in (16.0, "16", True, None):
        with pytest.raises(TypeError, match="digest_size"):
            impl.FingerprintTable(bad)
    table = impl.FingerprintTable(16)
    with pytest.raises(ValueError, match="exactly 16 bytes"):
        table.add(b"short")
    with pytest.raises(ValueError, match="exactly 16 bytes"):
        table.contains(bytes(17))
    with pytest.raises(TypeError, match="not str"):
        table.add("x" * 16)
    with pytest.raises(TypeError, match="int"):
        table.add(16)
    with pytest.raises(TypeError, match="single bytes"):
        table.add_many(bytes(32))
    with pytest.raises(TypeError, match="iterable"):
        table.add_many(5)
    with pytest.raises(ValueError, match="exactly 16 bytes"):
        table.add_many([bytes(16), b"x"])
    with pytest.raises(TypeError):
        table.contains_many([bytes(16), None])
    # A failed batch leaves earlier chunks added and the table consistent.
    assert len(table) == len(set(table.to_bytes()[i:i + 16]
                                 for i in range(0, len(table.to_bytes()), 16)))
    # Other bytes-like types work.
    assert table.add(bytearray(b"y" * 16)) and memoryview(b"y" * 16) in table
    assert table.add(np.arange(4, dtype=np.uint32).view(np.uint8))


def test_clear_and_pickle(impl):
    import pickle
    table = impl.FingerprintTable(8)
    table.add_many([i.to_bytes(8, "big") for i in range(500)])
    copy = pickle.loads(pickle.dumps(table))
    assert copy.to_bytes() == table.to_bytes() and copy.digest_size == 8
    table.clear()
    assert len(table) == 0 and table.to_bytes() == b""
    assert table.add((5).to_bytes(8, "big"))
    assert len(copy) == 500


def test_threads_share_a_table(core):
    # Batch calls run without the GIL; single calls from other threads must
    # see a consistent table and every add must count once.
    table = core.FingerprintTable(16)
    rng = np.random.default_rng(11)
    keys = np.frombuffer(rng.bytes(16 * 40_000), dtype="S16")
    results = {}

    def batch(i):
        results[i] = table.add_many(keys[i::2]).sum()

    def singles():
        results["single"] = sum(table.add(bytes(k)) for k in keys[:5000].tolist()
                                if len(k) == 16)

    threads = [threading.Thread(target=batch, args=(i,)) for i in range(2)]
    threads.append(threading.Thread(target=singles))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(table) == len(keys)
    assert results[0] + results[1] + results["single"] == len(keys)
    assert table.contains_many(keys).all()


@settings(max_examples=examples(0.08), deadline=None)
@given(st.sampled_from([1, 3, 8, 16, 20, 64]), st.integers(0, 2**32), st.data())
def test_large_batches_sort_and_merge_like_the_twin(core, reference, ds, seed, data):
    # Batches of 1,024 keys and more, next to a set no more than 4 times
    # their size, are added by sorting and merging: repeats, the all-zero
    # digest and (for 16 bytes) hash collisions must come out as from the
    # one-by-one path and the twin.
    rng = np.random.default_rng(seed)
    pool = [rng.bytes(ds) for _ in range(data.draw(st.integers(50, 3000)))]
    pool.append(bytes(ds))
    if ds == 16:
        for w in rng.integers(0, 2**63, size=(20, 3)).tolist():
            pool.extend(colliding_pair(*w))
    a, b = core.FingerprintTable(ds), reference.FingerprintTable(ds)
    for _ in range(data.draw(st.integers(1, 3))):
        size = data.draw(st.integers(1024, 5000))
        batch = [pool[i] for i in rng.integers(0, len(pool), size)]
        if data.draw(st.booleans()):
            arg_a = np.frombuffer(b"".join(batch), dtype=f"S{ds}")
        else:
            arg_a = batch
        assert a.add_many(arg_a).tolist() == b.add_many(batch).tolist()
        assert len(a) == len(b)
        assert a.to_bytes() == b.to_bytes()
        single = [pool[i] for i in rng.integers(0, len(pool), 50)]
        assert [a.add(k) for k in single] == [b.add(k) for k in single]
    assert a.contains_many(pool).tolist() == b.contains_many(pool).tolist()


@given(digest_lists(), st.data())
def test_reserve_changes_nothing_but_the_room(core, reference, case, data):
    """reserve(n) at any point (below, at or above what the table holds):
    the same answers and contents as the twin without it, and the room
    taken stays (adding up to n grows the table no more)."""
    ds, keys = case
    a, b = core.FingerprintTable(ds), reference.FingerprintTable(ds)
    cut = data.draw(st.integers(0, len(keys)))
    n = data.draw(st.integers(0, 2 * len(keys) + 70_000))
    assert a.add_many(keys[:cut]).tolist() == b.add_many(keys[:cut]).tolist()
    a.reserve(n)
    b.reserve(n)
    room = a.nbytes
    assert a.to_bytes() == b.to_bytes() and len(a) == len(b)
    assert [a.add(k) for k in keys[cut:]] == [b.add(k) for k in keys[cut:]]
    assert a.to_bytes() == b.to_bytes() and len(a) == len(b)
    assert a.contains_many(keys).all()
    if len(a) <= n:
        assert a.nbytes == room  # no growth up to n


def test_reserve_takes_the_room_once(impl):
    table = impl.FingerprintTable(16)
    rng = np.random.default_rng(3)
    keys = [rng.bytes(16) for _ in range(5_000)]
    table.add_many(keys[:100])
    table.reserve(200_000)
    if impl.IMPLEMENTATION == "core":
        room = table.nbytes
        assert room >= 200_000 * 16  # one table for them all
        table.add_many(keys)
        table.reserve(1_000)  # smaller: nothing changes
        assert table.nbytes == room
    else:
        table.add_many(keys)
    assert len(table) == 5_000 and table.contains_many(keys).all()
    for bad, exc in ((-1, ValueError), (1.5, TypeError), (True, TypeError), ("9", TypeError),
                     (1 << 62, MemoryError)):
        with pytest.raises(exc):
            table.reserve(bad)
    assert len(table) == 5_000 and table.to_bytes() == canonical(keys)
