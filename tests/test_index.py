"""crawldedup.SimhashIndex: ids, search, pairs, files, on each kernel (the
``api`` fixture)."""

import os

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from conftest import examples
from crawldedup import CorruptFileError, CrawldedupError, SimhashIndex
from crawldedup.formats import files as _files
from test_index_kernel import brute_query, planted, popcount, queries_for

U64 = (1 << 64) - 1


def brute(model, q, k):
    """Reference answer over a list model [(id, fp)], ordered like query():
    by distance, then by the model's order key."""
    out = []
    for pos, (i, f) in enumerate(model):
        d = bin(f ^ q).count("1")
        if d <= k:
            out.append((d, pos, i))
    return out


# ------------------------------------------------------------ int ids

def test_int_ids_pass_through(api):
    ix = api.SimhashIndex(k=3)
    ix.add(10, 0b1111)
    ix.add(2, 0b1110)
    ix.add_many(np.array([7, 8], dtype=np.uint64), np.array([0, 0xF << 40], dtype=np.uint64))
    assert len(ix) == 4 and 10 in ix and 3 not in ix and "10" not in ix
    assert ix.query(0b1111) == [(10, 0), (2, 1)]
    assert ix.query(0) == [(7, 0), (2, 3)]
    offsets, ids, dists = ix.query_many(np.array([0b1111, 0xF << 40], dtype=np.uint64))
    assert ids.dtype == np.uint64
    assert offsets.tolist() == [0, 2, 3]
    assert ids.tolist() == [10, 2, 8] and dists.tolist() == [0, 1, 0]
    assert list(ix.pairs()) == [(2, 7, 3), (2, 10, 1)]
    assert ix.near_dup(0b1) and not ix.near_dup(U64)
    ix.remove(2)
    with pytest.raises(KeyError):
        ix.remove(2)
    with pytest.raises(KeyError):
        ix.remove("nope")
    assert list(ix.pairs()) == []
    with pytest.raises(ValueError, match="already in the index"):
        ix.add(10, 5)
    with pytest.raises(ValueError, match="repeated or already"):
        ix.add_many([1, 1], [5, 6])
    with pytest.raises(ValueError, match="repeated or already"):
        ix.add_many([1, 10], [5, 6])
    assert len(ix) == 3
    assert repr(ix) == "SimhashIndex(k=3, entries=3)"
    assert ix.nbytes > 0


def test_argument_checks(api):
    for k in (-1, 9):
        with pytest.raises(ValueError, match=r"k must be in \[0, 8\]"):
            api.SimhashIndex(k)
    with pytest.raises(TypeError, match="k must be an int"):
        api.SimhashIndex(2.0)
    ix = api.SimhashIndex()
    assert ix.k == 3
    with pytest.raises(TypeError, match="fp must be an int"):
        ix.add(1, "abc")
    with pytest.raises(ValueError, match=r"fp must be in \[0, 2\*\*64\)"):
        ix.add(1, -1)
    with pytest.raises(TypeError, match="fp must be an int"):
        ix.query(1.5)
    with pytest.raises(TypeError, match="fp must be an int"):
        ix.near_dup(True)
    with pytest.raises(ValueError, match="fp must be in"):
        ix.query(-1)
    with pytest.raises(TypeError, match="unhashable"):
        ix.add([1], 5)
    with pytest.raises(ValueError, match="differ in length"):
        ix.add_many([1, 2, 3], np.array([1, 2], dtype=np.uint64))
    with pytest.raises(TypeError, match="fps must hold ints"):
        ix.add_many([1], ["x"])
    with pytest.raises(ValueError, match="fps values must be in"):
        ix.add_many([1], [-3])
    with pytest.raises(ValueError, match="fps values must be in"):
        ix.add_many([1], np.array([-3], dtype=np.int64))
    with pytest.raises(TypeError, match="unsigned 64-bit"):
        ix.query_many(np.array([1.0]))
    with pytest.raises(TypeError, match="single str"):
        ix.add_many("ab", [1, 2])
    assert len(ix) == 0
    assert [1] not in ix


