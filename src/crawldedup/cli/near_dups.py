"""``crawldedup near-dups``: near-duplicate documents in a stream of JSON lines.

Each document is fingerprinted with :func:`crawldedup.simhash_many` (the
default ``"auto"`` tokenizer), or with ``--method minhash`` signed with
:func:`crawldedup.near.minhash.minhash_many`, in batches, on a worker thread
while the next batch is read and parsed (the kernels run without the GIL),
and given to a :class:`crawldedup.NearDuplicates` over a
:class:`crawldedup.SimhashIndex` (every pair of documents within Hamming
distance k) or a :class:`crawldedup.near.lsh.MinHashIndex` (every pair that
shares an LSH band and whose estimated Jaccard similarity reaches
``--min-jaccard``, by default the threshold): each pair is found exactly
once, as (earlier, later).  The command parses the arguments, reads the documents
and prints what NearDuplicates finds.  With
``--index PATH`` the index is loaded first (documents of earlier runs count as
earlier than every document of this run) and saved at the end, atomically.

Output, one JSON object a line on standard output:

* ``--format pairs`` (default): ``{"a": ID, "b": ID, "distance": D}`` (with
  MinHash ``{"a": ID, "b": ID, "jaccard": J}``) as the later document of each
  pair is read, its pairs by distance, then by the index's order;
* ``--format clusters``: connected components of the pairs, each
  ``{"representative": ID, "members": [ID, ...], "size": N}`` with the
  earliest document first (it is the representative), clusters in the order
  of their representatives.  Documents with identical fingerprints join their
  group through its first member: a group of n identical documents costs n
  steps, never the n * (n - 1) / 2 pairs that join them.

Documents without features (empty, or only spaces and punctuation: no word
character) all have fingerprint 0, and would all be near duplicates of one
another and of nothing else worth knowing.  Documents whose fingerprint is 0
(those, and, very rarely, a document whose features' hashes cancel out) are
left out (not paired, not added to the index) and counted on standard error,
the rule of ``crawldedup.spark.near_duplicates``; ``--include-featureless``
treats them as any other document.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import (
    IO,
    Any,
    BinaryIO,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Tuple,
    Union,
)

import crawldedup
from crawldedup import _kernel
from crawldedup.cli._common import file_kind, keep_freed_memory
from crawldedup.cli._inputs import close_inputs, open_input, progress_bar, reading_command
from crawldedup.errors import CrawldedupError
from crawldedup.formats import files as _files
from crawldedup.near.index import SimhashIndex
from crawldedup.near.lsh import MinHashIndex
from crawldedup.near.minhash import MAX_PERM, minhash_many
from crawldedup.near.simhash import simhash_many
from crawldedup.warc import near_dups_documents  # WARC/WET: docs/spark.md

BATCH = 4096
# Inputs read as WARC/WET files by crawldedup.warc (as crawldedup.warc.WARC_SUFFIXES).
_WARC_SUFFIXES = (".warc", ".warc.gz", ".wet", ".wet.gz", ".arc.gz")


class BadLine(Exception):
    """A line that is not a document; the message names the line."""


class Stop(Exception):
    """A bad line without --skip-bad: stop with exit status 1."""


# Input is read in blocks of this many bytes, each decoded and split at once.
READ_SIZE = 1 << 20
# bytes.strip()'s whitespace: a line of these alone is blank.
_BLANK = " \t\n\r\x0b\x0c"
_scan_json: Callable[[str, int], Tuple[Any, int]] = \
    json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _blocks(source: BinaryIO) -> Iterator[bytes]:
    """source in blocks of whole lines (the last one may lack its newline)."""
    read = getattr(source, "read1", None) or source.read
    rest: List[bytes] = []
    while True:
        chunk = read(READ_SIZE)
        if not chunk:
            if rest:
                yield b"".join(rest)
            return
        cut = chunk.rfind(b"\n") + 1
        if not cut:
            rest.append(chunk)
            continue
        rest.append(chunk[:cut])
        yield b"".join(rest)
        rest = [chunk[cut:]] if cut < len(chunk) else []


def _loads(text: str) -> Any:
    """json.loads(text): in one call of the scanner when the text is one
    value from its first character to its last (a document line), else by
    json.loads itself, with its errors."""
    if text[0] not in " \t\n\r":
        try:
            value, end = _scan_json(text, 0)
        except (StopIteration, ValueError):
            end = -1
        if end == len(text):
            return value
    return json.loads(text)


def _documents(name: str, source: BinaryIO, args: argparse.Namespace,
               first_number: int) -> Iterator[Union[Tuple[str, Any, Any], "_Chunk"]]:
    """(where, id, text) for each line of source that is not blank; BadLine
    objects instead of ids for lines that are not documents; a _Chunk for a
    block's documents when the block holds no bad line.  JSON lines are
    read a block at a time by the core's reader, which hands back what is
    not a document for _line_document to read again and name the problem."""
    if args.lines:
        yield from _plain_lines(name, source, args, first_number)
        return
    text_key = args.text_field.encode("utf-8", "surrogatepass")
    id_key = args.id_field.encode("utf-8", "surrogatepass")
    number = 0
    for block in _blocks(source):
        status, ids, texts = _kernel.jsonl_documents(block, text_key, id_key)
        if 2 not in status:             # documents and blank lines only
            if 0 in status:
                ids = [ident for kind, ident in zip(status, ids) if kind]
                texts = [text for kind, text in zip(status, texts) if kind]
            yield _Chunk(name, number, status, ids, texts)
            number += len(status)
            continue
        for kind, ident, text in zip(status, ids, texts):
            number += 1
            if kind == 1:
                yield f"{name}:{number}", ident, text
            elif kind == 2:
                yield _line_document(f"{name}:{number}", text, args, first_number + number)


class _Chunk:
    """The documents of a block of lines that holds no bad line: their ids
    and texts, and where they are, for one_by_one."""

    def __init__(self, name: str, before: int, status: bytes, ids: List[Any],
                 texts: List[str]) -> None:
        self.name, self.before, self.status = name, before, status
        self.ids, self.texts = ids, texts

    def one_by_one(self) -> Iterator[Tuple[str, Any, str]]:
        """(where, id, text) of each document."""
        numbers = [self.before + i + 1 for i, kind in enumerate(self.status) if kind]
        for number, ident, text in zip(numbers, self.ids, self.texts):
            yield f"{self.name}:{number}", ident, text


def _plain_lines(name: str, source: BinaryIO, args: argparse.Namespace,
                 first_number: int) -> Iterator[Tuple[str, Any, Any]]:
    """_documents for --lines: each line is a text, its number its id.  A
    block of lines is decoded and split at once; a block with bytes that are
    not UTF-8 line by line, to name the line."""
    number = 0
    for block in _blocks(source):
        lines: List[Any]
        try:
            lines = block.decode("utf-8").split("\n")
        except UnicodeDecodeError:
            lines = block.split(b"\n")
        if block.endswith(b"\n"):
            lines.pop()  # the empty string after the last newline
        for line in lines:
            number += 1
            if isinstance(line, str):
                text = line.rstrip("\r\n")
                if text.strip(_BLANK):
                    yield f"{name}:{number}", first_number + number, text
            elif line.strip():
                yield _line_document(f"{name}:{number}", line, args, first_number + number)


def _line_document(where: str, line: bytes, args: argparse.Namespace,
                   number: int) -> Tuple[str, Any, Any]:
    """_document of one line that is not blank, given as bytes (BadLine if
    it is not UTF-8)."""
    raw = line.rstrip(b"\r\n")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return where, BadLine(f"{where}: not UTF-8 ({exc.reason} at byte {exc.start})"), None
    return _document(where, text, args, number)


def _document(where: str, text: str, args: argparse.Namespace,
              number: int) -> Tuple[str, Any, Any]:
    """(where, id, text) of one line that is not blank (number: its id with
    --lines)."""
    if args.lines:
        return where, number, text
    try:
        doc = _loads(text)
    except ValueError as exc:
        return where, BadLine(f"{where}: not a JSON document ({exc})"), None
    except RecursionError:
        return where, BadLine(f"{where}: not a JSON document (nested too deeply to read)"), None
    if not isinstance(doc, dict):
        return where, BadLine(f"{where}: a JSON {type(doc).__name__}, not an object"), None
    if args.text_field not in doc:
        return where, BadLine(f"{where}: no {args.text_field!r} field"), None
    text = doc[args.text_field]
    if not isinstance(text, str):
        return where, BadLine(f"{where}: field {args.text_field!r} is a JSON "
                              f"{_json_type(text)}, not a string"), None
    if args.id_field not in doc:
        return where, BadLine(f"{where}: no {args.id_field!r} field (or give --id-field)"), None
    ident = doc[args.id_field]
    if isinstance(ident, bool) or not isinstance(ident, (str, int)):
        return where, BadLine(f"{where}: id {_json(ident)} is a JSON {_json_type(ident)}; "
                              f"ids must be strings or integers"), None
    return where, ident, text


def _json(value: Any) -> str:
    """value as JSON, as the user wrote it (true, null, "x"), shortened."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _count(n: int, noun: str) -> str:
    """'1 document', '2 documents'."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _json_type(value: Any) -> str:
    return {bool: "boolean", int: "number", float: "number", str: "string", list: "array",
            dict: "object", type(None): "null"}.get(type(value), type(value).__name__)


def _simhash_index(args: argparse.Namespace, index_path: Optional[str]) -> SimhashIndex:
    """The --index to continue, or a new SimhashIndex."""
    for flag, value in (("--threshold", args.threshold), ("--num-perm", args.num_perm),
                        ("--shingle", args.shingle), ("--min-jaccard", args.min_jaccard)):
        if value is not None:
            raise CrawldedupError(f"{flag} is for --method minhash; SimHash takes --k")
    if index_path and os.path.exists(index_path):
        kind = file_kind(index_path)
        if kind != _files.KIND_INDEX:
            name = _files.kind_name(kind)
            hint = " (give --method minhash)" if kind == _files.KIND_MINHASH else ""
            raise CrawldedupError(f"the index {args.index!r} holds a {name}, not a SimHash "
                                  f"index{hint}; give another --index path")
        index = SimhashIndex.load(index_path)
        if args.k is not None and args.k != index.k:
            raise CrawldedupError(f"the index {args.index!r} was built for k={index.k}; "
                                  f"omit --k or give --k {index.k}")
        return index
    return SimhashIndex(3 if args.k is None else args.k)


def _recipe(shingle: int) -> str:
    """How near-dups makes MinHash signatures, saved with its index."""
    return f"crawldedup near-dups: minhash tokenizer=auto shingle={shingle} seed=1"


def _minhash_index(args: argparse.Namespace, index_path: Optional[str]) -> MinHashIndex:
    """The --index to continue (its threshold, num_perm and shingle unless
    the same are given), or a new MinHashIndex."""
    if args.k is not None:
        raise CrawldedupError("--k is for --method simhash; MinHash takes --threshold")
    if index_path and os.path.exists(index_path):
        kind = file_kind(index_path)
        if kind != _files.KIND_MINHASH:
            name = _files.kind_name(kind)
            hint = " (give --method simhash)" if kind == _files.KIND_INDEX else ""
            raise CrawldedupError(f"the index {args.index!r} holds a {name}, not a MinHash LSH "
                                  f"index{hint}; give another --index path")
        index = MinHashIndex.load(index_path)
        found = re.fullmatch(r"crawldedup near-dups: minhash tokenizer=auto shingle=(\d+) seed=1",
                             index.recipe)
        if found is None:
            raise CrawldedupError(f"the index {args.index!r} holds signatures made another way "
                                  f"({index.recipe or 'no recipe saved'}); near-dups can add "
                                  f"only its own; give another --index path")
        for flag, given, kept in (("--threshold", args.threshold, index.threshold),
                                  ("--num-perm", args.num_perm, index.num_perm),
                                  ("--shingle", args.shingle, int(found.group(1)))):
            if given is not None and given != kept:
                raise CrawldedupError(f"the index {args.index!r} was built with {flag} {kept:g}; "
                                      f"omit {flag} or give {flag} {kept:g}")
        args.shingle = int(found.group(1))
        return index
    shingle = 5 if args.shingle is None else args.shingle
    args.shingle = shingle
    try:
        return MinHashIndex(0.8 if args.threshold is None else args.threshold,
                            128 if args.num_perm is None else args.num_perm,
                            recipe=_recipe(shingle))
    except ValueError as exc:
        raise CrawldedupError(str(exc)) from None


def run(args: argparse.Namespace, out: IO[str], err: IO[str], stdin: Optional[BinaryIO]) -> int:
    keep_freed_memory()   # batches free and allocate tens of megabytes each

    index_path = os.path.abspath(args.index) if args.index else None
    index: Union[SimhashIndex, MinHashIndex]
    fingerprints: Callable[[List[str]], Any]
    if args.method == "minhash":
        index = _minhash_index(args, index_path)
        fingerprints = functools.partial(minhash_many, num_perm=index.num_perm,
                                         shingle=args.shingle)
        score = "jaccard"
    else:
        index = _simhash_index(args, index_path)
        fingerprints = simhash_many
        score = "distance"
    if index_path:
        _check_writable(args.index, index_path)
    index_before = _identity(index_path)
    near = crawldedup.NearDuplicates(index, clusters=args.format == "clusters",
                                     include_featureless=args.include_featureless,
                                     min_jaccard=args.min_jaccard)
    if isinstance(index, MinHashIndex):
        criterion = f"with an estimated Jaccard similarity of at least {near.min_jaccard:g}"
    else:
        criterion = f"within distance {index.k}"
    earlier = near.earlier
    counts = {"documents": 0, "skipped": 0, "pairs": 0, "featureless": 0, "compared": 0}
    bar = progress_bar(err)

    def bad(problem: BadLine) -> None:
        if not args.skip_bad:
            raise Stop(str(problem))
        counts["skipped"] += 1
        err.write(f"crawldedup: skipped {problem}\n")

    # A batch is fingerprinted on a worker thread (simhash_many and
    # minhash_many run without the GIL) while the next one is read and
    # parsed and the one before is compared; results are taken in order.
    pool = ThreadPoolExecutor(1, thread_name_prefix="crawldedup-fingerprints")
    pending: List[Tuple[List[Any], Any]] = []

    def flush(ids: List[Any], texts: List[str]) -> None:
        """Submit a batch (ids, texts), and take the results of the ones
        before it."""
        if ids:
            pending.append((ids, pool.submit(fingerprints, texts)))
        while len(pending) > 1:     # the one just submitted runs meanwhile
            done, future = pending.pop(0)
            take(done, future.result())

    def drain() -> None:
        while pending:
            ids, future = pending.pop(0)
            take(ids, future.result())

    def take(ids: List[Any], fps: Any) -> None:
        if bar is not None:
            bar.update(len(ids))
        for a, b, value in near.add(ids, fps):
            line = json.dumps({"a": a, "b": b, score: value}, ensure_ascii=False) + "\n"
            try:
                out.write(line)
            finally:
                # counted once written, even when Ctrl-C lands as the
                # write returns (the pair is in the output: it is flushed)
                counts["pairs"] += 1
        counts["featureless"] = near.featureless
        # Every pair among the documents compared so far is written.
        counts["compared"] += len(ids)

    sources = args.files or ["-"]
    # How far the run got, for the message of an interruption (Ctrl-C).
    progress: Dict[str, Any] = {"phase": "reading", "clusters": 0, "groups": 0}
    try:
        try:
            for name in sources:
                label, source = open_input(name, stdin)
                try:
                    batch_ids: List[Any] = []
                    batch_texts: List[str] = []
                    first = earlier + counts["documents"] + counts["skipped"] if args.lines else 0
                    documents: Iterator[Any] = _documents(label, source, args, first)
                    if name != "-" and name.lower().endswith(_WARC_SUFFIXES):
                        documents = near_dups_documents(name, err, counts)
                    for item in documents:
                        if isinstance(item, _Chunk):
                            if near.arrive_many(item.ids):   # ids all new: taken at once
                                counts["documents"] += len(item.ids)
                                start = 0
                                while start < len(item.ids):
                                    stop = start + BATCH - len(batch_ids)
                                    batch_ids.extend(item.ids[start:stop])
                                    batch_texts.extend(item.texts[start:stop])
                                    start = stop
                                    if len(batch_ids) >= BATCH:
                                        flush(batch_ids, batch_texts)
                                        batch_ids, batch_texts = [], []
                                continue
                            items: Iterable[Tuple[str, Any, str]] = item.one_by_one()
                        else:
                            items = (item,)
                        for where, ident, text in items:
                            if not isinstance(ident, BadLine):
                                given = near.given(ident)
                                if given is not None:
                                    ident = BadLine(f"{where}: id {_json(ident)} was already "
                                                    f"given" + (" (in the index)"
                                                                if given == "index" else ""))
                            if isinstance(ident, BadLine):
                                if not args.skip_bad:
                                    # the documents before the bad line count
                                    flush(batch_ids, batch_texts)
                                    drain()
                                    batch_ids, batch_texts = [], []
                                bad(ident)
                                continue
                            near.arrive(ident)
                            batch_ids.append(ident)
                            batch_texts.append(text)
                            counts["documents"] += 1
                            if len(batch_ids) >= BATCH:
                                flush(batch_ids, batch_texts)
                                batch_ids, batch_texts = [], []
                    flush(batch_ids, batch_texts)
                    drain()
                finally:
                    close_inputs([source], stdin)
        except Stop as exc:
            if bar is not None:
                bar.close()
            err.write(f"crawldedup: error: {exc} (--skip-bad skips such lines)\n")
            return 1
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        if bar is not None:
            bar.close()
        progress["phase"] = "output"
        if args.format == "clusters":
            groups = near.clusters()
            progress["groups"] = len(groups)
            for group in groups:
                line = json.dumps({"representative": group[0], "members": group,
                                   "size": len(group)}, ensure_ascii=False) + "\n"
                try:
                    out.write(line)
                finally:  # counted once written (see the pairs' count)
                    progress["clusters"] += 1
        out.flush()
        progress["phase"] = "saving"
        if index_path:  # without --index, the index is not kept: no need to fill it
            near.finish()
            try:
                index.save(index_path)
            except OSError as exc:
                raise CrawldedupError(f"cannot save the index {args.index!r}: "
                                      f"{exc.strerror or exc}") from None
        progress["phase"] = "done"
        if args.format == "clusters":
            summary = (f"crawldedup: {_count(counts['documents'], 'document')}, "
                       f"{_count(sum(len(g) for g in groups), 'near duplicate')} {criterion} "
                       f"in {_count(len(groups), 'cluster')}")
        else:
            summary = (f"crawldedup: {_count(counts['documents'], 'document')}, "
                       f"{_count(counts['pairs'], 'near-duplicate pair')} {criterion}")
        if counts["featureless"]:
            summary += (f", {_count(counts['featureless'], 'document')} without features (empty or "
                        f"no word character) left out (--include-featureless pairs them)")
        if counts["skipped"]:
            summary += f", {_count(counts['skipped'], 'bad line')} skipped"
        if index_path:
            summary += f"; index {args.index} holds {len(index)}"
        err.write(summary + "\n")
        return 0
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
        _report_interruption(args, out, err, counts, progress, index_path, index_before)
        return 130


def _check_writable(name: str, path: str) -> None:
    """Refuse, before any work, an --index that could not be saved at the
    end: saving replaces the file by a new one written beside it, so its
    folder must take a new file (a read-only folder does not)."""
    folder = os.path.dirname(_files.resolve(path)) or "."
    try:
        fd, probe = tempfile.mkstemp(prefix=".crawldedup-check-", dir=folder)
    except OSError as exc:
        raise CrawldedupError(f"cannot save the index {name!r}: its folder {folder} does not "
                              f"take new files ({exc.strerror or exc}); give another --index "
                              f"path") from None
    os.close(fd)
    os.unlink(probe)


def _identity(path: Optional[str]) -> Optional[Tuple[int, int, int]]:
    """(inode, size, mtime) of the file at path, None when there is none."""
    try:
        st = os.stat(path) if path else None
    except OSError:
        return None
    return None if st is None else (st.st_ino, st.st_size, st.st_mtime_ns)


def _report_interruption(args: argparse.Namespace, out: IO[str], err: IO[str],
                         counts: Dict[str, int], progress: Dict[str, Any],
                         index_path: Optional[str],
                         index_before: Optional[Tuple[int, int, int]]) -> None:
    """What a run stopped by Ctrl-C had written: the pairs or clusters of
    the output (flushed now), and whether the index was saved."""
    try:
        out.flush()
    except (OSError, ValueError):
        pass
    phase = progress["phase"]
    if phase == "reading":
        what = f"interrupted after reading {_count(counts['documents'], 'document')}: "
        if args.format == "pairs":
            what += (f"{_count(counts['pairs'], 'near-duplicate pair')} written, every pair "
                     f"among the first {counts['compared']:,}; the pairs of the later ones "
                     f"are missing")
        else:
            what += "no clusters written (they are written once every document is read)"
    elif phase == "output" and args.format == "clusters":
        what = (f"interrupted while writing the clusters: {progress['clusters']:,} of "
                f"{_count(progress['groups'], 'cluster')} written")
    else:
        what = "interrupted after the output was written"
    if index_path:
        if phase == "done" or _identity(index_path) != index_before:
            what += f"; the index {args.index} was saved"
        elif index_before is None:
            what += f"; the index {args.index} was not written"
        else:
            what += f"; the index {args.index} was not saved (it is as it was before this run)"
    err.write(f"crawldedup: {what}\n")


def main(args: argparse.Namespace) -> int:
    """``crawldedup near-dups`` on the process's standard streams."""
    stdin = sys.stdin.buffer if sys.stdin is not None else None
    return run(args, sys.stdout, sys.stderr, stdin)


