"""The state file format: damaged files are refused by name, saves are atomic.

Every corrupt-file case loads in a fresh subprocess, so a crash (not just a
wrong answer) fails the test.
"""

import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import examples, platform_lacks
from crawldedup import (
    BloomFilter,
    CorruptFileError,
    CrawldedupError,
    IncompatibleFilterError,
    hash_indices,
)
from crawldedup.formats import files as _files

HEADER = 4096


def sample(capacity=1000, keys=50):
    bf = BloomFilter(capacity, 0.01)  # 9586 bits: the last word has padding bits
    bf.add_many([f"https://example.com/{i}" for i in range(keys)])
    return bf


def reseal(data):
    """Recompute the checksum so that only the deliberate fault remains."""
    data = bytearray(data)
    data[92:96] = struct.pack("<I", _files.header_checksum(data))
    data[88:92] = b"\0\0\0\0"
    crc = zlib.crc32(bytes(data[:HEADER]))
    crc = zlib.crc32(bytes(data[HEADER:]), crc)
    data[88:92] = struct.pack("<I", crc)
    return bytes(data)


def patch(data, offset, fmt, value):
    data = bytearray(data)
    struct.pack_into(fmt, data, offset, value)
    return reseal(data)


GOOD = sample().to_bytes()
N = len(GOOD)


def flip(data, offset, bit=0):
    data = bytearray(data)
    data[offset] ^= 1 << bit
    return bytes(data)


CASES = {
    "empty": (b"", CorruptFileError, "empty"),
    "text": (b"https://example.com/\n" * 10, CorruptFileError, "signature"),
    "png": (b"\x89PNG\r\n\x1a\n" + bytes(5000), CorruptFileError, "signature"),
    "magic only": (GOOD[:8], CorruptFileError, "truncated"),
    "half header": (GOOD[:2000], CorruptFileError, "truncated"),
    "header only": (GOOD[:HEADER], CorruptFileError, "truncated"),
    "payload cut": (GOOD[:HEADER + 100], CorruptFileError, "truncated"),
    "last byte cut": (GOOD[:-1], CorruptFileError, "truncated"),
    "trailing junk": (GOOD + b"\0", CorruptFileError, "unexpected bytes"),
    "flip in payload": (flip(GOOD, HEADER + 300, 3), CorruptFileError, "checksum"),
    "flip in last byte": (flip(GOOD, N - 1, 7), CorruptFileError, "checksum"),
    "flip in num_bits": (flip(GOOD, 32, 0), CorruptFileError, "payload|checksum"),
    "flip in num_hashes": (flip(GOOD, 40, 1), CorruptFileError, "checksum"),
    "flip in capacity": (flip(GOOD, 48, 2), CorruptFileError, "checksum"),
    "flip in error rate": (flip(GOOD, 56, 5), CorruptFileError, "checksum"),
    "flip in insert count": (flip(GOOD, 64, 0), CorruptFileError, "checksum"),
    "flip in checksum": (flip(GOOD, 90, 0), CorruptFileError, "checksum"),
    "flip in reserved": (flip(GOOD, 3000, 0), CorruptFileError, "header checksum"),
    "reserved set, header resealed": (reseal(flip(GOOD, 3000, 0)), CorruptFileError, "reserved"),
    "flip in the DIRTY flag": (flip(GOOD, 20, 0), CorruptFileError, "header checksum"),
    "future version": (patch(GOOD, 8, "<H", 2), IncompatibleFilterError, "version 2"),
    "absurd version": (patch(GOOD, 8, "<H", 60000), CorruptFileError, "version"),
    "other kind": (patch(GOOD, 10, "<H", 7), CorruptFileError, "kind 7"),
    "other hash": (patch(GOOD, 12, "<H", 9), CorruptFileError, "hash algorithm"),
    "other layout": (patch(GOOD, 14, "<H", 3), CorruptFileError, "layout"),
    "flags": (patch(GOOD, 20, "<I", 2), CorruptFileError, "flags"),
    "zero bits": (patch(GOOD, 32, "<Q", 0), CorruptFileError, "num_bits"),
    "huge bits": (patch(GOOD, 32, "<Q", 2 ** 63), CorruptFileError, "num_bits"),
    "zero hashes": (patch(GOOD, 40, "<Q", 0), CorruptFileError, "num_hashes"),
    "many hashes": (patch(GOOD, 40, "<Q", 1000), CorruptFileError, "num_hashes"),
    "bad error rate": (patch(GOOD, 56, "<d", 1.5), CorruptFileError, "error_rate"),
    "nan error rate": (patch(GOOD, 56, "<d", float("nan")), CorruptFileError, "error_rate"),
    "zero capacity": (patch(GOOD, 48, "<Q", 0), CorruptFileError, "capacity"),
    "big seed": (patch(GOOD, 24, "<Q", 2 ** 40), CorruptFileError, "seed"),
    "payload size lies": (patch(GOOD, 80, "<Q", 8), CorruptFileError, "unexpected bytes"),
    "huge payload size": (patch(GOOD, 80, "<Q", 2 ** 62), CorruptFileError, "truncated"),
    "padding bit set": (reseal(flip(GOOD, N - 1, 7)), CorruptFileError, "padding"),
}

