"""MinHash LSH: the band table kernels against the twin, MinHashIndex
against brute force (a candidate is a pair with one band's values equal)
and against datasketch's MinHashLSH on datasketch's own signatures."""

import itertools

import datasketch
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import sized

# Small value alphabets make bands collide often.
sig_sets = st.tuples(st.integers(1, 40), st.integers(0, 2**16), st.integers(2, 4))


def signatures(n, k, seed, values):
    rng = np.random.default_rng(seed)
    return rng.integers(0, values, (n, k), dtype=np.uint64).astype(np.uint32)


def brute_candidates(sigs, query, b, r, alive):
    return [i for i in range(len(sigs)) if alive[i] and any(
        (sigs[i, j * r:(j + 1) * r] == query[j * r:(j + 1) * r]).all() for j in range(b))]


@given(sig_sets, st.sampled_from([(4, 3, 12), (3, 4, 13), (5, 1, 5), (2, 6, 16)]))
def test_band_table_core_equals_reference_and_brute_force(core, reference, params, shape):
    n, seed, values = params
    b, r, k = shape
    sigs = signatures(n, k, seed, values)
    queries = signatures(15, k, seed + 1, values)
    alive = (np.random.default_rng(seed).random(n) > 0.2).astype(np.uint8)
    tables = []
    for impl in (core, reference):
        t = impl.BandTable(b, r, k)
        half = n // 2
        assert t.add_many(sigs[:half]) == 0
        assert t.add_many(sigs[half:]) == half
        assert len(t) == n
        tables.append(t)
    got = [t.query_many(queries, sigs, alive) for t in tables]
    for x, y in zip(*got):
        assert x.tolist() == y.tolist()
    offsets, rows, agree = got[0]
    for q in range(len(queries)):
        found = rows[offsets[q]:offsets[q + 1]].tolist()
        assert found == brute_candidates(sigs, queries[q], b, r, alive)
        for row, c in zip(found, agree[offsets[q]:offsets[q + 1]].tolist()):
            assert c == int((sigs[row] == queries[q]).sum())
    pa = [t.pairs(sigs, alive) for t in tables]
    assert pa[0][0].tolist() == pa[1][0].tolist() and pa[0][1].tolist() == pa[1][1].tolist()
    want = [(i, j) for i, j in itertools.combinations(range(n), 2)
            if alive[i] and alive[j] and j in brute_candidates(sigs, sigs[i], b, r, alive)]
    assert list(zip(pa[0][0].tolist(), pa[0][1].tolist())) == want


@given(st.integers(0, 2**16), st.integers(1, 9), st.integers(1, 5))
def test_band_keys_core_equals_reference(core, reference, seed, b, r):
    sigs = signatures(7, b * r + 1, seed, 2**32)
    assert core.lsh_keys(sigs, b, r).tolist() == reference.lsh_keys(sigs, b, r).tolist()


def test_band_keys_are_frozen(impl):
    """Band keys are stored on Redis: they never change."""
    got = impl.lsh_keys(np.array([[1, 2, 3]], dtype=np.uint32), 1, 3)[0, 0]
    mask = (1 << 64) - 1

    def fmix(h):
        h ^= h >> 33
        h = (h * 0xFF51AFD7ED558CCD) & mask
        h ^= h >> 33
        h = (h * 0xC4CEB9FE1A85EC53) & mask
        return h ^ (h >> 33)
    h = fmix((0x9E3779B97F4A7C15 & mask) ^ 3)
    h = fmix(h ^ (1 | (2 << 32)))
    h = fmix(h ^ 3)
    assert int(got) == h


def test_band_table_refuses_bad_shapes(impl):
    with pytest.raises(ValueError, match="at most num_perm"):
        impl.BandTable(5, 5, 24)
    with pytest.raises(ValueError, match="at least 1"):
        impl.BandTable(0, 5, 24)
    t = impl.BandTable(2, 2, 4)
    with pytest.raises(ValueError, match="4 values"):
        t.add_many(np.zeros((1, 5), dtype=np.uint32))
    t.add_many(np.zeros((3, 4), dtype=np.uint32))
    with pytest.raises(ValueError, match="stored must hold"):
        t.query_many(np.zeros((1, 4), dtype=np.uint32), np.zeros((2, 4), dtype=np.uint32),
                     np.ones(3, dtype=np.uint8))
    with pytest.raises(ValueError, match="alive"):
        t.pairs(np.zeros((3, 4), dtype=np.uint32), np.ones(2, dtype=np.uint8))


# ------------------------------------------------------------ MinHashIndex

def lsh(api):
    from crawldedup.near import lsh
    return lsh


