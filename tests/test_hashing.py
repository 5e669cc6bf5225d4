"""MurmurHash3 x64 128 and the Bloom bit positions, in both implementations."""

import array

import mmh3
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

MASK64 = (1 << 64) - 1
seeds = st.integers(min_value=0, max_value=2 ** 32 - 1)
# Lengths around the 16-byte block boundary are where tails go wrong.
edge_bytes = st.one_of(
    st.binary(max_size=70),
    st.integers(0, 5).flatmap(
        lambda blocks: st.binary(min_size=16 * blocks, max_size=16 * blocks + 15)),
)


def mmh3_128(key, seed=0):
    return mmh3.hash128(key, seed, signed=False)


# ---------------------------------------------------------------- fixed vectors

@pytest.mark.parametrize("length", range(0, 48))
def test_every_tail_length_matches_mmh3(impl, length):
    data = bytes((i * 37 + 11) & 0xFF for i in range(length))
    for seed in (0, 1, 0xDEADBEEF, 2 ** 32 - 1):
        assert impl.hash128(data, seed) == mmh3_128(data, seed)


def test_empty_input(impl):
    assert impl.hash128(b"") == 0
    assert impl.hash128("") == 0
    assert impl.hash128(b"", 1) == mmh3_128(b"", 1) != 0


def test_long_inputs_match_mmh3(impl):
    rng = np.random.default_rng(3)
    for size in (1000, 65_537, 1_000_003):
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        assert impl.hash128(data, 7) == mmh3_128(data, 7)


@pytest.mark.parametrize("text", [
    "https://example.com/", "新浪新闻排行", "https://例え.テスト/パス?q=値",
    "😀🙈 astral \U0010FFFF", "mixed ascii 和 中文 and emoji 🎉", "\x00nul\x00",
])
def test_str_is_hashed_as_utf8(impl, text):
    assert impl.hash128(text) == mmh3_128(text) == impl.hash128(text.encode("utf-8"))
    assert impl.hash64(text) == impl.hash128(text) & MASK64


def test_known_value(impl):
    assert impl.hash128(b"hello") == 121118445609844952839898260755277781762
    assert impl.hash64(b"hello") == 14688674573012802306


# ------------------------------------------------------------ property tests

@given(data=edge_bytes, seed=seeds)
def test_bytes_match_mmh3(impl, data, seed):
    assert impl.hash128(data, seed) == mmh3_128(data, seed)
    assert impl.hash64(data, seed) == mmh3_128(data, seed) & MASK64


@given(text=st.text(st.characters(exclude_categories=("Cs",)), max_size=60), seed=seeds)
def test_text_matches_mmh3(impl, text, seed):
    assert impl.hash128(text, seed) == mmh3_128(text, seed)


@given(data=st.binary(max_size=64))
def test_bytes_like_keys_hash_their_contents(impl, data):
    expected = impl.hash128(data)
    assert impl.hash128(bytearray(data)) == expected
    assert impl.hash128(memoryview(data)) == expected
    assert impl.hash128(np.frombuffer(data, dtype=np.uint8)) == expected


def test_multibyte_buffers_hash_their_raw_bytes(impl):
    words = array.array("I", [1, 2, 3])
    assert impl.hash128(words) == impl.hash128(words.tobytes())


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("key", [None, 1, 1.5, ["a"], ("a",), {"a": 1}, object()])
def test_non_bytes_keys_raise_type_error_naming_the_type(impl, key):
    with pytest.raises(TypeError, match=type(key).__name__):
        impl.hash128(key)
    with pytest.raises(TypeError, match=type(key).__name__):
        impl.hash_indices(key, 3, 100)


def test_non_contiguous_buffer_is_refused(impl):
    strided = memoryview(bytes(range(10)))[::2]
    with pytest.raises(TypeError, match="contiguous"):
        impl.hash128(strided)


def test_lone_surrogate_is_a_unicode_error(impl):
    with pytest.raises(UnicodeEncodeError):
        impl.hash128("bad \ud800 surrogate")


@pytest.mark.parametrize("seed", [-1, 2 ** 32, 2 ** 64])
def test_seed_out_of_range(impl, seed):
    with pytest.raises(ValueError, match=r"seed must be in \[0, 2\*\*32\)"):
        impl.hash128(b"x", seed)


def test_seed_of_wrong_type(impl):
    with pytest.raises(TypeError, match="seed must be an int"):
        impl.hash64(b"x", "1")


# ---------------------------------------------------------------- indices

