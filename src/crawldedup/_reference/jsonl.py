"""Twin of ``src/_core_jsonl.pxi``: the JSON-lines reader of
``crawldedup near-dups``.

``jsonl_documents`` reads a block of JSON lines and says, for each line,
whether it is blank, a document (an object whose text field is a string and
whose id field a string or an integer), or something else, which the
command line then reads with ``json.loads`` itself to name the problem.  A
line is a document here exactly when ``json.loads`` reads it as one, with
one limit: containers nested deeper than ``MAX_DEPTH`` are left to the
caller (``json.loads`` itself fails on deep nesting with a RecursionError,
which the command line reports).
"""

from __future__ import annotations

import json
from typing import Any, List, Tuple

# A line nested deeper than this is not read as a document here.
MAX_DEPTH = 100

BLANK, DOCUMENT, OTHER = 0, 1, 2
# What bytes.strip() strips: a line of these alone is blank.
_BLANK = b" \t\n\r\x0b\x0c"


def _depth(value: Any) -> int:
    """How deeply containers nest in a value json.loads made (0 for a
    scalar, 1 for a flat object)."""
    deepest, level, todo = 0, 0, [(value, 1)]
    while todo:
        value, level = todo.pop()
        if isinstance(value, dict):
            deepest = max(deepest, level)
            todo.extend((v, level + 1) for v in value.values())
        elif isinstance(value, list):
            deepest = max(deepest, level)
            todo.extend((v, level + 1) for v in value)
    return deepest


def _check_key(key: object, what: str) -> bytes:
    if not isinstance(key, bytes):
        raise TypeError(f"{what} must be bytes, not {type(key).__name__}")
    return key


def jsonl_documents(data: bytes, text_key: bytes,
                    id_key: bytes) -> Tuple[bytes, List[Any], List[Any]]:
    """(status, ids, texts), one entry per line of data (split at "\\n"; no
    entry after a final "\\n"):

    * status[i] 0: a blank line (only what bytes.strip() strips); ids[i]
      and texts[i] None;
    * 1: a JSON object with a string under text_key and a string or an int
      under id_key (keys as UTF-8 bytes, surrogatepass): ids[i] and
      texts[i] those values, as json.loads gives them;
    * 2: anything else: ids[i] None, texts[i] the line's bytes (without its
      "\\n"), for the caller to read and name the problem.
    """
    if not isinstance(data, bytes):
        raise TypeError(f"data must be bytes, not {type(data).__name__}")
    text_name = _check_key(text_key, "text_key").decode("utf-8", "surrogatepass")
    id_name = _check_key(id_key, "id_key").decode("utf-8", "surrogatepass")
    lines = data.split(b"\n")
    if data.endswith(b"\n") or not data:
        lines.pop()
    status = bytearray(len(lines))
    ids: List[Any] = [None] * len(lines)
    texts: List[Any] = [None] * len(lines)
    for i, line in enumerate(lines):
        if not line.strip(_BLANK):
            continue
        status[i] = OTHER
        texts[i] = line
        try:
            doc = json.loads(line.decode("utf-8"))
        except (ValueError, RecursionError):
            continue
        if not isinstance(doc, dict) or _depth(doc) > MAX_DEPTH:
            continue
        text = doc.get(text_name)
        ident = doc.get(id_name)
        if not isinstance(text, str) or isinstance(ident, bool) \
                or not isinstance(ident, (str, int)):
            continue
        status[i], ids[i], texts[i] = DOCUMENT, ident, text
    return bytes(status), ids, texts
