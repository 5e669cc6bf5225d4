"""Durable file writes and the shared header of crawldedup state files.

``atomic_write`` is the only way crawldedup replaces a file: write a temporary
file in the same folder, fsync it, rename it over the target, fsync the
folder.  A crash or ``kill -9`` at any moment leaves either the old file or the
new one.  Temporary files are named after the writing process, and those left
behind by processes that no longer exist are removed by the next save, so they
never pile up.

The header layout is documented in ``docs/format.md``; keep the two in step.
"""

from __future__ import annotations

import errno
import os
import struct
import sys
import threading
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterator, Optional, Union

if sys.platform == "win32":  # pragma: no cover
    import msvcrt
else:
    import fcntl

from crawldedup._types import PathLike as PathLike  # re-exported
from crawldedup.errors import CorruptFileError as CorruptFileError  # re-exported
from crawldedup.errors import IncompatibleFilterError

MAGIC = b"\x89CRDDUP\n"
FORMAT_VERSION = 1
HEADER_SIZE = 4096  # one page: the payload that follows can be memory-mapped

# Header flags.  DIRTY: the file is (or was, when its writer was killed)
# mapped for writing, and its checksum is not up to date.
FLAG_DIRTY = 1
KNOWN_FLAGS = FLAG_DIRTY

HASH_MURMUR3_EDH = 1  # MurmurHash3 x64 128 + enhanced double hashing + multiply-high
HASH_FPSET_FMIX = 2  # a fingerprint set's canonical order (docs/fpset.md)

KIND_BLOOM = 1
KIND_SCALABLE = 2
KIND_ROTATING = 3
KIND_INDEX = 4  # SimhashIndex (docs/simhash-index.md)
KIND_FPSET = 5
KIND_MINHASH = 6  # MinHashIndex (docs/minhash.md)


@dataclass(frozen=True)
class Kind:
    """A kind of state file: its id in the header, its name in messages,
    the hash algorithm id its header carries (0: none), and the flags it
    may carry (DIRTY for the kinds used in place in a mapped file)."""

    id: int
    name: str
    hash_algorithm: int
    flags: int


#: The kinds of state file, one row a kind; the capability that owns a kind
#: checks the rest of its header (its parameters) and its payload.
KINDS = {kind.id: kind for kind in (
    Kind(KIND_BLOOM, "Bloom filter", HASH_MURMUR3_EDH, FLAG_DIRTY),
    Kind(KIND_SCALABLE, "scalable Bloom filter", HASH_MURMUR3_EDH, 0),
    Kind(KIND_ROTATING, "rotating Bloom filter", HASH_MURMUR3_EDH, FLAG_DIRTY),
    Kind(KIND_INDEX, "SimHash index", 0, 0),
    Kind(KIND_FPSET, "fingerprint set", HASH_FPSET_FMIX, 0),
    Kind(KIND_MINHASH, "MinHash LSH index", 0, 0),
)}
KIND_NAMES = {kind.id: kind.name for kind in KINDS.values()}


def kind_name(kind: int) -> str:
    """A kind's name, for messages ("kind 9" for one this code does not know)."""
    return KIND_NAMES.get(kind, f"kind {kind}")
# The layout field of the kinds that are not Bloom filters (the Bloom
# layouts: crawldedup.bloom.layouts).
LAYOUT_NONE = 0

# magic, version, kind, hash algorithm, layout, header size, flags, seed,
# num_bits, num_hashes, capacity, error_rate, insert_count, payload offset,
# payload size, checksum, header checksum.
_HEADER = struct.Struct("<8sHHHHIIQQQQdQQQII")
# Offsets of header fields that mapped files update in place.
FLAGS_AT = 20
COUNT_AT = 64
CHECKSUM_AT = 88
HEADER_CHECKSUM_AT = 92


