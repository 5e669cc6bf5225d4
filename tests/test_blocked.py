"""The cache-line blocked layout: every bit of a key in one 512-bit block."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawldedup import IncompatibleFilterError, optimal_parameters
from crawldedup.bloom.sizing import _blocked_fpr

MASK64 = (1 << 64) - 1
keys = st.one_of(st.binary(max_size=40), st.text(max_size=12).filter(
    lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s)))

# Frozen, like the standard positions in test_hashing.py: saved blocked
# filters depend on them (docs/format.md).
FROZEN = [
    ("https://example.com/", 7, 512 * 1000, 0,
     [362313, 362183, 362271, 362482, 362431, 362259, 362377]),
    ("新闻", 6, 512, 3, [507, 153, 451, 109, 141, 279]),
    (b"", 1, 512 * 7, 0, [0]),
    ("a" * 40, 12, 512 * 123457, 2 ** 32 - 1,
     [21594325, 21594614, 21594530, 21594545, 21594226, 21594371, 21594471, 21594413,
      21594547, 21594114, 21594406, 21594558]),
]


@pytest.mark.parametrize("key,k,m,seed,expected", FROZEN)
def test_frozen_blocked_positions(impl, key, k, m, seed, expected):
    assert impl.hash_indices(key, k, m, seed, layout="blocked") == expected


def spec_blocked(key, k, m, seed):
    """docs/format.md, written independently of both implementations."""
    import mmh3
    h = mmh3.hash128(key, seed, signed=False)
    h1, h2 = h & MASK64, h >> 64
    block = (h1 * (m // 512)) >> 64
    out, state = [], h2
    for _ in range(k):
        out.append(block * 512 + (state >> 55))
        state = (state * 6364136223846793005 + 1442695040888963407) & MASK64
    return out


@given(key=st.binary(max_size=40), k=st.integers(1, 64), blocks=st.integers(1, 2 ** 40),
       seed=st.integers(0, 2 ** 32 - 1))
def test_blocked_positions_follow_the_documented_derivation(impl, key, k, blocks, seed):
    got = impl.hash_indices(key, k, blocks * 512, seed, layout="blocked")
    assert got == spec_blocked(key, k, blocks * 512, seed)
    assert len({p // 512 for p in got}) == 1  # one block, one cache line


def test_layout_arguments(impl):
    with pytest.raises(ValueError, match="multiple of 512"):
        impl.hash_indices(b"x", 3, 1000, layout="blocked")
    with pytest.raises(ValueError, match="layout must be"):
        impl.hash_indices(b"x", 3, 1024, layout="zigzag")
    with pytest.raises(ValueError, match="multiple of 512"):
        impl.BloomBits()._init_bits(1000, 3, 0, None, "blocked")


@given(batch=st.lists(keys, max_size=60), probes=st.lists(keys, max_size=30),
       blocks=st.integers(1, 8), k=st.integers(1, 64))
def test_core_and_reference_blocked_bits_agree(core, reference, batch, probes, blocks, k):
    made = []
    for impl in (core, reference):
        bits = impl.BloomBits()
        bits._init_bits(blocks * 512, k, 0, None, "blocked")
        singles = [bits.add(key) for key in batch[::2]]
        batched = bits.add_many(batch[1::2]).tolist()
        made.append((bits, singles, batched))
    (a, sa, ba), (b, sb, bb) = made
    assert (sa, ba) == (sb, bb)
    assert bytes(a._bits_view()) == bytes(b._bits_view())
    assert a.contains_many(probes).tolist() == b.contains_many(probes).tolist()
    assert [p in a for p in probes] == [p in b for p in probes]
    assert a.layout == b.layout == "blocked"


@pytest.mark.parametrize("p", [0.1, 0.01, 0.001])
def test_blocked_false_positive_rate_at_capacity(core, p):
    n = 200_000
    m, k = optimal_parameters(n, p, layout="blocked")
    bits = core.BloomBits()
    bits._init_bits(m, k, 0, None, "blocked")
    bits.add_many([f"https://site{i % 977}.example/item/{i}" for i in range(n)])
    rate = bits.contains_many([f"https://site{i % 977}.example/other/{i}"
                               for i in range(1_000_000)]).mean()
    assert 0.5 * p <= rate <= 1.1 * p, rate


@pytest.mark.parametrize("p,most", [(0.1, 1.05), (0.01, 1.1), (0.001, 1.15), (1e-4, 1.2)])
def test_blocked_memory_cost(p, most):
    standard, _ = optimal_parameters(1_000_000, p)
    blocked, _ = optimal_parameters(1_000_000, p, layout="blocked")
    assert blocked % 512 == 0
    assert standard <= blocked <= most * standard


def test_sizing_model():
    # An empty block never matches; a saturated one always does.
    assert _blocked_fpr(7, 0) == 0
    assert _blocked_fpr(3, 10_000) == pytest.approx(1.0)
    # Uneven loads make a blocked filter somewhat worse than a standard one
    # with the same bits per key, never better.
    for load in (20, 50, 80):
        standard = (1 - math.exp(-7 * load / 512)) ** 7
        assert standard < _blocked_fpr(7, load) < 2 * standard


def test_blocked_filter_api_and_files(api, tmp_path):
    bf = api.BloomFilter(10_000, 0.01, layout="blocked")
    assert bf.layout == "blocked" and bf.num_bits % 512 == 0
    assert "layout='blocked'" in repr(bf)
    keys = [f"u{i}" for i in range(5000)]
    assert bf.add_many(keys).sum() >= 4990
    assert all(k in bf for k in keys)
    bf.save(tmp_path / "b")
    loaded = api.BloomFilter.load(tmp_path / "b")
    assert loaded == bf and loaded.layout == "blocked"
    assert loaded.to_bytes()[14] == 1  # layout id in the header
    assert api.BloomFilter.from_bytes(bf.to_bytes()) == bf
    standard = api.BloomFilter(10_000, 0.01)
    assert standard != bf
    with pytest.raises(IncompatibleFilterError, match="layout"):
        standard | bf
    with pytest.raises(ValueError, match="layout must be"):
        api.BloomFilter(10, layout="diagonal")
