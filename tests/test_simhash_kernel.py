"""SimHash kernels: the compiled core against the pure-Python twin (and MD5
against hashlib, the `simhash` package's text fingerprint against the package)."""

import hashlib

import numpy as np
import pytest
import simhash as leonsim
from hypothesis import given
from hypothesis import strategies as st

# Text built from pieces that sit on the tokenizers' edges: ASCII words and
# case, punctuation and whitespace, Latin-1 and other cased scripts, the two
# code points whose lowercase needs context or two code points (U+0130,
# U+03A3), CJK inside and outside [\u4e00-\u9fcc], kana, Thai, Hangul, emoji
# and other astral characters, digits of other scripts, underscores.
PIECES = ["the", "The", "QUICK", "fox", "a", "I", "_", "x_y", "42", "٣", " ", "  ", "\t", "\n",
          ",", ".", "!", "-", "'", "é", "É", "ß", "Straße", "İ", "Σ", "ΣΑΣ", "σ", "ς", "Ω",
          "我", "们", "你好", "世界", "，", "。", "、", "鿌", "鿍", "龥", "㐀",
          "𠀀", "𪜀", "か", "カナ",
          "ภาษา", "ไทย", "한국어", "😀", "👍🏽", "𝔘", "ǅ", "ﬃ", "\u0301", "\u200b"]
texts = st.one_of(
    st.lists(st.sampled_from(PIECES), max_size=40).map("".join),
    st.text(max_size=60),
    st.text(alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x4E40), max_size=60),
)
modes = st.sampled_from([0, 1, 2])
ngrams = st.integers(min_value=1, max_value=6)


@pytest.mark.parametrize("n", [0, 1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 1000])
def test_md5_matches_hashlib_at_block_edges(impl, n):
    data = bytes(range(256)) * 4
    assert impl.md5_digest(data[:n]) == hashlib.md5(data[:n]).digest()


@given(st.binary(max_size=300))
def test_md5_matches_hashlib(core, data):
    assert core.md5_digest(data) == hashlib.md5(data).digest()
    assert core.md5_digest(bytearray(data)) == hashlib.md5(data).digest()


def test_md5_of_str_is_of_its_utf8(impl):
    assert impl.md5_digest("你好😀") == hashlib.md5("你好😀".encode()).digest()


@given(texts, modes, ngrams, ngrams)
def test_simhash_text_core_equals_reference(core, reference, text, mode, word_n, char_n):
    assert core.simhash_text(text, mode, word_n, char_n) == \
        reference.simhash_text(text, mode, word_n, char_n)


@given(st.lists(texts, max_size=8), modes, ngrams, ngrams)
def test_simhash_texts_is_simhash_text_of_each(core, reference, batch, mode, word_n, char_n):
    got = core.simhash_texts(batch, mode, word_n, char_n)
    assert got.dtype == np.uint64
    assert got.tolist() == [reference.simhash_text(t, mode, word_n, char_n) for t in batch]
    assert reference.simhash_texts(batch, mode, word_n, char_n).tolist() == got.tolist()


def test_simhash_texts_lowers_special_code_points_in_a_batch(impl):
    # U+0130 and U+03A3 send a text through str.lower(); the others stay fast.
    batch = ["ΟΔΟΣ ΚΑΙ ΟΔΟΣ", "plain text", "İSTANBUL İzmir", "", "ΣΑΣ"]
    got = impl.simhash_texts(batch, 0, 1, 2).tolist()
    assert got == [impl.simhash_text(t.lower(), 0, 1, 2) for t in batch]
    assert got[0] != impl.simhash_text("οδοσ και οδοσ", 0, 1, 2)  # final sigma is ς


def test_auto_tokenizer_features(impl):
    # words once each, CJK bigrams at every occurrence
    h = impl.hash64
    got = impl.simhash_text("Ab ab, CD 你好你好", 0, 1, 2)
    feats = [h("ab"), h("cd"), h("你好"), h("好你"), h("你好")]
    assert got == impl.simhash_hashes(np.array(feats, dtype=np.uint64))


def test_short_sequences_give_one_feature(impl):
    h = impl.hash64
    assert impl.simhash_text("a b", 1, 3, 3) == h("a b")
    assert impl.simhash_text("ab", 2, 4, 4) == h("ab")
    assert impl.simhash_text("你", 0, 1, 2) == h("你")
    for text in ["", " ", "\t\n ", ",.!?", "\u200b"]:
        assert impl.simhash_text(text, 0, 1, 2) == 0


def test_every_code_point_lowers_like_str_lower(core):
    # The core lower-cases one code point at a time, except U+0130 and U+03A3.
    special = {0x130, 0x3A3}
    for start in range(0, 0x110000, 0x8000):
        chunk = "".join(chr(c) for c in range(start, start + 0x8000)
                        if not (0xD800 <= c <= 0xDFFF) and c not in special)
        assert core.lower_text(chunk) == chunk.lower(), hex(start)
    assert core.lower_text("İΣ") == "İΣ".lower()