# ------------------------------------------------------------ object ids

@pytest.mark.parametrize("object_ids", [False, True])
def test_query_many_threads(api, object_ids):
    rng = np.random.default_rng(12)
    fps = rng.integers(0, 1 << 63, 3000, dtype=np.uint64)
    ix = api.SimhashIndex(k=2)
    ids = [f"doc{i}" for i in range(len(fps))] if object_ids else np.arange(len(fps))
    ix.add_many(ids, fps)
    qs = np.concatenate([fps ^ np.uint64(1 << 40), rng.integers(0, 1 << 63, 500, dtype=np.uint64)])
    one = ix.query_many(qs, threads=1)
    assert one[0][len(fps)] == len(fps)   # each flipped copy finds its original
    for threads in (None, 2, 3):
        got = ix.query_many(qs, threads=threads)
        assert got[1].dtype == (object if object_ids else np.uint64)
        for a, b in zip(got, one):
            assert a.tolist() == b.tolist()
    with pytest.raises(ValueError, match="threads"):
        ix.query_many(qs, threads=0)


def test_object_ids_and_the_switch_from_int_ids(api):
    ix = api.SimhashIndex(k=2)
    ix.add(5, 0)
    ix.add(3, 1)
    ix.add("page", 3)                   # switch: 3 and 5 keep their order by value
    ix.add(b"raw", 0)
    ix.add(-4, 7)                       # negative ints are object ids
    ix.add(("tuple", 1), 0xF << 50)
    assert len(ix) == 6 and "page" in ix and 5 in ix and ("tuple", 1) not in ["x"]
    assert ix.query(0) == [(5, 0), (b"raw", 0), (3, 1), ("page", 2)]
    offsets, ids, dists = ix.query_many([0, 0xF << 50])
    assert ids.dtype == object
    assert ids.tolist() == [5, b"raw", 3, "page", ("tuple", 1)]
    assert offsets.tolist() == [0, 4, 5]
    assert list(ix.pairs()) == [(3, 5, 1), (3, "page", 1), (3, b"raw", 1), (3, -4, 2),
                                (5, "page", 2), (5, b"raw", 0), ("page", b"raw", 2),
                                ("page", -4, 1)]
    ix.remove("page")
    assert "page" not in ix
    with pytest.raises(KeyError):
        ix.remove("page")
    with pytest.raises(ValueError, match="already in the index"):
        ix.add(5, 9)
    with pytest.raises(ValueError, match="already in the index"):
        ix.add_many(["new", b"raw"], [1, 2])
    with pytest.raises(ValueError, match="repeated"):
        ix.add_many(["a", "a"], [1, 2])
    assert len(ix) == 5
    ix.add_many(np.array(["a", "b"]), [0xFF << 30, 0xFF << 20])
    assert ix.query(0xFF << 30) == [("a", 0)]
    ix.add(np.int64(77), 99)
    assert 77 in ix and ix.query(99) == [(77, 0)]


def test_add_many_with_object_ids_switches_and_checks_first(api):
    A, B, C, D = 0xFF << 8, 0xFF << 16, 0xFF << 24, 0xFF << 32
    ix = api.SimhashIndex()
    ix.add_many(np.arange(3, dtype=np.uint64), [A, B, C])
    with pytest.raises(ValueError, match="id 1 is already"):
        ix.add_many([1, "x"], [5, 6])
    assert len(ix) == 3 and "x" not in ix
    ix.add_many([5, "x"], [D, D ^ 1])
    assert ix.query(A) == [(0, 0)]
    assert ix.query(D) == [(5, 0), ("x", 1)]
    ix.add_many(np.array([-1, -2]), [0xFF << 40, 0xFF << 48])
    assert ix.query(0xFF << 40) == [(-1, 0)]


# ------------------------------------------------------------ against brute force

