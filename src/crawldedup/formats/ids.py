"""Ids in a state file's payload: one tagged record per id.

An index file (SimhashIndex, MinHashIndex) stores ids that are int, str or
bytes as records of a tag byte, a little-endian uint32 length and the data:
an int as its shortest little-endian two's-complement bytes, a str as its
UTF-8, bytes as themselves.  Reading checks every record (a known tag, a
length inside the payload, the shortest form of an int, valid UTF-8) and
names what is wrong.
"""

from __future__ import annotations

import struct
from typing import Callable, Hashable, List, Sequence, Tuple, Union

TAG_INT, TAG_STR, TAG_BYTES = 0, 1, 2
RECORD = struct.Struct("<BI")


def pack_ids(keys: Sequence[Hashable]) -> List[bytes]:
    """The records of keys, as parts to join.  TypeError naming the first id
    that is not an int, str or bytes (before anything is returned)."""
    parts: List[bytes] = []
    for key in keys:
        if isinstance(key, bool) or not isinstance(key, (int, str, bytes)):
            raise TypeError(f"only int, str and bytes ids can be saved; id {key!r} is "
                            f"a {type(key).__name__}")
        if isinstance(key, int):
            data = key.to_bytes((key.bit_length() + 8) // 8, "little", signed=True)
            tag = TAG_INT
        elif isinstance(key, str):
            data, tag = key.encode("utf-8"), TAG_STR
        else:
            data, tag = bytes(key), TAG_BYTES
        parts.append(RECORD.pack(tag, len(data)))
        parts.append(data)
    return parts


def unpack_ids(payload: Union[bytes, memoryview], pos: int, n: int,
               bad: Callable[[str], Exception]) -> Tuple[List[Hashable], int]:
    """n ids read from payload at pos, and the position after them; bad(reason)
    is raised for a damaged record."""
    keys: List[Hashable] = []
    end = len(payload)
    for _ in range(n):
        if pos + RECORD.size > end:
            raise bad("id records end early")
        tag, length = RECORD.unpack_from(payload, pos)
        pos += RECORD.size
        if length > end - pos:
            raise bad("an id record runs past the end of the payload")
        raw = bytes(payload[pos:pos + length])
        pos += length
        if tag == TAG_INT:
            if not length:
                raise bad("an int id record of length 0")
            value = int.from_bytes(raw, "little", signed=True)
            # pack_ids writes the shortest form: a longer one is not its file
            if length != (value.bit_length() + 8) // 8:
                raise bad(f"an int id record of {length} bytes for id {value} (save "
                          f"writes {(value.bit_length() + 8) // 8})")
            keys.append(value)
        elif tag == TAG_STR:
            try:
                keys.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise bad("a str id is not valid UTF-8") from None
        elif tag == TAG_BYTES:
            keys.append(raw)
        else:
            raise bad(f"unknown id record tag {tag}")
    return keys, pos
