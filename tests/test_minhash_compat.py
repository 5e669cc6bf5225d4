"""crawldedup.compat.datasketch against the installed datasketch: the same
hashvalues, permutations, estimates, band choice and query results."""

import pickle

import datasketch
import datasketch.lsh
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

values = st.lists(st.binary(max_size=30), max_size=60)
schemes = st.sampled_from(["affine32", "affine64", "legacy"])
seeds = st.integers(min_value=0, max_value=2**32 - 1)
num_perms = st.integers(min_value=1, max_value=300)


def compat():
    from crawldedup.compat import datasketch as cd
    return cd


def pair(**kwargs):
    return compat().MinHash(**kwargs), datasketch.MinHash(**kwargs)


@given(values, values, num_perms, seeds, schemes)
def test_hashvalues_equal_datasketch(api, batch, more, num_perm, seed, scheme):
    ours, theirs = pair(num_perm=num_perm, seed=seed, scheme=scheme)
    assert np.array_equal(ours.permutations, theirs.permutations)
    ours.update_batch(batch)
    theirs.update_batch(batch)
    for v in more:
        ours.update(v)
        theirs.update(v)
    assert ours.hashvalues.dtype == theirs.hashvalues.dtype
    assert ours.hashvalues.tolist() == theirs.hashvalues.tolist()
    assert ours.is_empty() == theirs.is_empty()
    assert ours.count() == pytest.approx(theirs.count())


def test_default_scheme_is_datasketchs(api):
    ours, theirs = pair()
    assert ours.scheme == theirs.scheme == "affine32"
    assert ours.hashvalues.dtype == np.uint32


@given(values, st.sampled_from(["mod", "identity"]), schemes)
def test_custom_hashfunc_equal_datasketch(api, batch, kind, scheme):
    top = (1 << 64) - 1 if scheme == "affine64" else (1 << 32) - 1

    def hashfunc(b):
        return (len(b) * 2654435761 + sum(b)) & top if kind == "mod" else len(b)
    ours, theirs = pair(num_perm=40, hashfunc=hashfunc, scheme=scheme)
    ours.update_batch(batch)
    theirs.update_batch(batch)
    assert ours.hashvalues.tolist() == theirs.hashvalues.tolist()


def test_datasketchs_own_sha1_hash32_takes_the_fast_path(api):
    from datasketch.hashfunc import sha1_hash32
    ours, theirs = pair(hashfunc=sha1_hash32)
    ours.update_batch([b"a", b"b"])
    theirs.update_batch([b"a", b"b"])
    assert ours.hashvalues.tolist() == theirs.hashvalues.tolist()


def test_out_of_range_hash_is_refused_like_datasketch(api):
    ours, theirs = pair(hashfunc=lambda b: 1 << 40)
    with pytest.raises(ValueError, match="out of range"):
        theirs.update(b"x")
    with pytest.raises(ValueError, match="out of range"):
        ours.update(b"x")
    assert ours.is_empty()


def test_str_values_are_refused_like_hashlib(api):
    ours, theirs = pair()
    with pytest.raises(TypeError):
        theirs.update_batch([b"a", "b"])
    with pytest.raises(TypeError, match="encoded"):
        ours.update_batch([b"a", "b"])
    assert ours.is_empty()


@given(values, values, schemes)
def test_jaccard_merge_union_equal_datasketch(api, x, y, scheme):
    o1, t1 = pair(num_perm=64, scheme=scheme)
    o2, t2 = pair(num_perm=64, scheme=scheme)
    o1.update_batch(x)
    t1.update_batch(x)
    o2.update_batch(y)
    t2.update_batch(y)
    assert o1.jaccard(o2) == t1.jaccard(t2)
    assert o1.jaccard(t2) == t1.jaccard(t2)   # a datasketch MinHash is accepted
    ou = compat().MinHash.union(o1, o2)
    tu = datasketch.MinHash.union(t1, t2)
    assert ou.hashvalues.tolist() == tu.hashvalues.tolist()
    o1.merge(o2)
    t1.merge(t2)
    assert o1.hashvalues.tolist() == t1.hashvalues.tolist()
    assert o1 == ou and o1.copy() == o1 and o1.digest().tolist() == o1.hashvalues.tolist()


