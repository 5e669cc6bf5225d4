"""w3lib's canonical form of a URL, through the compiled fast path where it
applies, and the checks shared by the batch functions of this package."""

from __future__ import annotations

import inspect
from typing import Any, List, Optional, Tuple
from urllib.parse import ParseResult

import w3lib
from w3lib.url import canonicalize_url as _w3lib_canonicalize_url

from crawldedup._kernel import canonicalize_url_fast as _fast

# The compiled fast path reproduces the rules of w3lib 2.5 (read from its
# source and checked by differential tests).  Another w3lib could canonicalize
# differently, so with it every URL goes to w3lib itself: slower, never wrong.
FAST_PATH_W3LIB = "2.5"
FAST_PATH: bool = ".".join(str(w3lib.__version__).split(".")[:2]) == FAST_PATH_W3LIB

W3LIB_QUERY_SEPARATOR = "query_separator" in inspect.signature(_w3lib_canonicalize_url).parameters
UTF8_NAMES = frozenset({"utf8", "utf-8", "utf_8", "u8", "utf"})


def check_separator(query_separator: Any) -> None:
    if not isinstance(query_separator, str):
        raise TypeError(f"query_separator must be a non-empty str such as '&' or ';', not "
                        f"{type(query_separator).__name__}")
    if not query_separator:
        raise ValueError("query_separator must be a non-empty str such as '&' or ';', got ''")


def canonical_form(url: Any, keep_fragments: bool, keep_blank_values: bool,
                   encoding: Optional[str], query_separator: Any) -> str:
    """w3lib's canonical URL, through the fast path when it applies."""
    if encoding is not None and not isinstance(encoding, str):
        raise TypeError(f"encoding must be a codec name (str) or None, not "
                        f"{type(encoding).__name__}")
    if isinstance(url, (str, bytes)):
        if (FAST_PATH and query_separator == "&"
                and (encoding is None or encoding.lower() in UTF8_NAMES)):
            result = _fast(url, keep_fragments, keep_blank_values)
            if result is not None:
                return result
    elif not isinstance(url, ParseResult):
        # w3lib takes str, bytes and urllib's ParseResult; bytearray,
        # memoryview and the rest raise TypeError there too.
        raise TypeError(f"url must be str, bytes or urllib.parse.ParseResult, not "
                        f"{type(url).__name__}")
    if query_separator == "&":  # w3lib before 2.4 has no query_separator
        return _w3lib_canonicalize_url(url, keep_blank_values=keep_blank_values,
                                       keep_fragments=keep_fragments, encoding=encoding)
    if not W3LIB_QUERY_SEPARATOR:
        check_separator(query_separator)
        raise ValueError(f"query_separator other than '&' needs w3lib 2.4 or later "
                         f"(installed: {w3lib.__version__})")
    try:
        return _w3lib_canonicalize_url(url, keep_blank_values=keep_blank_values,
                                       keep_fragments=keep_fragments, encoding=encoding,
                                       query_separator=query_separator)
    except (AttributeError, TypeError, ValueError):
        # w3lib uses the separator only on a URL with a query (so "" or a
        # non-str one passes on a URL without); where it fails, say why.
        check_separator(query_separator)
        raise


def at_index(exc: Exception, i: int) -> Exception:
    """exc, its message led by the batch index (when its type allows)."""
    if type(exc) in (TypeError, ValueError):
        return type(exc)(f"urls[{i}]: {exc}")
    if isinstance(exc, ValueError):  # UnicodeDecodeError from an older w3lib, say
        return ValueError(f"urls[{i}]: {type(exc).__name__}: {exc}")
    return exc


def as_list(urls: Any) -> List[Any]:
    if isinstance(urls, (str, bytes, bytearray, memoryview, ParseResult)):
        raise TypeError(f"urls must be an iterable of URLs, not a single {type(urls).__name__}")
    try:
        return list(urls)
    except TypeError:
        raise TypeError(f"urls must be an iterable of URLs, not {type(urls).__name__}") from None


def check_url_types(items: List[Any], indices: List[int],
                     types: Tuple[type, ...] = (str, bytes, ParseResult)) -> None:
    for i in indices:
        if not isinstance(items[i], types):
            names = ", ".join(t.__name__ for t in types[:-1]) + " or " + (
                "urllib.parse.ParseResult" if types[-1] is ParseResult else types[-1].__name__)
            raise TypeError(f"urls[{i}]: url must be {names}, not {type(items[i]).__name__}")