# Frozen: persisted filters depend on these positions.  A change to the
# derivation (docs/format.md) must fail here, and needs a new hash algorithm id.
FROZEN_INDICES = [
    ('', 1, 1, 0,
     [0]),
    ('https://example.com/', 7, 9585059, 0,
     [6778487, 3363600, 9533773, 6118889, 2704008, 8874190, 5459318]),
    (b'\x00\xff', 10, 2 ** 64 - 1, 0,
     [15970081977526235199, 3939260251476654309, 10355182599136625037, 16771104946796595769,
      4740283220747014891, 11156205568406985637, 17572127916066956393, 5541306190017375545,
      11957228537677346327, 18373150885337317125]),
    ('新闻 https://news.sina.com.cn/', 5, 1000003, 42,
     [833872, 325861, 817855, 309848, 801846]),
    ('😀', 3, 64, 7,
     [32, 28, 25]),
    ("a" * 33, 64, 12345, 2 ** 32 - 1,
     [3106, 2350, 1594, 841, 90, 11688, 10947, 10211, 9483, 8762, 8050, 7349, 6658, 5980, 5314,
      4662, 4026, 3405, 2802, 2216, 1649, 1103, 577, 74, 11938, 11481, 11050, 10644, 10265,
      9915, 9593, 9302, 9041, 8812, 8617, 8455, 8329, 8238, 8184, 8169, 8192, 8256, 8360, 8506,
      8696, 8929, 9208, 9532, 9903, 10323, 10791, 11310, 11879, 155, 830, 1558, 2341, 3181,
      4077, 5032, 6045, 7118, 8253, 9449]),
]


@pytest.mark.parametrize("key,k,m,seed,expected", FROZEN_INDICES)
def test_frozen_index_vectors(impl, key, k, m, seed, expected):
    assert impl.hash_indices(key, k, m, seed) == expected


def spec_indices(key, k, m, seed):
    """docs/format.md, written independently of both implementations."""
    if isinstance(key, str):
        key = key.encode("utf-8")
    h = mmh3_128(key, seed)
    h1, h2 = h & MASK64, h >> 64
    unit = MASK64 // m + (1 if m > 1 else 0)
    out = []
    for i in range(k):
        x = (h1 + i * h2 + (i ** 3 - i) // 6 * unit) & MASK64
        out.append((x * m) >> 64)
    return out


@given(key=st.one_of(st.binary(max_size=40), st.text(max_size=20).filter(
           lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s))),
       k=st.integers(1, 64), m=st.integers(1, 2 ** 64 - 1), seed=seeds)
def test_indices_follow_the_documented_derivation(impl, key, k, m, seed):
    got = impl.hash_indices(key, k, m, seed)
    assert got == spec_indices(key, k, m, seed)
    assert all(0 <= i < m for i in got)


@pytest.mark.parametrize("k,m,message", [
    (0, 10, r"k must be in \[1, 64\]"), (65, 10, r"k must be in \[1, 64\]"),
    (3, 0, r"m must be in \[1, 2\*\*64\)"), (3, 2 ** 64, r"m must be in \[1, 2\*\*64\)"),
    (3, -5, r"m must be in"),
])
def test_indices_argument_ranges(impl, k, m, message):
    with pytest.raises(ValueError, match=message):
        impl.hash_indices(b"x", k, m)


def test_indices_argument_types(impl):
    with pytest.raises(TypeError):
        impl.hash_indices(b"x", 3.0, 100)


@pytest.mark.parametrize("text", ["é" * 700, "新闻" * 600, "🎉" * 300, "a" * 2000 + "é"])
def test_long_non_ascii_keys(impl, text):
    assert impl.hash128(text) == mmh3_128(text.encode("utf-8"))
    with pytest.raises(UnicodeEncodeError):
        impl.hash128(text + "\udfff" + text)


def test_hashing_does_not_cache_utf8_in_the_key(impl):
    import sys
    key = "".join(["新闻排行-", str(id(impl))])  # a fresh, non-ASCII str
    size = sys.getsizeof(key)
    impl.hash128(key)
    bits = impl.BloomBits()
    bits._init_bits(1000, 3)
    bits.add(key)
    bits.add_many([key])
    assert key in bits
    assert sys.getsizeof(key) == size


class Text(str):
    pass


@pytest.mark.parametrize("text", ["https://example.com/", "新闻", "", "é"])
def test_str_subclasses_hash_like_str(impl, text):
    assert impl.hash128(Text(text)) == impl.hash128(text)
    assert impl.hash_indices(Text(text), 5, 1000) == impl.hash_indices(text, 5, 1000)
    bits = impl.BloomBits()
    bits._init_bits(1000, 4)
    bits.add_many([Text(text)])
    assert text in bits and bits.contains_many([text]).all()
