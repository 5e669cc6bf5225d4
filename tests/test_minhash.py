"""crawldedup.near.minhash: signatures of texts and tokens, their frozen
values, the Jaccard estimate, and the checks of every argument."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

MAX32 = (1 << 32) - 1


def mh(api):
    from crawldedup.near import minhash
    return minhash


def test_values_are_frozen(api):
    """The permutations and signatures of a release never change (stored
    signatures and indexes depend on them)."""
    m = mh(api)
    a, b = m.permutations(4, seed=1)
    assert a.tolist() == [2298633409, 4214379871, 3506550201, 3610655909]
    assert b.tolist() == [1703865447, 3997354251, 2417296000, 304579957]
    assert m.minhash("The quick brown fox jumps over the lazy dog.", 8).tolist() == [
        1138989697, 649167409, 1025316902, 486677808, 480162253, 979238947, 1303191903,
        67989121]
    assert m.minhash("中文网页的内容重复检测", 8).tolist() == [
        62673637, 55938418, 302026184, 286370859, 222746079, 389334615, 1115325697, 839062148]
    assert m.minhash([b"a", "b"], 4, seed=99).tolist() == [
        2018741791, 1136213297, 2795921209, 676905630]


def test_permutations_are_splitmix64(api):
    """a | 1 and b are the low 32 bits of SplitMix64's outputs, in pairs."""
    mask = (1 << 64) - 1

    def splitmix(seed, n):
        out, state = [], seed
        for _ in range(n):
            state = (state + 0x9E3779B97F4A7C15) & mask
            z = state
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
            out.append(z ^ (z >> 31))
        return out
    for seed in [0, 1, 12345, (1 << 64) - 1]:
        a, b = mh(api).permutations(6, seed)
        raw = splitmix(seed, 12)
        assert a.tolist() == [(x & MAX32) | 1 for x in raw[0::2]]
        assert b.tolist() == [x & MAX32 for x in raw[1::2]]
        assert not a.flags.writeable


def test_text_signature_is_the_kernels(api):
    m = mh(api)
    from crawldedup import _kernel
    a, b = m.permutations(32, 5)
    text = "Near duplicate pages differ in a footer. 重复的网页只差一个页脚。"
    assert m.minhash(text, 32, seed=5, shingle=(3, 4)).tolist() == \
        _kernel.minhash_text(text, 0, 3, 4, a, b).tolist()
    assert m.minhash(text, 32, seed=5, tokenizer="words", shingle=2).tolist() == \
        _kernel.minhash_text(text, 1, 2, 2, a, b).tolist()
    assert m.minhash(text, 32, seed=5, tokenizer="chars", shingle=6).tolist() == \
        _kernel.minhash_text(text, 2, 6, 6, a, b).tolist()


def test_tokens_are_a_set(api):
    m = mh(api)
    assert m.minhash(["a", "b", "a"]).tolist() == m.minhash(["b", "a"]).tolist()
    assert m.minhash(["a"]).tolist() == m.minhash([b"a"]).tolist()   # str as UTF-8
    assert m.minhash(iter(["x", "y"])).tolist() == m.minhash(("y", "x")).tolist()
    assert m.minhash([]).tolist() == [MAX32] * 128


def test_callable_tokenizer_gives_the_tokens(api):
    m = mh(api)
    text = "one two three"
    assert m.minhash(text, tokenizer=str.split).tolist() == m.minhash(text.split()).tolist()
    assert m.minhash_many([text, "x"], 16, tokenizer=str.split).tolist() == \
        [m.minhash(text.split(), 16).tolist(), m.minhash(["x"], 16).tolist()]


def test_many_is_each(api):
    m = mh(api)
    texts = ["alpha beta gamma delta epsilon zeta", "", "中文网页的内容", "x"]
    got = m.minhash_many(texts, 64, shingle=2)
    assert got.shape == (4, 64) and got.dtype == np.uint32
    assert got.tolist() == [m.minhash(t, 64, shingle=2).tolist() for t in texts]
    assert m.minhash_many([], 8).shape == (0, 8)
    assert m.minhash_many((t for t in texts), 8).shape == (4, 8)


@given(st.lists(st.sampled_from("abcdefghij"), min_size=1, max_size=10, unique=True),
       st.lists(st.sampled_from("abcdefghij"), min_size=1, max_size=10, unique=True))
def test_jaccard_estimates_the_set_similarity(x, y):
    """With 2048 permutations the estimate is within 0.1 of the truth
    (its standard deviation is at most 0.011 here)."""
    from crawldedup.near.minhash import jaccard, minhash
    truth = len(set(x) & set(y)) / len(set(x) | set(y))
    assert abs(jaccard(minhash(x, 2048), minhash(y, 2048)) - truth) < 0.1


def test_near_duplicates_score_high_and_others_low(api):
    m = mh(api)
    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(2000)]
    doc = list(rng.choice(words, 300))
    edited = list(doc)
    for i in rng.choice(300, 3, replace=False):
        edited[i] = "changed"
    other = list(rng.choice(words, 300))
    sig = m.minhash(" ".join(doc), 256, shingle=3)
    assert m.jaccard(sig, m.minhash(" ".join(edited), 256, shingle=3)) > 0.8
    assert m.jaccard(sig, m.minhash(" ".join(other), 256, shingle=3)) < 0.1


def test_jaccard_many(api):
    m = mh(api)
    sigs = m.minhash_many(["a b c d e f", "a b c d e g", "z y x"], 64, shingle=1)
    got = m.jaccard_many(sigs, sigs[0])
    assert got.tolist() == [m.jaccard(s, sigs[0]) for s in sigs]
    assert got[0] == 1.0


def test_argument_checks(api):
    m = mh(api)
    with pytest.raises(TypeError, match="decode bytes"):
        m.minhash(b"bytes text")
    with pytest.raises(TypeError, match="str or an iterable"):
        m.minhash(42)
    with pytest.raises(TypeError, match=r"text_or_tokens\[1\]"):
        m.minhash(["a", 3])
    with pytest.raises(TypeError, match=r"tokenizer\(text\)\[0\]"):
        m.minhash("a b", tokenizer=lambda t: [1])
    with pytest.raises(ValueError, match="num_perm"):
        m.minhash("x", 0)
    with pytest.raises(ValueError, match="num_perm"):
        m.minhash("x", m.MAX_PERM + 1)
    with pytest.raises(TypeError, match="num_perm"):
        m.minhash("x", 12.0)
    with pytest.raises(ValueError, match="seed"):
        m.minhash("x", seed=-1)
    with pytest.raises(TypeError, match="seed"):
        m.minhash("x", seed="1")
    with pytest.raises(ValueError, match="shingle"):
        m.minhash("x", shingle=0)
    with pytest.raises(ValueError, match=r"shingle\[1\]"):
        m.minhash("x", shingle=(2, 17))
    with pytest.raises(ValueError, match="shingle may be a"):
        m.minhash("x", shingle=(2, 3), tokenizer="words")
    with pytest.raises(ValueError, match="tokenizer"):
        m.minhash("x", tokenizer="sentences")
    with pytest.raises(TypeError, match="texts"):
        m.minhash_many("one text")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        m.minhash_many(["a", None])
    with pytest.raises(ValueError, match="different lengths"):
        m.jaccard([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="empty"):
        m.jaccard([], [])
    with pytest.raises(TypeError, match="integers"):
        m.jaccard(["a"], ["b"])
    with pytest.raises(ValueError, match="one signature"):
        m.jaccard([[1]], [[1]])
    with pytest.raises(ValueError, match=r"\(n, 2\)"):
        m.jaccard_many([1, 2], [1, 2])