def add_parsers(commands: Any) -> None:
    """Add ``near-dups`` to the crawldedup command line."""
    near = reading_command(
        commands, "near-dups", help="find near-duplicate documents (SimHash or MinHash)",
        description="Read documents, one JSON object a line (or plain text lines with "
                    "--lines), fingerprint each with SimHash (default) and print every pair "
                    "of documents within Hamming distance k, or with MinHash (--method "
                    "minhash) and print every pair whose estimated Jaccard similarity "
                    "reaches the threshold, or their clusters, as JSON lines.")
    near.add_argument("--method", choices=("simhash", "minhash"), default="simhash",
                      help="simhash (default): 64-bit fingerprints within Hamming distance "
                           "--k; minhash: signatures banded by LSH, pairs at --threshold")
    near.add_argument("--text-field", default="text", metavar="NAME",
                      help="the field that holds a document's text (default: text)")
    near.add_argument("--id-field", default="id", metavar="NAME",
                      help="the field that holds a document's id, a string or an integer "
                           "(default: id)")
    near.add_argument("--lines", action="store_true",
                      help="each line is a document's text; its id is its line number")
    near.add_argument("--k", type=_k, metavar="K",
                      help="the largest Hamming distance of a near duplicate, 0 to 8 "
                           "(default 3, or the --index's)")
    near.add_argument("--threshold", type=_fraction, metavar="T",
                      help="minhash: the Jaccard similarity of a near duplicate, which "
                           "chooses the LSH bands (default 0.8, or the --index's)")
    near.add_argument("--min-jaccard", type=_fraction, metavar="J",
                      help="minhash: keep the pairs whose estimated Jaccard similarity is at "
                           "least J (default: the threshold; 0 keeps every LSH candidate)")
    near.add_argument("--num-perm", type=_num_perm, metavar="N",
                      help="minhash: values in a signature (default 128, or the --index's)")
    near.add_argument("--shingle", type=_shingle, metavar="N",
                      help="minhash: words (or characters of Chinese and other unspaced "
                           "scripts) a shingle (default 5, or the --index's)")
    near.add_argument("--format", choices=("pairs", "clusters"), default="pairs",
                      help="print pairs (default) or clusters (connected components)")
    near.add_argument("--skip-bad", action="store_true",
                      help="report and skip malformed lines instead of stopping at the first")
    near.add_argument("--include-featureless", action="store_true",
                      help="pair documents without features (empty, or no word character: "
                           "fingerprint 0) like any other; by default they are left out and "
                           "counted")
    near.add_argument("--index", metavar="PATH",
                      help="a SimhashIndex (or, with --method minhash, MinHashIndex) file: "
                           "loaded first when it exists (its documents count as earlier "
                           "ones), saved with this run's documents at the end")


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text}")
    return value


def _int_in(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: an int in [lo, hi]."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be in [{lo}, {hi}], got {value}")
        return value
    return parse


_k = _int_in(0, 8)
_num_perm = _int_in(2, MAX_PERM)
_shingle = _int_in(1, 16)
