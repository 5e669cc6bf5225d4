"""The opt-in extras of canonical URLs, as string surgery on a canonical URL:
the tracking parameters ``strip_params`` drops, and default ports."""

from __future__ import annotations

import functools
from typing import Any, Optional, Tuple
from urllib.parse import quote_plus

#: Query parameters dropped by ``strip_params=True``: analytics and ad-click
#: identifiers that never change what a page shows.  Names ending in ``*`` are
#: prefixes.  Matched against the decoded parameter name, ignoring ASCII case.
DEFAULT_TRACKING_PARAMS: Tuple[str, ...] = (
    "utm_*",            # Google Analytics campaign tags (utm_source, utm_medium, ...)
    "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "gad_source",   # Google Ads
    "fbclid",           # Facebook
    "msclkid",          # Microsoft Ads
    "yclid", "ysclid",  # Yandex
    "twclid", "ttclid", "li_fat_id", "igshid", "igsh",  # X, TikTok, LinkedIn, Instagram
    "mc_cid", "mc_eid",  # Mailchimp
    "_ga", "_gl", "_hsenc", "_hsmi", "mkt_tok", "oly_anon_id", "oly_enc_id",
    "spm", "scm",       # Alibaba (Taobao, Tmall, AliExpress) tracking positions
    "vd_source", "share_source", "share_medium", "share_plat", "share_from",
    "share_tag", "share_session_id", "spm_id_from", "from_spmid",   # Bilibili & co.
)

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}


class ParamFilter:
    """Which query parameter names to drop: exact names and prefixes, both
    compared with the canonical (quote_plus-encoded) name, lower-cased."""

    __slots__ = ("exact", "prefixes")

    def __init__(self, names: Tuple[str, ...]) -> None:
        exact, prefixes = set(), []
        for name in names:
            if name.endswith("*"):
                prefixes.append(quote_plus(name[:-1].encode("utf-8"), safe="").lower())
            else:
                exact.add(quote_plus(name.encode("utf-8"), safe="").lower())
        self.exact = frozenset(exact)
        self.prefixes = tuple(prefixes)

    def drops(self, key: str) -> bool:
        key = key.lower()
        return key in self.exact or (bool(self.prefixes) and key.startswith(self.prefixes))


@functools.lru_cache(maxsize=64)
def param_filter(names: Tuple[str, ...]) -> ParamFilter:
    return ParamFilter(names)


_DEFAULT_FILTER = ParamFilter(DEFAULT_TRACKING_PARAMS)


def check_strip_params(strip_params: Any) -> Optional[ParamFilter]:
    if strip_params is None or strip_params is False:
        return None
    if strip_params is True:
        return _DEFAULT_FILTER
    if isinstance(strip_params, (str, bytes)):
        raise TypeError("strip_params must be True, None or an iterable of parameter names, "
                        f"not a single {type(strip_params).__name__}")
    try:
        names = tuple(strip_params)
    except TypeError:
        raise TypeError("strip_params must be True, None or an iterable of parameter names, "
                        f"not {type(strip_params).__name__}") from None
    for name in names:
        if not isinstance(name, str) or not name or name == "*":
            raise ValueError(f"strip_params entries must be non-empty parameter names, "
                             f"got {name!r}")
    return param_filter(names)


def split(url: str) -> Tuple[str, str, str, str]:
    """(scheme://netloc, path and params, query, fragment) of a canonical URL;
    the query and fragment without their "?"/"#"."""
    rest, _, fragment = url.partition("#")
    rest, _, query = rest.partition("?")
    start = rest.find("://")
    if start < 0:
        return "", rest, query, fragment
    slash = rest.find("/", start + 3)
    if slash < 0:
        return rest, "", query, fragment
    return rest[:slash], rest[slash:], query, fragment


def host_port(origin: str) -> Tuple[str, str, Optional[str]]:
    """(scheme, host, port) of "scheme://userinfo@host:port"."""
    scheme, _, netloc = origin.partition("://")
    hostport = netloc.rpartition("@")[2]
    if hostport.endswith("]"):
        return scheme, hostport, None
    host, colon, port = hostport.rpartition(":")
    if not colon or "]" in port:
        return scheme, hostport, None
    return scheme, host, port


def drop_params(url: str, params: ParamFilter) -> str:
    """url without the query fields params drops (a canonical URL's query
    comes after the first "?" that is not in the fragment)."""
    end = url.find("#")
    if end < 0:
        end = len(url)
    start = url.find("?", 0, end)
    if start < 0:
        return url
    fields = url[start + 1:end].split("&")
    kept = [f for f in fields if not params.drops(f.partition("=")[0])]
    if len(kept) == len(fields):
        return url
    query = "&".join(kept)
    return url[:start] + ("?" + query if query else "") + url[end:]


def drop_default_port(url: str) -> str:
    """url without an explicit port that is its scheme's default."""
    start = url.find("://")
    if start < 0:
        return url
    end = len(url)
    for c in "/?#":
        i = url.find(c, start + 3, end)
        if i >= 0:
            end = i
    colon = url.rfind(":", start + 3, end)
    if colon < 0:
        return url
    port = url[colon + 1:end]
    if not (port.isascii() and port.isdigit()):
        return url  # no port (a ":" of userinfo or an IPv6 address)
    if _DEFAULT_PORTS.get(url[:start]) != int(port):
        return url
    return url[:colon] + url[end:]
