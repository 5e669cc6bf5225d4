"""run_find, the lookup in DiskStore's sorted runs: the compiled core and
its twin against a plain Python set, over runs with keys that tie (digests
that share their first 8 bytes) and fences of every step."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import examples


def make_run(digests, ds):
    """(rows, fence keys, key of a digest) of a run of the distinct digests,
    as crawldedup.exact.disk writes it: rows sorted by the first 8 bytes as
    a big-endian integer, stored little-endian, then the other bytes."""
    def key(d):
        return int.from_bytes(d[:8], "big")
    rows = sorted(set(digests), key=key)
    data = b"".join(key(d).to_bytes(8, "little") + d[8:] for d in rows)
    return np.frombuffer(data, dtype=np.uint8), [key(d) for d in rows], key


def ask(impl, digests, ds, queries, step):
    raw, run_keys, key = make_run(digests, ds)
    count = len(run_keys)
    fence = np.array(run_keys[::step], dtype=np.uint64)
    queries = sorted(queries, key=key)
    keys = np.array([key(q) for q in queries], dtype=np.uint64)
    rest = np.frombuffer(b"".join(q[8:] for q in queries), dtype=np.uint8)
    out = np.zeros(len(queries), dtype=np.uint8)
    impl.run_find(raw if count else np.zeros(0, np.uint8), count, ds, fence, step, keys,
                  rest, out)
    return queries, out.astype(bool).tolist()


def digest(ds):
    # a few first-8-byte prefixes, so that keys tie across the fence's blocks
    return st.builds(lambda head, tail: head + tail,
                     st.sampled_from([bytes([i]) * 8 for i in (0, 7, 200, 255)])
                     | st.binary(min_size=8, max_size=8),
                     st.binary(min_size=ds - 8, max_size=ds - 8))


@settings(max_examples=examples(1.0), deadline=None)
@given(data=st.data(), ds=st.sampled_from([8, 16, 20]), step=st.integers(1, 5))
def test_against_a_set(impl, data, ds, step):
    stored = data.draw(st.lists(digest(ds), max_size=60))
    queries = data.draw(st.lists(digest(ds) | st.sampled_from(stored or [b"\0" * ds]),
                                 max_size=40))
    got_queries, found = ask(impl, stored, ds, queries, step)
    assert found == [q in set(stored) for q in got_queries]


def test_core_and_twin_agree_on_a_big_run(core, reference):
    rng = np.random.default_rng(1)
    stored = [bytes(r) for r in rng.integers(0, 256, (5000, 16), dtype=np.uint8)]
    stored += [b"\x05" * 8 + i.to_bytes(8, "big") for i in range(600)]  # ties over many blocks
    queries = stored[::3] + [bytes(r) for r in rng.integers(0, 256, (2000, 16), dtype=np.uint8)]
    queries += [b"\x05" * 8 + i.to_bytes(8, "big") for i in range(590, 700)]
    a = ask(core, stored, 16, queries, 256)
    b = ask(reference, stored, 16, queries, 256)
    assert a == b
    assert a[1] == [q in set(stored) for q in a[0]]


def test_bad_arguments_are_refused(impl):
    rows = np.zeros(32, dtype=np.uint8)
    out = np.zeros(1, dtype=np.uint8)
    keys = np.zeros(1, dtype=np.uint64)
    fence = np.zeros(1, dtype=np.uint64)
    rest = np.zeros(8, dtype=np.uint8)
    with pytest.raises(ValueError, match="rows take"):
        impl.run_find(rows, 3, 16, fence, 4, keys, rest, out)
    with pytest.raises(ValueError, match="one byte a key"):
        impl.run_find(rows, 2, 16, fence, 4, keys, rest[:4], out)
    with pytest.raises(ValueError, match="fence needs"):
        impl.run_find(rows, 2, 16, fence, 1, keys, rest, out)
    with pytest.raises(ValueError, match="8 bytes or more"):
        impl.run_find(rows, 2, 4, fence, 4, keys, rest, out)


def merge(impl, runs, ds, room):
    """The rows run_merge writes from the runs (each a list of distinct
    digests), room rows a call, and the positions it leaves."""
    sources = tuple(make_run(run, ds)[0] if run else np.zeros(0, np.uint8) for run in runs)
    pos = np.zeros(len(runs), dtype=np.intp)
    out = np.zeros(room * ds, dtype=np.uint8)
    rows = []
    while True:
        n = impl.run_merge(sources, ds, pos, out)
        assert 0 <= n <= room
        rows += [bytes(out[i * ds:(i + 1) * ds]) for i in range(n)]
        if n < room:
            break
    return rows, pos.tolist()


@settings(max_examples=examples(1.0), deadline=None)
@given(data=st.data(), ds=st.sampled_from([8, 16, 20]), room=st.integers(1, 7))
def test_merge_against_sorted(impl, data, ds, room):
    runs = data.draw(st.lists(st.lists(digest(ds), max_size=25, unique=True), max_size=6))
    rows, pos = merge(impl, runs, ds, room)
    sizes = [len(set(run)) for run in runs]
    assert pos == sizes
    keys = [int.from_bytes(r[:8], "little") for r in rows]
    assert keys == sorted(keys)
    expected = [int.from_bytes(d[:8], "big").to_bytes(8, "little") + d[8:]
                for run in runs for d in set(run)]
    assert sorted(rows) == sorted(expected)


def test_merge_core_and_twin_agree(core, reference):
    rng = np.random.default_rng(2)
    runs = [[bytes(r) for r in rng.integers(0, 256, (n, 16), dtype=np.uint8)]
            for n in (3000, 1, 0, 700)]
    runs[1] += [b"\x05" * 8 + i.to_bytes(8, "big") for i in range(300)]  # ties across runs
    runs[3] += [b"\x05" * 8 + i.to_bytes(8, "big") for i in range(300, 500)]
    assert merge(core, runs, 16, 997) == merge(reference, runs, 16, 997)


def test_merge_refuses_bad_arguments(impl):
    rows = np.zeros(32, dtype=np.uint8)
    out = np.zeros(32, dtype=np.uint8)
    with pytest.raises(ValueError, match="8 bytes or more"):
        impl.run_merge((rows,), 4, np.zeros(1, np.intp), out)
    with pytest.raises(ValueError, match="one position a source"):
        impl.run_merge((rows, rows), 16, np.zeros(1, np.intp), out)
    with pytest.raises(ValueError, match="whole 12-byte rows"):
        impl.run_merge((rows,), 12, np.zeros(1, np.intp), out)
    with pytest.raises(ValueError, match="outside source 0"):
        impl.run_merge((rows,), 16, np.array([3], np.intp), out)
    with pytest.raises(ValueError, match="outside source 0"):
        impl.run_merge((rows,), 16, np.array([-1], np.intp), out)


def sort_rows(impl, digests, ds):
    data = np.frombuffer(b"".join(digests), dtype=np.uint8) if digests \
        else np.zeros(0, np.uint8)
    out = np.zeros(len(digests) * max(ds, 8), dtype=np.uint8)
    impl.run_sort(data, ds, out)
    return out.tobytes()


@settings(max_examples=examples(1.0), deadline=None)
@given(data=st.data(), ds=st.sampled_from([1, 3, 8, 9, 16, 20, 64]))
def test_sort_against_python(impl, data, ds):
    # crowded buckets too: few distinct first bytes, so that keys tie
    head = st.sampled_from([bytes([i]) * 8 for i in (0, 1, 200)]) | st.binary(min_size=8,
                                                                              max_size=8)
    one = st.builds(lambda h, t: (h + t)[:ds], head, st.binary(min_size=56, max_size=56))
    digests = data.draw(st.lists(one, max_size=120, unique=True))
    row = max(ds, 8)
    expected = sorted((int.from_bytes(d[:8].ljust(8, b"\0"), "big"), d[8:]) for d in digests)
    assert sort_rows(impl, digests, ds) == b"".join(
        k.to_bytes(8, "little") + r for k, r in expected)
    assert len(sort_rows(impl, digests, ds)) == len(digests) * row


def test_sort_core_and_twin_agree_with_crowded_buckets(core, reference):
    rng = np.random.default_rng(3)
    digests = [bytes(r) for r in rng.integers(0, 256, (20_000, 16), dtype=np.uint8)]
    digests += [b"\x09" * 8 + i.to_bytes(8, "big") for i in range(3000)]  # one bucket
    digests += [b"\x0a" + i.to_bytes(7, "big") + b"\0" * 8 for i in range(3000)]
    rng.shuffle(digests)
    assert sort_rows(core, digests, 16) == sort_rows(reference, digests, 16)


def test_sort_refuses_bad_arguments(impl):
    with pytest.raises(ValueError, match="between 1 and 64"):
        impl.run_sort(np.zeros(16, np.uint8), 0, np.zeros(16, np.uint8))
    with pytest.raises(ValueError, match="whole 16-byte digests"):
        impl.run_sort(np.zeros(20, np.uint8), 16, np.zeros(16, np.uint8))
    with pytest.raises(ValueError, match="out takes 8 bytes"):
        impl.run_sort(np.zeros(4, np.uint8), 4, np.zeros(12, np.uint8))
