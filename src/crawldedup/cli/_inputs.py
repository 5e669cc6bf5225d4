"""What the commands that read FILEs share: the FILE arguments ("-" is
standard input), opening and closing them, and the progress bar."""

from __future__ import annotations

from typing import IO, Any, BinaryIO, Iterable, Optional, Tuple

from crawldedup.errors import CrawldedupError


def open_input(name: str, stdin: Optional[BinaryIO]) -> Tuple[str, BinaryIO]:
    """(label, binary file) of a FILE argument, "-" being standard input;
    the caller closes a file that is not ``stdin``.  CrawldedupError (a
    one-line error) when it cannot be read."""
    if name == "-":
        if stdin is None:
            raise CrawldedupError("no FILE given and no standard input to read")
        return "<stdin>", stdin
    try:
        return name, open(name, "rb")
    except OSError as exc:
        raise CrawldedupError(f"cannot read {name!r}: {exc.strerror}") from None


def close_inputs(files: Iterable[BinaryIO], stdin: Optional[BinaryIO]) -> None:
    """Close the files open_input opened (standard input stays open)."""
    for f in files:
        if f is not stdin:
            f.close()


def progress_bar(err: IO[str], unit: str = " docs", desc: str = "near-dups") -> Any:
    """A tqdm bar on stderr when it is a terminal and tqdm is installed."""
    isatty = getattr(err, "isatty", None)
    if not (isatty and isatty()):
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(file=err, unit=unit, desc=desc)


def reading_command(commands: Any, name: str, help: str, description: str) -> Any:
    """A subcommand that reads FILEs (or standard input, see open_input)."""
    command = commands.add_parser(name, help=help, description=description)
    command.add_argument("files", nargs="*", metavar="FILE", help="input files ('-' = stdin)")
    return command