def test_mismatches_are_refused(api):
    cd = compat()
    a = cd.MinHash(num_perm=16)
    for other, what in [(cd.MinHash(num_perm=32), "numbers"), (cd.MinHash(num_perm=16, seed=2),
                                                               "seeds"),
                        (cd.MinHash(num_perm=16, scheme="legacy"), "schemes")]:
        with pytest.raises(ValueError, match=what):
            a.jaccard(other)
        with pytest.raises(ValueError, match=what):
            a.merge(other)
    with pytest.raises(ValueError, match="scheme must be specified"):
        cd.MinHash(hashvalues=[1, 2, 3])
    with pytest.raises(ValueError, match="scheme must be one of"):
        cd.MinHash(scheme="affine16")
    with pytest.raises(ValueError, match="odd"):
        cd.MinHash(num_perm=2, permutations=([2, 4], [1, 1]), scheme="affine32")
    with pytest.raises(RuntimeError, match="GPU"):
        cd.MinHash(gpu_mode="always")


def test_bulk_generator_clear_and_pickle(api):
    cd = compat()
    data = [[b"a", b"b"], [b"c"], []]
    ours = cd.MinHash.bulk(data, num_perm=32)
    theirs = datasketch.MinHash.bulk(data, num_perm=32)
    assert [m.hashvalues.tolist() for m in ours] == [m.hashvalues.tolist() for m in theirs]
    back = pickle.loads(pickle.dumps(ours[0]))
    assert back == ours[0] and back.hashvalues.tolist() == ours[0].hashvalues.tolist()
    back.update(b"z")
    ours[0].clear()
    assert ours[0].is_empty() and not back.is_empty()


@given(st.floats(min_value=0.0, max_value=1.0), st.integers(min_value=2, max_value=160),
       st.sampled_from([(0.5, 0.5), (0.3, 0.7), (0.7, 0.3), (0.1, 0.9)]))
def test_band_choice_equals_datasketch(threshold, num_perm, weights):
    """The exact integration chooses as datasketch does when both weights
    are positive."""
    from crawldedup.near.lsh import optimal_bands
    assert optimal_bands(threshold, num_perm, weights) == \
        datasketch.lsh._optimal_param(threshold, num_perm, *weights)


@given(st.floats(min_value=0.0, max_value=1.0), st.integers(min_value=2, max_value=100),
       st.sampled_from([(0.5, 0.5), (1.0, 0.0), (0.0, 1.0), (0.9, 0.1)]))
def test_compat_band_choice_is_datasketchs_whatever_the_weights(threshold, num_perm, weights):
    """With a weight of 0, the pairs datasketch compares differ by less than
    quad's error (threshold 0.611328125, num_perm 75, weights (1, 0): it
    picks (1, 74) where the exact areas say (1, 75)); the compat module
    computes as datasketch does, so it picks the same."""
    from crawldedup.near.lsh import optimal_bands_as_datasketch
    assert optimal_bands_as_datasketch(threshold, num_perm, weights) == \
        datasketch.lsh._optimal_param(threshold, num_perm, *weights)


def test_a_choice_quad_decides():
    from crawldedup.near.lsh import optimal_bands, optimal_bands_as_datasketch
    assert datasketch.lsh._optimal_param(0.611328125, 75, 1.0, 0.0) == (1, 74)
    assert optimal_bands_as_datasketch(0.611328125, 75, (1.0, 0.0)) == (1, 74)
    assert optimal_bands(0.611328125, 75, (1.0, 0.0)) == (1, 75)


@pytest.mark.parametrize("threshold", [0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95])
@pytest.mark.parametrize("num_perm", [64, 128, 256])
def test_band_choice_equals_datasketch_on_a_grid(threshold, num_perm):
    ours = compat().MinHashLSH(threshold=threshold, num_perm=num_perm)
    theirs = datasketch.MinHashLSH(threshold=threshold, num_perm=num_perm)
    assert (ours.b, ours.r) == (theirs.b, theirs.r)


def corpus(n, seed, vocabulary=80, size=30):
    rng = np.random.default_rng(seed)
    return [[f"w{j}".encode() for j in rng.integers(0, vocabulary, size)] for _ in range(n)]


@given(st.integers(0, 2**16), st.sampled_from([0.3, 0.5, 0.7, 0.9]),
       st.sampled_from([None, (8, 4), (20, 3)]))
