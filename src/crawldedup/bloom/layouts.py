"""The Bloom filters' bit layouts: one row a layout, the one place that
lists them.

Each layout has its name (what ``layout=`` takes), its id (written in a
state file's header and in the Redis metadata), and the span a key's k
bits stay within (``block_bits``; 0: anywhere in the array), which also
picks the sizing model (bloom/sizing.py).  A new layout is a row here, its
bit positions in the core and the twin (``_core_bloom.pxi``,
``_reference/bloom.py``, and the Redis command bytes, ``_core_resp.pxi``,
``_reference/resp.py``), and its sizing if it is not a block model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from crawldedup._types import PathLike
from crawldedup.errors import CorruptFileError


@dataclass(frozen=True)
class Layout:
    name: str
    id: int
    #: The bits a key's k bits stay within (0: the whole array).
    block_bits: int


#: bit i in byte i // 8; a key's bits anywhere.  blocked: a key's k bits in
#: one 512-bit block, one 64-byte cache line (docs/format.md).
TABLE: Tuple[Layout, ...] = (
    Layout("standard", 0, 0),
    Layout("blocked", 1, 512),
)
BY_NAME: Dict[str, Layout] = {layout.name: layout for layout in TABLE}
BY_ID: Dict[int, Layout] = {layout.id: layout for layout in TABLE}
NAMES: Tuple[str, ...] = tuple(BY_NAME)
STANDARD = BY_NAME["standard"]


def check_layout(layout: Any) -> str:
    """The layout name, or ValueError naming the known ones."""
    if not isinstance(layout, str) or layout not in BY_NAME:
        known = " or ".join(repr(name) for name in NAMES)
        raise ValueError(f"layout must be {known}, got {layout!r}")
    return layout


def layout_id(name: str) -> int:
    return BY_NAME[name].id


def layout_of(layout_id: int, path: Optional[PathLike]) -> Layout:
    """The layout of a header's id; CorruptFileError for an unknown one."""
    layout = BY_ID.get(layout_id)
    if layout is None:
        raise CorruptFileError(path, f"unknown bit layout id {layout_id}")
    return layout
