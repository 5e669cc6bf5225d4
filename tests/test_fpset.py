"""FingerprintSet: behaviour against a Python set, files, damage, misuse, on
each kernel (the ``api`` fixture)."""

import copy
import hashlib
import os
import pickle
import struct

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from crawldedup import CorruptFileError, FingerprintSet, IncompatibleFilterError
from crawldedup.exact.fpset import url_digest, url_digests
from crawldedup.formats import files as _files


def md5(text):
    return hashlib.md5(text.encode()).digest()


DIGESTS = st.one_of(st.binary(min_size=16, max_size=16),
                    st.integers(0, 30).map(lambda i: i.to_bytes(16, "big")))


class SetModel(RuleBasedStateMachine):
    """Every operation of FingerprintSet next to the same on a Python set."""

    def __init__(self, api):
        super().__init__()
        self.FingerprintSet = api.FingerprintSet
        self.fps = self.FingerprintSet(16)
        self.model = set()

    @rule(d=DIGESTS)
    def add(self, d):
        assert self.fps.add(d) == (d not in self.model)
        self.model.add(d)

    @rule(ds=st.lists(DIGESTS, max_size=60), as_array=st.booleans())
    def add_many(self, ds, as_array):
        expected, seen = [], set(self.model)
        for d in ds:
            expected.append(d not in seen)
            seen.add(d)
        arg = np.array(ds, dtype="S16") if as_array and ds else ds
        assert self.fps.add_many(arg).tolist() == expected
        self.model = seen

    @rule(ds=st.lists(DIGESTS, max_size=30))
    def contains_many(self, ds):
        assert self.fps.contains_many(ds).tolist() == [d in self.model for d in ds]

    @rule(d=DIGESTS)
    def contains(self, d):
        assert (d in self.fps) == (d in self.model)

    @rule(others=st.lists(DIGESTS, max_size=30))
    def union(self, others):
        other = self.FingerprintSet(16)
        other.add_many(others)
        both = self.fps | other
        assert set(both) == self.model | set(others)
        self.fps |= other
        self.model |= set(others)

    @precondition(lambda self: len(self.model) % 7 == 3)
    @rule()
    def clear(self):
        self.fps.clear()
        self.model.clear()

    @rule()
    def round_trip(self):
        again = self.FingerprintSet.from_bytes(self.fps.to_bytes())
        assert again == self.fps
        self.fps = pickle.loads(pickle.dumps(again))

    @invariant()
    def same(self):
        assert len(self.fps) == len(self.model)
        assert sorted(self.fps) == sorted(self.model)


def test_against_a_set(api):
    run_state_machine_as_test(lambda: SetModel(api))


def test_basics_and_canonical_order(api):
    a, b = api.FingerprintSet(), api.FingerprintSet()
    urls = [f"https://example.com/{i}" for i in range(2000)]
    assert a.add_many([md5(u) for u in urls]).all()
    assert b.add_many(url_digests(reversed(urls))).all()
    assert url_digest(urls[0]) == md5(urls[0]) == url_digest(urls[0].encode())
    # Same digests, any insertion order: equal, same iteration, same file.
    assert a == b and list(a) == list(b) and a.to_bytes() == b.to_bytes()
    assert len(a) == 2000 and md5(urls[5]) in a and md5("nope") not in a
    c = a.copy()
    c.add(md5("extra"))
    assert c != a and len(a) == 2000
    assert copy.deepcopy(a) == a
    assert a.to_array().dtype == np.dtype("S16") and len(a.to_array()) == 2000
    assert repr(a) == "FingerprintSet(digest_size=16, len=2000)"
    with pytest.raises(TypeError):
        hash(a)
    with pytest.raises(ValueError, match="20-byte"):
        a | api.FingerprintSet(20)
    assert (a == 5) is False and a.__or__(5) is NotImplemented


def test_iteration_is_over_a_snapshot(api):
    fps = api.FingerprintSet(4)
    fps.add_many([i.to_bytes(4, "big") for i in range(100)])
    seen = []
    for d in fps:
        seen.append(d)
        fps.add(d[::-1] + b"")  # changing the set does not disturb the loop
    assert len(seen) == 100 and set(seen) == {i.to_bytes(4, "big") for i in range(100)}


def test_save_load(api, tmp_path):
    fps = api.FingerprintSet(20)
    fps.add_many([hashlib.sha1(str(i).encode()).digest() for i in range(5000)])
    fps.add(bytes(20))
    path = tmp_path / "seen.fps"
    fps.save(path)
    assert os.path.getsize(path) == _files.HEADER_SIZE + 5001 * 20
    again = api.FingerprintSet.load(path)
    assert again == fps and again.digest_size == 20 and bytes(20) in again
    empty = api.FingerprintSet()
    empty.save(path)
    assert len(api.FingerprintSet.load(path)) == 0
    # The shared header: kind 5, described by `crawldedup info`.
    with open(path, "rb") as f:
        header = _files.parse_header(f.read(_files.HEADER_SIZE), os.path.getsize(path), path)
    assert header.kind == _files.KIND_FPSET == 5
    assert _files.KIND_NAMES[5] == "fingerprint set"


