"""FingerprintTable's slots and growth at their edges: every digest size
(a slot is h plus the digest's words after the first, which is recovered
from h), the all-zero digest, digests with equal h or with h = 0, growth
moving the table over while lookups and adds go on, and the memory per
digest that the dense growth keeps."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import examples
from crawldedup._reference.bloom import _fmix64

MASK = (1 << 64) - 1


fmix = _fmix64  # MurmurHash3's finalizer, as the twin has it


def unfmix(k):
    k ^= k >> 33
    k = (k * 0x9CB4B2F8129337DB) & MASK
    k ^= k >> 33
    k = (k * 0x4F74430C22A54005) & MASK
    k ^= k >> 33
    return k


def words(d):
    return [int.from_bytes(d[i:i + 8], "little") for i in range(0, len(d), 8)]


def order(d):
    acc = 0
    for w in words(d):
        acc = fmix(acc ^ w)
    return (acc, *words(d))


def canonical(keys):
    return b"".join(sorted(set(keys), key=order))


def with_hash(h, tail):
    """The digest whose words after the first are `tail` (bytes, at least
    1) and whose hash is h: the first word is peeled out of h, as the core
    does when it reads a slot."""
    ws = words(bytes(8) + tail)
    acc = h
    for w in reversed(ws[1:]):
        acc = unfmix(acc) ^ w
    return unfmix(acc).to_bytes(8, "little") + tail


def test_helpers_agree_with_the_kernels(core, reference):
    assert all(unfmix(fmix(k)) == k for k in (0, 1, MASK, 0x0123456789ABCDEF))
    d = with_hash(12345, b"abcdefghijkl")
    assert core.fp_hash(d) == reference.fp_hash(d) == order(d)[0] == 12345


def sample_digests(ds, rng, count):
    """Random digests plus the ones at the edges of the slot encoding."""
    keys = [rng.bytes(ds) for _ in range(count)]
    keys += [bytes(ds), b"\xff" * ds, b"\x01" + bytes(ds - 1), bytes(ds - 1) + b"\x01"]
    keys += [i.to_bytes(ds, "little") for i in range(1, min(40, 256 ** min(ds, 2)))]
    if ds >= 9:
        tail = ds - 8
        # h = 0 without being the all-zero digest (a full, not an empty, slot)
        keys += [with_hash(0, rng.bytes(tail)) for _ in range(5)]
        keys.append(with_hash(0, b"\x00" * (tail - 1) + b"\x01"))
        # groups sharing one h: ordered by the implied first word
        for h in (1, MASK, int(rng.integers(0, 2**63))):
            keys += [with_hash(h, rng.bytes(tail)) for _ in range(6)]
            keys.append(with_hash(h, bytes(tail)))
    return keys


@pytest.mark.parametrize("ds", range(1, 65))
def test_every_digest_size(impl, ds):
    rng = np.random.default_rng(ds)
    keys = sample_digests(ds, rng, 400)
    absent = [rng.bytes(ds) for _ in range(100)]
    if ds >= 9:
        absent += [with_hash(order(k)[0], rng.bytes(ds - 8)) for k in keys[-20:]]
    absent = [k for k in absent if k not in set(keys)]
    table = impl.FingerprintTable(ds)
    model = set()
    for i, key in enumerate(keys):
        assert table.add(key) == (key not in model)
        model.add(key)
        assert key in table and keys[i // 2] in table
    assert len(table) == len(model)
    assert not table.contains_many(absent).any()
    data = table.to_bytes()
    assert data == canonical(keys)
    # The same set through the batch path and through load: same bytes.
    batch = impl.FingerprintTable(ds)
    assert batch.add_many(keys).tolist() == [
        k not in keys[:i] for i, k in enumerate(keys)]
    assert batch.to_bytes() == data
    again = impl.FingerprintTable(ds)
    again.load(data)
    assert again.to_bytes() == data
    assert again.contains_many(keys).all() and not again.contains_many(absent).any()


@pytest.mark.parametrize("ds", [1, 7, 8, 9, 15, 16, 17, 20, 24, 25, 63, 64])
def test_all_zero_digest(impl, ds):
    zero = bytes(ds)
    table = impl.FingerprintTable(ds)
    assert zero not in table
    assert table.add(zero) and not table.add(zero)
    assert zero in table and len(table) == 1
    assert table.to_bytes() == zero
    others = [i.to_bytes(ds, "big") for i in range(1, 200)] if ds > 1 else [
        bytes([i]) for i in range(1, 200)]
    assert table.add_many(others).all()
    assert table.contains_many([zero] + others).all()
    assert table.to_bytes()[:ds] == zero  # h = 0 and the smallest words: first
    other = impl.FingerprintTable(ds)
    other.add_many(others)
    assert zero not in other
    assert table.to_bytes() == zero + other.to_bytes()


@settings(max_examples=examples(0.3), deadline=None)
@given(st.integers(9, 64), st.lists(st.integers(0, MASK), min_size=1, max_size=8),
       st.integers(1, 12), st.integers(0, 2**32))
def test_equal_hashes_at_every_size(impl, ds, hashes, per_hash, seed):
    # Digests with equal h sort by their words, the first of which the core
    # does not store: it must decode it to compare, on every path.
    rng = np.random.default_rng(seed)
    groups = [[with_hash(h, rng.bytes(ds - 8)) for _ in range(per_hash)] for h in hashes]
    keys = [k for g in groups for k in g]
    rng.shuffle(keys)
    for g in groups:
        assert len({impl.fp_hash(k) for k in g}) == 1
    single = impl.FingerprintTable(ds)
    assert [single.add(k) for k in keys] == [k not in keys[:i] for i, k in enumerate(keys)]
    assert single.to_bytes() == canonical(keys)
    batch = impl.FingerprintTable(ds)
    batch.add_many(keys * 300)  # large enough for the sort-and-merge path
    assert batch.to_bytes() == single.to_bytes()
    probes = [with_hash(h, rng.bytes(ds - 8)) for h in hashes]
    assert single.contains_many(probes).tolist() == [p in set(keys) for p in probes]


def canonical_array(raw, ds):
    """Canonical order of the distinct ds-byte digests concatenated in raw,
    computed with numpy's wrapping uint64 arithmetic."""
    n = len(raw) // ds
    padded = np.zeros((n, (ds + 7) // 8 * 8), dtype=np.uint8)
    padded[:, :ds] = np.frombuffer(raw, dtype=np.uint8).reshape(n, ds)
    w = padded.view("<u8")
    acc = np.zeros(n, dtype=np.uint64)
    for j in range(w.shape[1]):
        k = acc ^ w[:, j]
        k ^= k >> np.uint64(33)
        k *= np.uint64(0xFF51AFD7ED558CCD)
        k ^= k >> np.uint64(33)
        k *= np.uint64(0xC4CEB9FE1A85EC53)
        k ^= k >> np.uint64(33)
        acc = k
    idx = np.lexsort([w[:, j] for j in reversed(range(w.shape[1]))] + [acc])
    return padded[idx, :ds].tobytes()


@pytest.mark.parametrize("ds", [20, 9, 64])
def test_growth_with_lookups_and_memory_bound(core, ds):
    # Single adds through several dense growths, each moving the table over
    # 64 slots per add while its old pages are given back: lookups of
    # earlier, later and absent digests, small batches and repeats between
    # the adds, and the table memory per digest checked all along.
    n = 400_000 if ds == 20 else 150_000
    rng = np.random.default_rng(ds)
    raw = rng.bytes(ds * n)
    keys = [raw[i:i + ds] for i in range(0, len(raw), ds)]
    absent = [rng.bytes(ds) for _ in range(2000)]
    table = core.FingerprintTable(ds)
    slot = max(ds, 8)
    # At most slot * 19/16 per digest once growth is dense (after ~104,000
    # digests), plus the overflow pad and what a growth adds meanwhile:
    # 24.5 bytes for a 20-byte digest, the target.
    bound = slot * 24.5 / 20
    for i, key in enumerate(keys):
        assert table.add(key)
        assert key in table
        assert keys[(i * 7) // 8] in table
        assert absent[i % 2000] not in table
        if i % 50_000 == 25_000:
            assert not table.add_many(keys[i - 100:i + 1]).any()
            assert table.contains_many(keys[: i + 1: 97]).all()
        if i % 101 == 0 and i >= 110_000:
            assert table.nbytes <= bound * len(table), (i, table.nbytes / len(table))
    assert len(table) == n
    assert table.contains_many(keys).all()
    assert not table.contains_many(absent).any()
    assert table.to_bytes() == canonical_array(raw, ds)


def test_twin_memory_estimate_uses_the_slot_size(reference):
    table = reference.FingerprintTable(20)
    table.add_many([i.to_bytes(20, "big") for i in range(1000)])
    assert 20 * 1000 <= table.nbytes <= 24.5 * 1000
    table = reference.FingerprintTable(4)
    table.add_many([i.to_bytes(4, "big") for i in range(1000)])
    assert table.nbytes >= 8 * 1000  # a slot is at least 8 bytes


@pytest.mark.parametrize("ds", [9, 20])
def test_runs_past_the_last_home_slot(impl, ds):
    # Digests whose h are all near 2**64 share the last home slots: their
    # run spills past the table's overflow pad, which must grow (slots and
    # occupancy bits alike), through single adds, batches and load.
    rng = np.random.default_rng(ds)
    top = [with_hash(MASK - i, rng.bytes(ds - 8)) for i in range(3000)]
    spread = [rng.bytes(ds) for _ in range(3000)]
    keys = [k for pair in zip(top, spread) for k in pair]
    table = impl.FingerprintTable(ds)
    for i, key in enumerate(keys):
        assert table.add(key)
        assert keys[i // 3] in table
    assert table.contains_many(keys).all()
    data = table.to_bytes()
    assert data == canonical(keys)
    batch = impl.FingerprintTable(ds)
    assert batch.add_many(keys).all() and batch.to_bytes() == data
    again = impl.FingerprintTable(ds)
    again.load(data)
    assert again.contains_many(keys).all() and again.to_bytes() == data
    more = [with_hash(MASK - 5000 - i, rng.bytes(ds - 8)) for i in range(500)]
    assert again.add_many(more[:100]).all() and all(again.add(k) for k in more[100:])
    assert again.to_bytes() == canonical(keys + more)
