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

The package: one module a subcommand, found through ``COMMANDS`` and
imported when its command runs (``urls``, ``info``, ``near_dups``,
``recrawl`` for ``due`` and ``record``); ``redis_state`` (a Redis state of
``urls``, and its description by ``info``); the parts of ``urls``:
``_delivery`` (signals, lock, journals, the read loop, output),
``_url_state`` and ``_exact_state`` (the states it talks to), ``_key_mode``
(the key mode a state records); and what the commands share: ``_common``
(defaults, argument types, file kinds) and ``_inputs`` (input files).

``crawldedup info PATH`` describes any crawldedup state file.

``crawldedup near-dups FILE.jsonl`` prints the near-duplicate documents of a
stream of JSON lines (see ``near_dups``).

Exit status: 0 on success, 1 on an error, 2 on a usage error, 130/143 when
stopped by SIGINT/SIGTERM, 141 (as a filter killed by SIGPIPE) when the reader
of the output went away (``| head``), which is not reported.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from typing import Dict, List, Optional, Sequence

from crawldedup._version import __version__
from crawldedup.cli._common import (
    DEFAULT_CAPACITY,
    DEFAULT_ERROR_RATE,
    UsageError,
    duration,
    file_kind,
    format_duration,
)
from crawldedup.errors import CrawldedupError

#: The subcommands, in the order ``crawldedup --help`` lists them: each
#: one's module, which defines ``add_parsers(commands)`` (its argument
#: parser, and that of the commands it shares a module with) and
#: ``main(args)`` (the run, on the process's standard streams).  A module is
#: imported when its command runs or the whole parser is built.
COMMANDS: Dict[str, str] = {
    "urls": "crawldedup.cli.urls",
    "near-dups": "crawldedup.cli.near_dups",
    "due": "crawldedup.cli.recrawl",
    "record": "crawldedup.cli.recrawl",
    "info": "crawldedup.cli.info",
}

__all__ = ["main", "build_parser", "file_kind", "UsageError", "DEFAULT_CAPACITY",
           "DEFAULT_ERROR_RATE", "duration", "format_duration"]


def build_parser(command: Optional[str] = None) -> argparse.ArgumentParser:
    """The parser of the command line: every subcommand's, or only that of
    ``command`` (what a run needs: the other subcommands' modules, and what
    they import, stay unloaded)."""
    parser = argparse.ArgumentParser(
        prog="crawldedup",
        description="Have I seen this before? Deduplicate URLs against persistent state.")
    parser.add_argument("--version", action="version", version=f"crawldedup {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    homes = COMMANDS.values() if command is None else [COMMANDS[command]]
    for home in dict.fromkeys(homes):  # each module once, in the table's order
        importlib.import_module(home).add_parsers(commands)
    for sub in commands.choices.values():
        sub.set_defaults(command_parser=sub)
    return parser


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
def _command_named(argv: List[str]) -> Optional[str]:
    """The subcommand that argv names (its first word that is not an
    option: the top level's options take no value), or None."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    return first if first in COMMANDS else None


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
    given = _attach_values(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command_named(given))
    args = _parse(parser, given)
    # (parsing exits with status 2 on a usage error)
    err = sys.stderr
    try:
        return importlib.import_module(COMMANDS[args.command]).main(args)  # type: ignore[no-any-return]
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
