"""The requests a crawler made from a page, kept beside the page's state.

A link-following crawler discovers pages through the pages it parsed.  When
a known page is answered 304, or comes back unchanged and is dropped, its
callback does not run, so the requests it would have made must come from
the state: ``RecrawlState.set_links`` keeps them, with the digest of the
version of the page they were made from, and ``RecrawlState.get_links``
gives them back.  The digest tells whether they belong to the version the
state holds: a page recorded again as changed, whose callback did not finish
(a crash, an exception), keeps links of another digest, so they are not
taken for the new version's.

A link is a list ``[url, callback, options]``: ``callback`` is the name of a
spider method or None (the default), ``options`` (optional) a JSON object
of further request arguments (``method``, ``headers``, ``body``, ``meta``,
...), as the Scrapy middleware writes them; this module checks the shape
only.  ``links`` None means that the page's requests could not be kept (a
callback that is not a spider method, a meta value that is not JSON): such a
page has to be fetched and parsed again.

A record may also keep the page's body and the headers needed to hand it
to a parser again (its Content-Type), for a crawler that gives its
callbacks the kept version of a page answered 304.

Stored form: one byte of format, then compressed with zlib (level 6) the
16-byte digest and: format 3, the links as compact JSON; format 4 (with a
body), a JSON line ``{"links": ..., "headers": {...}}``, a newline and the
body.  The digest is inside the compressed stream so that zlib's checksum
covers it: a damaged digest is named as damage, not taken for another
version's.  Formats 1 and 2 (the same, with the digest before the
compressed stream) are still read.  URLs of one site share most of their
bytes, so a page's links take a fraction of their text.
"""

from __future__ import annotations

import json
import zlib
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

#: The first byte of a stored record: links only, or links and a body.
LINKS_FORMAT = 3
BODY_FORMAT = 4
#: Formats 1 and 2 (links only, links and a body), whose digest comes before
#: the compressed stream instead of inside it: still read.
_OLD_FORMATS = {1: LINKS_FORMAT, 2: BODY_FORMAT}
DIGEST_SIZE = 16
#: The most bytes a record's JSON may take once decompressed: a bound on what
#: a damaged or hostile record can make a reader allocate.
MAX_LINKS_BYTES = 64 << 20


class PageLinks(NamedTuple):
    """The requests made from one version of a page: ``digest`` of that
    version, ``links`` (None when they could not be kept); and, when kept,
    its ``body`` and ``headers`` (name -> value)."""

    digest: bytes
    links: Optional[List[List[Any]]]
    body: Optional[bytes] = None
    headers: Optional[Dict[str, str]] = None


def _check_links(links: Any) -> Optional[str]:
    """Why ``links`` is not None or a list of links, or None when it is."""
    if links is None:
        return None
    if not isinstance(links, list):
        return f"links must be a list or None, not {type(links).__name__}"
    for i, link in enumerate(links):
        if (not isinstance(link, list) or not 2 <= len(link) <= 3
                or not isinstance(link[0], str) or not link[0]
                or not (link[1] is None or isinstance(link[1], str))
                or (len(link) == 3 and not isinstance(link[2], dict))):
            return (f"links[{i}] must be [url, callback name or None] or [url, callback, "
                    f"options], got {link!r:.200}")
    return None


def encode_links(digest: bytes, links: Optional[Sequence[Sequence[Any]]],
                 body: Optional[bytes] = None,
                 headers: Optional[Dict[str, str]] = None) -> bytes:
    """The stored form of ``links`` made from the version of digest
    ``digest`` (16 bytes), with that version's ``body`` and ``headers``
    when given.  ValueError/TypeError name what is wrong."""
    if not isinstance(digest, (bytes, bytearray)) or len(digest) != DIGEST_SIZE:
        raise ValueError(f"digest must be {DIGEST_SIZE} bytes, got {digest!r:.80}")
    if links is not None and not isinstance(links, (list, tuple)):
        raise ValueError(f"links must be a list or None, not {type(links).__name__}")
    value = None if links is None else [
        list(link) if isinstance(link, (list, tuple)) else link for link in links]
    why = _check_links(value)
    if why is not None:
        raise ValueError(why)
    if body is not None and not isinstance(body, (bytes, bytearray)):
        raise TypeError(f"body must be bytes or None, got {type(body).__name__}")
    if headers is not None and (not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items())):
        raise TypeError(f"headers must be a dict of str to str or None, got {headers!r:.120}")
    try:
        if body is None:
            text = json.dumps(value, separators=(",", ":"), ensure_ascii=False,
                              allow_nan=False)
        else:
            text = json.dumps({"links": value, "headers": headers or {}},
                              separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"links must hold JSON values only: {exc}") from None
    if body is None:
        return bytes((LINKS_FORMAT,)) + zlib.compress(bytes(digest) + text.encode("utf-8"), 6)
    return bytes((BODY_FORMAT,)) + zlib.compress(
        bytes(digest) + text.encode("utf-8") + b"\n" + bytes(body), 6)


def decode_links(blob: Any) -> PageLinks:
    """A stored record back; ValueError says how it is damaged."""
    if not isinstance(blob, (bytes, bytearray)):
        raise ValueError(f"a record is bytes, not {type(blob).__name__}")
    kind = _OLD_FORMATS.get(blob[0], blob[0]) if blob else 0
    # (a format 1 or 2 record's digest comes before its compressed stream)
    start = 1 + DIGEST_SIZE if blob and blob[0] in _OLD_FORMATS else 1
    if len(blob) < start + 1 or kind not in (LINKS_FORMAT, BODY_FORMAT):
        raise ValueError(f"not a record of format 1, 2, {LINKS_FORMAT} or {BODY_FORMAT} "
                         f"({len(blob)} bytes, starting {bytes(blob[:4])!r})")
    inflate = zlib.decompressobj()
    try:
        text = inflate.decompress(bytes(blob[start:]), MAX_LINKS_BYTES)
    except zlib.error as exc:
        raise ValueError(f"its compressed links do not inflate: {exc}") from None
    if inflate.unconsumed_tail or not inflate.eof:
        raise ValueError("its compressed links are truncated or larger than "
                         f"{MAX_LINKS_BYTES} bytes")
    if start == 1:
        if len(text) < DIGEST_SIZE:
            raise ValueError(f"its digest is {len(text)} bytes, not {DIGEST_SIZE}")
        digest, text = text[:DIGEST_SIZE], text[DIGEST_SIZE:]
    else:
        digest = bytes(blob[1:start])
    body = headers = None
    if kind == BODY_FORMAT:
        text, newline, body = text.partition(b"\n")
        if not newline:
            raise ValueError("its body is missing")
    try:
        links = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"its links are not JSON: {exc}") from None
    if body is not None:
        if not isinstance(links, dict) or set(links) != {"links", "headers"} \
                or not isinstance(links["headers"], dict) \
                or not all(isinstance(v, str) for v in links["headers"].values()):
            raise ValueError(f"its header line is not {{links, headers}}: {links!r:.200}")
        links, headers = links["links"], links["headers"]
    why = _check_links(links)
    if why is not None:
        raise ValueError(why)
    return PageLinks(digest, links, body, headers)


__all__ = ["PageLinks", "encode_links", "decode_links", "LINKS_FORMAT", "BODY_FORMAT",
           "MAX_LINKS_BYTES"]