def test_query_results_equal_datasketch(api, seed, threshold, params):
    cd = compat()
    docs = corpus(60, seed)
    ours = cd.MinHashLSH(threshold=threshold, num_perm=64, params=params)
    theirs = datasketch.MinHashLSH(threshold=threshold, num_perm=64, params=params)
    sigs = []
    for i, doc in enumerate(docs):
        o, t = pair(num_perm=64)
        o.update_batch(doc)
        t.update_batch(doc)
        ours.insert(f"d{i}", o)
        theirs.insert(f"d{i}", t)
        sigs.append((o, t))
    for o, t in sigs:
        assert sorted(ours.query(o)) == sorted(theirs.query(t))
    for i in range(0, 60, 7):
        ours.remove(f"d{i}")
        theirs.remove(f"d{i}")
    for o, t in sigs:
        assert sorted(ours.query(o)) == sorted(theirs.query(t))
    assert [f"d{i}" in ours for i in range(60)] == [f"d{i}" in theirs for i in range(60)]
    assert ours.is_empty() == theirs.is_empty()
    assert ours.get_counts() == theirs.get_counts()
    assert ours.get_subset_counts("d1", "d2") == theirs.get_subset_counts("d1", "d2")



def test_lsh_options_equal_datasketch(api):
    cd = compat()
    docs = corpus(30, 5, vocabulary=20)
    for kwargs in [{"prepickle": True}, {"hashfunc": lambda b: b[:6]},
                   {"weights": (0.2, 0.8)}]:
        ours = cd.MinHashLSH(threshold=0.5, num_perm=32, **kwargs)
        theirs = datasketch.MinHashLSH(threshold=0.5, num_perm=32, **kwargs)
        assert (ours.b, ours.r) == (theirs.b, theirs.r)
        for i, doc in enumerate(docs):
            o, t = pair(num_perm=32)
            o.update_batch(doc)
            t.update_batch(doc)
            ours.insert((i, "k"), o)
            theirs.insert((i, "k"), t)
            assert sorted(ours.query(o)) == sorted(theirs.query(t))


def test_lsh_refusals_match_datasketch(api):
    cd = compat()
    for kwargs, exc in [({"threshold": 1.5}, ValueError), ({"num_perm": 1}, ValueError),
                        ({"weights": (0.5, 0.6)}, ValueError),
                        ({"params": (10, 20), "num_perm": 128}, ValueError)]:
        with pytest.raises(exc):
            datasketch.MinHashLSH(**kwargs)
        with pytest.raises(exc):
            cd.MinHashLSH(**kwargs)
    lsh = cd.MinHashLSH(threshold=0.5, num_perm=16)
    m = cd.MinHash(num_perm=16)
    lsh.insert("a", m)
    with pytest.raises(ValueError, match="already exists"):
        lsh.insert("a", m)
    with pytest.raises(ValueError, match="does not exist"):
        lsh.remove("b")
    with pytest.raises(ValueError, match="length 16"):
        lsh.query(cd.MinHash(num_perm=32))
    with pytest.raises(ValueError, match="scheme"):
        lsh.insert("c", cd.MinHash(num_perm=16, scheme="legacy"))
    with pytest.raises(ValueError, match="Redis"):
        cd.MinHashLSH(storage_config={"type": "redis", "redis": {}})


def test_sessions_and_merge(api):
    cd = compat()
    docs = corpus(20, 9)
    a = cd.MinHashLSH(threshold=0.5, num_perm=32)
    b = cd.MinHashLSH(threshold=0.5, num_perm=32)
    sigs = []
    with a.insertion_session() as session:
        for i, doc in enumerate(docs[:10]):
            m = cd.MinHash(num_perm=32)
            m.update_batch(doc)
            session.insert(i, m)
            sigs.append(m)
    for i, doc in enumerate(docs[10:], 10):
        m = cd.MinHash(num_perm=32)
        m.update_batch(doc)
        b.insert(i, m)
        sigs.append(m)
    a.merge(b)
    assert all(i in a for i in range(20))
    assert all(i in a.query(m) for i, m in enumerate(sigs))
    with pytest.raises(ValueError, match="overlapping"):
        a.merge(b, check_overlap=True)
    with a.deletion_session() as session:
        session.remove(3)
    assert 3 not in a

