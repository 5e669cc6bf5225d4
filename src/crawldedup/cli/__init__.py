"""The ``crawldedup`` command line.

``crawldedup urls`` is the main job: filter a stream of URLs (one per line)
against a persistent state file, printing each URL that no earlier line of this
run, and no earlier run with the same state, has seen.

Guarantees:

* The state is a memory-mapped file, updated in place as URLs are printed: a
  URL printed as new is recorded before it is printed, so no later run prints
  it as new again, even after ``kill -9``.
* Every new URL is written to the output once: the chunk being recorded
  and written is kept in a pending journal, with the state's answer and how
  much of it was written, until it is written; a run that was killed, or
  whose output was closed early, leaves it there and the next run writes
  the rest first (``cli._delivery.Journal``; the limits are in docs/cli.md).
  URLs already written into a pipe whose reader exits before
  reading them (``| head``) are lost with the pipe, up to one pipe buffer:
  a consumer that needs every URL reads the output to its end or writes it
  to a file (docs/cli.md, "What is guaranteed").
* Ctrl-C and SIGTERM stop after the current chunk is printed.
* One ``crawldedup urls`` at a time uses a local state file (``STATE.lock``
  beside it while the command runs); a second one exits with an error.  A
  Redis state or a --db takes any number of processes, each with its own
  journal.
* A state records its key mode (``cli._key_mode``): a run with another one
  is a usage error.

The loop reads chunks, computes each chunk's keys once, and talks to its state
through the small interface of ``crawldedup.cli._url_state`` (docs/cli.md).

The package: ``_common`` (defaults, argument types, file kinds), ``_urls``
(``crawldedup urls``: opening its state, the run), ``_delivery`` (its loop's
parts: signals, lock, journals, chunks, keys computed ahead, output),
``_key_mode`` (the key mode a state records),
``_url_state`` and ``_exact_state`` (the states it talks to), ``_info``
(``crawldedup info``); ``crawldedup near-dups`` lives in
``crawldedup.cli.near_dups``, ``due`` and ``record`` in ``crawldedup.cli.recrawl``.

``crawldedup info PATH`` describes any crawldedup state file.

``crawldedup near-dups FILE.jsonl`` prints the near-duplicate documents of a
stream of JSON lines (see ``near_dups``).

Exit status: 0 on success, 1 on an error, 2 on a usage error, 130/143 when
stopped by SIGINT/SIGTERM, 141 (as a filter killed by SIGPIPE) when the reader
of the output went away (``| head``), which is not reported.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import List, Optional, Sequence

from crawldedup._extras import install_hint
from crawldedup._version import __version__
from crawldedup.bloom.layouts import NAMES as LAYOUTS
from crawldedup.cli import near_dups, recrawl
from crawldedup.cli._common import (
    DEFAULT_CAPACITY,
    DEFAULT_ERROR_RATE,
    UsageError,
    duration,
    file_kind,
    format_duration,
    generations,
    positive_int,
    probability,
)
from crawldedup.cli._inputs import reading_command
from crawldedup.cli.info import run_info
from crawldedup.cli.urls import run_urls
from crawldedup.errors import CrawldedupError

__all__ = ["main", "build_parser", "file_kind", "UsageError", "DEFAULT_CAPACITY",
           "DEFAULT_ERROR_RATE", "duration", "format_duration"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crawldedup",
        description="Have I seen this before? Deduplicate URLs against persistent state.")
    parser.add_argument("--version", action="version", version=f"crawldedup {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    urls = reading_command(
        commands, "urls", help="print the URLs not seen before",
        description="Read URLs, one per line, from FILEs (or standard input) and print each "
                    "one not seen before in this run or in earlier runs with the same state "
                    "file. Blank lines and surrounding whitespace are ignored.")
    urls.add_argument("--state", required=True, metavar="PATH",
                      help="state file (a Bloom filter), created when missing; or "
                           "redis://HOST:PORT/DB/NAME, a Bloom filter in Redis shared by "
                           f"crawlers on several machines ({install_hint('redis')})")
    urls.add_argument("--capacity", type=positive_int, metavar="N",
                      help=f"URLs the new state is sized for (default {DEFAULT_CAPACITY:,})")
    urls.add_argument("--error-rate", type=probability, metavar="P",
                      help=f"false-positive rate at capacity (default {DEFAULT_ERROR_RATE})")
    urls.add_argument("--layout", choices=LAYOUTS,
                      help="bit layout of a new state: 'blocked' keeps each URL's bits in one "
                           "cache line (faster for big states, a few %% more memory)")
    urls.add_argument("--rotate-every", type=duration, metavar="DURATION",
                      help="a rotating state: forget a URL not met for about GENERATIONS x "
                           "DURATION (e.g. 1d, 12h, 3600), so it is printed again; the "
                           "capacity is per DURATION")
    urls.add_argument("--generations", type=generations, metavar="N",
                      help="generations of a new rotating state (default 2): a URL is "
                           "remembered for N-1 to N rotation periods after it was last met")
    urls.add_argument("--canonical", action="store_true",
                      help="compare URLs by their canonical form (w3lib's canonicalize_url: "
                           "sorted query, normalized escapes, no fragment); the URL as read "
                           "is printed")
    urls.add_argument("--strip-tracking", action="store_true",
                      help="with --canonical, also drop tracking parameters (utm_*, gclid, "
                           "fbclid, spm, ...: crawldedup.DEFAULT_TRACKING_PARAMS)")
    urls.add_argument("--exact", action="store_true",
                      help="no false positives: keep each URL's MD5 (16 bytes) in a "
                           "fingerprint set saved in the state file (or in --db)")
    urls.add_argument("--db", metavar="URL",
                      help="keep the MD5s in a database instead (implies --exact): "
                           "sqlite:///PATH, redis://HOST:PORT/DB/NAME, or any SQLAlchemy URL "
                           f"(PostgreSQL, MySQL/MariaDB; {install_hint('sql')}); "
                           "--state then names the local journals (one a process); "
                           "crawlers sharing the database print each URL once")

    near_dups.add_parser(commands)

    recrawl.add_parsers(commands)

    info = commands.add_parser(
        "info", help="describe a state file",
        description="Print the parameters, layout, fill ratio, estimated count and current "
                    "estimated false-positive rate of a crawldedup state file.")
    info.add_argument("path", metavar="PATH")
    info.add_argument("--verify", action="store_true", default=None,
                      help="check the checksum even of a large file (reads it whole)")
    info.add_argument("--repair", action="store_true",
                      help="seal the checksum of a file left open by a killed writer")
    for command in commands.choices.values():
        # A usage error found after parsing shows the usage of its command.
        command.set_defaults(command_parser=command)
    return parser


# Options whose value may start with "-" ("--rotate-every -1d"): argparse
# would take such a value for an option and say "expected one argument".
_VALUE_OPTIONS = ("--capacity", "--error-rate", "--rotate-every", "--generations", "--k")


def _attach_values(argv: Sequence[str]) -> List[str]:
    """"--rotate-every -1d" -> "--rotate-every=-1d", so that the option's
    own check reports the value."""
    out: List[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if (arg in _VALUE_OPTIONS and i + 1 < len(argv) and len(argv[i + 1]) > 1
                and argv[i + 1][0] == "-" and (argv[i + 1][1].isdigit() or argv[i + 1][1] == ".")):
            out.append(f"{arg}={argv[i + 1]}")
            i += 2
            continue
        out.append(arg)
        i += 1
    return out


def _parse(parser: argparse.ArgumentParser, argv: List[str]) -> argparse.Namespace:
    """parser.parse_args(argv), but an unknown option after the command is
    reported with that command's usage (argparse gives the top level's)."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        message = f"unrecognized arguments: {' '.join(extras)}"
        command = getattr(args, "command_parser", None)
        after = argv[argv.index(args.command) + 1:] if args.command in argv else []
        if command is not None and extras[0] in after:
            command.error(message)  # given after the command's name: its option
        parser.error(message)
    return args


