"""Twin of ``src/_core_lines.pxi``: the input splitter of ``crawldedup urls``."""

from __future__ import annotations

from typing import List, Tuple


def split_lines(data: bytes, final: bool) -> Tuple[List[bytes], int]:
    """(lines, used): the stripped, non-blank lines of data's complete lines
    (each ended by "\\n"; with final, the unended tail too), and how many
    bytes of data they took."""
    if not isinstance(data, bytes):
        raise TypeError(f"data must be bytes, not {type(data).__name__}")
    used = len(data) if final else data.rfind(b"\n") + 1
    lines = (line.strip() for line in data[:used].split(b"\n"))
    return [line for line in lines if line], used
