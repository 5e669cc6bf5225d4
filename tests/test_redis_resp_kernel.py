"""The BITFIELD command bytes built in the core against the pure-Python twin
(no server needed), and their meaning: the offsets are the filter's bits."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

keys_st = st.lists(st.one_of(st.text(max_size=20), st.binary(max_size=20)), max_size=40)


def parse_ops(data, setting):
    """[(op, type, offset)] from the RESP bulk strings."""
    items = []
    while data:
        assert data[:1] == b"$"
        length, _, rest = data[1:].partition(b"\r\n")
        n = int(length)
        items.append(rest[:n])
        assert rest[n:n + 2] == b"\r\n"
        data = rest[n + 2:]
    width = 4 if setting else 3
    assert len(items) % width == 0
    ops = [items[i:i + width] for i in range(0, len(items), width)]
    for op in ops:
        assert op[:2] == ([b"SET", b"u1"] if setting else [b"GET", b"u1"])
        if setting:
            assert op[3] == b"1"
    return [int(op[2]) for op in ops]


@given(keys_st, st.integers(1, 12), st.integers(1, 40), st.integers(1, 6),
       st.integers(0, 2 ** 32 - 1), st.booleans())
def test_core_equals_twin_blocked_shards(core, reference, keys, k, blocks, shards, seed,
                                         setting):
    m = blocks * 512
    per = -(-blocks // shards)
    shards = -(-blocks // per)
    args = (keys, k, m, seed, "blocked", per * 512, shards, setting)
    ops_c, sh_c = core.bloom_resp(*args)
    ops_r, sh_r = reference.bloom_resp(*args)
    assert ops_c == ops_r
    assert sh_c.tolist() == sh_r.tolist()
    # the offsets are the local filter's positions, in Redis's bit order
    seen = {s: [] for s in range(shards)}
    for key, s in zip(keys, sh_c.tolist()):
        seen[s].append(key)
    for s, ops in enumerate(ops_c):
        offsets = parse_ops(ops, setting)
        expected = []
        for key in seen[s]:
            for p in core.hash_indices(key, k, m, seed, "blocked"):
                b = p - s * per * 512
                assert 0 <= b < per * 512
                expected.append((b & ~7) | (7 - (b & 7)))
        assert offsets == expected


@given(keys_st, st.integers(1, 12), st.integers(1, 2 ** 64 - 1), st.booleans())
def test_core_equals_twin_standard(core, reference, keys, k, m, setting):
    args = (keys, k, m, 0, "standard", m, 1, setting)
    assert core.bloom_resp(*args)[0] == reference.bloom_resp(*args)[0]


@pytest.mark.parametrize("args, error", [
    ((["a"], 0, 512, 0, "blocked", 512, 1, True), ValueError),
    ((["a"], 65, 512, 0, "blocked", 512, 1, True), ValueError),
    ((["a"], 3, 500, 0, "blocked", 512, 1, True), ValueError),
    ((["a"], 3, 1024, 0, "blocked", 512, 1, True), ValueError),   # shards do not cover m
    ((["a"], 3, 1024, 0, "standard", 512, 2, True), ValueError),  # standard, 2 shards
    ((["a"], 3, 1024, 0, "blocked", 500, 3, True), ValueError),   # shard not whole blocks
    ((["a"], 3, 1024, 0, "blocked", 512, 0, True), ValueError),
    ((["a"], 3, 1024, -1, "blocked", 512, 2, True), ValueError),
    ((["a"], 3, 1024, 0, "other", 512, 2, True), ValueError),
    ((["a"], 3.0, 1024, 0, "blocked", 512, 2, True), TypeError),
    (([1.5], 3, 1024, 0, "blocked", 512, 2, True), TypeError),
])
def test_bad_arguments(impl, args, error):
    with pytest.raises(error):
        impl.bloom_resp(*args)
