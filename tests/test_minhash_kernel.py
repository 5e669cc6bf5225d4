"""MinHash kernels: the compiled core against the pure-Python twin, the
vector version against the plain loop, datasketch's SHA-1 hash against
hashlib, and batches against one text at a time."""

import hashlib
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import sized
from test_simhash_kernel import PIECES

MAX32 = (1 << 32) - 1

texts = st.one_of(
    st.lists(st.sampled_from(PIECES), max_size=60).map("".join),
    st.text(max_size=80),
    st.text(alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x4E40), max_size=80),
)
modes = st.sampled_from([0, 1, 2])
ngrams = st.integers(min_value=1, max_value=8)
perms = st.integers(min_value=0, max_value=70)


def params(k, seed=7):
    rng = np.random.default_rng(seed)
    a = (rng.integers(0, 1 << 32, k, dtype=np.uint64) | 1).astype(np.uint32)
    b = rng.integers(0, 1 << 32, k, dtype=np.uint64).astype(np.uint32)
    return a, b


def brute(hashes, a, b):
    """The definition: per permutation, the minimum of a*x+b mod 2**32."""
    out = [MAX32] * len(a)
    for j in range(len(a)):
        for x in set(hashes):
            out[j] = min(out[j], (int(a[j]) * x + int(b[j])) & MAX32)
    return out


@given(texts, modes, ngrams, ngrams, perms)
def test_minhash_text_core_equals_reference(core, reference, text, mode, word_n, char_n, k):
    a, b = params(k)
    got = core.minhash_text(text, mode, word_n, char_n, a, b)
    assert got.dtype == np.uint32 and got.shape == (k,)
    assert got.tolist() == reference.minhash_text(text, mode, word_n, char_n, a, b).tolist()


@given(st.lists(texts, max_size=8), modes, ngrams, ngrams)
def test_minhash_texts_is_minhash_text_of_each(core, reference, batch, mode, word_n, char_n):
    a, b = params(40)
    got = core.minhash_texts(batch, mode, word_n, char_n, a, b)
    assert got.shape == (len(batch), 40) and got.dtype == np.uint32
    for i, t in enumerate(batch):
        assert got[i].tolist() == reference.minhash_text(t, mode, word_n, char_n, a, b).tolist()
    assert reference.minhash_texts(batch, mode, word_n, char_n, a, b).tolist() == got.tolist()


def test_reference_text_signature_is_the_definition(reference):
    """The twin's signature of a text is the brute-force minimum over the
    low 32 bits of its shingles' hashes: a polynomial of the units' hashes
    (hash64 of a word, the finalizer of a character's code point xor a
    salt), mixed by the finalizer."""
    from crawldedup._reference.minhash import char_hash, shingle_hashes, word_hash
    from crawldedup._reference.simhash import text_units
    a, b = params(16)
    text = "The quick brown fox jumps over the lazy dog; 我们的世界很大"
    words, chars = text_units(text, 0)
    assert words[:3] == ["the", "quick", "brown"] and chars[:2] == ["我", "们"]
    mask = (1 << 64) - 1

    def fmix(h):
        h ^= h >> 33
        h = (h * 0xFF51AFD7ED558CCD) & mask
        h ^= h >> 33
        h = (h * 0xC4CEB9FE1A85EC53) & mask
        return h ^ (h >> 33)
    base = 0x9E3779B97F4A7C15
    hw = [reference.hash64(w.encode()) for w in words]
    assert [word_hash(w) for w in words] == hw
    assert char_hash("我") == fmix(ord("我") ^ 0x2545F4914F6CDD1D)
    first = fmix((hw[0] * base * base + hw[1] * base + hw[2]) & mask)
    assert shingle_hashes(hw, 3)[0] == first
    shingles = shingle_hashes(hw, 3) + shingle_hashes([char_hash(c) for c in chars], 2)
    assert len(shingles) == (len(words) - 2) + (len(chars) - 1)
    assert reference.minhash_text(text, 0, 3, 2, a, b).tolist() == \
        brute([h & MAX32 for h in shingles], a, b)


def test_text_without_features_keeps_every_minimum(impl):
    a, b = params(8)
    for text in ["", "   ", ",.!?", "\n\t"]:
        assert impl.minhash_text(text, 0, 5, 5, a, b).tolist() == [MAX32] * 8
    assert impl.minhash_texts(["", "x"], 0, 5, 5, a, b)[0].tolist() == [MAX32] * 8


