"""BloomFilter.open: state files used in place, by several processes at once;
the tests in one process on each kernel (the ``api`` fixture)."""

import os
import signal
import struct
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import platform_lacks
from crawldedup import BloomFilter, CorruptFileError, IncompatibleFilterError

POSIX = sys.platform != "win32"
FLAGS_AT, COUNT_AT, CHECKSUM_AT = 20, 64, 88


def flags(path):
    with open(path, "rb") as f:
        return struct.unpack_from("<I", f.read(96), FLAGS_AT)[0]


def core_env():
    """Subprocesses use the compiled core: concurrent writers in several
    processes are its guarantee (the pure-Python twin is not atomic)."""
    env = dict(os.environ)
    env.pop("CRAWLDEDUP_PURE_PYTHON", None)
    return env


# ---------------------------------------------------------------- modes

def test_create_add_close_reopen(api, tmp_path):
    path = tmp_path / "s.bloom"
    with api.BloomFilter.open(path, capacity=10_000, error_rate=0.001) as bf:
        assert bf.path == str(path) and not bf.closed
        assert bf.add("a") and not bf.add("a")
        assert bf.add_many(["b", "c", "a"]).tolist() == [True, True, False]
        assert bf.insert_count == 3
        assert flags(path) & 1  # DIRTY while mapped for writing
    assert bf.closed and flags(path) == 0
    loaded = api.BloomFilter.load(path)  # sealed: the checksum is checked
    assert loaded.contains_many(["a", "b", "c"]).all() and loaded.insert_count == 3
    assert (loaded.capacity, loaded.error_rate) == (10_000, 0.001)
    with api.BloomFilter.open(path) as again:  # parameters from the file
        assert again.capacity == 10_000 and "b" in again
        assert again == loaded


def test_modes(api, tmp_path):
    path = tmp_path / "s.bloom"
    with pytest.raises(FileNotFoundError):
        api.BloomFilter.open(path, mode="r")
    with pytest.raises(ValueError, match="capacity is needed"):
        api.BloomFilter.open(path)
    with pytest.raises(ValueError, match="mode must be"):
        api.BloomFilter.open(path, capacity=10, mode="a")
    with api.BloomFilter.open(path, capacity=1000, mode="c") as bf:
        bf.add("kept")
    with api.BloomFilter.open(path, capacity=1000, mode="c") as bf:
        assert "kept" in bf
    with api.BloomFilter.open(path, mode="r") as ro:
        assert ro.readonly and "kept" in ro
        for write in (lambda: ro.add("x"), lambda: ro.add_many(["x"]), ro.clear,
                      lambda: ro.update(["x"])):
            with pytest.raises(ValueError, match="read-only"):
                write()
        ro.flush()  # nothing to do, no error
    with api.BloomFilter.open(path, capacity=500, mode="w") as fresh:
        assert "kept" not in fresh and fresh.capacity == 500


def test_parameters_must_match(api, tmp_path):
    path = tmp_path / "s.bloom"
    api.BloomFilter.open(path, capacity=1000, error_rate=0.01, layout="blocked").close()
    for kwargs, word in [({"capacity": 999}, "capacity 999"),
                         ({"error_rate": 0.1}, "error_rate 0.1"),
                         ({"layout": "standard"}, "layout 'standard'"),
                         ({"seed": 4}, "seed 4")]:
        with pytest.raises(IncompatibleFilterError, match=word):
            api.BloomFilter.open(path, **kwargs)
    with api.BloomFilter.open(path, capacity=1000, layout="blocked") as bf:
        assert bf.layout == "blocked"


def test_closed_filter_refuses_use(api, tmp_path):
    bf = api.BloomFilter.open(tmp_path / "s", capacity=100)
    bf.add("x")
    bf.close()
    bf.close()  # twice is fine
    for use in (lambda: "x" in bf, lambda: bf.add("y"), lambda: bf.contains_many(["x"]),
                lambda: bf.fill_ratio, bf.flush):
        with pytest.raises(ValueError, match="closed"):
            use()


def test_in_memory_filters_accept_close_and_with(api):
    with api.BloomFilter(100) as bf:
        bf.add("x")
        bf.flush()
    assert "x" in bf and bf.path is None and not bf.closed


def test_copies_and_pickles_of_a_mapped_filter_are_in_memory(api, tmp_path):
    import pickle
    with api.BloomFilter.open(tmp_path / "s", capacity=1000) as bf:
        bf.add_many(["a", "b"])
        clone = bf.copy()
        restored = pickle.loads(pickle.dumps(bf))
        bf.save(tmp_path / "snapshot")
    assert clone.path is None and "a" in clone and restored == clone
    assert api.BloomFilter.load(tmp_path / "snapshot") == clone


def test_two_handles_the_last_closer_seals(api, tmp_path):
    path = tmp_path / "s"
    first = api.BloomFilter.open(path, capacity=1000)
    second = api.BloomFilter.open(path)
    first.add("one")
    assert "one" in second  # the same pages
    second.add("two")
    assert second.insert_count == first.insert_count == 2
    first.close()
    assert flags(path) & 1  # second is still writing
    second.close()
    assert flags(path) == 0
    assert api.BloomFilter.load(path).contains_many(["one", "two"]).all()


