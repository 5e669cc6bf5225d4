"""The batch work of record_many and due done a column at a time.

``paused_gc``: a batch allocates tens of thousands of small containers (the
rows read back from the store, the tuples bound to its statements), which
set off Python's cyclic garbage collector over and over although none of
them can form a cycle; it is paused for the length of one batch.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (reference counting
    still frees everything at once); it is switched back on only if it was
    on, so a caller that turned it off keeps it off."""
    was_on = gc.isenabled()
    if was_on:
        gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