def test_short_text_is_one_shingle(impl):
    """Fewer words than the shingle size: the whole word sequence is one
    shingle, as for SimHash."""
    from crawldedup._reference.minhash import shingle_hashes, word_hash
    a, b = params(8)
    (h,) = shingle_hashes([word_hash("two"), word_hash("words")], 5)
    assert impl.minhash_text("two words", 1, 5, 5, a, b).tolist() == brute([h & MAX32], a, b)


def test_minhash_text_lowercases_like_str_lower(impl):
    """The two code points whose lowercase needs str.lower() (U+0130,
    U+03A3) take the slow path to the same signature."""
    a, b = params(12)
    for text in ["İstanbul ΣΑΣ Οδός", "ΣΑΣ", "İ"]:
        assert impl.minhash_text(text, 0, 2, 2, a, b).tolist() == \
            impl.minhash_text(text.lower(), 0, 2, 2, a, b).tolist()
    batch = ["İstanbul ΣΑΣ Οδός", "plain words here", "ΣΑΣ"]
    got = impl.minhash_texts(batch, 0, 2, 2, a, b)
    assert [row.tolist() for row in got] == \
        [impl.minhash_text(t, 0, 2, 2, a, b).tolist() for t in batch]


@given(st.lists(st.integers(0, MAX32), max_size=300), perms)
def test_vector_version_equals_plain_loop(core, hashes, k):
    a, b = params(k, seed=len(hashes))
    h = np.array(hashes, dtype=np.uint32)
    fast = np.full(k, MAX32, dtype=np.uint32)
    plain = fast.copy()
    core.minhash_hashes(h, a, b, fast, False)
    core._minhash_hashes_plain(h, a, b, plain)
    assert fast.tolist() == plain.tolist() == brute(hashes, a, b)


@pytest.mark.parametrize("k", [0, 1, 7, 8, 9, 31, 32, 33, 64, 128, 200])
def test_every_permutation_count(impl, k):
    """The vector version's blocks of 32 and 8 and the plain tail."""
    a, b = params(k)
    h = np.arange(0, 5000, 7, dtype=np.uint32) * np.uint32(2654435761)
    mins = np.full(k, MAX32, dtype=np.uint32)
    impl.minhash_hashes(h, a, b, mins, False)
    expect = ((a.astype(np.uint64)[None, :] * h.astype(np.uint64)[:, None]
               + b.astype(np.uint64)[None, :]) & MAX32).min(axis=0) if k else np.zeros(0)
    assert mins.tolist() == expect.astype(np.uint32).tolist()


def fmix32(h):
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & MAX32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & MAX32
    return h ^ (h >> 16)


@given(st.lists(st.integers(0, MAX32), max_size=50))
def test_mixed_hashes_go_through_the_finalizer(impl, hashes):
    a, b = params(24)
    mins = np.full(24, MAX32, dtype=np.uint32)
    impl.minhash_hashes(np.array(hashes, dtype=np.uint32), a, b, mins, True)
    assert mins.tolist() == brute([fmix32(x) for x in hashes], a, b)


@given(st.lists(st.binary(max_size=200), max_size=20))
def test_sha1_keys_are_datasketchs_hash(impl, keys):
    """sha1_hash32 (datasketch.hashfunc): the first 4 bytes of SHA-1,
    little-endian, then the finalizer; every SHA-1 padding length."""
    a, b = params(16)
    mins = np.full(16, MAX32, dtype=np.uint32)
    impl.minhash_sha1(keys, a, b, mins)
    want = [fmix32(struct.unpack("<I", hashlib.sha1(k).digest()[:4])[0]) for k in keys]
    assert mins.tolist() == brute(want, a, b)


@pytest.mark.parametrize("n", [0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 1000])
def test_sha1_at_block_edges(impl, n):
    a, b = params(4)
    data = bytes(range(256)) * 4
    mins = np.full(4, MAX32, dtype=np.uint32)
    impl.minhash_sha1([data[:n]], a, b, mins)
    x = fmix32(struct.unpack("<I", hashlib.sha1(data[:n]).digest()[:4])[0])
    assert mins.tolist() == brute([x], a, b)