@given(sig_sets, st.sampled_from([(4, 3), (6, 2), (3, 5)]))
def test_index_equals_brute_force(api, params, shape):
    n, seed, values = params
    b, r = shape
    k = 16
    sigs = signatures(n, k, seed, values)
    index = lsh(api).MinHashIndex(num_perm=k, bands=b, rows=r)
    ids = [f"doc{i}" for i in range(n)]
    index.add_many(ids[: n // 2], sigs[: n // 2])
    for i in range(n // 2, n):
        index.add(ids[i], sigs[i])
    removed = set(range(0, n, 5))
    for i in removed:
        index.remove(ids[i])
    alive = [i not in removed for i in range(n)]
    offsets, found, jac = index.query_many(sigs)
    for q in range(n):
        want = brute_candidates(sigs, sigs[q], b, r, alive)
        assert found[offsets[q]:offsets[q + 1]].tolist() == [ids[i] for i in want]
        assert jac[offsets[q]:offsets[q + 1]].tolist() == \
            [float((sigs[i] == sigs[q]).mean()) for i in want]
    pairs = list(index.pairs())
    want_pairs = [(ids[i], ids[j], float((sigs[i] == sigs[j]).mean()))
                  for i, j in itertools.combinations(range(n), 2)
                  if alive[i] and alive[j] and j in brute_candidates(sigs, sigs[i], b, r, alive)]
    assert pairs == want_pairs
    assert list(index.pairs(min_jaccard=0.5)) == [p for p in want_pairs if p[2] >= 0.5]
    offsets2, found2, jac2 = index.query_many(sigs, min_jaccard=0.5)
    for q in range(n):
        want = [i for i in brute_candidates(sigs, sigs[q], b, r, alive)
                if (sigs[i] == sigs[q]).mean() >= 0.5]
        assert found2[offsets2[q]:offsets2[q + 1]].tolist() == [ids[i] for i in want]
    index.compact()
    assert len(index) == n - len(removed)
    assert list(index.pairs()) == want_pairs


def test_index_chooses_datasketchs_bands(api):
    for threshold in (0.5, 0.8, 0.9):
        ours = lsh(api).MinHashIndex(threshold=threshold)
        theirs = datasketch.MinHashLSH(threshold=threshold, num_perm=128)
        assert (ours.bands, ours.rows) == (theirs.b, theirs.r)
    index = lsh(api).MinHashIndex(threshold=0.7, weights=(0.3, 0.7), num_perm=64)
    assert (index.bands, index.rows) == datasketch.lsh._optimal_param(0.7, 64, 0.3, 0.7)


def test_index_on_datasketch_signatures_finds_what_datasketch_finds(api):
    """Given datasketch's hashvalues and its bands and rows, the index's
    candidates are datasketch's query results, document for document."""
    rng = np.random.default_rng(4)
    n = sized(400, 100)
    docs = [[f"w{j}".encode() for j in rng.integers(0, 120, 40)] for _ in range(n)]
    for i in range(1, n, 3):                      # near copies
        docs[i] = docs[i - 1][:36] + docs[i][:4]
    theirs = datasketch.MinHashLSH(threshold=0.6, num_perm=128)
    sigs = np.empty((n, 128), dtype=np.uint32)
    mhs = []
    for i, doc in enumerate(docs):
        m = datasketch.MinHash(num_perm=128)
        m.update_batch(doc)
        theirs.insert(i, m)
        sigs[i] = m.hashvalues
        mhs.append(m)
    ours = lsh(api).MinHashIndex(threshold=0.6)
    ours.add_many(range(n), sigs)
    offsets, ids, _ = ours.query_many(sigs)
    for i, m in enumerate(mhs):
        assert sorted(ids[offsets[i]:offsets[i + 1]].tolist()) == sorted(theirs.query(m))


def test_index_argument_checks(api):
    m = lsh(api)
    index = m.MinHashIndex(num_perm=8, bands=2, rows=4)
    sig = np.arange(8, dtype=np.uint32)
    index.add("a", sig)
    with pytest.raises(ValueError, match="already in the index"):
        index.add("a", sig)
    with pytest.raises(ValueError, match="repeated"):
        index.add_many(["b", "b"], np.stack([sig, sig]))
    assert "b" not in index and len(index) == 1
    with pytest.raises(ValueError, match="8 values"):
        index.add("c", np.arange(9, dtype=np.uint32))
    with pytest.raises(ValueError, match="differ in length"):
        index.add_many(["c", "d"], sig[None, :])
    with pytest.raises(TypeError, match="integers"):
        index.add("c", np.zeros(8))
    with pytest.raises(ValueError, match=r"\[0, 2\*\*32\)"):
        index.add("c", np.full(8, -1))
    with pytest.raises(KeyError):
        index.remove("zzz")
    with pytest.raises(ValueError, match="min_jaccard"):
        index.query(sig, min_jaccard=1.5)
    with pytest.raises(ValueError, match="both bands and rows"):
        m.MinHashIndex(bands=4)
    with pytest.raises(ValueError, match="at most num_perm"):
        m.MinHashIndex(num_perm=8, bands=3, rows=3)
    with pytest.raises(ValueError, match="threshold"):
        m.MinHashIndex(threshold=1.2)
    with pytest.raises(TypeError, match="single str"):
        index.add_many("ab", np.stack([sig, sig]))
    assert index.query(sig) == [("a", 1.0)]
    assert index.nbytes > 0 and "len=1" in repr(index)


# ------------------------------------------------------------ files

def small_index(api, n=12, k=8):
    index = lsh(api).MinHashIndex(threshold=0.6, num_perm=k, weights=(0.4, 0.6),
                                  recipe="shingle=5 ✓")
    sigs = signatures(n, k, 3, 3)
    index.add_many([i if i % 3 else f"s{i}" for i in range(n - 1)] + [b"raw"], sigs)
    index.remove(1)
    return index, sigs


def test_save_load_pickle_round_trip(api, tmp_path):
    import pickle
    index, sigs = small_index(api)
    path = tmp_path / "near.mhx"
    index.save(path)
    for other in (lsh(api).MinHashIndex.load(path), pickle.loads(pickle.dumps(index)),
                  lsh(api).MinHashIndex.from_bytes(index.to_bytes())):
        assert (other.threshold, other.num_perm, other.bands, other.rows, other.recipe) == \
            (index.threshold, index.num_perm, index.bands, index.rows, "shingle=5 ✓")
        assert len(other) == len(index) == 11 and 1 not in other and b"raw" in other
        assert list(other.pairs()) == list(index.pairs())
        for q in sigs:
            assert other.query(q) == index.query(q)
    with open(path, "rb") as f:
        assert lsh(api).MinHashIndex.load(f).query(sigs[0]) == index.query(sigs[0])


def test_unsavable_ids_are_refused_before_writing(api, tmp_path):
    index = lsh(api).MinHashIndex(num_perm=4, bands=2, rows=2)
    index.add(("tuple", 1), np.zeros(4, dtype=np.uint32))
    with pytest.raises(TypeError, match="tuple"):
        index.save(tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_every_truncation_and_bit_flip_is_detected(api):
    from crawldedup import CorruptFileError, CrawldedupError
    from crawldedup.formats import files as _files
    data = small_index(api, n=5, k=4)[0].to_bytes()
    for cut in range(0, len(data), 7):
        with pytest.raises(CorruptFileError):
            lsh(api).MinHashIndex.from_bytes(data[:cut])
    for pos in range(len(data)):
        if _files.HEADER_SIZE // 2 < pos < _files.HEADER_SIZE and pos % 16:
            continue     # the header's zero padding: a sample of it
        bad = bytearray(data)
        bad[pos] ^= 1 << (pos % 8)
        expected = CrawldedupError if pos in (8, 9) else CorruptFileError
        with pytest.raises(expected):
            lsh(api).MinHashIndex.from_bytes(bad)


def test_well_sealed_but_inconsistent_files(api):
    from crawldedup import CorruptFileError
    from crawldedup.formats import files as _files
    good = small_index(api)[0].to_bytes()

    def resealed(payload, **fields):
        header = _files.parse_header(good[:_files.HEADER_SIZE], len(good), None)
        header.payload_size = len(payload)
        for name, value in fields.items():
            setattr(header, name, value)
        header.checksum = _files.checksum(header, payload)
        return bytes(header.pack()) + payload
    payload = good[_files.HEADER_SIZE:]
    with pytest.raises(CorruptFileError, match="after the last id record"):
        lsh(api).MinHashIndex.from_bytes(resealed(payload + b"x"))
    with pytest.raises(CorruptFileError, match="do not fit"):
        lsh(api).MinHashIndex.from_bytes(resealed(payload, insert_count=10**6))
    with pytest.raises(CorruptFileError, match="parameters"):
        lsh(api).MinHashIndex.from_bytes(resealed(payload, num_hashes=9))
    bad = bytearray(payload)
    bad[4:8] = (99).to_bytes(4, "little")              # bands * rows > num_perm
    with pytest.raises(CorruptFileError, match="bad parameters"):
        lsh(api).MinHashIndex.from_bytes(resealed(bytes(bad)))
    with pytest.raises(CorruptFileError, match="not a MinHash LSH index"):
        lsh(api).MinHashIndex.from_bytes(resealed(payload, kind=_files.KIND_INDEX))
    with pytest.raises(CorruptFileError, match="unused"):
        lsh(api).MinHashIndex.from_bytes(resealed(payload, seed=3))
    bad = bytearray(payload)
    bad[36:40] = (10**6).to_bytes(4, "little")         # the recipe's length
    with pytest.raises(CorruptFileError, match="recipe"):
        lsh(api).MinHashIndex.from_bytes(resealed(bytes(bad)))
    bad = bytearray(payload)
    bad[40] = 0xFF                                     # the recipe's first byte
    with pytest.raises(CorruptFileError, match="UTF-8"):
        lsh(api).MinHashIndex.from_bytes(resealed(bytes(bad)))


def test_info_describes_an_index(tmp_path):
    import subprocess
    import sys

    from crawldedup.near.lsh import MinHashIndex
    index = MinHashIndex(threshold=0.8)
    index.add("a", np.arange(128, dtype=np.uint32))
    path = tmp_path / "pages.mhx"
    index.save(path)
    out = subprocess.run([sys.executable, "-m", "crawldedup", "info", str(path)],
                         capture_output=True, text=True, check=True).stdout
    assert "kind: MinHash LSH index" in out and "bands=9, rows=13, len=1" in out
