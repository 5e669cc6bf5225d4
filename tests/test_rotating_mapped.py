"""RotatingBloomFilter.open: a rotating filter in a memory-mapped file,
shared by processes, rotating once for all of them, surviving kill -9; the
tests in one process on each kernel (the ``api`` fixture)."""

import os
import random
import signal
import struct
import subprocess
import sys
import textwrap
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import examples, platform_lacks
from crawldedup import CorruptFileError, IncompatibleFilterError
from crawldedup.bloom.rotating import RotatingBloomFilter
from crawldedup.formats import files as _files

pytestmark = platform_lacks(sys.platform == "win32", "POSIX file locks")

HEADER = 4096
WORDS = HEADER  # the state block's words start right after the header


class FakeClock:
    def __init__(self, now=0.0):
        self.now = float(now)

    def __call__(self):
        return self.now


def keys(prefix, n, start=0):
    return [f"https://example.com/{prefix}/{i}" for i in range(start, start + n)]


def word(path, index):
    with open(path, "rb") as f:
        f.seek(WORDS + 8 * index)
        return struct.unpack("<Q", f.read(8))[0]


def test_create_add_close_reopen(api, tmp_path):
    path = tmp_path / "seen.rbf"
    clock = FakeClock(1000.0)
    with api.RotatingBloomFilter.open(path, 500, 0.01, 3, rotate_every=60, clock=clock) as rf:
        assert rf.path == str(path) and not rf.closed
        assert rf.add("a") and not rf.add("a")
        assert rf.add_many(["b", "a", "c"]).tolist() == [True, False, True]
        assert rf.last_rotation == 1000.0 and rf.next_rotation == 1060.0
    assert rf.closed
    with pytest.raises(ValueError, match="closed"):
        rf.add("d")
    # Parameters come from the file; the file is sealed (its checksum holds).
    with api.RotatingBloomFilter.open(path, clock=clock) as again:
        assert (again.capacity, again.error_rate, again.generations, again.rotate_every,
                again.rotate_at_fill) == (500, 0.01, 3, 60.0, None)
        assert again.contains_many(["a", "b", "c", "d"]).tolist() == [True, True, True, False]
        assert again.insert_count == 3
    header = _files.parse_header(path.read_bytes()[:HEADER], path.stat().st_size, str(path))
    assert header.flags == 0 and header.insert_count == 3
    loaded = api.RotatingBloomFilter.load(path, clock=clock)
    assert loaded.contains_many(["a", "b", "c", "d"]).tolist() == [True, True, True, False]


def test_parameters_must_match_the_file(api, tmp_path):
    path = tmp_path / "seen.rbf"
    api.RotatingBloomFilter.open(path, 100, 0.01, 2, rotate_every=10, clock=FakeClock()).close()
    with pytest.raises(IncompatibleFilterError, match="generations 3 .*the file has 2"):
        api.RotatingBloomFilter.open(path, generations=3)
    with pytest.raises(IncompatibleFilterError, match="rotate_every 20.0"):
        api.RotatingBloomFilter.open(path, rotate_every=20)
    with pytest.raises(IncompatibleFilterError, match="capacity 99"):
        api.RotatingBloomFilter.open(path, 99)
    with pytest.raises(ValueError, match="capacity is needed"):
        api.RotatingBloomFilter.open(tmp_path / "new.rbf")
    with pytest.raises(ValueError, match="mode must be"):
        api.RotatingBloomFilter.open(path, mode="a")
    assert not (tmp_path / "new.rbf").exists()


def test_read_only_cannot_add_or_rotate(api, tmp_path):
    path = tmp_path / "seen.rbf"
    with api.RotatingBloomFilter.open(path, 100, clock=FakeClock()) as rf:
        rf.add("x")
    before = path.read_bytes()
    with api.RotatingBloomFilter.open(path, mode="r") as ro:
        assert "x" in ro
        with pytest.raises((TypeError, ValueError)):
            ro.add("y")
        with pytest.raises(ValueError, match="read-only"):
            ro.rotate()
    assert path.read_bytes() == before


def test_mode_w_replaces(api, tmp_path):
    path = tmp_path / "seen.rbf"
    with api.RotatingBloomFilter.open(path, 100, clock=FakeClock()) as rf:
        rf.add("x")
    with api.RotatingBloomFilter.open(path, 200, mode="w", clock=FakeClock()) as rf:
        assert rf.capacity == 200 and "x" not in rf