@given(st.lists(st.one_of(st.text(max_size=20), st.binary(max_size=20)), max_size=30))
def test_keys_are_hash64_low_bits(impl, keys):
    a, b = params(20)
    mins = np.full(20, MAX32, dtype=np.uint32)
    impl.minhash_keys(keys, a, b, mins)
    want = [impl.hash64(k.encode() if isinstance(k, str) else k) & MAX32 for k in keys]
    assert mins.tolist() == brute(want, a, b)


def test_bad_keys_change_nothing(impl):
    a, b = params(8)
    mins = np.full(8, MAX32, dtype=np.uint32)
    with pytest.raises(TypeError, match=r"keys\[1\]"):
        impl.minhash_keys([b"fine", 3, b"x"], a, b, mins)
    with pytest.raises(TypeError, match=r"keys\[1\].*encoded"):
        impl.minhash_sha1([b"fine", "str", b"x"], a, b, mins)
    assert mins.tolist() == [MAX32] * 8
    with pytest.raises(TypeError):
        impl.minhash_keys((b"a",), a, b, mins)


def test_argument_checks(impl):
    a, b = params(8)
    with pytest.raises(ValueError, match="same length"):
        impl.minhash_text("x", 0, 5, 5, a, b[:4])
    with pytest.raises(ValueError, match="one value per permutation"):
        impl.minhash_keys([b"x"], a, b, np.full(4, MAX32, dtype=np.uint32))
    with pytest.raises((TypeError, ValueError)):
        impl.minhash_keys([b"x"], a.astype(np.int64), b, np.full(8, MAX32, dtype=np.uint32))
    with pytest.raises(ValueError, match="n-gram"):
        impl.minhash_text("x", 0, 0, 5, a, b)
    with pytest.raises(TypeError, match="texts"):
        impl.minhash_texts("not a list", 0, 5, 5, a, b)
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        impl.minhash_texts(["a", b"b"], 0, 5, 5, a, b)
    with pytest.raises(TypeError, match="text must be str"):
        impl.minhash_text(b"bytes", 0, 5, 5, a, b)


def test_big_batch_on_threads_equals_one_at_a_time(core):
    """Enough text for several threads, of uneven lengths: each row is the
    signature of its own text."""
    a, b = params(128)
    rng = np.random.default_rng(3)
    words = ["alpha", "beta", "gamma", "delta", "中文", "网页", "重复", "ΣΑΣ"]
    n = sized(1500, 200)
    batch = [" ".join(rng.choice(words, int(rng.integers(0, 400)))) for _ in range(n)]
    got = core.minhash_texts(batch, 0, 5, 5, a, b)
    for i in range(0, n, 37):
        assert got[i].tolist() == core.minhash_text(batch[i], 0, 5, 5, a, b).tolist()
    try:
        core._set_batch_threads(1)
        assert core.minhash_texts(batch, 0, 5, 5, a, b).tolist() == got.tolist()
    finally:
        core._set_batch_threads(0)


def test_huge_text_streams(impl):
    """A text of more shingles than the buffer folds them in several passes
    to the signature of all of them."""
    from crawldedup._reference.minhash import shingle_hashes, word_hash
    a, b = params(16)
    words = [f"w{i}" for i in range(sized(5000, 3000))]
    got = impl.minhash_text(" ".join(words), 1, 2, 2, a, b)
    hashes = [h & MAX32 for h in shingle_hashes([word_hash(w) for w in words], 2)]
    expect = ((a.astype(np.uint64)[None, :] * np.array(hashes, dtype=np.uint64)[:, None]
               + b.astype(np.uint64)[None, :]) & MAX32).min(axis=0)
    assert got.tolist() == expect.tolist()


def test_version_names_the_loop(impl):
    assert impl.minhash_version() in ("avx2", "plain")


@given(st.binary(max_size=400))
def test_sha1_both_compressions_match_hashlib(core, data):
    """The SHA extensions' compression (where this CPU has them) and the
    plain one give hashlib's digest."""
    want = hashlib.sha1(data).digest()
    assert core._sha1_digest(data, False) == want
    if core._sha1_version() == "sha-ni":
        assert core._sha1_digest(data, True) == want