def test_failed_save_keeps_the_old_file(api, tmp_path, monkeypatch):
    path = tmp_path / "seen.fps"
    good = api.FingerprintSet()
    good.add(md5("a"))
    good.save(path)
    bigger = good.copy()
    bigger.add(md5("b"))

    def boom(self, f):
        f.write(b"partial")
        raise OSError("disk full")
    monkeypatch.setattr(api.FingerprintSet, "_write", boom)
    with pytest.raises(OSError, match="disk full"):
        bigger.save(path)
    monkeypatch.undo()
    assert api.FingerprintSet.load(path) == good
    assert [p.name for p in tmp_path.iterdir()] == ["seen.fps"]


@pytest.fixture
def saved(tmp_path):
    fps = FingerprintSet()
    fps.add_many([md5(str(i)) for i in range(300)])
    path = tmp_path / "seen.fps"
    fps.save(path)
    return path, path.read_bytes()


def test_every_damaged_byte_is_caught(api, saved, tmp_path):
    path, data = saved
    # Every header field and a sample of payload bytes, one bit flipped each.
    spots = list(range(0, 96)) + list(range(_files.HEADER_SIZE, len(data), 97)) + [len(data) - 1]
    for at in spots:
        broken = bytearray(data)
        broken[at] ^= 0x10
        path.write_bytes(bytes(broken))
        with pytest.raises((CorruptFileError, IncompatibleFilterError)):
            api.FingerprintSet.load(path)


def test_truncated_empty_foreign_files(api, saved, tmp_path):
    path, data = saved
    for cut in (0, 5, 100, _files.HEADER_SIZE, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.raises(CorruptFileError):
            api.FingerprintSet.load(path)
    path.write_bytes(data + b"\0")
    with pytest.raises(CorruptFileError, match="unexpected bytes"):
        api.FingerprintSet.load(path)
    path.write_bytes(b"PK\x03\x04" + bytes(5000))
    with pytest.raises(CorruptFileError, match="signature"):
        api.FingerprintSet.load(path)
    bloom = api.BloomFilter(100, 0.01)
    bloom.save(path)
    with pytest.raises(CorruptFileError, match="Bloom filter, not a fingerprint set"):
        api.FingerprintSet.load(path)
    with pytest.raises(CorruptFileError):
        api.FingerprintSet.from_bytes(data[:-16])


def test_well_checksummed_but_out_of_order_payload_is_corrupt(api, saved):
    path, data = saved
    payload = bytearray(data[_files.HEADER_SIZE:])
    payload[:16], payload[16:32] = payload[16:32], payload[:16]
    header = _files.parse_header(data[:_files.HEADER_SIZE], len(data), None)
    header.checksum = _files.checksum(header, bytes(payload))
    forged = bytes(header.pack()) + bytes(payload)
    with pytest.raises(CorruptFileError, match="canonical order"):
        api.FingerprintSet.from_bytes(forged)
    header.insert_count += 1
    header.checksum = _files.checksum(header, bytes(payload))
    with pytest.raises(CorruptFileError, match="does not hold"):
        api.FingerprintSet.from_bytes(bytes(header.pack()) + bytes(payload))


def test_bad_arguments(api):
    with pytest.raises(ValueError, match="digest_size"):
        api.FingerprintSet(0)
    with pytest.raises(TypeError, match="digest_size"):
        api.FingerprintSet("16")
    fps = api.FingerprintSet()
    with pytest.raises(ValueError, match="exactly 16 bytes"):
        fps.add(hashlib.sha1(b"x").digest())
    with pytest.raises(TypeError, match="not str"):
        "https://example.com/" in fps
    with pytest.raises(TypeError):
        fps.add_many(b"0123456789abcdef")
    with pytest.raises(ValueError, match="S16"):
        fps.add_many(np.zeros(2, dtype="S20"))


def test_header_layout_is_frozen(saved):
    _, data = saved
    (magic, version, kind, algorithm, layout, header_size, flags, seed, num_bits, num_hashes,
     capacity, error_rate, count, offset, payload_size, _crc, _hcrc) = struct.unpack_from(
        "<8sHHHHIIQQQQdQQQII", data, 0)
    assert (kind, algorithm, layout, flags, seed, num_bits, num_hashes) == (5, 2, 0, 0, 0, 0, 0)
    assert (capacity, error_rate, count, payload_size) == (16, 0.0, 300, 300 * 16)
