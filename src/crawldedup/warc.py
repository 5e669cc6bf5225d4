"""Documents from WARC and WET files (``pip install 'crawldedup[warc]'``).

Each ``response`` record whose HTTP payload is HTML or plain text, and each
``conversion`` record (the extracted text of a WET file), is a document: its
id is the record's ``WARC-Target-URI``, its text the payload, HTML reduced to
text by Resiliparse's ``extract_plain_text`` (a maintained, compiled HTML5
parser and text extractor written for web archive data; see docs/spark.md).
Other records (requests, metadata, images...) are not documents.

Damage never stops a read: a record that cannot be parsed, that is cut
short, or whose payload cannot be decoded is reported as a
:class:`WarcProblem` (file, offset of the record, reason) and the reader goes
on at the next record it can find (the next gzip member of a ``.warc.gz``,
the next ``WARC/1.`` line of a ``.warc``).

>>> import io, tempfile, os
>>> from warcio.warcwriter import WARCWriter
>>> path = os.path.join(tempfile.mkdtemp(), "a.warc.gz")
>>> with open(path, "wb") as f:
...     w = WARCWriter(f, gzip=True)
...     rec = w.create_warc_record("https://example.com/", "conversion",
...                                payload=io.BytesIO(b"Hello, world."), length=13,
...                                warc_content_type="text/plain")
...     w.write_record(rec)
>>> [(d.uri, d.text) for d in iter_warc(path)]
[('https://example.com/', 'Hello, world.')]
"""

from __future__ import annotations

import os
import sys
import zlib
from dataclasses import dataclass
from typing import IO, Any, BinaryIO, Dict, Iterator, List, Optional, Tuple, Union, cast

from crawldedup._extras import install_hint
from crawldedup.errors import CrawldedupError

__all__ = ["WARC_SUFFIXES", "WarcDocument", "WarcProblem", "html_to_text", "is_warc_path",
           "iter_warc", "near_dups_documents", "read_documents"]

#: File names the command line reads as WARC/WET files.
WARC_SUFFIXES = (".warc", ".warc.gz", ".wet", ".wet.gz", ".arc.gz")

_SCAN = 1 << 16
_HTML_TYPES = ("text/html", "application/xhtml+xml")


@dataclass(frozen=True)
class WarcDocument:
    """A document: ``uri`` (WARC-Target-URI), ``text``, and where it is."""
    uri: str
    text: str
    path: str
    offset: int


@dataclass(frozen=True)
class WarcProblem:
    """A record skipped because it is damaged: file, byte offset, reason."""
    path: str
    offset: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path} at offset {self.offset}: {self.reason}"


class _Damaged(Exception):
    pass


def _need_warcio() -> Any:
    try:
        from warcio.archiveiterator import ArchiveIterator
    except ImportError as exc:
        raise ImportError(f"reading WARC/WET files needs warcio ({exc}): "
                          f"{install_hint('warc')}") from exc
    return ArchiveIterator


def is_warc_path(name: Union[str, "os.PathLike[str]"]) -> bool:
    """True for the names read as WARC/WET files (see WARC_SUFFIXES)."""
    return os.fspath(name).lower().endswith(WARC_SUFFIXES)


def html_to_text(data: bytes, charset: Optional[str] = None) -> str:
    """The visible text of an HTML document (bytes): Resiliparse's
    ``extract_plain_text`` over its HTML5 parse, the encoding from
    ``charset`` when it names one Python knows, else detected."""
    try:
        from resiliparse.extract.html2text import extract_plain_text
        from resiliparse.parse.encoding import bytes_to_str, detect_encoding
        from resiliparse.parse.html import HTMLTree
    except ImportError as exc:
        raise ImportError(f"turning HTML into text needs Resiliparse ({exc}): "
                          f"{install_hint('warc')}") from exc
    encoding = None
    if charset:
        try:
            "".encode(charset)
            encoding = charset
        except (LookupError, ValueError):
            encoding = None
    if encoding is None:
        encoding = detect_encoding(data)
    tree = HTMLTree.parse(bytes_to_str(data, cast(str, encoding)))
    return str(extract_plain_text(tree))


def _charset(content_type: str) -> Optional[str]:
    for part in content_type.split(";")[1:]:
        name, _, value = part.strip().partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'") or None
    return None


def _document(record: Any, path: str, offset: int) -> Optional[WarcDocument]:
    """The document of a record, None if it is not one; _Damaged if the
    record is cut short or its payload is unreadable."""
    kind = record.rec_type
    if kind not in ("response", "conversion"):
        _drain(record)
        return None
    if kind == "response":
        http = record.http_headers
        ctype = (http.get_header("Content-Type") if http is not None else None) or ""
        mime = ctype.split(";")[0].strip().lower()
        if mime and mime not in _HTML_TYPES and mime != "text/plain":
            _drain(record)
            return None
    try:
        payload = record.content_stream().read()
    except (zlib.error, EOFError, OSError, ValueError) as exc:
        raise _Damaged(f"payload unreadable ({type(exc).__name__}: {exc})") from None
    remaining = getattr(record.raw_stream, "limit", 0) or 0
    if remaining > 0:
        raise _Damaged(f"record cut short: {remaining} of its {record.length} bytes missing")
    uri = record.rec_headers.get_header("WARC-Target-URI")
    if not uri:
        raise _Damaged(f"{kind} record without WARC-Target-URI")
    if kind == "conversion":
        text = payload.decode("utf-8", "replace")
    elif mime == "text/plain":
        text = payload.decode(_charset(ctype) or "utf-8", "replace")
    else:
        text = html_to_text(payload, _charset(ctype))
    return WarcDocument(uri, text, path, offset)