def header_checksum(raw: Union[bytes, bytearray, memoryview]) -> int:
    """CRC-32 of the HEADER_SIZE header bytes with the insert count and both
    checksum fields zeroed.  It stays valid while writers update the insert
    count of a mapped file, so the header is checked even when the payload's
    checksum is not up to date (a DIRTY file)."""
    head = bytearray(raw[:HEADER_SIZE])
    head[COUNT_AT:COUNT_AT + 8] = bytes(8)
    head[CHECKSUM_AT:HEADER_CHECKSUM_AT + 4] = bytes(8)
    return zlib.crc32(head) & 0xFFFFFFFF
assert _HEADER.size == 96


@dataclass
class Header:
    kind: int
    hash_algorithm: int
    layout: int
    flags: int
    seed: int
    num_bits: int
    num_hashes: int
    capacity: int
    error_rate: float
    insert_count: int
    payload_size: int
    version: int = FORMAT_VERSION
    checksum: int = 0

    def pack(self) -> bytearray:
        """The HEADER_SIZE header bytes: the checksum field as stored, the
        header checksum computed."""
        out = bytearray(HEADER_SIZE)
        _HEADER.pack_into(
            out, 0, MAGIC, self.version, self.kind, self.hash_algorithm, self.layout,
            HEADER_SIZE, self.flags, self.seed, self.num_bits, self.num_hashes,
            self.capacity, self.error_rate, self.insert_count, HEADER_SIZE,
            self.payload_size, self.checksum, 0)
        struct.pack_into("<I", out, HEADER_CHECKSUM_AT, header_checksum(out))
        return out


def checksum(header: Header, payload: Union[bytes, bytearray, memoryview]) -> int:
    """CRC-32 (zlib) of the header with its checksum field zeroed, then the payload."""
    saved, header.checksum = header.checksum, 0
    try:
        crc = zlib.crc32(header.pack())
    finally:
        header.checksum = saved
    # zlib.crc32 takes at most 4 GiB at once on some builds: feed it slices.
    view = memoryview(payload).cast("B")
    step = 1 << 30
    for start in range(0, len(view), step):
        crc = zlib.crc32(view[start:start + step], crc)
    return crc & 0xFFFFFFFF


def parse_header(raw: Union[bytes, bytearray, memoryview], total_size: int,
                 path: Optional[PathLike]) -> Header:
    """Check the fixed header of a state file of total_size bytes.

    Raises CorruptFileError for anything that is not a well-formed crawldedup
    header and IncompatibleFilterError for a format version this code does not
    read.  The checksum is left to the caller, who holds the payload.
    """
    if total_size == 0:
        raise CorruptFileError(path, "the file is empty")
    if len(raw) < len(MAGIC) or bytes(raw[:len(MAGIC)]) != MAGIC:
        raise CorruptFileError(path, "no crawldedup signature at the start (a foreign file?)")
    if len(raw) < HEADER_SIZE:
        raise CorruptFileError(
            path, f"truncated: {total_size} bytes, shorter than the {HEADER_SIZE}-byte header")
    (_magic, version, kind, hash_algorithm, layout, header_size, flags, seed, num_bits,
     num_hashes, capacity, error_rate, insert_count, payload_offset, payload_size,
     stored_checksum, stored_header_checksum) = _HEADER.unpack_from(raw, 0)
    if version != FORMAT_VERSION:
        if 0 < version < 256:
            raise IncompatibleFilterError(
                f"{_where(path)} uses file format version {version}; this crawldedup reads "
                f"version {FORMAT_VERSION}"
                + (" (upgrade crawldedup)" if version > FORMAT_VERSION else ""))
        raise CorruptFileError(path, f"impossible format version {version}")
    if header_size != HEADER_SIZE or payload_offset != HEADER_SIZE:
        raise CorruptFileError(path, f"header size {header_size} / payload offset "
                                     f"{payload_offset}, expected {HEADER_SIZE}")
    if header_checksum(raw) != stored_header_checksum:
        raise CorruptFileError(path, "header checksum mismatch (the header was damaged)")
    if any(bytes(raw[_HEADER.size:HEADER_SIZE])):
        raise CorruptFileError(path, "reserved header bytes are not zero")
    expected_size = HEADER_SIZE + payload_size
    if total_size < expected_size:
        raise CorruptFileError(
            path, f"truncated: {total_size} bytes, the header announces {expected_size}")
    if total_size > expected_size:
        raise CorruptFileError(
            path, f"{total_size - expected_size} unexpected bytes after the payload")
    return Header(kind=kind, hash_algorithm=hash_algorithm, layout=layout, flags=flags,
                  seed=seed, num_bits=num_bits, num_hashes=num_hashes, capacity=capacity,
                  error_rate=error_rate, insert_count=insert_count,
                  payload_size=payload_size, version=version, checksum=stored_checksum)


