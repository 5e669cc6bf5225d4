"""Files that an open or a load refuses (issue 26, items 9 to 11): a refused
open writes no byte, whatever its flags word reads; ``info --repair`` checks
the bits before it seals; every header and state field is range-checked, so
a crafted file with a recomputed checksum is refused, naming the field.
The tests in one process run on each kernel (the ``api`` fixture)."""

import hashlib
import os
import struct
import subprocess
import sys
import zlib

import pytest

from conftest import platform_lacks
from crawldedup import CorruptFileError, IncompatibleFilterError
from crawldedup.bloom import layouts
from crawldedup.formats import files as _files
from crawldedup.formats import mapped as _mapped

posix_only = platform_lacks(not _mapped.supports_locking(), "needs POSIX flock")

H = _files.HEADER_SIZE


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def patch(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def reseal_header(path, dirty=None):
    """Recompute the header checksum (as a writer does), with DIRTY set or
    cleared when asked: the header then passes its own checksum."""
    with open(path, "r+b") as f:
        head = bytearray(f.read(H))
        if dirty is not None:
            flags = struct.unpack_from("<I", head, _files.FLAGS_AT)[0]
            flags = flags | 1 if dirty else flags & ~1
            struct.pack_into("<I", head, _files.FLAGS_AT, flags)
        struct.pack_into("<I", head, _files.HEADER_CHECKSUM_AT, _files.header_checksum(head))
        f.seek(0)
        f.write(head)


def reseal(path):
    """Recompute both checksums of a clean file: a crafted file that only
    the range checks can refuse."""
    reseal_header(path, dirty=False)
    with open(path, "r+b") as f:
        data = bytearray(f.read())
    data[_files.CHECKSUM_AT:_files.CHECKSUM_AT + 4] = bytes(4)
    crc = zlib.crc32(data) & 0xFFFFFFFF
    patch(path, _files.CHECKSUM_AT, struct.pack("<I", crc))


def make(api, kind, path):
    if kind == "bloom":
        with api.BloomFilter.open(path, capacity=2_000) as bf:
            bf.add_many([f"k{i}" for i in range(300)])
    elif kind == "blocked":
        with api.BloomFilter.open(path, capacity=2_000, layout="blocked") as bf:
            bf.add_many([f"k{i}" for i in range(300)])
    else:
        with api.RotatingBloomFilter.open(path, 1_000, generations=3,
                                          rotate_every=60) as rf:
            rf.add_many([f"k{i}" for i in range(300)])


def opener(api, kind):
    cls = api.RotatingBloomFilter if kind == "rotating" else api.BloomFilter
    return cls.open


KINDS = ["bloom", "blocked", "rotating"]


# -------------------------------------------- 9. a refused open writes nothing

def _foreign(path):
    # Byte 20 (the flags word of a crawldedup file) odd: it reads DIRTY.
    data = bytearray(os.urandom(3 * H))
    data[20] |= 1
    path.write_bytes(bytes(data))


def _foreign_with_magic(path):
    data = bytearray(os.urandom(3 * H))
    data[:8] = _files.MAGIC
    data[20] |= 1
    path.write_bytes(bytes(data))


def _dirty_damaged_capacity(path):
    # A writer killed with the file DIRTY; then a header field is damaged
    # (its header checksum no longer matches).
    reseal_header(path, dirty=True)
    capacity = struct.unpack_from("<Q", path.read_bytes(), 48)[0]
    patch(path, 48, struct.pack("<Q", capacity + 4))


def _dirty_padding_set(path):
    reseal_header(path, dirty=True)
    with open(path, "r+b") as f:
        data = bytearray(f.read())
    # The last byte of the (first) bit array holds padding bits for these
    # sizes; for a rotating file, the byte before the first slot's end.
    kind, layout = struct.unpack_from("<HxxH", data, 10)
    if layout == layouts.BY_NAME["blocked"].id and kind == _files.KIND_BLOOM:
        # Whole 512-bit blocks have no padding: a bit count that is not.
        num_bits = struct.unpack_from("<Q", data, 32)[0]
        patch(path, 32, struct.pack("<Q", num_bits - 64))
        reseal_header(path)
    elif kind == _files.KIND_BLOOM:
        patch(path, len(data) - 1, bytes([data[-1] | 0x80]))
    else:
        num_bits = struct.unpack_from("<Q", data, 32)[0]
        end = 2 * H + (-(-num_bits // 64)) * 8
        patch(path, end - 1, bytes([data[end - 1] | 0x80]))


def _dirty_bad_kind(path):
    reseal_header(path, dirty=True)
    patch(path, 12, struct.pack("<H", 7))  # hash algorithm 7
    reseal_header(path)


DAMAGE = {"foreign": _foreign, "foreign-with-magic": _foreign_with_magic,
          "dirty-damaged-capacity": _dirty_damaged_capacity,
          "dirty-padding-bit": _dirty_padding_set, "dirty-unknown-hash": _dirty_bad_kind}


@posix_only
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("verify", [None, False, True])
def test_a_refused_open_writes_no_byte(api, tmp_path, kind, damage, verify):
    path = tmp_path / "state"
    make(api, kind, path)
    DAMAGE[damage](path)
    before = digest(path)
    for attempt in range(3):
        for mode in ("c", "r", "c"):
            # refused as damaged, or (a foreign file with our signature
            # whose version field reads another number) as another version
            with pytest.raises((CorruptFileError, IncompatibleFilterError)) as raised:
                opener(api, kind)(str(path), mode=mode, verify=verify)
            assert str(path) in str(raised.value)
            assert digest(path) == before, (mode, attempt)


@posix_only
@pytest.mark.parametrize("kind", ["bloom", "blocked"])
def test_a_dirty_file_with_a_damaged_header_stays_refused(api, tmp_path, kind):
    path = tmp_path / "state"
    make(api, kind, path)
    _dirty_damaged_capacity(path)
    for _ in range(2):
        with pytest.raises(CorruptFileError, match="header checksum mismatch"):
            api.BloomFilter.open(str(path))
    with pytest.raises(CorruptFileError, match="header checksum mismatch"):
        api.BloomFilter.load(str(path))


# ------------------------------------- 10. --repair checks before it seals

def _cli(*args):
    return subprocess.run([sys.executable, "-m", "crawldedup", *args], capture_output=True,
                          text=True)


@posix_only
def test_repair_of_a_large_damaged_file_is_refused(tmp_path):
    path = str(tmp_path / "big.bloom")
    # 60,000,000 keys at 1%: 68.6 MiB, sparse apart from a few pages.
    from crawldedup import BloomFilter
    with BloomFilter.open(path, capacity=60_000_000) as bf:
        bf.add("https://g/1")
    size = os.path.getsize(path)
    assert size >= _mapped.VERIFY_BELOW_BYTES
    patch(path, size // 2, b"\x10")
    damaged = digest(path)
    repair = _cli("info", "--repair", path)
    assert repair.returncode == 1, repair.stdout
    assert "checksum mismatch" in repair.stderr and "verified" not in repair.stdout
    assert digest(path) == damaged
    check = _cli("info", "--verify", path)
    assert check.returncode == 1 and "checksum mismatch" in check.stderr


@posix_only
def test_repair_of_a_large_rotating_damaged_file_is_refused(tmp_path):
    path = str(tmp_path / "big.rbf")
    from crawldedup import RotatingBloomFilter
    with RotatingBloomFilter.open(path, 25_000_000, generations=2) as rf:
        rf.add("https://g/1")
    size = os.path.getsize(path)
    assert size >= _mapped.VERIFY_BELOW_BYTES
    patch(path, size - 4096, b"\x01")
    damaged = digest(path)
    repair = _cli("info", "--repair", path)
    assert repair.returncode == 1 and "checksum mismatch" in repair.stderr
    assert digest(path) == damaged


@posix_only
def test_repair_says_what_it_did(tmp_path):
    from crawldedup import BloomFilter
    path = str(tmp_path / "seen.bloom")
    with BloomFilter.open(path, capacity=1_000) as bf:
        bf.add("a")
    reseal_header(path, dirty=True)  # as a killed writer leaves it
    repair = _cli("info", "--repair", path)
    assert repair.returncode == 0, repair.stderr
    assert "checksum: sealed" in repair.stdout
    again = _cli("info", "--repair", path)
    assert "checksum: verified" in again.stdout
    assert _cli("info", "--verify", path).returncode == 0


# ------------------------- 11. every field's range, with recomputed checksums

def _u64(path, offset, value):
    patch(path, offset, struct.pack("<Q", value))


def _f64(path, offset, value):
    patch(path, offset, struct.pack("<d", value))


@pytest.mark.parametrize("layout", ["standard", "blocked"])
@pytest.mark.parametrize("count", [2 ** 63, 2 ** 64 - 1, "64m+1"])
def test_a_bloom_insert_count_out_of_range_is_refused(api, tmp_path, layout, count):
    path = str(tmp_path / "seen.bloom")
    bf = api.BloomFilter(1_000, layout=layout)
    bf.add("a")
    bf.save(path)
    if count == "64m+1":
        count = 64 * bf.num_bits + 1
    _u64(path, _files.COUNT_AT, count)
    reseal(path)
    for read in (api.BloomFilter.load,
                 lambda p: api.BloomFilter.open(p, mode="r"),
                 lambda p: api.BloomFilter.open(p, mode="c")):
        with pytest.raises(CorruptFileError, match=f"insert count {count} out of range"):
            read(path)
    # The largest count in range is read.
    _u64(path, _files.COUNT_AT, 64 * bf.num_bits)
    reseal(path)
    assert api.BloomFilter.load(path).insert_count == 64 * bf.num_bits


def test_a_scalable_member_insert_count_out_of_range_is_refused(api, tmp_path):
    sbf = api.ScalableBloomFilter(100)
    sbf.add("a")
    data = bytearray(sbf.to_bytes())
    # The first member's file follows the header, the 24-byte parameter
    # block and its 8-byte length; its insert count is at 64 in it.
    member = H + 24 + 8
    struct.pack_into("<Q", data, member + _files.COUNT_AT, 2 ** 63)
    head = data[member:member + H]
    struct.pack_into("<I", data, member + _files.HEADER_CHECKSUM_AT,
                     _files.header_checksum(head))
    path = tmp_path / "s.sbf"
    path.write_bytes(bytes(data))
    reseal(str(path))
    with pytest.raises(CorruptFileError, match="insert count 9223372036854775808 out of range"):
        api.ScalableBloomFilter.load(str(path))


def _rotating(api, path, every=60.0):
    rf = api.RotatingBloomFilter(1_000, generations=3, rotate_every=every)
    rf.add("a")
    rf.save(path)


STATE = H  # the state block starts the payload


@pytest.mark.parametrize("every", [60.0, None])
@pytest.mark.parametrize("epoch", [1e308, -1e308, 2.0 ** 53, 1e20])
def test_a_rotating_epoch_out_of_range_is_refused(api, tmp_path, every, epoch):
    path = str(tmp_path / "seen.rbf")
    _rotating(api, path, every)
    _f64(path, STATE + 24, epoch)
    reseal(path)
    for read in (api.RotatingBloomFilter.load,
                 lambda p: api.RotatingBloomFilter.open(p, mode="r"),
                 lambda p: api.RotatingBloomFilter.open(p, mode="c")):
        with pytest.raises(CorruptFileError, match=r"epoch .* outside \(-2\*\*53, 2\*\*53\)"):
            read(path)


def test_a_rotating_pending_epoch_out_of_range_is_refused(api, tmp_path):
    path = str(tmp_path / "seen.rbf")
    _rotating(api, path)
    with open(path, "rb") as f:
        words = struct.unpack_from("<13Q", f.read(STATE + 104), STATE)
    # A rotation in progress (sequence odd) to the next slot, dropping one.
    newest, rotations = words[6], words[5]
    patch(path, STATE + 56, struct.pack("<QdQQQQ", 1, 1e308, 0, rotations + 1,
                                        (newest + 1) % 3, 1))
    reseal(path)
    with pytest.raises(CorruptFileError, match="the rotation in progress: epoch 1e"):
        api.RotatingBloomFilter.load(path)


@pytest.mark.parametrize("where", ["slot", "header"])
def test_a_rotating_insert_count_out_of_range_is_refused(api, tmp_path, where):
    path = str(tmp_path / "seen.rbf")
    _rotating(api, path)
    if where == "slot":
        _u64(path, STATE + 128 + 8, 2 ** 63)
        # the header's count is the sum: make it agree, so that only the
        # range can refuse the file
        with open(path, "rb") as f:
            data = f.read(STATE + 128 + 24)
        total = sum(struct.unpack_from("<3Q", data, STATE + 128)) % 2 ** 64
        _u64(path, _files.COUNT_AT, total)
        match = "slot 1: insert count 9223372036854775808 out of range"
    else:
        reseal_header(path, dirty=True)  # a DIRTY file's header count is not summed
        _u64(path, _files.COUNT_AT, 2 ** 63)
        match = "insert count 9223372036854775808 in the header out of range"
    if where == "slot":
        reseal(path)
    for read in (api.RotatingBloomFilter.load,
                 lambda p: api.RotatingBloomFilter.open(p, mode="r")):
        with pytest.raises(CorruptFileError, match=match):
            read(path)


@pytest.mark.parametrize("now", [1e308, -1e308, 2.0 ** 53])
def test_a_clock_outside_the_time_range_is_refused(api, now):
    rf = api.RotatingBloomFilter(100, generations=2, rotate_every=10, clock=lambda: 0.0)
    rf.add("k")
    rf._clock = lambda: now
    with pytest.raises(ValueError, match=r"clock\(\) returned .* in \(-2\*\*53, 2\*\*53\)"):
        rf.add("j")
    with pytest.raises(ValueError, match=r"clock\(\) returned"):
        api.RotatingBloomFilter(100, generations=2, rotate_every=10, clock=lambda: now)


@pytest.mark.parametrize("value, length", [(5, 8), (0, 2), (255, 3), (-1, 4)])
def test_an_index_int_id_record_not_in_save_form_is_refused(api, tmp_path, value, length):
    index = api.SimhashIndex(k=3)
    index.add("x", 123)  # a str id: the file keeps id records
    index.add(value, 456)
    data = bytearray(index.to_bytes())
    saved = (value.bit_length() + 8) // 8
    # The id records follow the two fingerprints: "x" (tag 1, length 1, "x"),
    # then the int id (tag 0, its length, its bytes).
    at = H + 16 + 5 + 1
    tag, old = struct.unpack_from("<BI", data, at)
    assert (tag, old) == (0, saved)
    record = struct.pack("<BI", 0, length) + value.to_bytes(length, "little", signed=True)
    data[at:at + 5 + saved] = record
    struct.pack_into("<Q", data, 80, len(data) - H)  # payload size
    path = tmp_path / "i.idx"
    path.write_bytes(bytes(data))
    reseal_header(str(path))
    reseal(str(path))
    with pytest.raises(CorruptFileError, match=f"an int id record of {length} bytes for id "
                                               f"{value}"):
        api.SimhashIndex.load(str(path))
    # The file as saved is read back.
    assert api.SimhashIndex.from_bytes(index.to_bytes()).query(456) == [(value, 0)]


@pytest.mark.parametrize("kind", ["fpset", "index"])
def test_a_zero_field_holding_minus_zero_is_refused(api, tmp_path, kind):
    # The error rate field is left at 0 by these kinds: -0.0 compares equal
    # to 0.0, but it is not a file crawldedup wrote.
    if kind == "fpset":
        obj = api.FingerprintSet(16)
        obj.add(b"a" * 16)
        cls, match = api.FingerprintSet, "header fields that fingerprint sets leave at 0"
    else:
        obj = api.SimhashIndex(k=3)
        obj.add(1, 99)
        cls, match = api.SimhashIndex, "fields unused by an index are not zero"
    path = tmp_path / "f"
    path.write_bytes(obj.to_bytes())
    _f64(str(path), 56, -0.0)
    reseal(str(path))
    with pytest.raises(CorruptFileError, match=match):
        cls.load(str(path))


def _rotation_words(path):
    with open(path, "rb") as f:
        return struct.unpack_from("<13Q", f.read(STATE + 104), STATE)


@pytest.mark.parametrize("word, value", [(5, 2 ** 64 - 1), (5, 2 ** 63), (7, 2 ** 64 - 2),
                                         (7, 2 ** 63)])
def test_a_rotation_count_or_sequence_out_of_range_is_refused(api, tmp_path, word, value):
    # Every rotation adds at most g (64) to the count and 2 to the sequence,
    # so no writer reaches 2**63: a file that holds more is refused, not
    # read into a filter whose next rotation overflows its u64 word.
    path = str(tmp_path / "seen.rbf")
    _rotating(api, path)
    _u64(path, STATE + 8 * word, value)
    reseal(path)
    name = "rotation count" if word == 5 else "sequence number"
    for read in (api.RotatingBloomFilter.load,
                 lambda p: api.RotatingBloomFilter.open(p, mode="r"),
                 lambda p: api.RotatingBloomFilter.open(p, mode="c")):
        with pytest.raises(CorruptFileError, match=f"{name} {value} .*2\\*\\*63"):
            read(path)


def test_a_pending_rotation_count_out_of_range_is_refused(api, tmp_path):
    path = str(tmp_path / "seen.rbf")
    _rotating(api, path)
    words = _rotation_words(path)
    newest = words[6]
    # A rotation in progress to the next slot, dropping one, whose count
    # would overflow at the rotation after it.
    patch(path, STATE + 56, struct.pack("<6Q", 1, words[3], 0, 2 ** 64 - 1,
                                        (newest + 1) % 3, 1))
    reseal(path)
    for read in (api.RotatingBloomFilter.load,
                 lambda p: api.RotatingBloomFilter.open(p, mode="r"),
                 lambda p: api.RotatingBloomFilter.open(p, mode="c")):
        with pytest.raises(CorruptFileError,
                           match="the rotation in progress: rotation count 18446744073709551615"):
            read(path)


def test_the_largest_rotation_count_in_range_rotates(api, tmp_path):
    path = str(tmp_path / "seen.rbf")
    _rotating(api, path)
    _u64(path, STATE + 40, 2 ** 63 - 1)
    reseal(path)
    rf = api.RotatingBloomFilter.load(path)
    rf.rotate()
    assert rf.rotations == 2 ** 63
    with api.RotatingBloomFilter.open(path) as mapped:
        mapped.rotate()
        assert mapped.rotations == 2 ** 63


@posix_only
@pytest.mark.parametrize("dirty", [False, True])
def test_a_mapped_rotating_open_refuses_bytes_past_a_slots_bits(api, tmp_path, dirty):
    # load refuses them; open must too, and not seal them in (a DIRTY file
    # is sealed by the writer that has it alone).
    path = str(tmp_path / "seen.rbf")
    _rotating(api, path)
    with open(path, "rb") as f:
        num_bits = struct.unpack_from("<Q", f.read(H), 32)[0]
    nbytes = -(-num_bits // 64) * 8
    assert nbytes % 4096, "the slot must have room past its bits"
    patch(path, 2 * H + nbytes + 5, b"\x01")  # slot 0, past its bits
    reseal(path)
    if dirty:
        reseal_header(path, dirty=True)
    before = digest(path)
    for read in (api.RotatingBloomFilter.load,
                 lambda p: api.RotatingBloomFilter.open(p, mode="r"),
                 lambda p: api.RotatingBloomFilter.open(p, mode="c")):
        with pytest.raises(CorruptFileError, match="slot 0: bytes past its bits are set"):
            read(path)
        assert digest(path) == before


@posix_only
def test_a_mapped_rotating_open_refuses_a_sealed_header_count_the_slots_do_not_hold(
        api, tmp_path):
    path = str(tmp_path / "seen.rbf")
    _rotating(api, path)  # one key: the header's count is 1
    _u64(path, _files.COUNT_AT, 33)
    reseal(path)
    before = digest(path)
    for read in (api.RotatingBloomFilter.load,
                 lambda p: api.RotatingBloomFilter.open(p, mode="r"),
                 lambda p: api.RotatingBloomFilter.open(p, mode="c")):
        with pytest.raises(CorruptFileError,
                           match="insert count 33 in the header, the generations hold 1"):
            read(path)
        assert digest(path) == before
    # A DIRTY file's header count is not up to date: it is read.
    reseal_header(path, dirty=True)
    with api.RotatingBloomFilter.open(path, mode="r") as rf:
        assert "a" in rf


@pytest.mark.parametrize("layout", ["standard", "blocked"])
@pytest.mark.parametrize("field, change", [("num_bits", 1), ("num_bits", -1),
                                           ("num_hashes", 1), ("num_hashes", -1),
                                           ("capacity", 1000)])
def test_a_bloom_sizing_the_parameters_do_not_give_is_refused(api, tmp_path, layout, field,
                                                               change):
    # m or k edited (checksums recomputed) would look for the stored keys at
    # other bits: with m + 1, 295 of 300 stored keys read absent.  A file
    # whose m and k are not what its capacity, error rate and layout size
    # was not written by crawldedup, as for rotating and scalable members.
    path = str(tmp_path / "seen.bloom")
    bf = api.BloomFilter(2_000, layout=layout)
    bf.add_many([f"k{i}" for i in range(300)])
    bf.save(path)
    offset = {"num_bits": 32, "num_hashes": 40, "capacity": 48}[field]
    with open(path, "rb") as f:
        value = struct.unpack_from("<Q", f.read(H), offset)[0]
    if layout == "blocked" and field == "num_bits":
        change *= 512  # whole blocks; the payload size follows
        _u64(path, 80, (value + change) // 8)
        with open(path, "r+b") as f:
            f.truncate(H + (value + change) // 8)
    _u64(path, offset, value + change)
    reseal(path)
    for read in (api.BloomFilter.load,
                 lambda p: api.BloomFilter.open(p, mode="r"),
                 lambda p: api.BloomFilter.open(p, mode="c")):
        with pytest.raises(CorruptFileError, match="do not match the capacity, error rate "
                                                   "and layout"):
            read(path)
