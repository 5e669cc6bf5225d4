"""Regression tests for the integrity findings of issue 11 (section A, and
items 9 and 15): damage is never sealed in as valid, a refused open leaves
nothing behind, a full disk is an OSError, pickles are checksummed, the last
writer seals, a batch is added whole or not at all, load takes paths and
binary files only, and state paths follow symbolic links.  The tests in one
process run on each kernel (the ``api`` fixture)."""

import errno
import fcntl
import hashlib
import io
import multiprocessing
import os
import pickle
import subprocess
import sys
import uuid

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import crawldedup
from conftest import platform_lacks
from crawldedup import BloomFilter, CorruptFileError, RotatingBloomFilter, ScalableBloomFilter
from crawldedup.formats import files as _files
from crawldedup.formats import mapped as _mapped

posix_only = platform_lacks(not _mapped.supports_locking(), "needs POSIX flock")


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def flip(path, offset, mask=0x10):
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ mask]))


def is_dirty(path):
    with open(path, "rb") as f:
        head = f.read(_files.HEADER_SIZE)
    return bool(int.from_bytes(head[_files.FLAGS_AT:_files.FLAGS_AT + 4], "little")
                & _files.FLAG_DIRTY)


def lock_is_free(path):
    """True when another open file description can take the exclusive lock
    (nobody keeps the file open)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def saved_filter(path, n=500, capacity=10_000):
    with BloomFilter.open(path, capacity=capacity) as bf:
        bf.add_many([f"https://a.example/{i}" for i in range(n)])
    assert not is_dirty(path)


# ------------------------------------------------- 1. damage is never sealed

@pytest.mark.parametrize("layout", ["standard", "blocked"])
def test_damage_survives_open_add_close_without_verify(api, tmp_path, layout):
    path = str(tmp_path / "seen.bloom")
    with api.BloomFilter.open(path, capacity=20_000, layout=layout) as bf:
        bf.add_many([f"k{i}" for i in range(2_000)])
    middle = _files.HEADER_SIZE + (os.path.getsize(path) - _files.HEADER_SIZE) // 2
    flip(path, middle)
    damaged = digest(path)
    # An open and close that change nothing leave the file as it was.
    api.BloomFilter.open(path, verify=False).close()
    assert digest(path) == damaged
    # The first add checks the file, refuses, and changes nothing.
    with api.BloomFilter.open(path, verify=False) as bf:
        with pytest.raises(CorruptFileError, match="checksum mismatch"):
            bf.add("https://g/3")
        with pytest.raises(CorruptFileError, match="checksum mismatch"):
            bf.add_many(["https://g/4", "https://g/5"])
        with pytest.raises(CorruptFileError):
            bf.clear()
        assert "k1" in bf  # reads still work
    assert digest(path) == damaged
    with pytest.raises(CorruptFileError, match="checksum mismatch"):
        api.BloomFilter.load(path)
    with pytest.raises(CorruptFileError, match="checksum mismatch"):
        api.BloomFilter.open(path, verify=True)


def test_a_large_file_keeps_its_damage_through_the_command_line(tmp_path):
    # 64 MiB and more: open does not read the bits (the default verify), the
    # first add does, and refuses.
    path = str(tmp_path / "big.bloom")
    with BloomFilter.open(path, capacity=60_000_000) as bf:
        assert os.path.getsize(path) >= _mapped.VERIFY_BELOW_BYTES
        bf.add("https://g/1")
    flip(path, os.path.getsize(path) // 2)
    damaged = digest(path)
    run = subprocess.run([sys.executable, "-m", "crawldedup", "urls", "-", "--state", path],
                         input=b"https://g/3\n", capture_output=True)
    assert run.returncode == 1, run.stderr
    assert b"checksum mismatch" in run.stderr and b"Traceback" not in run.stderr
    assert run.stdout == b""
    assert digest(path) == damaged
    info = subprocess.run([sys.executable, "-m", "crawldedup", "info", "--verify", path],
                          capture_output=True)
    assert info.returncode == 1 and b"checksum mismatch" in info.stderr


def test_rotating_damage_survives_open_and_close(api, tmp_path):
    path = str(tmp_path / "seen.rbf")
    with api.RotatingBloomFilter.open(path, 1_000, rotate_every=86_400) as rf:
        rf.add_many([f"k{i}" for i in range(100)])
    # rotate_every is the second field of the state block (docs/format.md):
    # flip a mantissa bit, so that it stays a valid period.
    flip(path, _files.HEADER_SIZE + 8 + 2, 0x02)
    damaged = digest(path)
    for mode in ("c", "r"):
        with api.RotatingBloomFilter.open(path, mode=mode, verify=False) as rf:
            assert rf.rotate_every != 86_400
            if mode == "c":
                with pytest.raises(CorruptFileError, match="checksum mismatch"):
                    rf.add("new")
    assert digest(path) == damaged
    with pytest.raises(CorruptFileError, match="checksum mismatch"):
        api.RotatingBloomFilter.load(path)


def test_writers_opening_a_damaged_file_after_another_writer_began(api, tmp_path):
    # A file already DIRTY was checked by the writer that marked it; a
    # second writer joins without checking, and the last to close seals.
    path = str(tmp_path / "seen.bloom")
    saved_filter(path)
    a = api.BloomFilter.open(path)
    a.add("from-a")
    assert is_dirty(path)
    b = api.BloomFilter.open(path, verify=True)  # DIRTY: not checkable, not refused
    b.add("from-b")
    a.close()
    assert is_dirty(path)  # b still has it open
    b.close()
    assert not is_dirty(path)
    loaded = api.BloomFilter.load(path)
    assert "from-a" in loaded and "from-b" in loaded


# ------------------------------------------ 2, 3. a refused open leaves nothing

@posix_only
@pytest.mark.parametrize("mode", ["c", "r"])
def test_refused_open_with_padding_bit_set(api, tmp_path, mode):
    path = str(tmp_path / "seen.bloom")
    with api.BloomFilter.open(path, capacity=1_000) as bf:  # 9,586 bits: 50 bits of padding
        bf.add("x")
        assert bf.num_bits % 64
    flip(path, os.path.getsize(path) - 1, 0x80)
    before = digest(path)
    for _ in range(2):  # a second open in the same process must not deadlock
        with pytest.raises(CorruptFileError, match="padding bits") as raised:
            api.BloomFilter.open(path, mode=mode, verify=False)
        assert path in str(raised.value)
        assert lock_is_free(path)
    assert digest(path) == before


@posix_only
@pytest.mark.parametrize("offset, mask", [
    (0, 0x01),           # generations
    (0, 0x40),
    (8 * 6, 0x01),       # newest slot
    (8 * 6 + 7, 0x80),
    (8 * 1 + 7, 0x80),   # rotate_every: negative
])
@pytest.mark.parametrize("mode", ["c", "r"])
def test_refused_rotating_open_is_a_corrupt_file_error(api, tmp_path, offset, mask, mode):
    path = str(tmp_path / "seen.rbf")
    with api.RotatingBloomFilter.open(path, 1_000, generations=3, rotate_every=60) as rf:
        rf.add("x")
    flip(path, _files.HEADER_SIZE + offset, mask)
    before = digest(path)
    with pytest.raises(CorruptFileError) as raised:
        api.RotatingBloomFilter.open(path, mode=mode, verify=False)
    assert path in str(raised.value)
    assert lock_is_free(path)
    assert digest(path) == before
    with pytest.raises(CorruptFileError):
        api.RotatingBloomFilter.load(path)


# ------------------------------------------------------- 4. a full disk

@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs mounted for the test (needs the right to mount)."""
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)],
                             capture_output=True)
    if mounted.returncode != 0:
        if os.environ.get("CRAWLDEDUP_REQUIRE_SERVICES"):
            pytest.fail(f"cannot mount a small tmpfs: {mounted.stderr.decode().strip()}")
        pytest.skip(f"mounting a small file system is not permitted here: "
                    f"{mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def test_a_full_disk_is_an_oserror_at_open(api, small_disk):
    path = str(small_disk / "seen.bloom")
    with pytest.raises(OSError) as raised:
        api.BloomFilter.open(path, capacity=10_000_000)  # 12 MB on a 2 MiB disk
    assert raised.value.errno == errno.ENOSPC
    assert "seen.bloom" in str(raised.value)
    assert os.listdir(small_disk) == []  # no file, no temporary file left
    with pytest.raises(OSError) as raised:
        api.RotatingBloomFilter.open(str(small_disk / "r.rbf"), 1_000_000)
    assert raised.value.errno == errno.ENOSPC
    assert os.listdir(small_disk) == []


_FILL_LATER = """
import sys
from crawldedup import BloomFilter
with BloomFilter.open(sys.argv[1], capacity=500_000) as bf:
    with open(sys.argv[2], "wb") as f:  # fill the rest of the disk
        try:
            while True:
                f.write(b"x" * 65536)
                f.flush()
        except OSError:
            pass
    fresh = bf.add_many([f"https://a.example/{i}" for i in range(200_000)])
    print(int(fresh.sum()))
"""


def test_a_disk_that_fills_later_cannot_kill_the_adds(small_disk):
    # The file's blocks were reserved when it was made: adds into holes of a
    # sparse file would raise SIGBUS once the disk is full.
    run = subprocess.run([sys.executable, "-c", _FILL_LATER, str(small_disk / "seen.bloom"),
                          str(small_disk / "filler")], capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr.decode()
    assert int(run.stdout) > 190_000
    assert "https://a.example/7" in BloomFilter.load(small_disk / "seen.bloom")


# --------------------------------------------------------- 5. pickles

def test_fingerprint_set_pickles_carry_the_checksum(api):
    fs = api.FingerprintSet(16)
    fs.add_many(np.array([bytes([i]) * 16 for i in range(3)], dtype="S16"))
    data = pickle.dumps(fs)
    assert pickle.loads(data) == fs
    core = fs.to_bytes()
    at = data.index(core[:64])
    damaged = 0
    for bit in range(0, 8 * len(core), 97):  # single-bit flips across the whole file
        bad = bytearray(data)
        bad[at + bit // 8] ^= 1 << (bit % 8)
        try:
            pickle.loads(bytes(bad))
        except CorruptFileError:
            damaged += 1
        except Exception as exc:  # pragma: no cover - the point of the test
            pytest.fail(f"flip {bit}: {type(exc).__name__}: {exc}")
        else:
            pytest.fail(f"flip of bit {bit} loaded silently")
    assert damaged > 300


def test_simhash_index_pickles(api):
    index = api.SimhashIndex(k=3)
    index.add_many(list(range(50)), [i * 0x9E3779B97F4A7C15 % 2**64 for i in range(50)])
    index.add("doc", 12345)
    copy = pickle.loads(pickle.dumps(index))
    assert len(copy) == len(index) == 51 and copy.k == 3
    assert sorted(map(str, copy.query(12345))) == sorted(map(str, index.query(12345)))
    data = bytearray(pickle.dumps(index))
    data[len(data) // 2] ^= 0x04
    with pytest.raises(CorruptFileError):
        pickle.loads(bytes(data))


@pytest.mark.parametrize("make", [
    lambda api: api.BloomFilter(1_000),
    lambda api: api.ScalableBloomFilter(100),
    lambda api: api.RotatingBloomFilter(1_000, generations=3),
])
def test_filter_pickles_carry_the_checksum(api, make):
    f = make(api)
    f.add_many([f"k{i}" for i in range(50)])
    data = bytearray(pickle.dumps(f))
    assert pickle.loads(bytes(data)) == f
    data[len(data) - 100] ^= 0x01
    with pytest.raises(CorruptFileError):
        pickle.loads(bytes(data))


# ------------------------------------------------ 6. the last writer seals

def _writer(path, barrier, index):
    bf = BloomFilter.open(path)
    bf.add_many([f"{index}-{i}" for i in range(200)])
    barrier.wait()
    bf.close()


@posix_only
def test_writers_closing_at_the_same_instant_leave_the_file_sealed(tmp_path):
    context = multiprocessing.get_context("fork")
    for run in range(6):
        path = str(tmp_path / f"seen-{run}.bloom")
        saved_filter(path)
        barrier = context.Barrier(4)
        procs = [context.Process(target=_writer, args=(path, barrier, i)) for i in range(4)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
        assert not is_dirty(path), f"run {run}: DIRTY after every writer closed"
        loaded = BloomFilter.load(path)
        assert all(f"{i}-{j}" in loaded for i in range(4) for j in range(0, 200, 17))


@posix_only
def test_a_writer_that_added_nothing_seals_what_another_left(api, tmp_path):
    path = str(tmp_path / "seen.bloom")
    saved_filter(path)
    idle = api.BloomFilter.open(path)
    busy = api.BloomFilter.open(path)
    busy.add("new")
    busy.close()
    assert is_dirty(path)
    idle.close()
    assert not is_dirty(path)
    assert "new" in api.BloomFilter.load(path)


# -------------------------------------------- 7. a batch is whole or nothing

def _filters(tmp_path):
    yield BloomFilter(100_000)
    yield BloomFilter(100_000, layout="blocked")
    yield BloomFilter.open(str(tmp_path / f"{uuid.uuid4().hex}.bloom"), capacity=100_000)
    yield ScalableBloomFilter(1_000)
    yield RotatingBloomFilter(100_000, generations=3, rotate_at_fill=0.5)
    yield RotatingBloomFilter.open(str(tmp_path / f"{uuid.uuid4().hex}.rbf"), 100_000,
                                   rotate_at_fill=0.5)


@pytest.mark.parametrize("bad", [None, 3, "\ud800", memoryview(b"abcd")[::2]])
@pytest.mark.parametrize("size", [1, 511, 512, 50_000])
def test_a_batch_with_a_bad_key_adds_nothing(api, tmp_path, bad, size):
    keys = [f"k{i}" for i in range(size)] + ["中文-" + str(size), b"raw", bad]
    for f in _filters(tmp_path):
        empty = f.copy() if not getattr(f, "path", None) else None
        with pytest.raises((TypeError, UnicodeEncodeError)) as raised:
            f.add_many(keys)
        if isinstance(raised.value, TypeError):
            assert f"keys[{len(keys) - 1}]" in str(raised.value)
        assert f.insert_count == 0, type(f).__name__
        assert not f.contains_many(keys[:-1]).any(), type(f).__name__
        if empty is not None:
            assert f == empty
        # The retry reports the keys new (but for a few false positives
        # among themselves in the largest batch).
        assert f.add_many(keys[:-1]).mean() > 0.99
        if hasattr(f, "close"):
            f.close()


# ------------------------------------------------ 9. load takes what it says

@pytest.mark.parametrize("cls", ["BloomFilter", "ScalableBloomFilter", "RotatingBloomFilter",
                                 "FingerprintSet", "SimhashIndex"])
def test_load_refuses_anything_but_a_path_or_a_binary_file(api, tmp_path, cls):
    cls = getattr(api, cls)
    for bad in (0, 3.5, None, b"/tmp/x", ["x"]):
        with pytest.raises(TypeError, match="path|file"):
            cls.load(bad)
    os.fstat(0)  # stdin was not closed
    made = {api.BloomFilter: lambda: api.BloomFilter(100),
            api.ScalableBloomFilter: lambda: api.ScalableBloomFilter(100),
            api.RotatingBloomFilter: lambda: api.RotatingBloomFilter(100),
            api.FingerprintSet: lambda: api.FingerprintSet(16),
            api.SimhashIndex: lambda: api.SimhashIndex()}[cls]()
    if cls is api.FingerprintSet:
        made.add(b"x" * 16)
    elif cls is api.SimhashIndex:
        made.add(1, 99)
    else:
        made.add("x")
    path = tmp_path / "state"
    made.save(path)
    with open(path, "rb") as f:
        loaded = cls.load(f)
    assert loaded == made if cls is not api.SimhashIndex else len(loaded) == 1
    def size(x):
        return len(x) if cls in (api.FingerprintSet, api.SimhashIndex) else x.insert_count
    assert size(cls.load(io.BytesIO(path.read_bytes()))) == size(made)
    with open(path, "r", encoding="latin-1") as text:
        with pytest.raises(TypeError, match="binary"):
            cls.load(text)
    damaged = bytearray(path.read_bytes())
    damaged[-1] ^= 1
    with pytest.raises(CorruptFileError):
        cls.load(io.BytesIO(bytes(damaged)))


# --------------------------------------------------------- 15. symlinks

def test_save_writes_through_a_symlink(api, tmp_path):
    target = tmp_path / "real.bloom"
    link = tmp_path / "link.bloom"
    api.BloomFilter(100).save(target)
    link.symlink_to(target)
    bf = api.BloomFilter(100)
    bf.add("x")
    bf.save(link)
    assert link.is_symlink()
    assert "x" in api.BloomFilter.load(target)
    fs = api.FingerprintSet(16)
    fs.add(b"y" * 16)
    fs.save(link)
    assert link.is_symlink() and b"y" * 16 in api.FingerprintSet.load(target)


@pytest.mark.parametrize("cls", ["BloomFilter", "RotatingBloomFilter"])
def test_open_for_writing_goes_through_a_symlink(api, tmp_path, cls):
    cls = getattr(api, cls)
    target = tmp_path / "real"
    link = tmp_path / "link"
    link.symlink_to(target)  # dangling: open creates the target
    with cls.open(link, 100) as f:
        f.add("x")
    assert link.is_symlink() and target.exists()
    with cls.open(link, 100, mode="w") as f:  # replaces the target, keeps the link
        f.add("y")
    assert link.is_symlink()
    with cls.open(target, mode="r") as f:
        assert "y" in f and "x" not in f


def test_opening_a_folder_names_it(api, tmp_path):
    for mode in ("r", "c"):
        with pytest.raises(OSError) as raised:
            api.BloomFilter.open(tmp_path, mode=mode)
        assert str(tmp_path) in str(raised.value)
    with pytest.raises(OSError) as raised:
        api.RotatingBloomFilter.open(tmp_path, mode="r")
    assert str(tmp_path) in str(raised.value)


def test_the_package_still_exports_what_it_did():
    assert crawldedup.BloomFilter is BloomFilter


# ------------------------------------------- check_keys: core against twin


_any_key = st.one_of(
    st.text(max_size=20), st.binary(max_size=20),
    st.text(alphabet=st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010), max_size=5),
    st.text(alphabet=st.characters(min_codepoint=0x1F600, max_codepoint=0x1F64F), max_size=5),
    st.builds(bytearray, st.binary(max_size=8)),
    st.none(), st.integers(), st.floats(allow_nan=False),
    st.builds(lambda b: memoryview(b)[::2], st.binary(min_size=2, max_size=8)),
)


def _outcome(check, keys):
    try:
        check(keys)
    except (TypeError, UnicodeEncodeError) as exc:
        message = str(exc)
        return type(exc).__name__, message.split(":")[0] if isinstance(exc, TypeError) else ""
    return None


@given(st.lists(_any_key, max_size=30), st.booleans())
def test_check_keys_core_and_twin_agree(core, reference, keys, as_tuple):
    keys = tuple(keys) if as_tuple else keys
    expected = _outcome(reference.check_keys, keys)
    assert _outcome(core.check_keys, keys) == expected
    # A batch that check_keys accepts is added whole; one it refuses, not at all.
    bits = core.BloomBits()
    bits._init_bits(4096, 3)
    if expected is None:
        assert len(bits.add_many(keys)) == len(keys)
    else:
        with pytest.raises((TypeError, UnicodeEncodeError)):
            bits.add_many(keys)
        assert bits._popcount() == 0 and bits.insert_count == 0


# ------------- a rotation whose writer was killed while publishing it

@pytest.mark.parametrize("copied", [0, 1, 2, 3, 4])
def test_a_rotation_killed_while_published_is_finished_right(api, tmp_path, copied):
    import struct

    from crawldedup.bloom import rotating_file as state
    path = tmp_path / "seen.rbf"
    with api.RotatingBloomFilter.open(path, 1_000, generations=3) as rf:
        rf.add("x")
        rf.rotate()
        rf.add("a")
        rf.rotate()
        rf.add("b")
    data = bytearray(path.read_bytes())
    base = _files.HEADER_SIZE

    def word(i, value=None):
        if value is None:
            return struct.unpack_from("<Q", data, base + 8 * i)[0]
        struct.pack_into("<Q", data, base + 8 * i, value)
    # What _shared_rotation writes for one dropped generation, then the live
    # words copied from the pending ones one by one, the writer killed after
    # `copied` of them (the dropped slot not cleared in every case).
    newest, rotations = word(state.W_NEWEST), word(state.W_ROTATIONS)
    word(state.W_P_EPOCH, word(state.W_EPOCH))
    word(state.W_P_PERIODS, word(state.W_PERIODS))
    word(state.W_P_ROTATIONS, rotations + 1)
    word(state.W_P_NEWEST, (newest + 1) % 3)
    word(state.W_DROPS, 1)
    word(state.W_SEQUENCE, word(state.W_SEQUENCE) + 1)
    for live, pending in ((state.W_EPOCH, state.W_P_EPOCH), (state.W_PERIODS, state.W_P_PERIODS),
                          (state.W_ROTATIONS, state.W_P_ROTATIONS),
                          (state.W_NEWEST, state.W_P_NEWEST))[:copied]:
        word(live, word(pending))
    flags = _files.FLAGS_AT
    data[flags:flags + 4] = (_files.FLAG_DIRTY).to_bytes(4, "little")
    data[_files.HEADER_CHECKSUM_AT:_files.HEADER_CHECKSUM_AT + 4] = \
        _files.header_checksum(data).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    loaded = api.RotatingBloomFilter.load(path)
    assert ("x" in loaded, "a" in loaded, "b" in loaded) == (False, True, True)
    assert loaded.rotations == rotations + 1
    with api.RotatingBloomFilter.open(path) as rf:  # alone: finishes it and seals
        assert ("x" in rf, "a" in rf, "b" in rf) == (False, True, True)
        assert rf.rotations == rotations + 1
    assert not is_dirty(path)
    assert api.RotatingBloomFilter.load(path) == loaded


@pytest.mark.parametrize("error", [
    crawldedup.CorruptFileError("s.bloom", "header checksum mismatch"),
    crawldedup.CorruptFileError(None, "truncated"),
    crawldedup.CorruptDatabaseError("seen.db", "database disk image is malformed"),
    crawldedup.CorruptStateError("redis://127.0.0.1:6379/0 key 'x'", "not a hash"),
    crawldedup.IncompatibleFilterError("other parameters"),
    crawldedup.StoreUnavailableError("down"),
])
def test_errors_pickle_with_their_fields(error):
    """A worker's error reaches its parent pickled (Spark, multiprocessing)."""
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error)
    assert vars(copy) == vars(error)