def test_every_code_point_is_a_word_character_as_re_says(core):
    # The word test of the scans (a table for the Basic Multilingual Plane,
    # the Unicode database above it: planes 1 and 2 checked) against re's
    # \w: a one-character text has a feature exactly when its character is
    # a word character.
    import re
    word = re.compile(r"\w")
    for start in range(0, 0x30000, 0x10000):
        chars = [chr(c) for c in range(start, start + 0x10000) if not 0xD800 <= c <= 0xDFFF]
        got = core.simhash_texts(chars, 1, 1, 1) != 0
        want = np.array([word.match(ch) is not None for ch in chars])
        assert (got == want).all(), hex(start)


@given(st.lists(st.integers(min_value=0, max_value=2**64 - 1), max_size=40),
       st.data())
def test_simhash_hashes_core_equals_reference(core, reference, hashes, data):
    arr = np.array(hashes, dtype=np.uint64)
    assert core.simhash_hashes(arr) == reference.simhash_hashes(arr)
    weights = data.draw(st.lists(st.floats(min_value=-1e6, max_value=1e6),
                                 min_size=len(hashes), max_size=len(hashes)))
    w = np.array(weights, dtype=np.float64)
    assert core.simhash_hashes(arr, w) == reference.simhash_hashes(arr, w)


def test_simhash_hashes_majority_rule(impl):
    arr = np.array([0b1011, 0b0011, 0b0110], dtype=np.uint64)
    assert impl.simhash_hashes(arr) == 0b0011
    assert impl.simhash_hashes(arr, np.array([1.0, 1.0, 5.0])) == 0b0110
    assert impl.simhash_hashes(np.array([], dtype=np.uint64)) == 0
    assert impl.simhash_hashes(np.array([2**64 - 1], dtype=np.uint64)) == 2**64 - 1
    with pytest.raises(ValueError, match="weights"):
        impl.simhash_hashes(arr, np.array([1.0]))


@given(st.lists(st.integers(min_value=0, max_value=2**64 - 1), max_size=50),
       st.integers(min_value=0, max_value=2**64 - 1))
def test_hamming_many_core_equals_reference(core, reference, fps, fp):
    arr = np.array(fps, dtype=np.uint64)
    got = core.hamming_many(arr, fp)
    assert got.dtype == np.uint8
    assert got.tolist() == reference.hamming_many(arr, fp).tolist()
    assert got.tolist() == [bin(x ^ fp).count("1") for x in fps]


@given(texts, st.sampled_from([8, 16, 32, 64, 72, 120, 128]))
def test_leonsim_text_equals_the_package(impl, text, f):
    assert impl.leonsim_text(text, f) == leonsim.Simhash(text, f=f).value


@given(st.lists(st.tuples(st.text(max_size=8), st.integers(min_value=-3, max_value=300)),
                max_size=30),
       st.sampled_from([8, 64, 128]))
def test_leonsim_features_core_equals_reference(core, reference, pairs, f):
    names = [p[0] for p in pairs]
    weights = np.array([p[1] for p in pairs], dtype=np.int64)
    total = int(weights.sum())
    assert core.leonsim_features(names, weights, total, f) == \
        reference.leonsim_features(names, weights, total, f)


def test_kernel_argument_errors(impl):
    with pytest.raises(TypeError, match="text must be str"):
        impl.simhash_text(b"bytes", 0, 1, 2)
    with pytest.raises(TypeError, match=r"texts\[1\] must be str"):
        impl.simhash_texts(["ok", 3], 0, 1, 2)
    with pytest.raises(TypeError, match="texts must be a list"):
        impl.simhash_texts(("a",), 0, 1, 2)
    with pytest.raises(ValueError, match="mode"):
        impl.simhash_text("a", 7, 1, 2)
    with pytest.raises(ValueError, match="n-gram"):
        impl.simhash_text("a", 0, 0, 2)
    with pytest.raises(ValueError, match="n-gram"):
        impl.simhash_text("a", 0, 1, impl.MAX_NGRAM + 1)
    with pytest.raises(ValueError, match="f must be"):
        impl.leonsim_text("a", 12)
    with pytest.raises(ValueError, match="f must be"):
        impl.leonsim_text("a", 136)
    with pytest.raises(TypeError, match=r"features\[0\] must be str"):
        impl.leonsim_features([b"x"], np.array([1], dtype=np.int64), 1, 64)
    with pytest.raises(UnicodeEncodeError):
        impl.leonsim_features(["\ud800"], np.array([1], dtype=np.int64), 1, 64)


@pytest.mark.parametrize("length", [1, 7, 8, 9, 15, 16, 17, 31, 32, 33])
def test_feature_lengths_around_hash_blocks(impl, length):
    # MurmurHash3 reads 16-byte blocks then a tail: features of every length
    # near the block edges hash like hash64 of their UTF-8.
    word = ("abcdefghij" * 4)[:length]
    assert impl.simhash_text(word, 0, 1, 2) == impl.hash64(word)
    assert impl.simhash_text(word + " " + word, 1, 2, 2) == impl.hash64(word + " " + word)
    astral = "𠀀𠀁𠀂𠀃𠀄"[: max(1, length // 4)]          # 4 UTF-8 bytes each
    for n in range(1, 6):
        assert impl.simhash_text(astral, 0, 1, n) == reference_text(astral, 0, 1, n)


def reference_text(text, mode, word_n, char_n):
    from crawldedup import _reference
    return _reference.simhash_text(text, mode, word_n, char_n)