# 128 + SIGPIPE: the status of a filter that the end of its output's reader
# stopped (cat, grep), which `set -o pipefail` scripts see.
EXIT_BROKEN_PIPE = 128 + getattr(signal, "SIGPIPE", 13)


def _quiet_stdout() -> None:
    """After a broken pipe: point standard output at /dev/null, so that the
    interpreter's last flush of what is buffered does not fail again."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = _parse(parser, _attach_values(sys.argv[1:] if argv is None else argv))
    # (parsing exits with status 2 on a usage error)
    err = sys.stderr
    try:
        if args.command == "urls":
            if sys.stdin is None and not args.files:
                raise CrawldedupError("no FILE given and no standard input to read")
            stdin = sys.stdin.buffer if sys.stdin is not None else None
            return run_urls(args, sys.stdout.buffer, err, stdin)  # type: ignore[arg-type]
        if args.command == "info":
            return run_info(args, sys.stdout)
        if args.command == "near-dups":
            stdin = sys.stdin.buffer if sys.stdin is not None else None
            return near_dups.run(args, sys.stdout, err, stdin)
        if args.command in ("due", "record"):
            stdin = sys.stdin.buffer if sys.stdin is not None else None
            return recrawl.run(args, sys.stdout, err, stdin)
        raise UsageError(f"unknown command {args.command!r}")  # pragma: no cover
    except UsageError as exc:
        if getattr(exc, "show_usage", True):
            getattr(args, "command_parser", parser).print_usage(err)
        err.write(f"crawldedup: error: {exc}\n")
        return 2
    except BrokenPipeError:
        # The reader of the output is gone (| head): stop quietly, as a
        # filter does; there is no one left to tell.
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except (CrawldedupError, OSError) as exc:
        err.write(f"crawldedup: error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        # The commands that write as they go say themselves what they wrote
        # (near-dups, urls); for the others, what is known is that the
        # command had started.
        err.write(f"crawldedup: interrupted: {args.command} stopped before it finished; "
                  f"what it wrote so far is incomplete\n")
        return 130