@pytest.mark.parametrize("k", range(9))
def test_against_brute_force_with_save_and_load(api, tmp_path, k):
    rng = np.random.default_rng(k)
    fps = planted(rng, 2000, k)
    ids = rng.permutation(1 << 20)[:2000].astype(np.uint64)
    ix = api.SimhashIndex(k)
    ix.add_many(ids[:1500], fps[:1500])
    for i, f in zip(ids[1500:].tolist(), fps[1500:].tolist()):
        ix.add(i, f)
    for i in ids[::5].tolist():
        ix.remove(i)
    keep = np.ones(2000, dtype=bool)
    keep[::5] = False
    path = tmp_path / "ix.cdx"
    ix.save(path)
    back = api.SimhashIndex.load(path)
    assert back.k == k and len(back) == len(ix) == int(keep.sum())
    qs = queries_for(rng, fps, k, 100)
    for index in (ix, back):
        offsets, got_ids, dists = index.query_many(qs)
        for j, q in enumerate(qs.tolist()):
            expect = brute_query(fps[keep], ids[keep], q, k)
            got = list(zip(got_ids[offsets[j]:offsets[j + 1]].tolist(),
                           dists[offsets[j]:offsets[j + 1]].tolist()))
            assert got == expect == index.query(q)
            assert index.near_dup(q) == bool(expect)
    assert list(back.pairs()) == list(ix.pairs())


class WrapperMachine(RuleBasedStateMachine):
    """SimhashIndex against a list of (id, fp), with int and object ids and
    save/load round trips."""

    def __init__(self, api):
        super().__init__()
        self.k = 3
        self.SimhashIndex = api.SimhashIndex
        self.ix = self.SimhashIndex(self.k)
        self.model = []      # [(id, fp)] in the order of internal numbers
        self.counter = 0

    def _new_id(self, kind):
        self.counter += 1
        if kind == 0:
            return self.counter * 104729 % (1 << 64)
        if kind == 1:
            return f"doc-{self.counter}"
        return b"b" + self.counter.to_bytes(3, "big")

    def _near(self, fp, near, bits):
        if near and self.model:
            fp = self.model[near % len(self.model)][1]
            for b in bits:
                fp ^= 1 << b
        return fp

    def _object_mode(self):
        return self.ix._ids is not None

    @rule(kind=st.sampled_from([0, 0, 0, 1, 2]), fp=st.integers(0, U64),
          near=st.integers(0, 30), bits=st.lists(st.integers(0, 63), max_size=4))
    def add(self, kind, fp, near, bits):
        i = self._new_id(kind)
        f = self._near(fp, near, bits)
        was_object = self._object_mode()
        self.ix.add(i, f)
        if not was_object and self._object_mode():
            self.model.sort(key=lambda m: m[0])   # int ids renumbered by value
        self.model.append((i, f))

    @rule(n=st.integers(1, 40), seed=st.integers(0, 99), obj=st.booleans())
    def add_many(self, n, seed, obj):
        fps = planted(np.random.default_rng(seed), n, self.k)
        ids = [self._new_id(1 if obj else 0) for _ in range(n)]
        was_object = self._object_mode()
        self.ix.add_many(ids, fps)
        if not was_object and self._object_mode():
            self.model.sort(key=lambda m: m[0])
        self.model.extend(zip(ids, fps.tolist()))

    @rule(pick=st.integers(0, 1000))
    def remove(self, pick):
        if not self.model:
            with pytest.raises(KeyError):
                self.ix.remove(12345)
            return
        i, _ = self.model.pop(pick % len(self.model))
        self.ix.remove(i)
        assert i not in self.ix

    @rule(fp=st.integers(0, U64), near=st.integers(0, 30),
          bits=st.lists(st.integers(0, 63), max_size=5))
    def query(self, fp, near, bits):
        q = self._near(fp, near, bits)
        found = brute(self.model, q, self.k)
        if self._object_mode():
            expect = [(i, d) for d, _, i in sorted(found)]
        else:
            expect = [(i, d) for d, i in sorted((d, i) for d, _, i in found)]
        assert self.ix.query(q) == expect
        assert self.ix.near_dup(q) == bool(expect)
        offsets, ids, dists = self.ix.query_many([q])
        assert list(zip(ids.tolist(), dists.tolist())) == expect
        assert ids.dtype == (object if self._object_mode() else np.uint64)

    @rule()
    def pairs(self):
        pos = {m[0]: p for p, m in enumerate(self.model)}
        got = list(self.ix.pairs())
        expect = set()
        for x in range(len(self.model)):
            for y in range(x + 1, len(self.model)):
                d = bin(self.model[x][1] ^ self.model[y][1]).count("1")
                if d <= self.k:
                    expect.add((self.model[x][0], self.model[y][0], d))
        key = (lambda p: (pos[p[0]], pos[p[1]])) if self._object_mode() else (lambda p: p[:2])
        assert len(got) == len(expect)
        assert {(a, b, d) if key((a, b, d))[0] < key((a, b, d))[1] else (b, a, d)
                for a, b, d in got} == {(a, b, d) if key((a, b, d))[0] < key((a, b, d))[1]
                                        else (b, a, d) for a, b, d in expect}
        assert all(key(p)[0] < key(p)[1] for p in got)
        assert got == sorted(got, key=key)

    @rule()
    def round_trip(self):
        back = self.SimhashIndex.from_bytes(self.ix.to_bytes())
        assert len(back) == len(self.ix)
        self.ix = back

    @invariant()
    def length(self):
        assert len(self.ix) == len(self.model)


