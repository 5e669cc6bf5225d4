"""Twin of ``src/_core_lines.pxi``: the input splitter of ``crawldedup urls``."""

from __future__ import annotations

from typing import List, Tuple

from crawldedup._reference.bloom import murmur3_x64_128


def split_lines(data: bytes, final: bool) -> Tuple[List[bytes], int]:
    """(lines, used): the stripped, non-blank lines of data's complete lines
    (each ended by "\\n"; with final, the unended tail too), and how many
    bytes of data they took."""
    if not isinstance(data, bytes):
        raise TypeError(f"data must be bytes, not {type(data).__name__}")
    used = len(data) if final else data.rfind(b"\n") + 1
    lines = (line.strip() for line in data[:used].split(b"\n"))
    return [line for line in lines if line], used


def line_hashes(lines: object) -> bytes:
    """The 128-bit MurmurHash3 (seed 0) of each bytes object of the list
    lines, end to end: 16 bytes each, h1 then h2, little-endian."""
    if not isinstance(lines, list):
        raise TypeError(f"lines must be a list, not {type(lines).__name__}")
    for i, line in enumerate(lines):
        if not isinstance(line, bytes):
            raise TypeError(f"lines[{i}] must be bytes, not {type(line).__name__}")
    out = []
    for line in lines:
        h1, h2 = murmur3_x64_128(line, 0)
        out.append(h1.to_bytes(8, "little") + h2.to_bytes(8, "little"))
    return b"".join(out)