def test_a_big_file_is_reserved_and_opens_without_change(api, tmp_path):
    # 2 x 100M-key generations: the blocks are reserved when the file is
    # made (a full disk fails there, not as SIGBUS later), and opening it
    # (the default verify does not read a file this large) changes nothing.
    path = tmp_path / "big.rbf"
    api.RotatingBloomFilter.open(path, 100_000_000, layout="blocked", clock=FakeClock()).close()
    size = os.path.getsize(path)
    assert size > 200 << 20
    assert os.stat(path).st_blocks * 512 >= size
    before = (os.stat(path).st_mtime_ns, path.read_bytes()[:8192])
    with api.RotatingBloomFilter.open(path, mode="r") as rf:
        assert "x" not in rf
    with api.RotatingBloomFilter.open(path) as rf:
        assert "x" not in rf
    assert (os.stat(path).st_mtime_ns, path.read_bytes()[:8192]) == before


ops = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(0, 40)),
    st.tuples(st.just("add_many"), st.lists(st.integers(0, 40), max_size=12)),
    st.tuples(st.just("in"), st.integers(0, 40)),
    st.tuples(st.just("tick"), st.floats(0, 25)),
    st.tuples(st.just("rotate"), st.none()),
    st.tuples(st.just("reopen"), st.none()),
), max_size=40)


@settings(max_examples=examples(0.2), deadline=None)  # 60 under the ci profile
@given(ops=ops, fill=st.sampled_from([None, 0.25]), every=st.sampled_from([None, 10.0]))
def test_mapped_behaves_like_in_memory(api, tmp_path_factory, ops, fill, every):
    path = tmp_path_factory.mktemp("m") / "seen.rbf"
    clock = FakeClock(100.0)
    memory = api.RotatingBloomFilter(20, 0.05, 3, rotate_every=every, rotate_at_fill=fill,
                                 clock=clock)
    mapped = api.RotatingBloomFilter.open(path, 20, 0.05, 3, rotate_every=every,
                                      rotate_at_fill=fill, clock=clock)
    try:
        for op, arg in ops:
            if op == "add":
                assert mapped.add(f"k{arg}") == memory.add(f"k{arg}")
            elif op == "add_many":
                batch = [f"k{i}" for i in arg]
                assert mapped.add_many(batch).tolist() == memory.add_many(batch).tolist()
            elif op == "in":
                assert (f"k{arg}" in mapped) == (f"k{arg}" in memory)
            elif op == "tick":
                clock.now += arg
            elif op == "rotate":
                mapped.rotate()
                memory.rotate()
            else:
                mapped.close()
                mapped = api.RotatingBloomFilter.open(path, clock=clock)
            assert mapped.rotations == memory.rotations
            assert [f.insert_count for f in mapped.filters] == \
                [f.insert_count for f in memory.filters]
        assert mapped == memory
    finally:
        mapped.close()
    assert api.RotatingBloomFilter.load(path, clock=clock) == memory


def test_two_handles_share_rotations(api, tmp_path):
    # Two mappings of one file (as two processes would have): a rotation by
    # one is seen by the other at its next call, and happens only once.
    path = tmp_path / "seen.rbf"
    clock = FakeClock(0.0)
    a = api.RotatingBloomFilter.open(path, 100, 0.01, 2, rotate_every=10, clock=clock)
    b = api.RotatingBloomFilter.open(path, clock=clock)
    try:
        a.add("old")
        clock.now = 10.0
        assert a.rotate_if_due() == 1
        assert b.rotate_if_due() == 1  # it saw a's rotation, and did not rotate again
        assert a.rotations == b.rotations == 1
        b.add("new")  # into the newest generation, which a sees too
        assert "new" in a.filters[-1] and "old" in a.filters[0]
        clock.now = 20.0
        assert "old" not in b and "new" in b  # b rotates this time
        assert a.rotations == 1 and "old" not in a and a.rotations == 2
        a.rotate()
        assert b.rotations == 2 and "new" not in b and b.rotations == 3
    finally:
        a.close()
        b.close()
    assert api.RotatingBloomFilter.load(path, clock=clock).rotations == 3


def test_rotation_by_fill_happens_once_for_all_handles(api, tmp_path):
    path = tmp_path / "seen.rbf"
    a = api.RotatingBloomFilter.open(path, 100, 0.01, 3, rotate_at_fill=0.1, clock=FakeClock())
    b = api.RotatingBloomFilter.open(path, clock=FakeClock())
    try:
        a.add_many(keys("a", 9))
        b.add("b0")  # the 10th key of the generation: b rotates
        assert a.add("a9") and a.rotations == 1 == b.rotations
        assert [f.insert_count for f in a.filters] == [0, 10, 1]
    finally:
        a.close()
        b.close()


