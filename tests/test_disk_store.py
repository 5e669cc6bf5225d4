"""DiskStore: an exact fingerprint store on disk (crawldedup.exact.disk).

Held to a Python set over random sequences of adds, lookups, flushes and
reopenings (with a memtable of a few digests, so that spills and merges
happen all the time), on both kernels; and its promises: kill -9, a crash
in a merge, damaged files, a full disk, one process at a time."""

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import examples
from crawldedup import CorruptFileError, StoreLockedError
from crawldedup.exact import disk as disk_module
from crawldedup.exact.stores import open_store

SRC = os.path.dirname(os.path.dirname(os.path.abspath(disk_module.__file__)))


def small(monkeypatch, module, room):
    """A memtable of ``room`` digests: spills and merges at small sizes."""
    monkeypatch.setattr(module.DiskStore, "_memtable_room", lambda self: room)


def digests(rng, n, ds=16):
    return rng.integers(0, 256, (n, ds), dtype=np.uint8).view(f"S{ds}").ravel()


# Digests from a small alphabet repeat often; a few share their first 8
# bytes and differ after (the runs' sort key ties).
DIGEST = st.one_of(
    st.binary(min_size=16, max_size=16),
    st.sampled_from([bytes([i]) * 16 for i in range(6)]),
    st.sampled_from([b"\x07" * 8 + bytes([i]) * 8 for i in range(6)]),
)
OPS = st.lists(st.one_of(
    st.tuples(st.just("add_many"), st.lists(DIGEST, max_size=40)),
    st.tuples(st.just("add"), DIGEST),
    st.tuples(st.just("contains"), st.lists(DIGEST, max_size=20)),
    st.tuples(st.just("flush"), st.none()),
    st.tuples(st.just("reopen"), st.none()),
), max_size=40)