def _drain(record: Any) -> None:
    """Read a record that is not a document to its end (checking it is whole)."""
    stream = record.raw_stream
    try:
        while stream.read(_SCAN):
            pass
    except (zlib.error, EOFError, OSError, ValueError) as exc:
        raise _Damaged(f"record unreadable ({type(exc).__name__}: {exc})") from None
    if (getattr(stream, "limit", 0) or 0) > 0:
        raise _Damaged(f"record cut short: {stream.limit} of its {record.length} bytes missing")


def _is_gzip(f: BinaryIO) -> bool:
    f.seek(0)
    magic = f.read(2)
    f.seek(0)
    return magic == b"\x1f\x8b"


def _next_start(f: BinaryIO, pos: int, gz: bool) -> Optional[int]:
    """Offset of the first candidate record start at or after pos."""
    needle = b"\x1f\x8b\x08" if gz else b"\nWARC/1."
    skip = 0 if gz else 1
    f.seek(pos - skip if pos >= skip else 0)
    base = f.tell()
    tail = b""
    while True:
        chunk = f.read(_SCAN)
        if not chunk:
            return None
        data = tail + chunk
        at = data.find(needle)
        if at >= 0:
            found = base - len(tail) + at + skip
            if found >= pos:
                return found
            at = data.find(needle, at + 1)
            if at >= 0:
                return base - len(tail) + at + skip
        base += len(chunk)
        tail = data[-(len(needle) - 1):]


def iter_warc(path: Union[str, "os.PathLike[str]"]) -> Iterator[Union[WarcDocument, WarcProblem]]:
    """The documents of a .warc, .warc.gz or .wet.gz file, in file order,
    with a :class:`WarcProblem` in place of each damaged record.  OSError if
    the file cannot be opened."""
    ArchiveIterator = _need_warcio()
    from warcio.exceptions import ArchiveLoadFailed

    name = os.fspath(path)
    with open(name, "rb") as f:
        gz = _is_gzip(f)
        start: Optional[int] = 0
        while start is not None:
            f.seek(start)
            records = ArchiveIterator(f)
            offset = start
            try:
                for record in records:
                    offset = records.offset  # where this record starts (absolute)
                    try:
                        doc = _document(record, name, offset)
                    except _Damaged as exc:
                        # the record is framed but cut short or unreadable:
                        # report it and look for the next one after it
                        raise _Resync(offset, str(exc)) from None
                    if doc is not None:
                        yield doc
                return
            except _Resync as exc:
                yield WarcProblem(name, exc.offset, exc.reason)
                start = _next_start(f, exc.offset + 1, gz)
            except (ArchiveLoadFailed, zlib.error, EOFError, OSError, ValueError,
                    UnicodeDecodeError, IndexError, KeyError) as exc:
                bad = max(getattr(records, "offset", start), offset, start)
                yield WarcProblem(name, bad, f"{type(exc).__name__}: {_short(exc)}")
                start = _next_start(f, bad + 1, gz)


class _Resync(Exception):
    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason


def _short(exc: BaseException) -> str:
    """The exception's message on one printable line of at most 120 characters."""
    text = " ".join(str(exc).split())
    text = "".join(c if " " <= c <= "~" else "?" for c in text)
    return text[:117] + "..." if len(text) > 120 else text


def read_documents(path: Union[str, "os.PathLike[str]"],
                   problems: Optional[List[WarcProblem]] = None,
                   report: Optional[IO[str]] = None) -> Iterator[Tuple[str, str]]:
    """(uri, text) of each document of path.  Damaged records are skipped:
    appended to ``problems`` when it is given, and written to ``report`` (a
    text stream; default standard error) as ``crawldedup: skipped a damaged
    record in FILE at offset N: reason``."""
    out = sys.stderr if report is None else report
    for item in iter_warc(path):
        if isinstance(item, WarcProblem):
            if problems is not None:
                problems.append(item)
            out.write(f"crawldedup: skipped a damaged record in {item}\n")
            continue
        yield item.uri, item.text


def near_dups_documents(path: str, err: IO[str],
                        counts: Dict[str, int]) -> Iterator[Tuple[str, str, str]]:
    """(where, id, text) of each document of a WARC/WET file, for
    ``crawldedup near-dups``: the id is the WARC-Target-URI.  A damaged
    record is written to err, counted in ``counts["skipped"]`` and skipped;
    it never stops the command.  CrawldedupError (not a traceback) when
    warcio or Resiliparse is missing."""
    try:
        for item in iter_warc(path):
            if isinstance(item, WarcProblem):
                counts["skipped"] = counts.get("skipped", 0) + 1
                err.write(f"crawldedup: skipped a damaged record in {item}\n")
                continue
            yield f"{path} at offset {item.offset}", item.uri, item.text
    except ImportError as exc:
        raise CrawldedupError(str(exc)) from None