def check_kind(header: Header, path: Optional[PathLike], kind: int) -> None:
    """The check of a header's kind that every loader and the command line
    make: the kind expected, its hash algorithm, and no flag it does not
    carry.  CorruptFileError naming the file otherwise."""
    if header.kind != kind:
        raise CorruptFileError(path, f"holds a {kind_name(header.kind)}, not a "
                                     f"{KINDS[kind].name}")
    expected = KINDS[kind]
    if header.hash_algorithm != expected.hash_algorithm:
        raise CorruptFileError(path, f"unknown hash algorithm id {header.hash_algorithm} for a "
                                     f"{expected.name} (expected {expected.hash_algorithm})")
    if header.flags & ~expected.flags:
        raise CorruptFileError(path, f"unknown flags {header.flags:#x}")


def read_header(path: PathLike) -> Header:
    """The checked header of the state file at path (its kind is known:
    check_kind tells whether it is the one wanted)."""
    with open(path, "rb") as f:
        head = f.read(HEADER_SIZE)
    return parse_header(head, os.path.getsize(path), path)


def zero_float(value: float) -> bool:
    """True for +0.0 only: a header field a kind leaves at 0 holds eight zero
    bytes (-0.0 compares equal to 0.0 but is not what crawldedup writes)."""
    return struct.pack("<d", value) == bytes(8)


def _where(path: Optional[PathLike]) -> str:
    return "the data" if path is None else repr(os.fspath(path))


# ---------------------------------------------------------------- atomic write

_TMP_SUFFIX = ".crawldedup-tmp"


def _temp_name(path: str) -> str:
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.{os.getpid()}-{threading.get_ident()}{_TMP_SUFFIX}")


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if sys.platform == "win32":  # no cheap liveness probe: keep the file
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stale_temps(path: str) -> Iterator[str]:
    folder, name = os.path.split(path)
    prefix = f".{name}."
    try:
        entries = os.listdir(folder or ".")
    except OSError:
        return
    for entry in entries:
        if not (entry.startswith(prefix) and entry.endswith(_TMP_SUFFIX)):
            continue
        owner = entry[len(prefix):-len(_TMP_SUFFIX)].split("-", 1)[0]
        if owner.isdigit() and not _pid_alive(int(owner)):
            yield os.path.join(folder, entry)


