"""BloomBits.contains_hashed / add_hashed: batches of keys given by their
hashes (what ``crawldedup urls`` computes for a block of lines on its worker
thread), against the key-based batches and between the implementations."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

keys = st.one_of(st.binary(max_size=60), st.text(max_size=12).filter(
    lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s)))
LOW64 = (1 << 64) - 1


def hashes_of(impl, batch, seed):
    """hash128 cut into its (h1, h2) halves, one row a key."""
    rows = [(h & LOW64, h >> 64) for h in (impl.hash128(key, seed) for key in batch)]
    return np.array(rows, dtype=np.uint64).reshape(len(rows), 2)


def pair(impl, layout, k, seed):
    made = []
    for _ in range(2):
        bits = impl.BloomBits()
        bits._init_bits(4096 if layout == "blocked" else 3001, k, seed, layout=layout)
        made.append(bits)
    return made


@given(batch=st.lists(keys, max_size=60), probes=st.lists(keys, max_size=30),
       layout=st.sampled_from(["standard", "blocked"]), k=st.integers(1, 20),
       seed=st.integers(0, 2 ** 32 - 1))
def test_hashed_batches_equal_key_batches(impl, batch, probes, layout, k, seed):
    by_key, by_hash = pair(impl, layout, k, seed)
    half = len(batch) // 2
    assert by_hash.add_hashed(hashes_of(impl, batch[:half], seed)).tolist() == \
        by_key.add_many(batch[:half]).tolist()
    assert bytes(by_hash._bits_view()) == bytes(by_key._bits_view())
    assert by_hash.insert_count == by_key.insert_count
    everything = batch + probes
    assert by_hash.contains_hashed(hashes_of(impl, everything, seed)).tolist() == \
        by_key.contains_many(everything).tolist()
    # and mixed: keys added by hash are found by key, and the other way round
    by_key.add_many(batch[half:])
    by_hash.add_hashed(hashes_of(impl, batch[half:], seed))
    assert bytes(by_hash._bits_view()) == bytes(by_key._bits_view())
    assert by_key.contains_many(everything).tolist() == \
        by_hash.contains_hashed(hashes_of(impl, everything, seed)).tolist()


@given(rows=st.lists(st.tuples(st.integers(0, LOW64), st.integers(0, LOW64)), max_size=50),
       layout=st.sampled_from(["standard", "blocked"]), k=st.integers(1, 64),
       seed=st.integers(0, 2 ** 32 - 1))
def test_core_equals_twin(core, reference, rows, layout, k, seed):
    hashes = np.array(rows, dtype=np.uint64).reshape(len(rows), 2)
    a = pair(core, layout, k, seed)[0]
    b = pair(reference, layout, k, seed)[0]
    half = len(rows) // 2
    assert a.add_hashed(hashes[:half]).tolist() == b.add_hashed(hashes[:half]).tolist()
    assert bytes(a._bits_view()) == bytes(b._bits_view())
    assert a.insert_count == b.insert_count
    assert a.contains_hashed(hashes).tolist() == b.contains_hashed(hashes).tolist()


def test_repeats_inside_one_call_and_views(impl):
    bits = pair(impl, "standard", 5, 0)[0]
    h = hashes_of(impl, [b"a", b"b", b"a"], 0)
    assert bits.add_hashed(h).tolist() == [True, True, False]
    assert bits.insert_count == 2
    # a strided (not C-contiguous) array is read as it is
    doubled = np.repeat(hashes_of(impl, [b"a", b"zz"], 0), 2, axis=1)[:, ::2]
    assert not doubled.flags.c_contiguous
    assert bits.contains_hashed(doubled).tolist() == [True, False]
    assert bits.contains_hashed(np.zeros((0, 2), dtype=np.uint64)).tolist() == []
    assert bits.add_hashed(np.zeros((0, 2), dtype=np.uint64)).tolist() == []


@pytest.mark.parametrize("bad", [
    np.zeros((3, 2), dtype=np.int64), np.zeros((3, 2), dtype=np.uint32),
    np.zeros((3, 3), dtype=np.uint64), np.zeros(4, dtype=np.uint64),
    np.zeros((2, 2, 2), dtype=np.uint64), [[1, 2]], b"0123456789abcdef", None])
def test_bad_hashes_change_nothing(impl, bad):
    bits = pair(impl, "standard", 3, 0)[0]
    hook = []
    bits._set_write_hook(lambda: hook.append(1))
    for call in (bits.add_hashed, bits.contains_hashed):
        with pytest.raises(TypeError, match=r"uint64 numpy array of shape \(n, 2\)"):
            call(bad)
    assert bits._popcount() == 0 and bits.insert_count == 0 and not hook


def test_read_only_and_closed(impl):
    buf = bytes(1024)
    bits = impl.BloomBits()
    bits._init_bits(1000, 3, 0, buf, readonly=True)
    h = hashes_of(impl, [b"x"], 0)
    assert bits.contains_hashed(h).tolist() == [False]
    with pytest.raises(ValueError, match="read-only"):
        bits.add_hashed(h)
    fresh = impl.BloomBits()
    with pytest.raises(RuntimeError, match="before _init_bits"):
        fresh.add_hashed(h)
    with pytest.raises(RuntimeError, match="before _init_bits"):
        fresh.contains_hashed(h)


def test_write_hook_runs_before_the_first_change(impl):
    bits = pair(impl, "standard", 3, 0)[0]
    seen = []
    bits._set_write_hook(lambda: seen.append(bits._popcount()))
    bits.add_hashed(hashes_of(impl, [b"a"], 0))
    assert seen == [0] and bits._popcount() > 0


@pytest.mark.parametrize("layout,k", [("standard", 7), ("blocked", 7), ("blocked", 1)])
def test_threaded_hashed_lookups_equal_key_lookups(core, layout, k):
    import crawldedup
    bits = core.BloomBits()
    bits._init_bits(1 << 20 if layout == "blocked" else 1_000_003, k, 9, layout=layout)
    bits.add_many([f"https://example.com/{i}" for i in range(0, 60000, 2)])
    batch = [f"https://example.com/{i}".encode() for i in range(70000)]
    hashes = hashes_of(core, batch, 9)
    expect = bits.contains_many(batch).tolist()
    assert any(expect) and not all(expect)
    previous = crawldedup.set_threads(None)
    try:
        for threads in (None, 2, 3, 1):
            crawldedup.set_threads(threads)
            assert bits.contains_hashed(hashes).tolist() == expect
    finally:
        crawldedup.set_threads(previous)


def test_bloom_filter_file_found_by_hash(tmp_path):
    """A filter saved by key-based adds answers hashed lookups (the command's
    old and new modes share their state files)."""
    from crawldedup import BloomFilter, hash128
    path = tmp_path / "s.bloom"
    bf = BloomFilter(1000, 0.01, seed=5)
    bf.add_many([b"u1", b"u2"])
    bf.save(path)
    loaded = BloomFilter.load(path)
    rows = [(h & LOW64, h >> 64) for h in (hash128(k, 5) for k in (b"u1", b"u3", b"u2"))]
    assert loaded.contains_hashed(np.array(rows, dtype=np.uint64)).tolist() == [True, False, True]
