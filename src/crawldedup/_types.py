"""Type aliases the modules share (for annotations only)."""

from __future__ import annotations

import os
from typing import Callable, Union

#: A key: a str (hashed as UTF-8) or a bytes-like object.
Key = Union[str, bytes, bytearray, memoryview]
#: A file name.
PathLike = Union[str, "os.PathLike[str]"]
#: A clock: returns seconds, like time.time.
Clock = Callable[[], float]
