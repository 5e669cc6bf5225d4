"""A fetch as a crawler reports it, read and checked for RecrawlState: the
validators in its headers (any case, str or bytes, Scrapy's Headers
included), HTTP dates, the host that pools change rates, the content
digest.  No state here: these are the checks record_many runs on every
fetch before it records any.
"""

from __future__ import annotations

import calendar
import functools
import math
import re
from collections.abc import Mapping
from email.utils import mktime_tz, parsedate_tz
from typing import Any, Callable, Dict, Iterable, NamedTuple, Optional
from urllib.parse import urlsplit

import numpy as np

from crawldedup._kernel import hash128


class Fetch(NamedTuple):
    key: str
    host: str
    status: int
    etag: Optional[str]
    last_modified: Optional[str]
    content_length: Optional[int]
    digest: Optional[bytes]
    text: Optional[str]
    at: float
    bad_date: bool
    bad_length: bool


#: The largest Content-Length kept (a signed 64-bit integer, as stored);
#: a longer one is counted as a bad length, like one that is not a number.
MAX_LENGTH = (1 << 63) - 1


def signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _header_value(url: str, name: str, value: Any) -> str:
    if isinstance(value, (list, tuple)):
        if not value:
            return ""
        value = value[-1]
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return bytes(value).decode("ascii").strip()
        except UnicodeDecodeError:
            raise ValueError(f"header {name!r} of {url!r} has non-ASCII bytes: "
                             f"{bytes(value)[:80]!r}") from None
    if isinstance(value, str):
        if not value.isascii():
            raise ValueError(f"header {name!r} of {url!r} has non-ASCII characters: "
                             f"{value[:80]!r}")
        return value.strip()
    raise TypeError(f"header {name!r} of {url!r} must be str or bytes, got "
                    f"{type(value).__name__}")


_WANTED = {"etag": "etag", "last-modified": "last_modified", "content-length": "content_length"}


def validators(url: str, headers: Any) -> Dict[str, str]:
    """ETag, Last-Modified and Content-Length from a headers mapping (str or
    bytes keys, any case, values str/bytes or lists of them, Scrapy's
    Headers included) or a list of (name, value) pairs."""
    found: Dict[str, str] = {}
    if headers is None:
        return found
    if type(headers) is dict:
        for name, value in headers.items():  # the common case, kept short
            if type(name) is not str or type(value) is not str:
                found.clear()
                break
            field = _WANTED.get(name.lower())
            if field is not None:
                if not value.isascii():
                    raise ValueError(f"header {name!r} of {url!r} has non-ASCII characters: "
                                     f"{value[:80]!r}")
                found[field] = value.strip()
        else:
            return found
        items: Iterable[Any] = headers.items()
    elif isinstance(headers, Mapping) or hasattr(headers, "items"):
        items = headers.items()
    elif isinstance(headers, (list, tuple)):
        items = headers
    else:
        raise TypeError(f"headers of {url!r} must be a mapping or a list of (name, value) "
                        f"pairs, got {type(headers).__name__}")
    for pair in items:
        try:
            name, value = pair
        except (TypeError, ValueError):
            raise TypeError(f"headers of {url!r}: {pair!r} is not a (name, value) "
                            f"pair") from None
        if isinstance(name, (bytes, bytearray)):
            try:
                name = bytes(name).decode("ascii")
            except UnicodeDecodeError:
                raise ValueError(f"a header name of {url!r} has non-ASCII bytes: "
                                 f"{bytes(name)[:80]!r}") from None
        elif not isinstance(name, str):
            raise TypeError(f"header names of {url!r} must be str or bytes, got "
                            f"{type(name).__name__}")
        field = _WANTED.get(name.lower())
        if field is not None:
            found[field] = _header_value(url, name, value)
    return found


_IMF_FIXDATE = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), ([0-3][0-9]) "
    r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) ([0-9]{4}) "
    r"([0-2][0-9]):([0-5][0-9]):([0-6][0-9]) GMT")
_MONTHS = {m: i + 1 for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"))}


@functools.lru_cache(maxsize=4096)
def parse_http_date(value: str) -> Optional[float]:
    """Seconds since the epoch of an HTTP date (RFC 9110 IMF-fixdate, or the
    obsolete RFC 850 and asctime forms); None when it cannot be parsed.

    >>> parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT")
    784111777.0
    >>> parse_http_date("yesterday") is None
    True
    """
    m = _IMF_FIXDATE.fullmatch(value)
    if m is not None:
        day, month, year, hh, mm, ss = m.groups()
        try:
            return float(calendar.timegm((int(year), _MONTHS[month], int(day), int(hh),
                                          int(mm), int(ss), 0, 0, 0)))
        except (ValueError, OverflowError):
            return None
    try:
        parts = parsedate_tz(value)
        if parts is None:
            return None
        stamp = float(mktime_tz(parts))
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    return stamp if math.isfinite(stamp) else None


NETLOC = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)")


