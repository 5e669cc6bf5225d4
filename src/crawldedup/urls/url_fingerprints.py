"""URL fingerprints: the MD5 of the canonical URL (16 bytes), the key the
seeds use."""

from __future__ import annotations

import hashlib
from typing import Any, Dict, Iterable, List, Union, cast

from crawldedup._checks import check_flag
from crawldedup._kernel import url_digests_fast as _url_digests_fast
from crawldedup._kernel import url_fingerprint_fast as _url_fp_fast
from crawldedup._kernel import url_fingerprints_fast as _url_fps_fast
from crawldedup.urls.canonical import canonicalize_url
from crawldedup.urls.form import FAST_PATH, as_list, at_index, check_url_types


def url_fingerprint(url: Union[str, bytes], *, canonical: bool = True, **kwargs: Any) -> bytes:
    """MD5 (16 bytes) of the UTF-8 canonical URL; ``kwargs`` go to
    :func:`canonicalize_url`.  ``canonical=False``: the MD5 of the URL's own
    UTF-8 bytes, as given (the ``crawldedup urls --exact`` key).

    >>> url_fingerprint("http://example.com/?b=2&a=1") == url_fingerprint("http://EXAMPLE.com?a=1&b=2")
    True
    >>> url_fingerprint("http://a.com/x", canonical=False) == hashlib.md5(b"http://a.com/x").digest()
    True
    """
    if canonical is not True and not check_flag("canonical", canonical):
        if kwargs:
            raise TypeError(f"url_fingerprint(canonical=False) takes no canonicalization "
                            f"options, got {', '.join(sorted(kwargs))}")
        if isinstance(url, str):
            return hashlib.md5(url.encode("utf-8")).digest()
        if isinstance(url, bytes):
            return hashlib.md5(url).digest()
        raise TypeError(f"url must be str or bytes, not {type(url).__name__}")
    if not kwargs and FAST_PATH and type(url) is str:
        digest = _url_fp_fast(url)
        if digest is not None:
            return digest
    return hashlib.md5(canonicalize_url(url, **kwargs).encode("utf-8")).digest()


def url_fingerprints(urls: Iterable[Union[str, bytes]], *, canonical: bool = True,
                     **kwargs: Any) -> List[bytes]:
    """``[url_fingerprint(url, canonical=canonical, **kwargs) for url in
    urls]``, faster: with no kwargs, the URLs (``str`` or UTF-8 ``bytes``)
    on the fast path are canonicalized and hashed in one compiled loop that
    releases the GIL, a large batch on several threads (see
    :func:`crawldedup.set_threads`); with ``canonical=False`` every URL is
    hashed there.

    >>> a, b = url_fingerprints(["http://a.com/?b=1&a=2", b"http://A.com?a=2&b=1"])
    >>> a == b == hashlib.md5(b"http://a.com/?a=2&b=1").digest()
    True
    """
    items = as_list(urls)
    if not check_flag("canonical", canonical):
        if kwargs:
            raise TypeError(f"url_fingerprints(canonical=False) takes no canonicalization "
                            f"options, got {', '.join(sorted(kwargs))}")
        digests = _url_digests_fast(items)
        missing = [i for i, digest in enumerate(digests) if digest is None]
        check_url_types(items, missing, (str, bytes))
        for i in missing:  # a str with lone surrogates: UnicodeEncodeError
            digests[i] = url_fingerprint(items[i], canonical=False)
        return cast(List[bytes], digests)
    if kwargs or not FAST_PATH:
        return [_fingerprint_at(i, u, kwargs) for i, u in enumerate(items)]
    out = _url_fps_fast(items, False, True)
    missing = [i for i, digest in enumerate(out) if digest is None]
    check_url_types(items, missing)
    for i in missing:
        out[i] = _fingerprint_at(i, items[i], kwargs)
    return cast(List[bytes], out)


def _fingerprint_at(i: int, url: Any, kwargs: Dict[str, Any]) -> bytes:
    try:
        return url_fingerprint(url, **kwargs)
    except (TypeError, ValueError) as exc:
        raise at_index(exc, i) from exc
