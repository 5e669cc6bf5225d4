"""``crawldedup near-dups``: near-duplicate documents in a stream of JSON lines.

Each document is fingerprinted with :func:`crawldedup.simhash_many` (the
default ``"auto"`` tokenizer) in batches, added to a
:class:`crawldedup.SimhashIndex`, and looked up in it: every pair of documents
within Hamming distance k is found exactly once, as (earlier, later).  With
``--index PATH`` the index is loaded first (documents of earlier runs count as
earlier than every document of this run) and saved at the end, atomically.

Output, one JSON object a line on standard output:

* ``--format pairs`` (default): ``{"a": ID, "b": ID, "distance": D}`` as the
  later document of each pair is read, its pairs by distance, then by the
  index's order;
* ``--format clusters``: connected components of the pairs, each
  ``{"representative": ID, "members": [ID, ...], "size": N}`` with the
  earliest document first (it is the representative), clusters in the order
  of their representatives.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import IO, Any, BinaryIO, Dict, Hashable, Iterator, List, Optional, Tuple

BATCH = 4096


class BadLine(Exception):
    """A line that is not a document; the message names the line."""


class Stop(Exception):
    """A bad line without --skip-bad: stop with exit status 1."""


def _documents(name: str, source: BinaryIO, args: argparse.Namespace,
               first_number: int) -> Iterator[Tuple[str, Any, Any]]:
    """(where, id, text) for each line of source; BadLine objects instead of
    ids for lines that are not documents."""
    for number, raw in enumerate(source, 1):
        where = f"{name}:{number}"
        line = raw.rstrip(b"\r\n")
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield where, BadLine(f"{where}: not UTF-8 ({exc.reason} at byte {exc.start})"), None
            continue
        if args.lines:
            yield where, first_number + number, text
            continue
        try:
            doc = json.loads(text)
        except ValueError as exc:
            yield where, BadLine(f"{where}: not a JSON document ({exc})"), None
            continue
        if not isinstance(doc, dict):
            yield where, BadLine(f"{where}: a JSON {type(doc).__name__}, not an object"), None
            continue
        if args.text_field not in doc:
            yield where, BadLine(f"{where}: no {args.text_field!r} field"), None
            continue
        text = doc[args.text_field]
        if not isinstance(text, str):
            yield where, BadLine(f"{where}: field {args.text_field!r} is a JSON "
                                 f"{_json_type(text)}, not a string"), None
            continue
        if args.id_field not in doc:
            yield where, BadLine(f"{where}: no {args.id_field!r} field (or give --id-field)"), None
            continue
        ident = doc[args.id_field]
        if isinstance(ident, bool) or not isinstance(ident, (str, int)):
            yield where, BadLine(f"{where}: id {ident!r} is a JSON {_json_type(ident)}; ids "
                                 f"must be strings or integers"), None
            continue
        yield where, ident, text


def _json_type(value: Any) -> str:
    return {bool: "boolean", int: "number", float: "number", str: "string", list: "array",
            dict: "object", type(None): "null"}.get(type(value), type(value).__name__)


class _Clusters:
    """Union-find over document ids, remembering the order documents came in."""

    def __init__(self) -> None:
        self.parent: Dict[Hashable, Hashable] = {}

    def find(self, x: Hashable) -> Hashable:
        parent = self.parent
        parent.setdefault(x, x)
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    def union(self, a: Hashable, b: Hashable) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra

    def groups(self, rank: Dict[Hashable, Tuple[int, str]]) -> List[List[Hashable]]:
        members: Dict[Hashable, List[Hashable]] = {}
        for x in self.parent:
            members.setdefault(self.find(x), []).append(x)
        out = [sorted(group, key=rank.__getitem__) for group in members.values()]
        out.sort(key=lambda group: rank[group[0]])
        return out


def run(args: argparse.Namespace, out: IO[str], err: IO[str], stdin: Optional[BinaryIO]) -> int:
    from crawldedup.errors import CrawldedupError
    from crawldedup.index import SimhashIndex
    from crawldedup.simhash import simhash_many

    index_path = os.path.abspath(args.index) if args.index else None
    if index_path and os.path.exists(index_path):
        index = SimhashIndex.load(index_path)
        if args.k is not None and args.k != index.k:
            raise CrawldedupError(f"the index {args.index!r} was built for k={index.k}; "
                                  f"omit --k or give --k {index.k}")
    else:
        index = SimhashIndex(3 if args.k is None else args.k)
    earlier = len(index)
    # The order documents arrived in, for "earlier": documents of earlier runs
    # (in the loaded index) come before all of this run's.
    order: Dict[Hashable, int] = {}
    clusters = _Clusters() if args.format == "clusters" else None
    counts = {"documents": 0, "skipped": 0, "pairs": 0}
    bar = _progress(err)

    def bad(problem: BadLine) -> None:
        if not args.skip_bad:
            raise Stop(str(problem))
        counts["skipped"] += 1
        err.write(f"crawldedup: skipped {problem}\n")

    def flush(batch: List[Tuple[str, Any, str]]) -> None:
        if not batch:
            return
        ids = [ident for _, ident, _ in batch]
        fps = simhash_many([text for _, _, text in batch])
        index.add_many(ids, fps)
        offsets, found, distances = index.query_many(fps)
        found_list, dist_list = found.tolist(), distances.tolist()
        for i, ident in enumerate(ids):
            mine = order[ident]
            for j in range(int(offsets[i]), int(offsets[i + 1])):
                other = found_list[j]
                if other == ident or order.get(other, -1) > mine:
                    continue  # itself, or a later document (its own query finds this pair)
                counts["pairs"] += 1
                if clusters is not None:
                    clusters.union(other, ident)
                else:
                    out.write(json.dumps({"a": other, "b": ident, "distance": dist_list[j]},
                                         ensure_ascii=False) + "\n")
        if bar is not None:
            bar.update(len(batch))

    sources = args.files or ["-"]
    try:
        for name in sources:
            if name == "-":
                if stdin is None:
                    raise CrawldedupError("no FILE given and no standard input to read")
                source, label = stdin, "<stdin>"
            else:
                try:
                    source = open(name, "rb")
                except OSError as exc:
                    raise CrawldedupError(f"cannot read {name!r}: {exc.strerror}") from None
                label = name
            try:
                batch: List[Tuple[str, Any, str]] = []
                first = earlier + counts["documents"] + counts["skipped"] if args.lines else 0
                for where, ident, text in _documents(label, source, args, first):
                    if not isinstance(ident, BadLine) and (ident in order
                                                           or _stored(index, ident)):
                        ident = BadLine(f"{where}: id {ident!r} was already given"
                                        + ("" if ident in order else " (in the index)"))
                    if isinstance(ident, BadLine):
                        if not args.skip_bad:
                            flush(batch)  # the documents before the bad line count
                            batch = []
                        bad(ident)
                        continue
                    order[ident] = len(order)
                    batch.append((where, ident, text))
                    counts["documents"] += 1
                    if len(batch) >= BATCH:
                        flush(batch)
                        batch = []
                flush(batch)
            finally:
                if source is not stdin:
                    source.close()
    except Stop as exc:
        if bar is not None:
            bar.close()
        err.write(f"crawldedup: error: {exc} (--skip-bad skips such lines)\n")
        return 1
    if bar is not None:
        bar.close()
    if clusters is not None:
        rank = {ident: (order.get(ident, -1), str(ident)) for ident in clusters.parent}
        groups = clusters.groups(rank)
        for group in groups:
            out.write(json.dumps({"representative": group[0], "members": group,
                                  "size": len(group)}, ensure_ascii=False) + "\n")
    out.flush()
    if index_path:
        index.save(index_path)
    summary = (f"crawldedup: {counts['documents']} documents, {counts['pairs']} near-duplicate "
               f"pairs within distance {index.k}")
    if clusters is not None:
        summary += f" in {len(groups)} clusters"
    if counts["skipped"]:
        summary += f", {counts['skipped']} bad lines skipped"
    if index_path:
        summary += f"; index {args.index} holds {len(index)}"
    err.write(summary + "\n")
    return 0


def _stored(index: Any, ident: Any) -> bool:
    try:
        return ident in index
    except TypeError:
        return False


def _progress(err: IO[str]) -> Any:
    """A tqdm bar on stderr when it is a terminal and tqdm is installed."""
    isatty = getattr(err, "isatty", None)
    if not (isatty and isatty()):
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(file=err, unit=" docs", desc="near-dups")


def add_parser(commands: Any) -> None:
    near = commands.add_parser(
        "near-dups", help="find near-duplicate documents (SimHash)",
        description="Read documents, one JSON object a line (or plain text lines with "
                    "--lines), fingerprint each with SimHash and print every pair of "
                    "documents within Hamming distance k, or their clusters, as JSON lines.")
    near.add_argument("files", nargs="*", metavar="FILE", help="input files ('-' = stdin)")
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
    near.add_argument("--format", choices=("pairs", "clusters"), default="pairs",
                      help="print pairs (default) or clusters (connected components)")
    near.add_argument("--skip-bad", action="store_true",
                      help="report and skip malformed lines instead of stopping at the first")
    near.add_argument("--index", metavar="PATH",
                      help="a SimhashIndex file: loaded first when it exists (its documents "
                           "count as earlier ones), saved with this run's documents at the end")


def _k(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= value <= 8:
        raise argparse.ArgumentTypeError(f"must be in [0, 8], got {value}")
    return value
