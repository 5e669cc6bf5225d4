"""``crawldedup due`` and ``crawldedup record``: the re-crawl state for
crawlers that are not Scrapy.

``crawldedup due --state recrawl.db --limit N`` prints the URLs to fetch now,
one per line, best first.  ``crawldedup record --state recrawl.db`` reads JSON
lines ``{"url", "status", "headers", "digest" | "text" | "body", "time"}``
and prints one JSON line ``{"url", "verdict"}`` for each, in order.

Exit status: 0 on success, 1 on an error (a bad line, an unreachable store),
2 on a usage error (``due`` of a SQLite state that does not exist), 130/143
when ``record`` is stopped by SIGINT/SIGTERM (after the batch being
recorded, whose verdicts are printed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import IO, Any, BinaryIO, Dict, List, Optional, Tuple

from crawldedup import recrawl
from crawldedup.cli._common import UsageError, positive_int
from crawldedup.cli._delivery import SignalGuard, Stopped
from crawldedup.cli._inputs import close_inputs, open_input, progress_bar, reading_command
from crawldedup.errors import CrawldedupError

BATCH = 1000


class _BadLine(CrawldedupError):
    pass


def _policy(args: argparse.Namespace) -> Any:
    if args.policy == "nutch":
        if args.budget is not None:
            raise CrawldedupError("--budget applies to the change-rate policy, not to nutch")
        return recrawl.NutchPolicy()
    return recrawl.ChangeRatePolicy(budget_per_day=args.budget)


def _writable(path: str) -> bool:
    """Whether path may be written: a write permission bit set and this
    user allowed to write it."""
    return bool(os.stat(path).st_mode & 0o222) and os.access(path, os.W_OK)


def _check_sqlite_state(path: str, command: str) -> None:
    """Refuse, naming the path, a SQLite state that ``command`` cannot use:
    a missing one for ``due`` (a usage error: due reads what record made),
    a read-only file, or a folder that does not exist or is read-only
    (SQLite keeps STATE-wal and STATE-shm beside the file).  Both commands
    write to the state (verdicts, schedule settings, leases)."""
    if path.startswith("sqlite:///"):
        path = path[len("sqlite:///"):]
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise CrawldedupError(f"the state {path!r} is a directory; --state names a file")
    if not os.path.exists(path):
        if command == "due":
            raise UsageError(f"the state {path!r} does not exist: due reads a state that "
                             f"record made (check the --state path)")
        if not os.path.isdir(folder):
            raise CrawldedupError(f"cannot create the state {path!r}: its folder {folder!r} "
                                  f"does not exist")
    elif not _writable(path):
        raise CrawldedupError(f"the state file {path!r} is read-only; {command} writes to it "
                              f"(make it writable or give another --state)")
    if os.path.isdir(folder) and not _writable(folder):
        raise CrawldedupError(f"the folder {folder!r} of the state {path!r} is read-only; "
                              f"SQLite writes {os.path.basename(path)}-wal and "
                              f"{os.path.basename(path)}-shm beside the state")


def _open(args: argparse.Namespace) -> Any:
    options: Dict[str, Any] = {}
    if args.state.startswith(("redis://", "rediss://", "unix://")):
        options["prefix"] = args.prefix
    elif args.prefix != DEFAULT_PREFIX:
        raise CrawldedupError("--prefix applies to a Redis --state only")
    else:
        _check_sqlite_state(args.state, args.command)
    try:
        return recrawl.RecrawlState(args.state, policy=_policy(args), **options)
    except (ValueError, TypeError, ImportError) as exc:
        raise CrawldedupError(f"cannot open the state {args.state!r}: {exc}") from None


def run_due(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    state = _open(args)
    try:
        now = time.time() if args.now is None else args.now
        urls = state.due(now, args.limit, per_host=args.per_host, lease=args.lease,
                         fill=args.fill)
        if urls:
            out.write("\n".join(urls) + "\n")
        out.flush()
        waiting = state.count_due(now)
        err.write(f"crawldedup: {len(urls)} URLs due printed ({waiting} due in all, "
                  f"{len(state)} known); state {args.state}\n")
    finally:
        state.close()
    return 0


def _fetch(line: bytes, where: str) -> Dict[str, Any]:
    try:
        item = json.loads(line)
    except ValueError as exc:
        raise _BadLine(f"{where}: not JSON ({exc})") from None
    if not isinstance(item, dict):
        raise _BadLine(f"{where}: a JSON object was expected, got {type(item).__name__}")
    unknown = set(item) - {"url", "status", "headers", "digest", "text", "body", "time"}
    if unknown:
        raise _BadLine(f"{where}: unknown fields {sorted(unknown)} (expected url, status, "
                       f"headers, digest, text, body, time)")
    fetch = dict(item)
    body = fetch.get("body")
    if isinstance(body, str):
        fetch["body"] = body.encode("utf-8")
    elif body is not None:
        raise _BadLine(f"{where}: body must be a string, got {type(body).__name__}")
    return fetch


def run_record(args: argparse.Namespace, out: IO[str], err: IO[str],
               stdin: Optional[BinaryIO]) -> int:
    # Loaded for `record` only: its HTTP dates need email.utils, which the
    # other commands would otherwise load at every start.
    from crawldedup.recrawl.fetches import parse_fetch  # noqa: PLC0415
    state = _open(args)
    counts: Dict[str, int] = {}
    skipped = 0
    bar = progress_bar(err, " lines", "record")
    # SIGINT/SIGTERM while a line is awaited stop at once; while a batch is
    # recorded and its verdicts printed, they stop after it (so the summary
    # counts exactly what was recorded, and every recorded fetch's verdict
    # was printed).
    guard = SignalGuard()

    def flush(batch: List[Tuple[str, Dict[str, Any]]]) -> None:
        if not batch:
            return
        try:
            verdicts = state.record_many([fetch for _, fetch in batch])
        except (ValueError, TypeError):
            # Find the line: record the ones before it, one by one.
            verdicts = []
            for where, fetch in batch:
                try:
                    verdicts.append(state.record_many([fetch])[0])
                except (ValueError, TypeError) as exc:
                    _emit(batch[:len(verdicts)], verdicts)
                    raise _BadLine(f"{where}: {_strip(exc)}") from None
        _emit(batch, verdicts)

    def _emit(batch: List[Tuple[str, Dict[str, Any]]], verdicts: List[Any]) -> None:
        lines = []
        for (_, fetch), verdict in zip(batch, verdicts):
            counts[verdict.value] = counts.get(verdict.value, 0) + 1
            lines.append(json.dumps({"url": fetch["url"], "verdict": verdict.value},
                                    ensure_ascii=False))
        if lines:
            out.write("\n".join(lines) + "\n")
            out.flush()
        if bar is not None:
            bar.update(len(lines))

    def lines(source: Any) -> Any:
        """The lines of source, a signal stopping the wait for one."""
        it = iter(source)
        while guard.signum is None:
            guard.reading = True
            try:
                line = next(it, None)
            finally:
                guard.reading = False
            if line is None:
                return
            yield line

    batch: List[Tuple[str, Dict[str, Any]]] = []
    try:
        clock = time.time()
        try:
            guard.__enter__()
        except ValueError:  # not the main thread: signals keep their handlers
            pass
        for name in args.files or ["-"]:
            if guard.signum is not None:
                break
            label, source = open_input(name, stdin)
            try:
                batch = []
                try:
                    for number, line in enumerate(lines(source), 1):
                        if not line.strip():
                            continue
                        where = f"{label} line {number}"
                        try:
                            fetch = _fetch(line, where)
                            try:  # checked, not recorded
                                parse_fetch(0, fetch, clock, state.key, state.canonical)
                            except (ValueError, TypeError) as exc:
                                raise _BadLine(f"{where}: {_strip(exc)}") from None
                        except _BadLine as exc:
                            if not args.skip_bad:
                                flush(batch)
                                raise
                            skipped += 1
                            err.write(f"crawldedup: skipped {exc}\n")
                            continue
                        batch.append((where, fetch))
                        if len(batch) >= BATCH:
                            flush(batch)
                            batch = []
                except Stopped:
                    pass  # the lines read so far are recorded below
                flush(batch)
                batch = []
            finally:
                close_inputs([source], stdin)
        total = len(state)
    except _BadLine as exc:
        err.write(f"crawldedup: error: {exc} (--skip-bad skips such lines)\n")
        return 1
    finally:
        guard.__exit__()
        if bar is not None:
            bar.close()
        state.close()
    extra = f", {skipped} bad lines skipped" if skipped else ""
    if guard.signum is not None:
        err.write(f"crawldedup: stopped by signal {guard.signum}; recorded "
                  f"{sum(counts.values())} fetches: {_counts(counts)}{extra}, their verdicts "
                  f"printed; lines not yet read were not recorded; state {args.state} holds "
                  f"{total} URLs\n")
        return 128 + guard.signum
    err.write(f"crawldedup: recorded {sum(counts.values())} fetches: {_counts(counts)}{extra}; "
              f"state {args.state} holds {total} URLs\n")
    return 0


def _counts(counts: Dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(counts.items())) or "nothing"


def _strip(exc: BaseException) -> str:
    text = str(exc)
    return text[len("fetches[0]"):].lstrip(": ") if text.startswith("fetches[0]") else text


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"must be finite, got {text!r}")
    return value


def _positive(text: str) -> float:
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return value


DEFAULT_PREFIX = "crawldedup:recrawl"


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state", required=True, metavar="PATH|URL",
                        help="the re-crawl state: a SQLite file (created when missing) or a "
                             "redis:// URL")
    parser.add_argument("--prefix", default=DEFAULT_PREFIX, metavar="NAME",
                        help=f"key prefix in Redis (default {DEFAULT_PREFIX})")
    parser.add_argument("--policy", choices=("change-rate", "nutch"), default="change-rate",
                        help="schedule: crawldedup's change-rate estimator (default) or "
                             "Nutch's adaptive interval")
    parser.add_argument("--budget", type=_positive, metavar="N",
                        help="fetches a day the crawler can afford (change-rate policy; "
                             "default: measured from the calls to due)")


def add_parsers(commands: Any) -> None:
    """Add ``due`` and ``record`` to the crawldedup command line."""
    due = commands.add_parser(
        "due", help="print the URLs to re-crawl now",
        description="Print the URLs of the re-crawl state that are due now, one per line, "
                    "best first (by the expected freshness gained per fetch).")
    _common(due)
    due.add_argument("--limit", type=positive_int, required=True, metavar="N",
                     help="print at most N URLs")
    due.add_argument("--per-host", type=positive_int, metavar="N",
                     help="at most N URLs of one host (politeness)")
    due.add_argument("--lease", type=_positive, metavar="SECONDS",
                     help="do not print these URLs again for SECONDS unless recorded")
    due.add_argument("--fill", action="store_true",
                     help="when fewer than N are due, add those due soonest")
    due.add_argument("--now", type=_number, metavar="EPOCH",
                     help="the time to schedule for, in seconds since the epoch "
                          "(default: now)")
    record = reading_command(
        commands, "record", help="record fetches and print their verdicts",
        description="Read fetches as JSON lines {\"url\", \"status\", \"headers\", "
                    "\"digest\" (32 hex digits) or \"text\" or \"body\", \"time\"} and print "
                    "{\"url\", \"verdict\"} for each: new, not_modified, unchanged, "
                    "near_duplicate or changed.")
    _common(record)
    record.add_argument("--skip-bad", action="store_true",
                        help="report and skip bad lines instead of stopping at the first")


def run(args: argparse.Namespace, out: IO[str], err: IO[str],
        stdin: Optional[BinaryIO]) -> int:
    """Run ``due`` or ``record``."""
    if args.command == "due":
        return run_due(args, out, err)
    return run_record(args, out, err, stdin)


def main(args: argparse.Namespace) -> int:
    """``crawldedup due`` or ``record`` on the process's standard streams."""
    stdin = sys.stdin.buffer if sys.stdin is not None else None
    return run(args, sys.stdout, sys.stderr, stdin)