def test_wrapper_machine(api):
    run_state_machine_as_test(lambda: WrapperMachine(api), settings=settings(
        max_examples=examples(0.1), stateful_step_count=30, deadline=None))


# ------------------------------------------------------------ files

def _small_index(api, object_ids):
    ix = api.SimhashIndex(k=4)
    rng = np.random.default_rng(11)
    fps = planted(rng, 40, 4)
    if object_ids:
        ids = [f"s{i}" if i % 3 else (b"b%d" % i if i % 2 else -i * 10 ** 20) for i in range(40)]
    else:
        ids = list(range(1000, 1040))
    ix.add_many(ids, fps)
    return ix


@pytest.mark.parametrize("object_ids", [False, True])
def test_file_round_trip_and_layout(api, tmp_path, object_ids):
    ix = _small_index(api, object_ids)
    path = tmp_path / "x.cdx"
    ix.save(path)
    data = path.read_bytes()
    assert data == ix.to_bytes()
    assert data[:8] == _files.MAGIC
    header = _files.parse_header(data[:_files.HEADER_SIZE], len(data), None)
    assert header.kind == _files.KIND_INDEX == 4
    assert header.num_hashes == 4 and header.num_bits == 64 and header.insert_count == 40
    assert header.layout == (1 if object_ids else 0)
    back = api.SimhashIndex.load(path)
    for q in range(0, 1 << 64, 1 << 58):
        assert back.query(q) == ix.query(q)
    assert list(back.pairs()) == list(ix.pairs())
    if not object_ids:
        fps, ids = ix._core.items()
        assert (data[_files.HEADER_SIZE:]
                == fps.astype("<u8").tobytes() + ids.astype("<u8").tobytes())
    # no temporary files left behind
    assert sorted(os.listdir(tmp_path)) == ["x.cdx"]


def test_empty_index_file(api, tmp_path):
    api.SimhashIndex(0).save(tmp_path / "e")
    back = api.SimhashIndex.load(tmp_path / "e")
    assert len(back) == 0 and back.k == 0


def test_unsaveable_ids_raise_type_error(api, tmp_path):
    ix = api.SimhashIndex()
    ix.add(("a", 1), 5)
    path = tmp_path / "t"
    with pytest.raises(TypeError, match="only int, str and bytes ids can be saved"):
        ix.save(path)
    assert not path.exists()
    ix2 = api.SimhashIndex()
    ix2.add(True, 5)
    with pytest.raises(TypeError, match="bool"):
        ix2.to_bytes()


