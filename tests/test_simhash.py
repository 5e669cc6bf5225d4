"""The public SimHash API: simhash, simhash_many, simhash_features, hamming,
hamming_many; on each kernel (the ``api`` fixture)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import crawldedup
from conftest import sized
from crawldedup import hash64, simhash, simhash_features

EN = ("Search engines crawl the web every day and most of the pages they fetch have been seen "
      "before, sometimes under another address, sometimes with a changed counter or a new "
      "advertisement in the sidebar. A crawler that recognises these near duplicates saves "
      "bandwidth, storage and the time of everyone who reads the index afterwards.")
ZH = ("搜索引擎每天都在抓取网页，其中大部分页面以前已经见过，有时换了一个地址，有时只是计数器"
      "或者侧边栏的广告变了。能够识别这些近似重复页面的爬虫可以节省带宽和存储，"
      "也节省了之后阅读索引的每个人的时间。")


def test_exported():
    for name in ["simhash", "simhash_many", "simhash_features", "hamming", "hamming_many"]:
        assert name in crawldedup.__all__


@pytest.mark.parametrize("text", ["", " ", "   \t\n\r ", "\u3000\u00a0", ",.;!?-—…", "。，、"])
def test_text_without_features_gives_zero(api, text):
    assert api.simhash(text) == 0
    assert api.simhash(text, tokenizer="words") == 0
    assert api.simhash(text, tokenizer="chars") == 0
    assert api.simhash_many([text]).tolist() == [0]


def test_one_feature_gives_its_hash(api):
    assert api.simhash("Hello") == api.hash64("hello")
    assert api.simhash("  hello  hello ") == api.hash64("hello")   # distinct words count once
    assert api.simhash("你") == api.hash64("你")


def test_auto_is_words_plus_cjk_bigrams(api):
    got = api.simhash("Crawl 网页抓取 crawl")
    feats = [api.hash64("crawl"), api.hash64("网页"), api.hash64("页抓"), api.hash64("抓取")]
    assert got == api.simhash_features(feats)


def test_case_is_ignored(api):
    assert api.simhash(EN) == api.simhash(EN.upper()) == api.simhash(EN.lower())
    assert api.simhash("İSTANBUL Σ") == api.simhash("i̇stanbul σ")


def test_tokenizers_and_ngram_sizes(api):
    assert api.simhash("a b c", tokenizer="words", ngram=2) == api.simhash_features(
        [api.hash64("a b"), api.hash64("b c")])
    assert api.simhash("ab,cd", tokenizer="chars", ngram=3) == api.simhash_features(
        [api.hash64("abc"), api.hash64("bcd")])
    assert api.simhash("x y 你好吗", ngram=(2, 3)) == api.simhash_features(
        [api.hash64("x y"), api.hash64("你好吗")])
    assert api.simhash("x y 你好吗", ngram=3) == api.simhash_features(
        [api.hash64("x y"), api.hash64("你好吗")])
    # English alone: auto is word unigrams; Chinese has no spaces, so "words"
    # sees whole clauses where "auto" sees bigrams.
    assert api.simhash(EN) == api.simhash(EN, tokenizer="words") \
        != api.simhash(EN, tokenizer="chars")
    assert api.simhash(ZH) != api.simhash(ZH, tokenizer="words")


def test_custom_tokenizer_gets_the_original_text(api):
    seen = []

    def tok(text):
        seen.append(text)
        return text.split()

    assert api.simhash("A b A", tokenizer=tok) == api.simhash(["A", "b", "A"])
    assert seen == ["A b A"]
    assert api.simhash_many(["A b A", "c"], tokenizer=tok).tolist() == [
        api.simhash(["A", "b", "A"]), api.simhash(["c"])]


def test_features_and_weights(api):
    assert api.simhash(["a", "b"], weights=[3, 1]) == api.simhash(["a", "a", "a", "b"])
    assert api.simhash(["a", "b"], weights=[0.5, 0.25]) == api.simhash(["a", "a", "b"])
    assert api.simhash(iter(["x", "y", "z"])) == api.simhash_features(
        [api.hash64("x"), api.hash64("y"), api.hash64("z")])
    assert api.simhash([]) == 0


def test_near_duplicates_are_close_and_others_far(api):
    en_edit = EN.replace("changed counter", "different counter")
    zh_edit = ZH.replace("计数器", "计时器")
    assert api.hamming(api.simhash(EN), api.simhash(en_edit)) <= 3
    assert api.hamming(api.simhash(ZH), api.simhash(zh_edit)) <= 3
    assert api.hamming(api.simhash(EN), api.simhash(ZH)) > 10


@given(st.lists(st.text(max_size=40), max_size=10),
       st.sampled_from(["auto", "words", "chars"]), st.integers(min_value=1, max_value=5))
def test_simhash_many_equals_simhash(api, texts, tokenizer, n):
    got = api.simhash_many(texts, tokenizer=tokenizer, ngram=n)
    assert got.dtype == np.uint64 and got.shape == (len(texts),)
    assert got.tolist() == [api.simhash(t, tokenizer=tokenizer, ngram=n) for t in texts]


def test_simhash_many_accepts_any_iterable(api):
    assert api.simhash_many(t for t in [EN, ZH]).tolist() == [api.simhash(EN), api.simhash(ZH)]
    assert api.simhash_many([]).tolist() == []


@given(st.integers(min_value=0, max_value=2**64 - 1), st.integers(min_value=0, max_value=2**64 - 1))
def test_hamming(api, a, b):
    assert api.hamming(a, b) == bin(a ^ b).count("1") == api.hamming(b, a)
    assert api.hamming(a, a) == 0
    assert api.hamming_many(np.array([a, b, a ^ b], dtype=np.uint64), a).tolist() == [
        0, api.hamming(a, b), api.hamming(a, a ^ b)]
    assert api.hamming_many([a, b], b).tolist() == [api.hamming(a, b), 0]


def test_hamming_many_dtypes(api):
    assert api.hamming_many(np.array([1, 2, 3], dtype=np.int64), 0).tolist() == [1, 1, 2]
    assert api.hamming_many(np.array([1, 2], dtype=np.uint32), 3).tolist() == [1, 1]
    assert api.hamming_many([np.uint64(2**64 - 1)], 0).tolist() == [64]


def test_huge_text(core):
    # 100 MB through the compiled kernel (in every mode: the twin would take
    # minutes; 10 MB under the sanitizers): streamed, memory does not grow
    # with the text.
    n = sized(20_000_000, 2_000_000)
    text = "Word " * n
    assert len(text) == 5 * n
    assert core.simhash_text(text, core.TOKENIZER_AUTO, 1, 2) == hash64("word")
    zh = "网页" * (n * 5 // 2)
    assert core.simhash_text(zh, core.TOKENIZER_AUTO, 1, 2) == simhash_features(
        [hash64("网页"), hash64("页网")], weights=[n * 5 // 2, n * 5 // 2 - 1])
    if crawldedup.IMPLEMENTATION == "core":
        assert simhash(text) == hash64("word")


def test_bad_arguments_name_themselves(api):
    with pytest.raises(TypeError, match="text_or_features"):
        api.simhash(42)
    with pytest.raises(TypeError, match="text_or_features.*bytes"):
        api.simhash(b"bytes")
    with pytest.raises(TypeError, match=r"text_or_features\[1\]"):
        api.simhash(["a", 2])
    with pytest.raises(ValueError, match="weights"):
        api.simhash("text", weights=[1])
    with pytest.raises(ValueError, match="weights"):
        api.simhash(["a", "b"], weights=[1])
    with pytest.raises(ValueError, match="weights"):
        api.simhash(["a"], weights=[float("nan")])
    with pytest.raises(TypeError, match="weights"):
        api.simhash(["a"], weights=["heavy"])
    with pytest.raises(ValueError, match="tokenizer"):
        api.simhash("a", tokenizer="sentences")
    with pytest.raises(TypeError, match="tokenizer"):
        api.simhash("a", tokenizer=3)
    with pytest.raises(ValueError, match="ngram"):
        api.simhash("a", ngram=0)
    with pytest.raises(ValueError, match="ngram"):
        api.simhash("a", ngram=17)
    with pytest.raises(TypeError, match="ngram"):
        api.simhash("a", ngram=2.0)
    with pytest.raises(ValueError, match="ngram"):
        api.simhash("a", tokenizer="words", ngram=(1, 2))
    with pytest.raises(TypeError, match="texts"):
        api.simhash_many("one text")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        api.simhash_many(["a", None])
    with pytest.raises(TypeError, match="texts"):
        api.simhash_many(5)
    with pytest.raises(ValueError, match="hashes"):
        api.simhash_features([-1])
    with pytest.raises(ValueError, match=r"hashes\[0\]"):
        api.simhash_features([2**64])
    with pytest.raises(TypeError, match=r"hashes\[0\]"):
        api.simhash_features(["1"])
    with pytest.raises(TypeError, match="hashes"):
        api.simhash_features(np.array([1.5]))
    with pytest.raises(ValueError, match="hashes"):
        api.simhash_features(np.array([-1], dtype=np.int64))
    with pytest.raises(ValueError, match="one-dimensional"):
        api.simhash_features(np.zeros((2, 2), dtype=np.uint64))
    with pytest.raises(TypeError, match="a must be an int"):
        api.hamming("1", 2)
    with pytest.raises(TypeError, match="b must be an int"):
        api.hamming(1, 2.0)
    with pytest.raises(ValueError, match="b must be in"):
        api.hamming(1, -2)
    with pytest.raises(ValueError, match="fp must be in"):
        api.hamming_many([1], 2**64)
    with pytest.raises(TypeError, match="fps"):
        api.hamming_many(3, 1)