@settings(max_examples=examples(0.3), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(ops=OPS, room=st.integers(1, 12))
def test_against_a_set(api, tmp_path_factory, monkeypatch, ops, room):
    import crawldedup.exact.disk as disk
    small(monkeypatch, disk, room)
    folder = tmp_path_factory.mktemp("disk")
    store = disk.DiskStore(folder)
    model = set()
    try:
        for op, arg in ops:
            if op == "add_many":
                expect, seen = [], set()
                for d in arg:
                    expect.append(d not in model and d not in seen)
                    seen.add(d)
                assert store.add_many(arg).tolist() == expect
                model.update(arg)
            elif op == "add":
                assert store.add(arg) == (arg not in model)
                model.add(arg)
            elif op == "contains":
                assert store.contains_many(arg).tolist() == [d in model for d in arg]
                assert all((d in store) == (d in model) for d in arg)
            elif op == "flush":
                store.flush()
            else:
                store.close()
                store = disk.DiskStore(folder)
            assert len(store) == len(model)
        if model:
            assert store.contains_many(np.array(sorted(model), dtype="S16")).all()
    finally:
        store.close()


def test_many_runs_and_merges_agree_with_a_set(api, tmp_path, monkeypatch):
    import crawldedup.exact.disk as disk
    small(monkeypatch, disk, 500)
    rng = np.random.default_rng(3)
    model = set()
    with disk.DiskStore(tmp_path / "s") as store:
        for _ in range(40):
            batch = digests(rng, 300)
            if model:
                old = np.array(sorted(model)[::7][:100], dtype="S16")
                batch = np.concatenate([batch, old, batch[:30]])
            seen = set()
            expect = []
            for d in batch.tolist():
                expect.append(d not in model and d not in seen)
                seen.add(d)
            assert store.add_many(batch).tolist() == expect
            model.update(batch.tolist())
        # merged as the logarithmic method keeps them: few runs
        assert 1 <= store.runs <= 6
        assert len(store) == len(model)
        absent = digests(rng, 2000)
        assert store.contains_many(absent).tolist() == [d in model for d in absent.tolist()]


def test_a_cascade_of_merges_is_one_pass(tmp_path, monkeypatch):
    """When a spill sets off a cascade of merges (the merged run again at
    least half the one before it), the runs merge in one k-way pass: each
    digest is written once, not once a level."""
    small(monkeypatch, disk_module, 100)
    widths = []
    merged = disk_module._merged
    monkeypatch.setattr(disk_module, "_merged",
                        lambda sources, ds: (widths.append(len(sources)), merged(sources, ds))[1])
    rng = np.random.default_rng(8)
    model = set()
    with disk_module.DiskStore(tmp_path / "s") as store:
        for _ in range(8):
            batch = digests(rng, 100)
            store.add_many(batch)
            model.update(batch.tolist())
        store.add(digests(rng, 1)[0].tobytes())
        store._settle()
        assert max(widths) >= 3
        assert store.runs <= 2
        assert store.contains_many(np.array(sorted(model), dtype="S16")).all()


def test_a_failed_spill_keeps_the_memtable(tmp_path, monkeypatch):
    """A spill that cannot write its run (a full disk) raises OSError and
    leaves the open store as it was: its memtable is rebuilt, and the next
    add spills it."""
    small(monkeypatch, disk_module, 50)
    write_run = disk_module._write_run
    fail = [True]

    def full(path, ds, parts):
        if fail[0]:
            fail[0] = False
            raise OSError(28, "No space left on device")
        return write_run(path, ds, parts)

    monkeypatch.setattr(disk_module, "_write_run", full)
    rng = np.random.default_rng(9)
    first, second = digests(rng, 50), digests(rng, 10)
    with disk_module.DiskStore(tmp_path / "s") as store:
        store.add_many(first)
        with pytest.raises(OSError):
            store.add_many(second)
        assert len(store) == 50 and store.runs == 0
        assert store.contains_many(first).all() and not store.contains_many(second).any()
        assert store.add_many(second).all()
        assert store.runs == 1 and len(store) == 60
        assert not store.add_many(np.concatenate([first, second])).any()
    with disk_module.DiskStore(tmp_path / "s") as store:
        assert len(store) == 60
        assert store.contains_many(np.concatenate([first, second])).all()


def test_a_merge_that_fails_on_its_thread_changes_nothing(tmp_path, monkeypatch):
    """A merge runs on a thread of its own; when it fails (here a full
    disk), the next spill raises its OSError before changing anything, and
    the spill after that goes on (and merges again)."""
    import threading
    small(monkeypatch, disk_module, 100)
    write_run = disk_module._write_run
    failures = []

    def full_on_the_merge_thread(path, ds, parts):
        if threading.current_thread() is not threading.main_thread() and not failures:
            failures.append(path)
            raise OSError(28, "No space left on device")
        return write_run(path, ds, parts)

    monkeypatch.setattr(disk_module, "_write_run", full_on_the_merge_thread)
    rng = np.random.default_rng(10)
    added = [digests(rng, 100) for _ in range(4)]
    with disk_module.DiskStore(tmp_path / "s") as store:
        store.add_many(added[0])
        store.add_many(added[1])  # spills run 1
        store.add_many(added[2])  # spills run 2, whose merge fails on its thread
        with pytest.raises(OSError):
            store.add_many(added[3])  # the spill that would follow it
        assert len(store) == 300 and store.runs == 2
        assert not os.path.exists(failures[0])
        assert store.add_many(added[3]).all()  # spills now, and merges again
        store._settle()
        assert store.runs == 1 and len(store) == 400
        assert store.contains_many(np.concatenate(added)).all()
    with disk_module.DiskStore(tmp_path / "s") as store:
        assert len(store) == 400


def test_close_finishes_a_merge_in_flight(tmp_path, monkeypatch):
    import time
    small(monkeypatch, disk_module, 100)
    merged = disk_module._merged

    def slow(sources, ds):
        time.sleep(0.3)
        return merged(sources, ds)

    monkeypatch.setattr(disk_module, "_merged", slow)
    rng = np.random.default_rng(11)
    batches = [digests(rng, 100) for _ in range(3)]
    store = disk_module.DiskStore(tmp_path / "s")
    for batch in batches:
        store.add_many(batch)  # the third spills run 2: a merge starts
    assert store._merging is not None and store.runs == 2
    store.close()
    names = sorted(n for n in os.listdir(tmp_path / "s") if n.startswith("run-"))
    assert len(names) == 1
    with disk_module.DiskStore(tmp_path / "s") as store:
        assert store.runs == 1 and len(store) == 300
        assert store.contains_many(np.concatenate(batches)).all()


@pytest.mark.parametrize("ds", [1, 4, 8, 9, 20, 32])
def test_digest_sizes(tmp_path, monkeypatch, ds):
    small(monkeypatch, disk_module, 64)
    rng = np.random.default_rng(ds)
    batch = np.unique(digests(rng, 1000, ds)) if ds > 1 else \
        np.array([bytes([i]) for i in range(256)], dtype="S1")
    with disk_module.DiskStore(tmp_path / "s", ds) as store:
        assert store.add_many(batch).all()
        assert not store.add_many(batch).any()
    with disk_module.DiskStore(tmp_path / "s", ds) as store:
        assert len(store) == len(batch)
        assert store.contains_many(batch).all()
    with pytest.raises(ValueError, match="holds"):
        disk_module.DiskStore(tmp_path / "s", ds + 1 if ds < 32 else ds - 1)


def test_bad_input_changes_nothing(tmp_path):
    with disk_module.DiskStore(tmp_path / "s") as store:
        with pytest.raises(ValueError, match="16 bytes"):
            store.add_many([b"a" * 16, b"b" * 15])
        with pytest.raises(TypeError, match="str"):
            store.add_many([b"a" * 16, "b" * 16])
        with pytest.raises(TypeError):
            store.add("x" * 16)
        with pytest.raises(ValueError):
            store.contains_many(np.zeros(3, dtype="S20"))
        assert len(store) == 0
        assert store.add(b"a" * 16)
    with pytest.raises(TypeError, match="memory"):
        disk_module.DiskStore(tmp_path / "t", memory=1.5)
    with pytest.raises(ValueError, match="memory"):
        disk_module.DiskStore(tmp_path / "t", memory=1000)
    with pytest.raises(ValueError, match="closed"):
        store.add(b"a" * 16)


def test_open_store_url_and_clear(tmp_path):
    store = open_store(f"disk:///{tmp_path / 's'}")
    try:
        assert isinstance(store, disk_module.DiskStore)
        assert store.add_many([b"a" * 16, b"b" * 16, b"a" * 16]).tolist() == [True, True, False]
        store.clear()
        assert len(store) == 0 and store.add(b"a" * 16)
    finally:
        store.close()
    with pytest.raises(ValueError, match="disk:///PATH"):
        open_store("disk://")


def test_one_process_at_a_time(tmp_path):
    with disk_module.DiskStore(tmp_path / "s"):
        with pytest.raises(StoreLockedError, match="another process"):
            disk_module.DiskStore(tmp_path / "s")
    disk_module.DiskStore(tmp_path / "s").close()  # released by close


# ---------------------------------------------------------------- damage

def _filled(folder, monkeypatch, n=3000):
    small(monkeypatch, disk_module, 1000)
    rng = np.random.default_rng(5)
    batch = digests(rng, n)
    with disk_module.DiskStore(folder) as store:
        for piece in np.array_split(batch, 6):
            store.add_many(piece)
        assert store.runs >= 1
    return batch


def test_a_damaged_run_is_named(tmp_path, monkeypatch):
    folder = tmp_path / "s"
    _filled(folder, monkeypatch)
    run = sorted(p for p in os.listdir(folder) if p.startswith("run-"))[0]
    path = folder / run
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=run) as info:
        disk_module.DiskStore(folder)
    assert "checksum" in str(info.value)
    # still refused: damage is never merged away
    with pytest.raises(CorruptFileError):
        disk_module.DiskStore(folder)