def test_read_only_handle_follows_a_writer(api, tmp_path):
    path = tmp_path / "seen.rbf"
    clock = FakeClock()
    writer = api.RotatingBloomFilter.open(path, 100, 0.01, 2, clock=clock)
    reader = api.RotatingBloomFilter.open(path, mode="r", clock=clock)
    try:
        writer.add("x")
        assert "x" in reader
        writer.rotate()
        writer.rotate()
        assert "x" not in reader and reader.rotations == 2
    finally:
        writer.close()
        reader.close()


def test_a_rotation_left_half_done_is_finished_at_open(api, tmp_path):
    path = tmp_path / "seen.rbf"
    clock = FakeClock(50.0)
    with api.RotatingBloomFilter.open(path, 100, 0.01, 2, clock=clock) as rf:
        rf.add("old")
        rf.rotate()
        rf.add("new")
    # As a writer killed mid-rotation leaves it: the pending rotation (drop
    # one: the slot of "old" becomes the newest), the sequence odd, DIRTY.
    with open(path, "r+b") as f:
        newest = word(path, 6)
        f.seek(WORDS + 8 * 8)
        f.write(struct.pack("<dQQQQ", 60.0, 0, 2, (newest + 1) % 2, 1))
        seq = word(path, 7)
        f.seek(WORDS + 8 * 7)
        f.write(struct.pack("<Q", seq + 1))
    raw = bytearray(path.read_bytes()[:HEADER])
    struct.pack_into("<I", raw, 20, _files.FLAG_DIRTY)
    struct.pack_into("<I", raw, 92, _files.header_checksum(raw))
    with open(path, "r+b") as f:
        f.write(raw)
    assert api.RotatingBloomFilter.load(path).rotations == 2  # load finishes it in memory
    with api.RotatingBloomFilter.open(path, clock=clock) as rf:
        assert rf.rotations == 2 and rf.last_rotation == 60.0
        assert "old" not in rf and "new" in rf.filters[0]
        assert [f.insert_count for f in rf.filters] == [1, 0]
    assert word(path, 7) % 2 == 0
    assert api.RotatingBloomFilter.load(path) .rotations == 2  # sealed, checksum valid


WORKER = textwrap.dedent("""
    import sys
    from crawldedup.bloom.rotating import RotatingBloomFilter
    path, name, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rotations = 0
    with RotatingBloomFilter.open(path) as rf:
        for i in range(rounds):
            rf.add_many([f"{name}/{i}/{j}" for j in range(20)])
            if i % 3 == 0:
                rf.rotate()
                rotations += 1
                print(rotations, flush=True)
    """)


def test_processes_rotating_at_once_each_rotate_exactly_once(tmp_path):
    path = tmp_path / "seen.rbf"
    RotatingBloomFilter.open(path, 10_000, 0.01, 4).close()
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(path), f"p{n}", "60"],
                              stdout=subprocess.PIPE, text=True) for n in range(4)]
    calls = 0
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0
        calls += len(out.split())
    assert calls == 4 * 20
    rf = RotatingBloomFilter.load(path)  # sealed by the last to close
    assert rf.rotations == calls
    assert word(path, 7) == 2 * calls


KILLED = textwrap.dedent("""
    import sys
    from crawldedup.bloom.rotating import RotatingBloomFilter
    with RotatingBloomFilter.open(sys.argv[1]) as rf:
        i = 0
        while True:
            rf.add(f"k{i}")
            if i % 50 == 0:
                rf.rotate()
            i += 1
    """)


def test_kill_9_at_random_moments_leaves_a_file_that_opens(tmp_path):
    path = tmp_path / "seen.rbf"
    RotatingBloomFilter.open(path, 1000, 0.01, 3).close()
    rng = random.Random(5)
    for _ in range(5):
        before = RotatingBloomFilter.load(path).rotations
        proc = subprocess.Popen([sys.executable, "-c", KILLED, str(path)])
        time.sleep(0.3 + rng.random() * 0.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        rf = RotatingBloomFilter.load(path)  # DIRTY, maybe mid-rotation: still loads
        assert rf.rotations >= before
        with RotatingBloomFilter.open(path) as again:  # opened alone: repaired
            assert again.rotations == rf.rotations
            assert sum(f.insert_count for f in again.filters) == again.insert_count
        header = _files.parse_header(path.read_bytes()[:HEADER], path.stat().st_size, str(path))
        assert header.flags == 0


def test_damage_is_found_at_open(api, tmp_path):
    path = tmp_path / "seen.rbf"
    with api.RotatingBloomFilter.open(path, 100) as rf:
        rf.add("x")
    data = bytearray(path.read_bytes())
    data[HEADER + 4096 + 3] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match="checksum"):
        api.RotatingBloomFilter.open(path)
    assert path.read_bytes() == bytes(data)  # refused, and left as it was