def fsync_folder(folder: str) -> None:
    """Make the entries of folder (a rename, a new or removed file) durable."""
    if sys.platform == "win32":
        return
    fd = os.open(folder or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:  # some file systems cannot fsync a folder
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def resolve(path: PathLike) -> str:
    """The absolute path a state path stands for: a symbolic link is
    followed to its target (which is then written, the link kept), as users
    expect of a path they point at their state."""
    return os.path.realpath(os.fspath(path))


def check_path(path: object, what: str = "path") -> PathLike:
    """path when it is a str or os.PathLike naming a file, else TypeError
    (an int would be taken for a file descriptor, bytes paths are refused)."""
    if isinstance(path, (str, os.PathLike)) and not isinstance(path, bytes):
        name = os.fspath(path)
        if isinstance(name, str):
            return path
    raise TypeError(f"{what} must be a str or os.PathLike file name, "
                    f"not {type(path).__name__}")


def try_lock(fd: int) -> bool:
    """Take an exclusive lock on the open file fd without waiting; False
    when another process holds it.  The lock goes with the process: a
    process killed with kill -9 releases it, and so does closing fd."""
    try:
        if sys.platform == "win32":  # pragma: no cover
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        else:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def atomic_write(path: PathLike, write: Callable[[BinaryIO], None]) -> None:
    """Replace path with what write(file) writes, all or nothing (through a
    symbolic link: its target is replaced)."""
    target = resolve(path)
    for stale in _stale_temps(target):
        try:
            os.unlink(stale)
        except OSError:
            pass
    tmp = _temp_name(target)
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_folder(os.path.dirname(target))


def read_exactly(f: BinaryIO, view: memoryview, path: Optional[PathLike]) -> None:
    """Fill view from f, or raise CorruptFileError if the file ends early."""
    done = 0
    while done < len(view):
        n = f.readinto(view[done:])  # type: ignore[attr-defined]
        if not n:
            raise CorruptFileError(path, "truncated while reading the payload")
        done += n


# A header check of one kind of file: raises CorruptFileError for a header
# that is not of that kind (path None for bytes in memory).
HeaderCheck = Callable[[Header, Optional[PathLike]], None]


def sealed(header: Header, payload: Union[bytes, bytearray, memoryview]) -> Header:
    """header with the checksum of itself and payload filled in."""
    header.checksum = checksum(header, payload)
    return header


def is_file_object(src: object) -> bool:
    """True for an open file object given where a path is expected."""
    return hasattr(src, "read") and not isinstance(src, (str, bytes, os.PathLike))


def read_object(src: object) -> "tuple[bytes, Optional[str]]":
    """The remaining bytes of a binary file object, and its name if it has
    one (for messages).  TypeError for a text file."""
    data = src.read()  # type: ignore[attr-defined]
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"the file object must be opened in binary mode ('rb'); its read() "
                        f"returned {type(data).__name__}")
    name = getattr(src, "name", None)
    return bytes(data), name if isinstance(name, str) else None


def read_file(path: Union[PathLike, BinaryIO], check: HeaderCheck) -> "tuple[Header, memoryview]":
    """The header of the state file at path (or in a binary file object),
    parsed and checked, and its whole payload, read into memory (not yet
    checked against the checksum).  TypeError for anything but a str or
    os.PathLike path and a binary file object."""
    if is_file_object(path):
        data, name = read_object(path)
        view = memoryview(data)
        header = parse_header(view[:HEADER_SIZE], len(view), name)
        check(header, name)
        return header, view[HEADER_SIZE:]
    path = check_path(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        header = parse_header(f.read(HEADER_SIZE), size, path)
        check(header, path)
        # parse_header checked that the file really has payload_size bytes.
        payload = memoryview(bytearray(header.payload_size))
        read_exactly(f, payload, path)
    return header, payload


def split_bytes(data: Union[bytes, bytearray, memoryview],
                check: HeaderCheck) -> "tuple[Header, memoryview]":
    """read_file for a file's bytes in memory (a to_bytes result)."""
    view = memoryview(data).cast("B")
    header = parse_header(view[:HEADER_SIZE], len(view), None)
    check(header, None)
    return header, view[HEADER_SIZE:]


def restore(cls: type, data: bytes) -> object:
    """Unpickle: the object of cls that from_bytes reads from data (pickles
    carry the checksummed file format)."""
    return cls.from_bytes(data)  # type: ignore[attr-defined]


class Saved:
    """save() and to_bytes() for a class whose state is one file: it gives
    _payload(), the bytes after the header, and _header(payload), the
    sealed header for them."""

    # Given by every subclass.
    _payload: Callable[[], Union[bytes, bytearray]]
    _header: Callable[[Union[bytes, bytearray]], Header]

    def _write(self, f: BinaryIO) -> None:
        payload = self._payload()
        f.write(self._header(payload).pack())
        f.write(payload)

    def to_bytes(self) -> bytes:
        """The bytes of the file that :meth:`save` writes (docs/format.md)."""
        payload = self._payload()
        return bytes(self._header(payload).pack()) + bytes(payload)

    def save(self, path: PathLike) -> None:
        """Write to path atomically: a crash at any moment leaves the
        previous file or the new one, never a damaged one."""
        atomic_write(path, self._write)