@functools.lru_cache(maxsize=65536)
def hostname(netloc: str) -> str:
    """The host of a URL's netloc, lower-case, with its port when it has one
    (two servers on one machine are two sites)."""
    try:
        parts = urlsplit("//" + netloc)
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        return ""
    return host if port is None else f"{host}:{port}"


def digest_bytes(value: Any, where: str) -> bytes:
    if isinstance(value, str):
        try:
            data = bytes.fromhex(value)
        except ValueError:
            raise ValueError(f"{where}: digest must be 32 hex digits or 16 bytes, got "
                             f"{value[:80]!r}") from None
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    else:
        raise TypeError(f"{where}: digest must be a hex str or bytes, got "
                        f"{type(value).__name__}")
    if len(data) != 16:
        raise ValueError(f"{where}: digest must be 16 bytes (32 hex digits), got "
                         f"{len(data)} bytes")
    return data


def parse_fetch(i: int, item: Any, clock: float, key_of: Callable[[Any], str],
                canonical: bool) -> Fetch:
    """One fetch as record_many takes it (``fetches[i]``), checked and read:
    a :class:`Fetch`, or TypeError/ValueError naming the fetch and the
    problem.  ``key_of``: the state's URL key; ``canonical``: whether it
    canonicalizes (a plain str URL is its own key otherwise)."""
    if type(item) is not dict and not isinstance(item, Mapping):
        raise TypeError(f"fetches[{i}] must be a mapping with url, status, headers and "
                        f"body, text or digest; got {type(item).__name__}")
    get = item.get
    url = get("url")
    if url is None:
        raise ValueError(f"fetches[{i}]: url is missing")
    if not canonical and type(url) is str and url and not url[0].isspace() \
            and not url[-1].isspace():
        key = url
    else:
        try:
            key = key_of(url)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"fetches[{i}]: {exc}") from None
    status = get("status")
    if status is None:
        raise ValueError(f"fetches[{i}] ({key}): status is missing")
    if type(status) is not int and (isinstance(status, bool)
                                    or not isinstance(status, (int, np.integer))):
        raise TypeError(f"fetches[{i}] ({key}): status must be an int, got "
                        f"{type(status).__name__}")
    status = int(status)
    if not (200 <= status < 300 or status == 304):
        raise ValueError(f"fetches[{i}] ({key}): status must be 2xx or 304, got {status} "
                         f"(record only pages and 304s)")
    at = get("time")
    if at is None:
        at = clock
    elif (type(at) is not float and type(at) is not int) and (
            isinstance(at, bool) or not isinstance(at, (int, float))) \
            or not math.isfinite(at):
        raise ValueError(f"fetches[{i}] ({key}): time must be a finite number of "
                         f"seconds, got {at!r}")
    try:
        found = validators(key, get("headers"))
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"fetches[{i}]: {exc}") from None
    etag: Optional[str] = None
    lm: Optional[str] = None
    length: Optional[int] = None
    bad_date = bad_length = False
    if found:
        etag = found.get("etag") or None
        lm = found.get("last_modified") or None
        if lm is not None and parse_http_date(lm) is None:
            lm, bad_date = None, True
        content_length = found.get("content_length")
        if content_length is not None:
            if content_length.isdigit() and int(content_length) <= MAX_LENGTH:
                length = int(content_length)
            else:
                bad_length = True
    body, text, digest = get("body"), get("text"), get("digest")
    data: Optional[bytes] = None
    if text is not None and not isinstance(text, str):
        raise TypeError(f"fetches[{i}] ({key}): text must be str, got "
                        f"{type(text).__name__}")
    if body is not None:
        if isinstance(body, str):
            raise TypeError(f"fetches[{i}] ({key}): body must be bytes (give a str as "
                            f"text=)")
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise TypeError(f"fetches[{i}] ({key}): body must be bytes, got "
                            f"{type(body).__name__}")
        data = bytes(body)
        if length is None:
            length = len(data)
    fp: Optional[bytes] = None
    if type(digest) is bytes and len(digest) == 16:
        fp = digest
    elif digest is not None:
        fp = digest_bytes(digest, f"fetches[{i}] ({key})")
    elif text is not None:
        fp = hash128(text).to_bytes(16, "little")
    elif data is not None:
        fp = hash128(data).to_bytes(16, "little")
    elif status != 304:
        raise ValueError(f"fetches[{i}] ({key}): a {status} needs body, text or digest")
    if text is None and data is not None and digest is None:
        text = data.decode("utf-8", "replace")
    m = NETLOC.match(key)
    return Fetch(key, "" if m is None else hostname(m.group(1)), status, etag, lm, length,
                  fp, text, float(at), bad_date, bad_length)