@pytest.mark.parametrize("cut", ["header", "length"])
def test_a_cut_or_rewritten_run_is_named(tmp_path, monkeypatch, cut):
    folder = tmp_path / "s"
    _filled(folder, monkeypatch)
    path = folder / sorted(p for p in os.listdir(folder) if p.startswith("run-"))[0]
    data = bytearray(path.read_bytes())
    if cut == "header":
        data[12] ^= 1  # the digest size field
    else:
        data = data[:-3]
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=path.name):
        disk_module.DiskStore(folder)


def test_a_damaged_or_missing_manifest_is_named(tmp_path, monkeypatch):
    folder = tmp_path / "s"
    _filled(folder, monkeypatch)
    manifest = folder / "MANIFEST"
    data = manifest.read_bytes()
    manifest.write_bytes(data.replace(b'"next"', b'"nexu"'))
    with pytest.raises(CorruptFileError, match="MANIFEST"):
        disk_module.DiskStore(folder)
    manifest.unlink()
    with pytest.raises(CorruptFileError, match="MANIFEST.*missing"):
        disk_module.DiskStore(folder)


def test_journal_damage_and_torn_tail(tmp_path):
    folder = tmp_path / "s"
    with disk_module.DiskStore(folder) as store:
        for i in range(3):
            store.add_many([bytes([i]) * 16, bytes([i + 100]) * 16])
            store.flush()
    journal = folder / next(p for p in os.listdir(folder) if p.startswith("journal-"))
    whole = journal.read_bytes()
    # a record cut short at the end (an interrupted write): dropped
    journal.write_bytes(whole[:-5])
    with disk_module.DiskStore(folder) as store:
        assert len(store) == 4
        assert store.add(bytes([2]) * 16)  # the cut record's digests are new again
    # a damaged record followed by others: damage
    data = bytearray(whole)
    data[8 + 8 + 3] ^= 1  # in the first record's digests
    journal.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match="journal"):
        disk_module.DiskStore(folder)


