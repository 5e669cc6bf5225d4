"""The Hamming index kernel (HammingIndex), core and pure-Python twin, against
a brute-force numpy scan (xor + popcount) and against each other."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
)

from conftest import examples, load_impl, sized

U64 = (1 << 64) - 1
KS = list(range(9))


def popcount(a):
    a = np.asarray(a, dtype=np.uint64)
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(a).astype(np.int64)
    a = a - ((a >> np.uint64(1)) & np.uint64(0x5555555555555555))
    a = (a & np.uint64(0x3333333333333333)) + ((a >> np.uint64(2)) & np.uint64(0x3333333333333333))
    a = (a + (a >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return ((a * np.uint64(0x0101010101010101)) >> np.uint64(56)).astype(np.int64)


def brute_query(fps, ids, q, k):
    """[(id, d)] by (d, id): the scan every index must agree with."""
    fps = np.asarray(fps, dtype=np.uint64)
    ids = np.asarray(ids, dtype=np.uint64)
    d = popcount(fps ^ np.uint64(q))
    sel = np.flatnonzero(d <= k)
    return sorted(((int(ids[i]), int(d[i])) for i in sel), key=lambda x: (x[1], x[0]))


def brute_pairs(fps, ids, k):
    fps = np.asarray(fps, dtype=np.uint64)
    ids = np.asarray(ids, dtype=np.uint64)
    out = []
    for x in range(len(fps)):
        d = popcount(fps[x] ^ fps[x + 1:])
        for y in np.flatnonzero(d <= k):
            a, b = int(ids[x]), int(ids[x + 1 + y])
            out.append((min(a, b), max(a, b), int(d[y])))
    return sorted(out)


def got_pairs(ix):
    a, b, d = ix.pairs()
    assert a.dtype == np.uint64 and b.dtype == np.uint64 and d.dtype == np.uint8
    return list(zip(a.tolist(), b.tolist(), d.tolist()))


def csr_lists(result):
    offsets, ids, dists = result
    assert offsets.dtype == np.int64 and ids.dtype == np.uint64 and dists.dtype == np.uint8
    assert offsets[0] == 0 and offsets[-1] == len(ids) == len(dists)
    assert (np.diff(offsets) >= 0).all()
    return [list(zip(ids[offsets[i]:offsets[i + 1]].tolist(),
                     dists[offsets[i]:offsets[i + 1]].tolist()))
            for i in range(len(offsets) - 1)]


def planted(rng, n, k, dup_share=0.3):
    """n fingerprints: random ones plus copies of earlier ones with 0..k+2
    bits flipped (near and just-too-far), and exact repeats."""
    fps = rng.integers(0, 1 << 63, n, dtype=np.uint64) * np.uint64(2) \
        + rng.integers(0, 2, n, dtype=np.uint64)
    for i in range(1, n):
        if rng.random() < dup_share:
            src = fps[rng.integers(0, i)]
            nflip = int(rng.integers(0, k + 3))
            bits = rng.choice(64, size=nflip, replace=False)
            mask = 0
            for b in bits:
                mask |= 1 << int(b)
            fps[i] = src ^ np.uint64(mask)
    return fps


def queries_for(rng, fps, k, m):
    out = []
    for _ in range(m):
        if len(fps) and rng.random() < 0.7:
            q = int(fps[rng.integers(0, len(fps))])
            for b in rng.choice(64, size=int(rng.integers(0, k + 3)), replace=False):
                q ^= 1 << int(b)
            out.append(q)
        else:
            out.append(int(rng.integers(0, 1 << 63)) * 2 + int(rng.integers(0, 2)))
    return np.array(out, dtype=np.uint64)


# ------------------------------------------------------------ random data, every k

@pytest.mark.parametrize("k", KS)
def test_query_and_pairs_match_brute_force(impl, k):
    rng = np.random.default_rng(1000 + k)
    n = 600 if impl.IMPLEMENTATION == "reference" else 3000
    fps = planted(rng, n, k)
    ids = rng.permutation(10 * n).astype(np.uint64)[:n]
    ix = impl.HammingIndex(k)
    half = n // 2
    ix.add_many(ids[:half], fps[:half])              # a bulk segment
    for f, i in zip(fps[half:].tolist(), ids[half:].tolist()):
        ix.add(i, f)                                 # segments + pending buffer
    assert len(ix) == n
    qs = queries_for(rng, fps, k, 150)
    got = csr_lists(ix.query_many(qs))
    for j, q in enumerate(qs.tolist()):
        expect = brute_query(fps, ids, q, k)
        assert got[j] == expect
        assert ix.query(q) == expect
    assert got_pairs(ix) == brute_pairs(fps, ids, k)

    # remove a third (tombstones, compaction of segments more than half dead)
    keep = np.ones(n, dtype=bool)
    keep[rng.choice(n, size=n // 3, replace=False)] = False
    for i in ids[~keep].tolist():
        assert ix.remove(i) is True
        assert ix.remove(i) is False
        assert i not in ix
    assert len(ix) == int(keep.sum())
    got = csr_lists(ix.query_many(qs))
    for j, q in enumerate(qs.tolist()):
        assert got[j] == brute_query(fps[keep], ids[keep], q, k)
    assert got_pairs(ix) == brute_pairs(fps[keep], ids[keep], k)
    f2, i2 = ix.items()
    order = np.lexsort((ids[keep], fps[keep]))
    assert f2.tolist() == fps[keep][order].tolist()
    assert i2.tolist() == ids[keep][order].tolist()


def test_many_single_adds_make_several_segments_and_stay_exact(core):
    rng = np.random.default_rng(5)
    k = 3
    fps = planted(rng, 6000, k)
    ix = core.HammingIndex(k)
    for i, f in enumerate(fps.tolist()):
        ix.add(i, f)
    assert ix.segments > 1       # the log-structured merge is exercised
    qs = queries_for(rng, fps, k, 300)
    ids = np.arange(len(fps), dtype=np.uint64)
    got = csr_lists(ix.query_many(qs))
    for j, q in enumerate(qs.tolist()):
        assert got[j] == brute_query(fps, ids, q, k)
    ix.compact()
    assert ix.segments == 1
    assert csr_lists(ix.query_many(qs)) == got


@pytest.mark.parametrize("k", [0, 3, 8])
def test_skewed_data(impl, k):
    """Many equal and nearly equal fingerprints, and many sharing one block."""
    rng = np.random.default_rng(7)
    base = int(rng.integers(0, 1 << 62))
    fps = [base] * 200                                        # equal
    fps += [base ^ (1 << int(b)) for b in rng.integers(0, 64, 100)]  # near (repeats too)
    top = base & (0xFFFF << 48)
    fps += [top | int(x) for x in rng.integers(0, 1 << 48, 200)]    # same top block
    fps = np.array(fps, dtype=np.uint64)
    ids = np.arange(len(fps), dtype=np.uint64) * np.uint64(3)
    ix = impl.HammingIndex(k)
    ix.add_many(ids, fps)
    for q in [base, base ^ 3, top, top | 1, base ^ (1 << 63)]:
        assert ix.query(q) == brute_query(fps, ids, q, k)
    assert got_pairs(ix) == brute_pairs(fps, ids, k)


# ------------------------------------------------------------ hypothesis

fp_st = st.integers(0, U64)


@st.composite
def dataset(draw, k):
    base = draw(st.lists(fp_st, min_size=1, max_size=25))
    derived = draw(st.lists(st.tuples(st.integers(0, 10 ** 6),
                                      st.lists(st.integers(0, 63), max_size=k + 2)),
                            max_size=25))
    fps = list(base)
    for src, bits in derived:
        f = fps[src % len(fps)]
        for b in bits:
            f ^= 1 << b
        fps.append(f)
    ids = draw(st.lists(st.integers(0, U64), min_size=len(fps), max_size=len(fps),
                        unique=True))
    return fps, ids


@pytest.mark.parametrize("k", KS)
@settings(max_examples=examples(0.13))
@given(data=st.data())
def test_hypothesis_against_brute_force_and_twin(core, reference, k, data):
    fps, ids = data.draw(dataset(k))
    queries = data.draw(st.lists(st.one_of(fp_st, st.sampled_from(fps)), max_size=10))
    removed = data.draw(st.lists(st.sampled_from(ids), max_size=len(ids) // 2, unique=True))
    split = data.draw(st.integers(0, len(fps)))
    indexes = []
    for impl in (core, reference):
        ix = impl.HammingIndex(k)
        ix.add_many(np.array(ids[:split], dtype=np.uint64), np.array(fps[:split], dtype=np.uint64))
        for f, i in zip(fps[split:], ids[split:]):
            ix.add(i, f)
        for i in removed:
            assert ix.remove(i)
        indexes.append(ix)
    live = [(f, i) for f, i in zip(fps, ids) if i not in set(removed)]
    lf = [f for f, _ in live]
    li = [i for _, i in live]
    expect_pairs = brute_pairs(lf, li, k)
    qs = np.array(queries, dtype=np.uint64)
    for ix in indexes:
        assert len(ix) == len(live)
        got = csr_lists(ix.query_many(qs))
        for j, q in enumerate(queries):
            expect = brute_query(lf, li, q, k)
            assert ix.query(q) == expect
            assert got[j] == expect
        assert got_pairs(ix) == expect_pairs
        f2, i2 = ix.items()
        assert list(zip(f2.tolist(), i2.tolist())) == sorted(live)


class IndexMachine(RuleBasedStateMachine):
    """The kernel against a list of (fingerprint, id) pairs."""
    impl_name = "core"

    def __init__(self):
        super().__init__()
        self.impl = load_impl(self.impl_name)
        self.k = 3
        self.ix = self.impl.HammingIndex(self.k)
        self.model = []            # [(fp, id)]
        self.next_id = 0

    ids = Bundle("ids")

    def _fp(self, data_fp, near, bits):
        if near and self.model:
            f = self.model[near % len(self.model)][0]
            for b in bits:
                f ^= 1 << b
            return f
        return data_fp

    @rule(target=ids, fp=fp_st, near=st.integers(0, 50),
          bits=st.lists(st.integers(0, 63), max_size=5))
    def add(self, fp, near, bits):
        f = self._fp(fp, near, bits)
        i = self.next_id * 7919 % (1 << 64)
        self.next_id += 1
        self.ix.add(i, f)
        self.model.append((f, i))
        return i

    @rule(n=st.integers(0, 700), seed=st.integers(0, 1000))
    def add_many(self, n, seed):
        rng = np.random.default_rng(seed)
        fps = planted(rng, n, self.k)
        ids = [(self.next_id + j) * 7919 % (1 << 64) for j in range(n)]
        self.next_id += n
        self.ix.add_many(np.array(ids, dtype=np.uint64), fps)
        self.model.extend(zip(fps.tolist(), ids))

    @rule(i=ids, fp=fp_st)
    def add_present_is_refused(self, i, fp):
        if any(m[1] == i for m in self.model):
            with pytest.raises(ValueError, match="already in the index"):
                self.ix.add(i, fp)

    @rule(i=consumes(ids))
    def remove(self, i):
        present = any(m[1] == i for m in self.model)
        assert self.ix.remove(i) is present
        self.model = [m for m in self.model if m[1] != i]

    @precondition(lambda self: self.model)
    @rule(pick=st.integers(0, 10 ** 6))
    def remove_bulk_entry(self, pick):
        f, i = self.model.pop(pick % len(self.model))
        assert self.ix.remove(i) is True

    @rule()
    def compact(self):
        self.ix.compact()

    @rule(fp=fp_st, near=st.integers(0, 50), bits=st.lists(st.integers(0, 63), max_size=5))
    def query(self, fp, near, bits):
        q = self._fp(fp, near, bits)
        fps = [m[0] for m in self.model]
        idl = [m[1] for m in self.model]
        expect = brute_query(fps, idl, q, self.k)
        assert self.ix.query(q) == expect
        assert csr_lists(self.ix.query_many(np.array([q, q], dtype=np.uint64))) == [expect, expect]

    @rule()
    def pairs(self):
        fps = [m[0] for m in self.model]
        idl = [m[1] for m in self.model]
        assert got_pairs(self.ix) == brute_pairs(fps, idl, self.k)

    @invariant()
    def length(self):
        assert len(self.ix) == len(self.model)


IndexMachine.TestCase.settings = settings(max_examples=examples(0.08), stateful_step_count=25,
                                          deadline=None)
TestIndexMachineCore = IndexMachine.TestCase


class ReferenceIndexMachine(IndexMachine):
    impl_name = "reference"


# the twin's searches are slow: a thirtieth of the profile (10 under ci)
ReferenceIndexMachine.TestCase.settings = settings(max_examples=examples(1 / 30),
                                                   stateful_step_count=15, deadline=None)
TestIndexMachineReference = ReferenceIndexMachine.TestCase


# ------------------------------------------------------------ arguments

def test_bad_arguments(impl):
    H = impl.HammingIndex
    for k in (-1, 9, 100):
        with pytest.raises(ValueError, match=r"k must be in \[0, 8\]"):
            H(k)
    for k in (3.0, "3", True):
        with pytest.raises(TypeError):
            H(k)
    ix = H(2)
    assert ix.k == 2 and len(ix) == 0
    with pytest.raises(ValueError, match="fp must be in"):
        ix.add(0, -1)
    with pytest.raises(ValueError, match="fp must be in"):
        ix.add(0, 1 << 64)
    with pytest.raises(ValueError, match="id must be in"):
        ix.add(-5, 0)
    with pytest.raises(TypeError, match="fp must be an int"):
        ix.add(0, "x")
    with pytest.raises(TypeError, match="id must be an int"):
        ix.add(2.5, 1)
    with pytest.raises(TypeError, match="fp must be an int, not bool"):
        ix.add(1, True)
    with pytest.raises(TypeError, match="fp must be an int, not bool"):
        ix.query(False)
    with pytest.raises(TypeError, match="unsigned 64-bit"):
        ix.add_many(np.array([1], dtype=np.uint64), np.array([1.0]))
    with pytest.raises(ValueError, match="differ in length"):
        ix.add_many(np.array([1], dtype=np.uint64), np.array([1, 2], dtype=np.uint64))
    with pytest.raises(ValueError, match="one-dimensional"):
        ix.add_many(np.zeros(4, dtype=np.uint64), np.zeros((2, 2), dtype=np.uint64))
    with pytest.raises(TypeError, match="fps"):
        ix.query_many(np.array([-1.5]))
    ix.add_many(np.array([1, 2, 3], dtype=np.uint64), np.array([5, 6, 7], dtype=np.uint64))
    # all or nothing: a repeat (or present id) adds none and names the smallest
    with pytest.raises(ValueError, match="id 3 is already"):
        ix.add_many(np.array([9, 3, 8], dtype=np.uint64), np.array([1, 2, 3], dtype=np.uint64))
    with pytest.raises(ValueError, match="id 4 is already"):
        ix.add_many(np.array([9, 4, 4], dtype=np.uint64), np.array([1, 2, 3], dtype=np.uint64))
    assert len(ix) == 3 and 9 not in ix
    with pytest.raises(ValueError, match="id 2 is already"):
        ix.add(2, 0)
    assert ix.remove("2") is False and ix.remove(-1) is False and ix.remove(1 << 70) is False
    assert "1" not in ix and 1 in ix and -1 not in ix
    ix.add_many(np.array([], dtype=np.uint64), np.array([], dtype=np.uint64))
    offsets, ids, dists = ix.query_many(np.array([], dtype=np.uint64))
    assert offsets.tolist() == [0] and len(ids) == 0 and len(dists) == 0
    # numpy scalars and signed arrays of non-negative values are accepted
    ix.add(np.int64(10), np.uint64(U64))
    assert ix.query(U64) == [(10, 0)]
    ix.add_many(np.array([11], dtype=np.int64), np.array([8], dtype=np.int64))
    assert ix.query(np.uint64(8)) == [(11, 0)]


def test_extreme_values(impl):
    for k in KS:
        ix = impl.HammingIndex(k)
        vals = [0, U64, 1 << 63, (1 << 63) - 1, 1, U64 - 1]
        ix.add_many(np.array([U64, 0, 1, 2, 3, 4], dtype=np.uint64),
                    np.array(vals, dtype=np.uint64))
        for q in vals:
            assert ix.query(q) == brute_query(vals, [U64, 0, 1, 2, 3, 4], q, k)
        assert got_pairs(ix) == brute_pairs(vals, [U64, 0, 1, 2, 3, 4], k)


def test_empty_index(impl):
    ix = impl.HammingIndex(3)
    assert ix.query(0) == []
    assert csr_lists(ix.query_many(np.array([1, 2], dtype=np.uint64))) == [[], []]
    assert got_pairs(ix) == []
    f, i = ix.items()
    assert len(f) == 0 and len(i) == 0
    ix.add(1, 1)
    assert ix.remove(1) is True
    assert ix.query(1) == [] and len(ix) == 0


def test_query_many_releases_the_gil(core):
    """Threads share one index read-only; a change while a search runs is refused."""
    import threading
    rng = np.random.default_rng(3)
    fps = planted(rng, 20000, 3)
    ix = core.HammingIndex(3)
    ix.add_many(np.arange(len(fps), dtype=np.uint64), fps)
    qs = queries_for(rng, fps, 3, 20000)
    expect = ix.query_many(qs)
    results = []

    def work():
        results.append(ix.query_many(qs))
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        for a, b in zip(r, expect):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("k", [0, 3, 8])
def test_query_many_on_threads_equals_one_thread(core, k):
    """A batch cut into slices searched on several threads gives exactly the
    one-thread results: every split, fewer queries than threads, segments,
    pending entries and tombstones, and the automatic choice."""
    rng = np.random.default_rng(70 + k)
    fps = planted(rng, 12000, k)
    ix = core.HammingIndex(k)
    ix.add_many(np.arange(10000, dtype=np.uint64), fps[:10000])
    for f, i in zip(fps[10000:].tolist(), range(10000, 12000)):
        ix.add(i, f)
    for i in range(0, 12000, 7):
        ix.remove(i)
    qs = queries_for(rng, fps, k, sized(9000, 1500))
    one = ix.query_many(qs, threads=1)
    lists = csr_lists(one)
    for j in range(0, len(qs), 97):
        assert lists[j] == ix.query(int(qs[j]))
    for threads in (2, 3, 5, 64, 1000, None):
        for part in (qs, qs[:1], qs[:3], qs[:4097]):
            got = ix.query_many(part, threads=threads)
            want = ix.query_many(part, threads=1)
            for a, b in zip(got, want):
                assert a.dtype == b.dtype and np.array_equal(a, b)
    assert [a.tolist() for a in ix.query_many(qs, threads=4)] == [a.tolist() for a in one]


def test_query_many_threads_argument(impl):
    ix = impl.HammingIndex(3)
    ix.add(1, 5)
    qs = np.array([5, 4], dtype=np.uint64)
    for good in (None, 1, 2, 100):
        assert csr_lists(ix.query_many(qs, threads=good)) == [[(1, 0)], [(1, 1)]]
    for bad in (True, 1.5, "2"):
        with pytest.raises(TypeError, match="threads"):
            ix.query_many(qs, threads=bad)
    for bad in (0, -1):
        with pytest.raises(ValueError, match="threads"):
            ix.query_many(qs, threads=bad)


@pytest.mark.parametrize("k,shared", [(1, 16), (2, 21), (3, 16), (3, 40), (5, 11), (8, 30)])
def test_big_shared_block_buckets_join_recursively(core, k, shared):
    """Thousands of fingerprints sharing their top bits (one huge bucket, no
    pairs between most of them): pairs() splits the bucket recursively and
    still finds exactly the brute-force pairs."""
    rng = np.random.default_rng(k * 100 + shared)
    n = 3000
    top = int(rng.integers(0, 1 << 63)) >> (64 - shared) << (64 - shared)
    rest = rng.integers(0, 1 << (64 - shared), n, dtype=np.uint64) if shared > 0 else None
    fps = np.uint64(top) | rest
    for i in range(1, n, 4):     # planted near-duplicates inside the bucket
        f = int(fps[rng.integers(0, i)])
        for b in rng.choice(64 - shared, size=int(rng.integers(0, k + 2)), replace=False):
            f ^= 1 << int(b)
        fps[i] = f
    spread = ((np.arange(n, dtype=np.uint64) * np.uint64(2654435761) + np.uint64(12345))
              % np.uint64(1 << 40))
    ids = spread if k % 2 else np.arange(n, dtype=np.uint64)   # 64-bit and 32-bit id storage
    ix = core.HammingIndex(k)
    ix.add_many(ids, fps)
    assert got_pairs(ix) == brute_pairs(fps, ids, k)
    # queries landing in the big bucket go through its nested segment
    qs = np.concatenate([fps[:40], queries_for(rng, fps, k, 60),
                         np.uint64(top) | rng.integers(0, 1 << (64 - shared), 40, dtype=np.uint64)])
    got = csr_lists(ix.query_many(qs))
    for j, q in enumerate(qs.tolist()):
        assert got[j] == brute_query(fps, ids, q, k)
    assert ix.query(int(qs[0])) == got[0]
    # with tombstones, and after compaction
    gone = ids[::7].tolist()
    for i in gone:
        assert ix.remove(i)
    keep = np.ones(n, dtype=bool)
    keep[::7] = False
    for index_state in ("tombstones", "compacted"):
        got = csr_lists(ix.query_many(qs))
        for j, q in enumerate(qs.tolist()):
            assert got[j] == brute_query(fps[keep], ids[keep], q, k), index_state
        ix.compact()


def test_hamming_blocks_cut_64_bits(core, reference, impl):
    """hamming_blocks(k): k + 1 blocks covering the 64 bits from the top,
    the first 64 % (k + 1) one bit wider; the core's layout equals the
    twin's, and bad k is refused as HammingIndex refuses it."""
    for k in range(impl.MAX_HAMMING_K + 1):
        got = impl.hamming_blocks(k)
        assert got == (core if impl is reference else reference).hamming_blocks(k)
        assert len(got) == k + 1 and sum(width for _, width in got) == 64
        assert [shift for shift, _ in got] == [64 - sum(w for _, w in got[:t + 1])
                                              for t in range(k + 1)]
        assert [width for _, width in got] == sorted((width for _, width in got), reverse=True)
        assert max(w for _, w in got) - min(w for _, w in got) <= 1
    for bad, error in ((-1, ValueError), (impl.MAX_HAMMING_K + 1, ValueError), (True, TypeError),
                       (2.0, TypeError)):
        with pytest.raises(error):
            impl.hamming_blocks(bad)
        with pytest.raises(error):
            impl.HammingIndex(bad)