LOADER = textwrap.dedent("""
    import json, sys
    from crawldedup import BloomFilter, CrawldedupError
    path, how = sys.argv[1], sys.argv[2]
    try:
        if how == "load":
            BloomFilter.load(path)
        else:
            BloomFilter.from_bytes(open(path, "rb").read())
    except CrawldedupError as exc:
        print(json.dumps([type(exc).__name__, str(exc)]))
    else:
        print(json.dumps(["loaded", ""]))
""")


@pytest.mark.parametrize("how", ["load", "from_bytes"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_damaged_file_is_refused_in_a_subprocess(tmp_path, case, how):
    data, error, words = CASES[case]
    path = tmp_path / "state.bloom"
    path.write_bytes(data)
    run = subprocess.run([sys.executable, "-c", LOADER, str(path), how],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"loader died: {run.returncode} {run.stderr[-2000:]}"
    name, message = json.loads(run.stdout)
    assert name == error.__name__, message
    assert any(w in message for w in words.split("|")), message
    if how == "load" and error is CorruptFileError:
        assert str(path) in message


def test_corrupt_error_names_file_and_reason(tmp_path):
    path = tmp_path / "x.bloom"
    path.write_bytes(b"")
    with pytest.raises(CorruptFileError) as info:
        BloomFilter.load(path)
    assert info.value.path == str(path) and "empty" in info.value.reason
    assert isinstance(info.value, CrawldedupError)


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        BloomFilter.load(tmp_path / "nope")


@settings(max_examples=examples(2 / 3), deadline=None)
@given(offset=st.integers(0, N - 1), bit=st.integers(0, 7))
def test_any_single_bit_flip_is_detected(offset, bit):
    with pytest.raises(CrawldedupError):
        BloomFilter.from_bytes(flip(GOOD, offset, bit))


@given(cut=st.integers(0, N - 1))
def test_any_truncation_is_detected(cut):
    with pytest.raises(CorruptFileError):
        BloomFilter.from_bytes(GOOD[:cut])


def test_file_layout_is_as_documented():
    bf = sample()
    data = bf.to_bytes()
    assert data[:8] == b"\x89CRDDUP\n"
    version, kind, algo, layout, header_size, flags = struct.unpack_from("<HHHHII", data, 8)
    assert (version, kind, algo, layout, header_size, flags) == (1, 1, 1, 0, 4096, 0)
    seed, m, k, cap, rate, count, off, size, crc, header_crc = struct.unpack_from(
        "<QQQQdQQQII", data, 24)
    assert (seed, m, k, cap, rate, count) == (0, bf.num_bits, bf.num_hashes, 1000, 0.01, 50)
    assert (off, size) == (4096, (bf.num_bits + 63) // 64 * 8)
    head = bytearray(data[:4096])
    head[64:72] = bytes(8)
    head[88:96] = bytes(8)
    assert header_crc == zlib.crc32(head)
    assert len(data) == off + size
    assert crc == zlib.crc32(data[off:], zlib.crc32(data[:88] + b"\0\0\0\0" + data[92:off]))
    assert not any(data[96:4096])
    # Bit i is bit i % 8 of payload byte i // 8.
    payload = data[off:]
    for pos in hash_indices("https://example.com/0", k, m):
        assert payload[pos >> 3] >> (pos & 7) & 1


# ---------------------------------------------------------------- atomic saves

def test_failed_save_keeps_the_previous_file(tmp_path):
    path = tmp_path / "state.bloom"
    good = sample()
    good.save(path)
    before = path.read_bytes()

    class Exploding(BloomFilter):
        __slots__ = ()

        def _write(self, f):
            f.write(b"partial garbage")
            raise OSError("disk full (simulated)")

    bad = Exploding.from_bytes(sample(keys=999).to_bytes())
    with pytest.raises(OSError, match="disk full"):
        bad.save(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.bloom"]


def test_save_into_missing_folder_fails_cleanly(tmp_path):
    with pytest.raises(FileNotFoundError):
        sample().save(tmp_path / "missing" / "state.bloom")
    assert list(tmp_path.iterdir()) == []


SAVER = textwrap.dedent("""
    import sys
    from crawldedup import BloomFilter
    path = sys.argv[1]
    a = BloomFilter(200_000, 0.01); a.add_many([f"a{i}" for i in range(1000)])
    b = BloomFilter(200_000, 0.01); b.add_many([f"b{i}" for i in range(1000)])
    a.save(path)
    print("ready", flush=True)
    while True:
        b.save(path)
        a.save(path)
""")


@platform_lacks(sys.platform == "win32", "SIGKILL is POSIX")
def test_kill_9_during_saves_leaves_a_whole_file_and_no_temp_pile(tmp_path):
    path = tmp_path / "state.bloom"
    for attempt in range(8):
        proc = subprocess.Popen([sys.executable, "-c", SAVER, str(path)],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.05 + 0.037 * attempt)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        proc.stdout.close()
        loaded = BloomFilter.load(path)  # never torn
        assert (loaded.contains_many(["a1", "a999"]).all()
                or loaded.contains_many(["b1", "b999"]).all())
    # Killed writers may have left their temp files; the next save removes them.
    sample().save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.bloom"]


def test_stale_temp_of_live_process_is_kept(tmp_path):
    path = tmp_path / "s.bloom"
    mine = tmp_path / f".s.bloom.{os.getppid()}-1{_files._TMP_SUFFIX}"
    dead = tmp_path / f".s.bloom.999999999-1{_files._TMP_SUFFIX}"
    mine.write_bytes(b"x")
    dead.write_bytes(b"x")
    sample().save(path)
    assert mine.exists() and not dead.exists()