# ---------------------------------------------------- processes and crashes

WRITER = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path.insert(0, {src!r})
    from crawldedup.exact import disk
    disk.DiskStore._memtable_room = lambda self: {room}
    rng = np.random.default_rng({seed})
    store = disk.DiskStore({folder!r})
    for i in range(10**9):
        batch = rng.integers(0, 256, (200, 16), dtype=np.uint8).view("S16").ravel()
        new = store.add_many(batch)
        store.flush()
        sys.stdout.write(batch[new].tobytes().hex() + "\\n")
        sys.stdout.flush()
""")


def _acknowledged(out):
    """The digests the killed writer printed whole (flushed before printed)."""
    lines = out.split(b"\n")[:-1]
    return [bytes.fromhex(line[i:i + 32].decode()) for line in lines
            for i in range(0, len(line), 32)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kill_minus_nine_loses_no_flushed_digest(tmp_path, seed):
    folder = str(tmp_path / "s")
    rng = np.random.default_rng(seed)
    code = WRITER.format(src=SRC, room=700, seed=seed, folder=folder)
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE) as proc:
        got = b""
        # kill at a random moment once a few spills and merges have happened
        want = int(rng.integers(4000, 12000))
        while got.count(b"\n") < want // 200:
            chunk = proc.stdout.read1(1 << 16)
            assert chunk, "the writer stopped"
            got += chunk
        proc.send_signal(signal.SIGKILL)
        got += proc.stdout.read()
    acked = _acknowledged(got)
    with disk_module.DiskStore(folder) as store:
        assert store.contains_many(acked).all()  # nothing flushed is lost
        assert not store.add_many(acked).any()  # nor said new twice
        assert len(store) >= len(set(acked))
        assert not [p for p in os.listdir(folder) if p.endswith(".tmp")]


def test_a_crash_in_a_merge_recovers(tmp_path, monkeypatch):
    small(monkeypatch, disk_module, 100)
    folder = tmp_path / "s"
    rng = np.random.default_rng(9)
    model = set()
    store = disk_module.DiskStore(folder)
    batch = digests(rng, 100)
    store.add_many(batch)
    model.update(batch.tolist())
    batch = digests(rng, 100)
    store.add_many(batch)  # the memtable is full now
    model.update(batch.tolist())
    store.flush()
    # the next add spills, and the merge that follows dies after writing
    # its run and before the manifest names it
    real = disk_module.DiskStore._commit
    calls = []

    def crash(self, manifest):
        calls.append(manifest)
        if len(calls) == 2:
            raise KeyboardInterrupt("killed during the merge")
        return real(self, manifest)
    monkeypatch.setattr(disk_module.DiskStore, "_commit", crash)
    with pytest.raises(KeyboardInterrupt):
        store.add(b"\x01" * 16)
        store._settle()  # where the merge's run is committed
    store._release()
    # and a run that a killed process had half written
    (folder / ".run-99.cdr.4242-1.tmp").write_bytes(b"CDDRUN01 half")
    monkeypatch.setattr(disk_module.DiskStore, "_commit", real)
    with disk_module.DiskStore(folder) as again:
        assert len(again) == len(model)
        assert again.contains_many(np.array(sorted(model), dtype="S16")).all()
        names = set(os.listdir(folder))
        assert len([n for n in names if n.startswith("run-")]) == again.runs
        assert not [n for n in names if n.endswith(".tmp")]


FULL_DISK = textwrap.dedent("""
    import resource, signal, sys
    import numpy as np
    sys.path.insert(0, {src!r})
    from crawldedup.exact import disk
    disk.DiskStore._memtable_room = lambda self: 5000
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    store = disk.DiskStore({folder!r})
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, hard))
    rng = np.random.default_rng(4)
    flushed = []
    try:
        for i in range(1000):
            batch = rng.integers(0, 256, (1000, 16), dtype=np.uint8).view("S16").ravel()
            new = store.add_many(batch)
            store.flush()
            flushed.append(batch[new])
    except OSError as exc:
        print("OSError", exc.errno)
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    np.concatenate(flushed).tofile({folder!r} + ".acked")
""")


def test_a_full_disk_is_an_oserror_and_tears_nothing(tmp_path):
    folder = str(tmp_path / "s")
    code = FULL_DISK.format(src=SRC, folder=folder, limit=150_000)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("OSError"), out.stdout
    acked = np.fromfile(folder + ".acked", dtype="S16")
    assert len(acked) > 1000
    with disk_module.DiskStore(folder) as store:
        assert store.contains_many(acked).all()
        assert not store.add_many(acked).any()


def test_damage_after_open_is_not_merged(tmp_path, monkeypatch):
    small(monkeypatch, disk_module, 500)
    rng = np.random.default_rng(8)
    folder = tmp_path / "s"
    store = disk_module.DiskStore(folder)
    try:
        store.add_many(digests(rng, 500))
        store.add_many(digests(rng, 10))  # spills the first run
        run = next(p for p in os.listdir(folder) if p.startswith("run-"))
        with open(folder / run, "r+b") as f:
            f.seek(100)
            byte = f.read(1)
            f.seek(100)
            f.write(bytes([byte[0] ^ 0x40]))
        with pytest.raises(CorruptFileError, match=run):
            for _ in range(3):  # fills the memtable: the next spill merges
                store.add_many(digests(rng, 500))
        assert run in os.listdir(folder)
        assert len([p for p in os.listdir(folder) if p.startswith("run-")]) == 2
    finally:
        store._release()