def test_verify_reads_a_sealed_file(api, tmp_path):
    path = tmp_path / "s"
    with api.BloomFilter.open(path, capacity=1000) as bf:
        bf.add("x")
    data = bytearray(path.read_bytes())
    data[4096 + 17] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match="checksum"):
        api.BloomFilter.open(path)  # small file: verified by default
    with api.BloomFilter.open(path, verify=False, mode="r") as bf:
        assert "x" in bf  # not read whole, not checked


def test_damaged_headers_are_refused(api, tmp_path):
    path = tmp_path / "s"
    path.write_bytes(b"not a crawldedup file at all" * 200)
    with pytest.raises(CorruptFileError, match="signature"):
        api.BloomFilter.open(path)
    path.write_bytes(b"")
    with pytest.raises(CorruptFileError, match="empty"):
        api.BloomFilter.open(path)


# ------------------------------------------------------- several processes

WRITER = textwrap.dedent("""
    import sys
    from crawldedup import BloomFilter
    path, who, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    new = 0
    with BloomFilter.open(path) as bf:
        print("ready", flush=True)
        sys.stdin.readline()  # start together
        keys = [f"{who}-{i}" for i in range(count)]
        for start in range(0, count, 500):
            new += int(bf.add_many(keys[start:start + 250]).sum())
            new += sum(bf.add(k) for k in keys[start + 250:start + 500])
    print(new, flush=True)
""")


@platform_lacks(not POSIX, "shared mappings with flock")
def test_four_processes_add_at_once(tmp_path):
    path = tmp_path / "shared.bloom"
    BloomFilter.open(path, capacity=400_000, error_rate=0.001).close()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"p{n}", "50000"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=core_env())
             for n in range(4)]
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready"
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    reported = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        reported.append(int(out.strip()))
    # The last one out seals the file, unless writers closed at the same
    # instant; then the next process to open it alone does.
    loaded = BloomFilter.load(path)
    for n in range(4):
        assert loaded.contains_many([f"p{n}-{i}" for i in range(50_000)]).all()
    # Every "new" was counted, by every process, in the file's header.
    assert loaded.insert_count == sum(reported)
    assert sum(reported) >= 200_000 - 100  # false "seen" answers are rare
    BloomFilter.open(path).close()
    assert flags(path) == 0
    assert BloomFilter.load(path) == loaded


KILLED = textwrap.dedent("""
    import sys
    from crawldedup import BloomFilter
    bf = BloomFilter.open(sys.argv[1])
    i = 0
    while True:
        key = f"k{i}"
        if i % 3:
            bf.add(key)
        else:
            bf.add_many([key])
        print(key, flush=True)  # after add returned: this key must survive
        i += 1
""")


@platform_lacks(not POSIX, "SIGKILL")
def test_kill_9_loses_no_reported_key(tmp_path):
    path = tmp_path / "s.bloom"
    BloomFilter.open(path, capacity=100_000).close()
    survivors = []
    for attempt in range(4):
        proc = subprocess.Popen([sys.executable, "-c", KILLED, str(path)],
                                stdout=subprocess.PIPE, text=True, env=core_env())
        proc.stdout.readline()
        time.sleep(0.05 + 0.05 * attempt)
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=60)
        survivors += [line for line in out.split() if line.startswith("k")]
        assert flags(path) & 1  # killed while writing: dirty
        # load() accepts a file whose writer was killed (no checksum to test)
        assert BloomFilter.load(path).contains_many(survivors).all()
    # Opening it alone repairs it: checksum recomputed, DIRTY cleared.
    with BloomFilter.open(path) as bf:
        assert bf.contains_many(survivors).all()
    assert flags(path) == 0
    BloomFilter.open(path, verify=True).close()
    assert len(survivors) > 10


def test_mapped_blocked_and_standard_agree_with_memory(api, tmp_path):
    keys = [f"https://e.com/{i}" for i in range(3000)]
    for layout in ("standard", "blocked"):
        memory = api.BloomFilter(5000, 0.01, layout=layout)
        memory.add_many(keys)
        with api.BloomFilter.open(tmp_path / layout, capacity=5000, layout=layout) as mapped:
            mapped.add_many(keys)
            assert mapped == memory
            assert bytes(mapped._bits_view()) == bytes(memory._bits_view())


def test_a_seal_cut_while_it_computes_the_checksum_leaves_a_dirty_file(tmp_path):
    """The seal's pass over the whole file for its checksum is the long part
    of a close: a process killed during it (here: the pass raises) leaves a
    file that still reads DIRTY, which the next open takes as a killed
    writer's, never a clean file whose checksum is stale ("damaged")."""
    path = str(tmp_path / "s.bloom")
    keys = [f"https://a.example/{i}" for i in range(1000)]
    bf = BloomFilter.open(path, capacity=10_000)
    bf.add_many(keys)
    mapping = bf._mapping

    def killed(header=None):
        raise KeyboardInterrupt("killed during the checksum pass")
    mapping.checksum = killed
    with pytest.raises(KeyboardInterrupt):
        mapping.seal()
    mapping.close(seal=False)
    again = BloomFilter.open(path, capacity=10_000, verify=True)
    try:
        assert again.contains_many(keys).all()
    finally:
        again.close()
    assert BloomFilter.load(path).contains_many(keys).all()  # sealed by that close
