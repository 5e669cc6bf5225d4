"""``crawldedup due`` and ``crawldedup record``: the re-crawl state for
crawlers that are not Scrapy.

``crawldedup due --state recrawl.db --limit N`` prints the URLs to fetch now,
one per line, best first.  ``crawldedup record --state recrawl.db`` reads JSON
lines ``{"url", "status", "headers", "digest" | "text" | "body", "time"}``
and prints one JSON line ``{"url", "verdict"}`` for each, in order.

Exit status: 0 on success, 1 on an error (a bad line, an unreachable store),
2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import IO, Any, BinaryIO, Dict, List, Optional, Tuple

from crawldedup._near_dups import close_inputs, open_input, progress_bar, reading_command
from crawldedup.cli._common import positive_int
from crawldedup.errors import CrawldedupError

BATCH = 1000


class _BadLine(CrawldedupError):
    pass


def _policy(args: argparse.Namespace) -> Any:
    from crawldedup.recrawl import ChangeRatePolicy, NutchPolicy
    if args.policy == "nutch":
        if args.budget is not None:
            raise CrawldedupError("--budget applies to the change-rate policy, not to nutch")
        return NutchPolicy()
    return ChangeRatePolicy(budget_per_day=args.budget)


def _open(args: argparse.Namespace) -> Any:
    from crawldedup.recrawl import RecrawlState
    options: Dict[str, Any] = {}
    if args.state.startswith(("redis://", "rediss://", "unix://")):
        options["prefix"] = args.prefix
    elif args.prefix != DEFAULT_PREFIX:
        raise CrawldedupError("--prefix applies to a Redis --state only")
    try:
        return RecrawlState(args.state, policy=_policy(args), **options)
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
    from crawldedup.recrawl.fetches import parse_fetch

    state = _open(args)
    counts: Dict[str, int] = {}
    skipped = 0
    bar = progress_bar(err, " lines", "record")

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

    try:
        clock = time.time()
        for name in args.files or ["-"]:
            label, source = open_input(name, stdin)
            try:
                batch: List[Tuple[str, Dict[str, Any]]] = []
                for number, line in enumerate(source, 1):
                    if not line.strip():
                        continue
                    where = f"{label} line {number}"
                    try:
                        fetch = _fetch(line, where)
                        try:
                            parse_fetch(0, fetch, clock, state.key, state.canonical)  # no record
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
                flush(batch)
            finally:
                close_inputs([source], stdin)
        total = len(state)
    except _BadLine as exc:
        err.write(f"crawldedup: error: {exc} (--skip-bad skips such lines)\n")
        return 1
    finally:
        if bar is not None:
            bar.close()
        state.close()
    summary = ", ".join(f"{name} {n}" for name, n in sorted(counts.items())) or "nothing"
    extra = f", {skipped} bad lines skipped" if skipped else ""
    err.write(f"crawldedup: recorded {sum(counts.values())} fetches: {summary}{extra}; "
              f"state {args.state} holds {total} URLs\n")
    return 0


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


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: crawldedup due|record ...")