@pytest.mark.parametrize("object_ids", [False, True])
def test_every_truncation_is_corrupt(api, tmp_path, object_ids):
    data = _small_index(api, object_ids).to_bytes()
    for cut in range(len(data)):
        with pytest.raises(CorruptFileError):
            api.SimhashIndex.from_bytes(data[:cut])
    path = tmp_path / "cut"
    for cut in (0, 7, 100, _files.HEADER_SIZE, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.raises(CorruptFileError) as info:
            api.SimhashIndex.load(path)
        assert info.value.path == str(path)
    path.write_bytes(data + b"\0")
    with pytest.raises(CorruptFileError, match="unexpected bytes"):
        api.SimhashIndex.load(path)


@pytest.mark.parametrize("object_ids", [False, True])
def test_every_bit_flip_is_detected(api, object_ids):
    data = _small_index(api, object_ids).to_bytes()
    for pos in range(len(data)):
        for bit in ((pos % 8,) if _files.HEADER_SIZE // 2 < pos < _files.HEADER_SIZE else range(8)):
            bad = bytearray(data)
            bad[pos] ^= 1 << bit
            # a flipped format-version field may read as another version
            expected = CrawldedupError if pos in (8, 9) else CorruptFileError
            with pytest.raises(expected):
                api.SimhashIndex.from_bytes(bad)


def _resealed(data, payload):
    header = _files.parse_header(data[:_files.HEADER_SIZE], len(data), None)
    header.payload_size = len(payload)
    header.checksum = _files.checksum(header, payload)
    return bytes(header.pack()) + payload


def test_well_sealed_but_inconsistent_files(api):
    good = _small_index(api, False).to_bytes()
    payload = good[_files.HEADER_SIZE:]
    n = 40
    fps, ids = payload[:8 * n], payload[8 * n:]
    # ids not in (fp, id) order / repeated
    twice = fps + ids[:8] * 2 + ids[16:]
    with pytest.raises(CorruptFileError):
        api.SimhashIndex.from_bytes(_resealed(good, twice))
    # fingerprints out of order
    rev = b"".join(fps[i:i + 8] for i in range(8 * (n - 1), -1, -8))
    with pytest.raises(CorruptFileError, match="ascending"):
        api.SimhashIndex.from_bytes(_resealed(good, rev + ids))
    # payload size disagrees with the entry count
    with pytest.raises(CorruptFileError, match="payload of"):
        api.SimhashIndex.from_bytes(_resealed(good, payload + b"\0" * 8))
    obj = _small_index(api, True).to_bytes()
    op = obj[_files.HEADER_SIZE:]
    # a record tag that does not exist
    bad = bytearray(op)
    bad[8 * n] = 9
    with pytest.raises(CorruptFileError, match="tag"):
        api.SimhashIndex.from_bytes(_resealed(obj, bytes(bad)))
    with pytest.raises(CorruptFileError, match="after the last id record"):
        api.SimhashIndex.from_bytes(_resealed(obj, op + b"x"))
    with pytest.raises(CorruptFileError, match="end"):
        api.SimhashIndex.from_bytes(_resealed(obj, op[:-1]))
    # a non-index kind
    header = _files.parse_header(good[:_files.HEADER_SIZE], len(good), None)
    header.kind = _files.KIND_BLOOM
    header.checksum = _files.checksum(header, payload)
    with pytest.raises(CorruptFileError, match="not a SimHash index"):
        api.SimhashIndex.from_bytes(bytes(header.pack()) + payload)
    header.kind = _files.KIND_INDEX
    header.num_hashes = 9
    header.checksum = _files.checksum(header, payload)
    with pytest.raises(CorruptFileError, match="k = 9"):
        api.SimhashIndex.from_bytes(bytes(header.pack()) + payload)


def test_load_of_missing_file_is_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        SimhashIndex.load(tmp_path / "missing")


def test_popcount_helper():
    vals = np.array([0, 1, U64, 0xF0F0], dtype=np.uint64)
    assert popcount(vals).tolist() == [0, 1, 64, 8]
