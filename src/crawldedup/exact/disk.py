"""DiskStore: an exact fingerprint store on disk, for more digests than RAM.

A FingerprintSet keeps about 20 bytes of RAM a digest; a billion URLs would
need 20 GB.  A DiskStore keeps its digests in a folder and only a bounded
working set in memory (``memory``, 256 MiB by default):

* a **memtable**: the digests added since the last spill, in a
  FingerprintSet, with a **journal** (``journal-N.log``) that records each
  added digest: appended, and fsynced by :meth:`DiskStore.flush`;
* **runs** (``run-N.cdr``): immutable files of distinct digests sorted by
  their first 8 bytes, written when the memtable fills (a *spill*) and
  merged on a thread of their own as later spills come (committed at
  the next spill or at close), so that the store holds about
  log2(size / memtable) runs; a run's rows are its digests with their
  first 8 bytes turned into a little-endian integer (the sort key), and
  every MiB of it is checksummed;
* a **manifest** (``MANIFEST``): the runs and the journal that make up the
  store, replaced atomically: a spill or a merge writes its run first and
  then the manifest, so a crash anywhere leaves either the old set of files
  or the new one, and the files that no manifest names are removed at the
  next open.

A digest is looked up in the memtable, then in each run: a binary search of
the run's keys (a mapped file, read through the page cache), narrowed by a
fence of every 256th key kept in memory, and a comparison of the remaining
bytes.  Runs are pairwise disjoint (a digest joins the store
once), so a merge is a plain k-way merge of sorted rows: the core's
run_merge, reading its runs through their mappings (the page cache, not the
process's memory) into a buffer of MERGE_BUFFER bytes.

Memory: the memtable holds as many digests as a spill can sort within the
budget, less the runs' fences (8 bytes each 256 digests) and an eighth of
the budget for the batches' working arrays and the merge's buffer.

Durability: once :meth:`flush` or :meth:`close` returns, every digest added
survives kill -9 and power loss; between flushes a kill -9 loses at most
the adds since the last flush.  Damage to a run, the manifest or the
journal raises :class:`~crawldedup.errors.CorruptFileError` naming the file
(runs are verified when the store opens, and again when a merge reads
them).  A full disk raises ``OSError`` from the call that needed the space,
which then changed nothing.  One process at a time opens a store: a second
one gets :class:`~crawldedup.errors.StoreLockedError`.

>>> import hashlib, tempfile
>>> from crawldedup.exact.disk import DiskStore
>>> folder = tempfile.mkdtemp()
>>> with DiskStore(folder) as store:
...     store.add(hashlib.md5(b"https://example.com/").digest())
True
>>> with DiskStore(folder) as store:
...     hashlib.md5(b"https://example.com/").digest() in store, len(store)
(True, 1)
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import sys
import threading
import zlib
from typing import Any, Dict, List, Optional

import numpy as np

from crawldedup._kernel import run_find, run_merge, run_sort
from crawldedup._types import PathLike
from crawldedup.errors import CorruptFileError, StoreLockedError
from crawldedup.exact.fpset import FingerprintSet
from crawldedup.exact.stores.base import FingerprintStore, check_digest_size
from crawldedup.formats.files import atomic_write, check_path, try_lock

#: The default memory budget, in bytes.
DEFAULT_MEMORY = 256 << 20
#: The smallest budget a store takes.
MIN_MEMORY = 1 << 20
#: Keys between two entries of a run's fence (kept in memory).
FENCE_STEP = 256
#: Bytes of a run's payload under one checksum.
CHUNK = 1 << 20
#: Memory a digest of the memtable costs on top of the digest itself (its
#: FingerprintSet's table at its fullest).  A spill holds the table and a
#: copy of its digests for a moment: 2 * digest_size + 12 bytes a digest.
MEMTABLE_OVERHEAD = 12
#: Bytes of the buffer a merge or a spill writes its rows through.
MERGE_BUFFER = 4 << 20
#: Journal bytes buffered before they are written to the file (a write
#: per call would cost a system call for each single add).
JOURNAL_BUFFER = 1 << 16

RUN_MAGIC = b"CDDRUN01"
JOURNAL_MAGIC = b"CDDJRN01"
MANIFEST = "MANIFEST"
LOCK = "LOCK"
FORMAT = 1
# Run header: magic, format, digest size, count, fence step, chunk size,
# checksum of the header before it.
_RUN_HEADER = struct.Struct("<8sIIQII")
_RUN_HEADER_SIZE = _RUN_HEADER.size + 4
# Journal record: count of digests, CRC-32 of the digests; then the digests.
_RECORD = struct.Struct("<II")


def _keys(raw: np.ndarray, ds: int) -> np.ndarray:
    """The sort keys of digests (an (n, ds) uint8 array): their first 8
    bytes as big-endian integers, zero-padded when shorter."""
    if ds >= 8:
        head = np.array(raw[:, :8], order="C")  # a copy: it is swapped in place
    else:
        head = np.zeros((len(raw), 8), dtype=np.uint8)
        head[:, :ds] = raw
    keys: np.ndarray = head.view(np.uint64).ravel()  # native order, in place:
    if sys.byteorder == "little":                    # no second copy
        keys.byteswap(inplace=True)
    return keys


class _Run:
    """One run file, mapped read-only: ``keys`` (uint64, sorted) and
    ``rest`` (the digests' bytes after the first 8), and the fence."""

    def __init__(self, path: str, ds: int, count: int) -> None:
        self.path, self.ds, self.count = path, ds, count
        self.rest_size = max(ds - 8, 0)
        size = os.path.getsize(path)
        payload = count * (8 + self.rest_size)
        chunks = -(-payload // CHUNK) if payload else 0
        expected = _RUN_HEADER_SIZE + payload + 4 * chunks
        if size != expected:
            raise CorruptFileError(path, f"{size} bytes, not the {expected} of a run of "
                                         f"{count:,} {ds}-byte digests")
        with open(path, "rb") as f:
            head = f.read(_RUN_HEADER_SIZE)
        magic, fmt, got_ds, got_count, step, chunk = _RUN_HEADER.unpack_from(head)
        (crc,) = struct.unpack_from("<I", head, _RUN_HEADER.size)
        if zlib.crc32(head[:_RUN_HEADER.size]) != crc or magic != RUN_MAGIC:
            raise CorruptFileError(path, "the run's header is damaged")
        if (fmt, got_ds, got_count, step, chunk) != (FORMAT, ds, count, FENCE_STEP, CHUNK):
            raise CorruptFileError(path, f"the run's header (format {fmt}, digest size "
                                         f"{got_ds}, count {got_count}) does not match the "
                                         f"manifest (format {FORMAT}, {ds}, {count})")
        # A plain array over the mapping (np.memmap's subclass costs a
        # Python call for every index of the lookups).
        self._mmap: Optional[mmap.mmap] = None
        self.map: Optional[np.ndarray] = None
        if size:
            with open(path, "rb") as f:
                self._mmap = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            self.map = np.frombuffer(self._mmap, dtype=np.uint8)
        self.payload, self.chunks = payload, chunks
        self.verify()
        if count:
            assert self.map is not None
            self.rows = self.map[_RUN_HEADER_SIZE:_RUN_HEADER_SIZE + payload]
            rows = self.rows.view(_row_dtype(ds))
            self.keys = rows["k"]
            self.rest = rows["r"] if self.rest_size else np.zeros((count, 0), dtype=np.uint8)
        else:
            self.rows = np.zeros(0, dtype=np.uint8)
            self.keys = np.zeros(0, dtype=np.uint64)
            self.rest = np.zeros((0, self.rest_size), dtype=np.uint8)
        self.fence = np.array(self.keys[::FENCE_STEP])

    def verify(self) -> None:
        """Check every chunk's checksum (CorruptFileError naming the first
        damaged one)."""
        payload, chunks = self.payload, self.chunks
        if not chunks:
            return
        assert self.map is not None
        sums = self.map[_RUN_HEADER_SIZE + payload:].view("<u4")
        data = self.map[_RUN_HEADER_SIZE:_RUN_HEADER_SIZE + payload]
        for i in range(chunks):
            part = data[i * CHUNK:(i + 1) * CHUNK]
            if zlib.crc32(part.data) != int(sums[i]):
                raise CorruptFileError(self.path, f"checksum mismatch in bytes "
                                                  f"{_RUN_HEADER_SIZE + i * CHUNK:,} to "
                                                  f"{_RUN_HEADER_SIZE + i * CHUNK + len(part):,}")

    def find(self, keys: np.ndarray, rest: np.ndarray) -> np.ndarray:
        """True where (key, rest) is in the run; keys ascending, rest an
        (n, digest_size - 8) uint8 array (the core's run_find)."""
        found = np.zeros(len(keys), dtype=np.bool_)
        if self.count and len(keys):
            run_find(self.rows, self.count, 8 + self.rest_size, self.fence, FENCE_STEP,
                     np.ascontiguousarray(keys, dtype=np.uint64),
                     np.ascontiguousarray(rest, dtype=np.uint8).reshape(-1),
                     found.view(np.uint8))
        return found

    def find_one(self, key: int, rest: bytes) -> bool:
        """Whether (key, rest) is in the run: one digest."""
        if not self.count:
            return False
        found = np.zeros(1, dtype=np.uint8)
        run_find(self.rows, self.count, 8 + self.rest_size, self.fence, FENCE_STEP,
                 np.array([key], dtype=np.uint64), np.frombuffer(rest, dtype=np.uint8), found)
        return bool(found[0])

    def close(self) -> None:
        self.map = None
        self.rows = self.keys = self.rest = self.fence = None  # type: ignore[assignment]
        if self._mmap is not None:
            try:
                self._mmap.close()
            except BufferError:  # a view still refers to it: the GC closes it
                pass
            self._mmap = None


def _row_dtype(ds: int) -> "np.dtype[Any]":
    """A run's row: the sort key (the digest's first 8 bytes as a big-endian
    integer, stored little-endian), then the digest's other bytes."""
    if ds > 8:
        return np.dtype([("k", "<u8"), ("r", np.uint8, (ds - 8,))])
    return np.dtype([("k", "<u8")])


class _Checksummed:
    """A file written in order, with the CRC-32 of every CHUNK bytes."""

    def __init__(self, f: Any) -> None:
        self.f = f
        self.sums: List[int] = []
        self.crc = 0
        self.filled = 0

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while len(view):
            take = min(CHUNK - self.filled, len(view))
            self.crc = zlib.crc32(view[:take], self.crc)
            self.filled += take
            if self.filled == CHUNK:
                self.sums.append(self.crc)
                self.crc = self.filled = 0
            view = view[take:]
        self.f.write(data)

    def finish(self) -> bytes:
        if self.filled:
            self.sums.append(self.crc)
        return np.array(self.sums, dtype="<u4").tobytes()


def _write_run(path: str, ds: int, parts: Any) -> int:
    """Write a run from ``parts``, an iterable of uint8 arrays of whole
    rows in ascending key order; the number of digests.  The file is
    written whole or not at all, fsynced, folder included (atomic_write)."""
    row = max(ds, 8)
    count = 0

    def write(f: Any) -> None:
        nonlocal count
        f.write(bytes(_RUN_HEADER_SIZE))
        out = _Checksummed(f)
        for rows in parts:
            out.write(rows)
            count += len(rows) // row
        f.write(out.finish())
        head = bytearray(_RUN_HEADER.pack(RUN_MAGIC, FORMAT, ds, count, FENCE_STEP, CHUNK))
        head += struct.pack("<I", zlib.crc32(head))
        f.seek(0)
        f.write(head)
    atomic_write(path, write)
    return count


def read_manifest(folder: str) -> Optional[Dict[str, Any]]:
    """The manifest of the disk store in folder (None for an empty folder):
    its format, digest size, runs (name, count), journal and next number.
    CorruptFileError for a damaged one, ValueError for a folder that holds
    other things."""
    path = os.path.join(folder, MANIFEST)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        names = set(os.listdir(folder)) - {LOCK}
        if any(name.startswith(("run-", "journal-")) for name in names):
            raise CorruptFileError(path, "missing, but the folder holds runs or a "
                                         "journal of a disk store") from None
        if names:
            raise ValueError(f"{folder!r} is neither a disk store nor an empty "
                             f"folder") from None
        return None
    body, _, tail = data.rpartition(b"\n")
    try:
        if int(tail.decode("ascii"), 16) != zlib.crc32(body):
            raise ValueError("checksum")
        manifest = json.loads(body)
        if manifest.get("format") != FORMAT:
            raise ValueError(f"format {manifest.get('format')!r}")
        check_digest_size(manifest["digest_size"])
        runs = [(str(name), int(count)) for name, count in manifest["runs"]]
        manifest["runs"] = runs
        int(manifest["journal"])
        int(manifest["next"])
    except (ValueError, TypeError, KeyError, UnicodeDecodeError) as exc:
        raise CorruptFileError(path, f"not a valid disk store manifest ({exc})") from None
    for name, _ in runs:
        if os.path.basename(name) != name or not name.startswith("run-"):
            raise CorruptFileError(path, f"names a run {name!r} outside its folder")
        if not os.path.exists(os.path.join(folder, name)):
            raise CorruptFileError(os.path.join(folder, name),
                                   "missing: the manifest names it")
    return manifest  # type: ignore[no-any-return]


class DiskStore(FingerprintStore):
    """Exact fingerprints of ``digest_size`` bytes in the folder ``path``
    (created when missing), in at most about ``memory`` bytes of RAM.

    ``add``, ``add_many`` (True where this call added the digest, the first
    of repeats within a call counting as new), ``contains_many``, ``in``,
    ``len``, :meth:`flush` (every add so far durable), ``close`` and use as
    a context manager.  See the module docstring for the layout and its
    guarantees.
    """

    supports_receipts = False

    def __init__(self, path: PathLike, digest_size: int = 16, *,
                 memory: int = DEFAULT_MEMORY) -> None:
        check_path(path)
        self.digest_size = ds = check_digest_size(digest_size)
        if isinstance(memory, bool) or not isinstance(memory, int):
            raise TypeError(f"memory must be an int (bytes), not {type(memory).__name__}")
        if memory < MIN_MEMORY:
            raise ValueError(f"memory must be at least {MIN_MEMORY:,} bytes, got {memory:,}")
        self.memory = memory
        self.path = os.path.abspath(os.fspath(path))
        self.closed = False
        self._lock_fd: Optional[int] = None
        self._journal_fd: Optional[int] = None
        self._runs: List[_Run] = []
        self._merging: Optional[_Merge] = None
        os.makedirs(self.path, exist_ok=True)
        fd = os.open(os.path.join(self.path, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
        if not try_lock(fd):
            os.close(fd)
            raise StoreLockedError(f"the disk store {self.path!r} is open in another "
                                   f"process (one process at a time opens a store)")
        self._lock_fd = fd
        try:
            self._open(ds)
        except BaseException:
            self._release()
            raise

    # ------------------------------------------------------------ opening

    def _manifest_path(self) -> str:
        return os.path.join(self.path, MANIFEST)

    def _open(self, ds: int) -> None:
        manifest = self._read_manifest()
        if manifest is None:
            manifest = {"format": FORMAT, "digest_size": ds, "runs": [], "journal": 0,
                        "next": 1}
            self._write_manifest(manifest)
        elif manifest["digest_size"] != ds:
            raise ValueError(f"the disk store {self.path!r} holds {manifest['digest_size']}"
                             f"-byte digests, not {ds}-byte ones")
        self._manifest = manifest
        self._next = int(manifest["next"])  # the number the next file takes
        self._remove_strays()
        self._runs = [_Run(os.path.join(self.path, name), ds, count)
                      for name, count in manifest["runs"]]
        self._stored = sum(run.count for run in self._runs)
        self._memtable = FingerprintSet(ds)
        self._reserved = 0
        self._pending = bytearray()  # journal records not yet written
        self._replay()

    def _read_manifest(self) -> Optional[Dict[str, Any]]:
        return read_manifest(self.path)

    def _write_manifest(self, manifest: Dict[str, Any]) -> None:
        body = json.dumps(manifest, sort_keys=True).encode("ascii")
        data = body + b"\n" + f"{zlib.crc32(body):08x}".encode("ascii")
        def write(f: Any) -> None:
            f.write(data)
        atomic_write(self._manifest_path(), write)

    def _journal_path(self, number: Optional[int] = None) -> str:
        if number is None:
            number = self._manifest["journal"]
        return os.path.join(self.path, f"journal-{number}.log")

    def _remove_strays(self) -> None:
        """Remove what a crash left that the manifest does not name: a run
        written by a spill or merge that did not reach the manifest, the runs
        a merge replaced, an older journal, temporary files."""
        keep = {name for name, _ in self._manifest["runs"]}
        keep.add(os.path.basename(self._journal_path()))
        for name in os.listdir(self.path):
            # .run-N.cdr.*.tmp: a run a crash left half written
            if name.startswith(("run-", "journal-", ".run-")) and name not in keep:
                os.unlink(os.path.join(self.path, name))

    def _replay(self) -> None:
        """Read the journal into the memtable.  A record cut short at its end
        (a write that a kill or power loss interrupted) is dropped and the
        file cut there; a damaged record anywhere else is damage."""
        path = self._journal_path()
        ds = self.digest_size
        good = size = 0
        if self._runs:
            # A store with runs is large: its memtable will fill, and
            # taking the whole room now saves the copies of growing to it.
            self._make_room(self._memtable_room())
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            f = None
        if f is not None:
            with f:
                size = os.fstat(f.fileno()).st_size
                # the table made once for what the journal holds (growing
                # as it fills would hold two tables for a moment)
                self._make_room(size // ds)
                magic = f.read(len(JOURNAL_MAGIC))
                if magic != JOURNAL_MAGIC:
                    if len(magic) < len(JOURNAL_MAGIC) and size == len(magic) \
                            and JOURNAL_MAGIC.startswith(magic):
                        size = 0  # a journal torn as it was begun
                    elif size:
                        raise CorruptFileError(path, "not a disk store journal")
                pos = good = len(JOURNAL_MAGIC) if size else 0
                while pos < size:
                    head = f.read(_RECORD.size)
                    if len(head) < _RECORD.size:
                        break
                    count, crc = _RECORD.unpack(head)
                    end = pos + _RECORD.size + count * ds
                    if end > size:
                        break
                    body = f.read(count * ds)
                    if zlib.crc32(body) != crc or count == 0:
                        if end == size:
                            break  # the last record, torn by power loss
                        raise CorruptFileError(path, f"a damaged record at byte {pos:,}")
                    self._memtable.add_many(np.frombuffer(body, dtype=f"S{ds}"))
                    pos = good = end
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if good < size or not size:
                os.ftruncate(fd, good)
            if good == 0:
                os.pwrite(fd, JOURNAL_MAGIC, 0)
                good = len(JOURNAL_MAGIC)
            os.lseek(fd, good, os.SEEK_SET)
        except BaseException:
            os.close(fd)
            raise
        self._journal_fd = fd
        self._journal_size = good

    # ----------------------------------------------------------- lookups

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("the disk store is closed")

    def _array(self, fps: Any) -> np.ndarray:
        """The digests as a contiguous numpy S<digest_size> array, checked
        whole before anything changes."""
        ds = self.digest_size
        if isinstance(fps, np.ndarray) and fps.dtype.kind == "S" and fps.ndim == 1 \
                and fps.dtype.itemsize == ds:
            return np.ascontiguousarray(fps)
        items = self._fps(fps)
        if not items:
            return np.zeros(0, dtype=f"S{ds}")
        return np.frombuffer(b"".join(items), dtype=f"S{ds}")

    def _on_disk(self, digests: np.ndarray) -> np.ndarray:
        """True where a run holds the digest."""
        found = np.zeros(len(digests), dtype=np.bool_)
        if not self._runs or not len(digests):
            return found
        ds = self.digest_size
        raw = digests.view(np.uint8).reshape(len(digests), ds)
        keys = _keys(raw, ds)
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        rest = raw[order, 8:] if ds > 8 else np.zeros((len(keys), 0), dtype=np.uint8)
        hit = np.zeros(len(keys), dtype=np.bool_)
        for run in self._runs:
            ask = np.flatnonzero(~hit)
            if not len(ask):
                break
            hit[ask] = run.find(keys[ask], rest[ask])
        found[order] = hit
        return found

    def _on_disk_one(self, fp: bytes) -> bool:
        """Whether a run holds one digest."""
        if not self._runs:
            return False
        head = fp[:8] if len(fp) >= 8 else fp + bytes(8 - len(fp))
        key = int.from_bytes(head, "big")
        rest = fp[8:]
        return any(run.find_one(key, rest) for run in self._runs)

    def contains_many(self, fps: Any) -> np.ndarray:
        """A numpy bool array, True where the digest is in the store."""
        self._check_open()
        digests = self._array(fps)
        found = self._memtable.contains_many(digests)
        ask = np.flatnonzero(~found)
        if len(ask):
            found[ask] = self._on_disk(digests[ask])
        return found

    def __contains__(self, fp: Any) -> bool:
        self._check_open()
        fp = self._fp(fp)
        return fp in self._memtable or self._on_disk_one(fp)

    # -------------------------------------------------------------- adds

    def add_many(self, fps: Any) -> np.ndarray:
        """Add every digest; a numpy bool array, True where this call added
        it (the first of repeats within the call counts as new).  The added
        digests are journaled and the journal handed to the OS before the
        call returns (a kill -9 loses none; :meth:`flush` makes them survive
        power loss too); an OSError there leaves the store unchanged."""
        self._check_open()
        digests = self._array(fps)
        if len(self._memtable) >= self._memtable_room():
            self._spill()  # before this call changes anything
        new = np.zeros(len(digests), dtype=np.bool_)
        if not len(digests):
            return new
        ask = np.flatnonzero(~self._memtable.contains_many(digests))
        if len(ask):
            ask = ask[~self._on_disk(digests[ask])]
        if len(ask):
            candidates = digests[ask]
            first = FingerprintSet(self.digest_size).add_many(candidates)
            added = candidates[first]
            self._log(added, write=True)  # journaled before the memtable changes
            self._make_room(len(added))
            self._memtable.add_many(added)
            new[ask[first]] = True
        return new

    def add(self, fp: Any) -> bool:
        """Add one digest; True when it was not in the store."""
        self._check_open()
        fp = self._fp(fp)
        if fp in self._memtable:
            return False
        if len(self._memtable) >= self._memtable_room():
            self._spill()
        if self._on_disk_one(fp):
            return False
        one = np.frombuffer(fp, dtype=f"S{self.digest_size}")
        self._log(one)
        self._memtable.add(fp)
        return True

    def _log(self, added: np.ndarray, write: bool = False) -> None:
        """Journal the digests about to be added: buffered, and written to
        the file when ``write`` or when the buffer fills.  If that write
        fails, this record leaves the buffer (its call raises and adds
        nothing); the records before it stay, to be written later."""
        if not len(added):
            return
        mark = len(self._pending)
        body = added.tobytes()
        self._pending += _RECORD.pack(len(added), zlib.crc32(body))
        self._pending += body
        if write or len(self._pending) >= JOURNAL_BUFFER:
            try:
                self._write_journal()
            except BaseException:
                del self._pending[mark:]
                raise

    def _write_journal(self) -> None:
        """Write the buffered records; on an error the file is cut back to
        its last whole record and the records stay buffered."""
        if not self._pending:
            return
        assert self._journal_fd is not None
        data = bytes(self._pending)
        try:
            done = 0
            while done < len(data):
                done += os.pwrite(self._journal_fd, data[done:], self._journal_size + done)
        except OSError:
            try:
                os.ftruncate(self._journal_fd, self._journal_size)
            except OSError:
                pass
            raise
        self._journal_size += len(data)
        del self._pending[:]

    def flush(self) -> None:
        """Make every add so far durable (the journal written and fsynced)."""
        self._check_open()
        self._write_journal()
        assert self._journal_fd is not None
        os.fsync(self._journal_fd)

    # ------------------------------------------------------ spills, merges

    def _make_room(self, n: int) -> None:
        """Room in the memtable for n more digests, taken in doublings up to
        its room (a FingerprintSet left to grow by itself moves every digest
        at each of its small growth steps)."""
        need = len(self._memtable) + n
        if need > self._reserved:
            self._reserved = min(max(need, 2 * self._reserved, 1 << 16),
                                 max(need, self._memtable_room()))
            try:
                self._memtable.reserve(self._reserved)
            except MemoryError:  # only speed is lost: the set grows as it fills
                pass

    def _memtable_room(self) -> int:
        """How many digests the memtable holds before it is spilled: what a
        spill (the table and a copy of its digests) takes of the budget,
        less the runs' fences and an eighth for the batches' working arrays
        and the merge's buffer."""
        fences = sum(len(run.fence) * 8 for run in self._runs)
        free = self.memory - self.memory // 8 - fences
        return max(1024, free // (2 * self.digest_size + MEMTABLE_OVERHEAD))

    def _number(self) -> int:
        """The number of a new file (a run or a journal): never one the
        manifest or a merge in flight has taken."""
        number = self._next
        self._next += 1
        return number

    def _spill(self) -> None:
        """Write the memtable as a run, start a new journal, then start a
        merge (see _start_merge).  A merge still running is finished first
        (its error, if it failed, is raised here, before anything changes).
        A crash at any point leaves the store as it was before or after the
        spill."""
        ds = self.digest_size
        self._settle()
        self._write_journal()  # the records before the spill stay whole
        digests = self._memtable.to_array()
        # The memtable's table is let go before the sort, whose arrays take
        # its place in the budget; should the spill fail, it is rebuilt.
        self._memtable = FingerprintSet(ds)
        self._reserved = 0
        number = self._number()
        name = f"run-{number}.cdr"
        old_journal = self._journal_path()
        try:
            _write_run(os.path.join(self.path, name), ds, _sorted_rows(digests, ds))
            manifest = dict(self._manifest,
                            runs=self._manifest["runs"] + [(name, len(digests))],
                            journal=number, next=self._next)
            self._commit(manifest)
        except BaseException:
            self._make_room(len(digests))
            self._memtable.add_many(digests)
            raise
        run = _Run(os.path.join(self.path, name), ds, len(digests))
        self._runs.append(run)
        self._stored += len(digests)
        del digests
        assert self._journal_fd is not None
        os.close(self._journal_fd)
        self._journal_fd = None
        os.unlink(old_journal)
        self._replay()  # the new, empty journal
        self._start_merge()

    def _commit(self, manifest: Dict[str, Any]) -> None:
        """Make ``manifest`` the store's (atomically), removing nothing."""
        try:
            self._write_manifest(manifest)
        except BaseException:
            # The new run is a stray until a manifest names it.
            names = {name for name, _ in manifest["runs"]}
            for name in names - {n for n, _ in self._manifest["runs"]}:
                try:
                    os.unlink(os.path.join(self.path, name))
                except OSError:
                    pass
            raise
        self._manifest = manifest

    def _start_merge(self) -> None:
        """Start merging the newest runs, on a thread of its own, while the
        newest is at least half the size of the one before (about
        log2(size / memtable) runs), in one k-way pass (each digest written
        once for the whole cascade).  The store goes on meanwhile: lookups
        read the merge's sources, which stay until the merge is committed
        by _settle (at the next spill, or at close)."""
        counts = [run.count for run in self._runs]
        width = 1
        while len(counts) >= 2 and counts[-2] <= 2 * counts[-1]:
            counts[-2:] = [counts[-2] + counts[-1]]
            width += 1
        if width >= 2:
            path = os.path.join(self.path, f"run-{self._number()}.cdr")
            self._merging = _Merge(self._runs[-width:], path, self.digest_size)

    def _settle(self) -> None:
        """Wait for the merge in flight, if any, and make it the store's:
        its run replaces its sources in the manifest, then in the lookups.
        A merge that failed (damage in a source, a full disk) changes
        nothing, and its error is raised here."""
        merge = self._merging
        if merge is None:
            return
        merge.thread.join()
        self._merging = None
        if merge.error is not None or merge.run is None:
            merge.discard()
            raise merge.error or RuntimeError("the merge ended without its run")
        at = next(i for i, run in enumerate(self._runs) if run is merge.sources[0])
        width = len(merge.sources)
        name = os.path.basename(merge.path)
        runs = self._manifest["runs"]
        try:
            self._commit(dict(self._manifest, runs=runs[:at] + [(name, merge.run.count)]
                              + runs[at + width:], next=self._next))
        except BaseException:
            merge.discard()
            raise
        self._runs[at:at + width] = [merge.run]
        for old in merge.sources:
            old.close()
            os.unlink(old.path)

    def _abandon_merge(self) -> None:
        """Wait for the merge in flight, if any, and throw its run away."""
        merge = self._merging
        if merge is not None:
            merge.thread.join()
            self._merging = None
            merge.discard()

    # ----------------------------------------------------------- the rest

    def __len__(self) -> int:
        self._check_open()
        return self._stored + len(self._memtable)

    @property
    def runs(self) -> int:
        """How many run files the store has."""
        return len(self._runs)

    def clear(self) -> None:
        """Remove every digest."""
        self._check_open()
        self._abandon_merge()
        old = [run.path for run in self._runs]
        old_journal = self._journal_path()
        number = self._number()
        self._commit(dict(self._manifest, runs=[], journal=number, next=self._next))
        for run in self._runs:
            run.close()
        self._runs, self._stored = [], 0
        if self._journal_fd is not None:
            os.close(self._journal_fd)
            self._journal_fd = None
        for path in old + [old_journal]:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self._memtable = FingerprintSet(self.digest_size)
        self._reserved = 0
        self._pending = bytearray()
        self._replay()

    def close(self) -> None:
        """Flush, finish a merge in flight and release the store (a second
        close does nothing)."""
        if self.closed:
            return
        try:
            self.flush()
            self._settle()
        finally:
            self.closed = True
            self._release()

    def _release(self) -> None:
        self._abandon_merge()  # before the runs it reads are closed
        self._memtable = FingerprintSet(self.digest_size)  # its memory goes now
        self._pending = bytearray()
        for run in self._runs:
            run.close()
        if self._journal_fd is not None:
            os.close(self._journal_fd)
            self._journal_fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing releases the lock
            self._lock_fd = None

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"len={len(self)}, runs={len(self._runs)}"
        return f"DiskStore({self.path!r}, digest_size={self.digest_size}, {state})"

    def _insert(self, unique: List[bytes]) -> Any:  # the base's add_many is replaced
        raise NotImplementedError

    def _select(self, unique: List[bytes]) -> Any:
        raise NotImplementedError


class _Merge:
    """A merge of runs into the file path, on a thread of its own: the
    sources checked again (not trusted), merged, written whole, and opened
    (``run``); or ``error``.  It reads the sources and writes its own file:
    everything else is the store's, on the store's thread."""

    def __init__(self, sources: List[_Run], path: str, ds: int) -> None:
        self.sources, self.path = list(sources), path
        self.run: Optional[_Run] = None
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._work, args=(ds,), daemon=True,
                                       name="crawldedup-disk-merge")
        self.thread.start()

    def _work(self, ds: int) -> None:
        try:
            for run in self.sources:
                run.verify()
            total = _write_run(self.path, ds, _merged(self.sources, ds))
            self.run = _Run(self.path, ds, total)
        except BaseException as exc:  # raised on the store's thread
            self.error = exc

    def discard(self) -> None:
        """Close and remove the merged run (never named by a manifest)."""
        if self.run is not None:
            self.run.close()
            self.run = None
        try:
            os.unlink(self.path)
        except OSError:
            pass


def _sorted_rows(digests: np.ndarray, ds: int) -> Any:
    """The rows of a run of the distinct digests (an S<ds> array), in key
    order (the core's run_sort), MERGE_BUFFER bytes at a time.  Besides
    the digests it holds their rows: max(ds, 8) bytes a digest."""
    row = max(ds, 8)
    rows = np.empty(len(digests) * row, dtype=np.uint8)
    run_sort(digests.view(np.uint8).reshape(-1), ds, rows)
    step = max(1, MERGE_BUFFER // row) * row
    for start in range(0, len(rows), step):
        yield rows[start:start + step]


def _merged(sources: List[_Run], ds: int) -> Any:
    """The rows of disjoint runs, merged in key order, MERGE_BUFFER bytes
    at a time (the core's run_merge, reading the runs' mappings)."""
    row = max(ds, 8)
    out = np.empty(max(1, MERGE_BUFFER // row) * row, dtype=np.uint8)
    room = len(out) // row
    rows = tuple(run.rows for run in sources)
    pos = np.zeros(len(sources), dtype=np.intp)
    while True:
        n = run_merge(rows, row, pos, out)
        if n:
            yield out[:n * row]
        if n < room:
            return


def open_disk_url(url: str, *, table: Optional[str] = None,
                  digest_size: int = 16) -> DiskStore:
    """``disk:///PATH`` (``disk:////abs/path``, as SQLite URLs): a DiskStore
    in the folder PATH.  ``table`` is not used (a folder is one store)."""
    path = url[len("disk:///"):] if url.startswith("disk:///") else ""
    if not path:
        raise ValueError(f"{url!r}: a disk store URL names its folder: disk:///PATH")
    return DiskStore(path, digest_size)
