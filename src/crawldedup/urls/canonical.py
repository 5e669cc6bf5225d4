"""Canonical URLs: :func:`canonicalize_url` (w3lib's answer, and opt-in
extras) and the per-site rules that map the URLs of one page to one URL."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple, Union, cast
from urllib.parse import ParseResult

from crawldedup._checks import check_flag
from crawldedup._kernel import canonicalize_url_fast as _fast
from crawldedup._kernel import canonicalize_urls_fast as _fast_many
from crawldedup.urls.form import (
    FAST_PATH,
    UTF8_NAMES,
    as_list,
    at_index,
    canonical_form,
    check_url_types,
)
from crawldedup.urls.params import (
    ParamFilter,
    check_strip_params,
    drop_default_port,
    drop_params,
    host_port,
    split,
)

__all__ = ["CanonicalUrl", "UrlRule", "UrlRules", "canonicalize_url", "canonicalize_urls"]


def canonicalize_url(
    url: Union[str, bytes, ParseResult],
    keep_blank_values: bool = True,
    keep_fragments: bool = False,
    encoding: Optional[str] = None,
    *,
    query_separator: str = "&",
    strip_params: Union[None, bool, Iterable[str]] = None,
    remove_default_port: bool = False,
    rules: Optional[Union["UrlRules", Iterable["UrlRule"]]] = None,
) -> str:
    """The canonical form of url: with the defaults, exactly
    ``w3lib.url.canonicalize_url(url, keep_blank_values, keep_fragments,
    encoding, query_separator=...)``, with the same arguments in the same
    order.

    w3lib's rules: scheme and host lower-cased, query arguments sorted by key
    then value, percent-escapes upper-cased and decoded where safe, non-ASCII
    percent-encoded as UTF-8, dot segments resolved, an empty path made "/",
    the fragment dropped unless ``keep_fragments``.

    Extras, all off by default (so the default result stays w3lib's):

    - ``strip_params``: ``True`` drops :data:`DEFAULT_TRACKING_PARAMS`; an
      iterable of names drops those instead (a trailing ``*`` makes a prefix;
      ``(*DEFAULT_TRACKING_PARAMS, "sid")`` extends the defaults).  Names are
      compared with the decoded parameter name, ignoring ASCII case.
    - ``remove_default_port``: drop ``:80`` from http/ws, ``:443`` from
      https/wss and ``:21`` from ftp URLs.
    - ``rules``: a :class:`UrlRules` (or a list of :class:`UrlRule`) whose
      first matching rule rewrites the URL to its canonical form.

    Rules apply first (they see every parameter), then ``strip_params``, then
    ``remove_default_port``.  ``url`` is a ``str``, ``bytes`` (decoded with
    ``encoding``, bytes that are not percent-encoded, as w3lib does) or a
    ``urllib.parse.ParseResult``; anything else raises ``TypeError``, and
    w3lib's ``ValueError`` (e.g. for a port above 65535) is raised as is.

    >>> canonicalize_url("http://www.example.com/do?c=3&b=5&b=2&a=50")
    'http://www.example.com/do?a=50&b=2&b=5&c=3'
    >>> canonicalize_url("http://example.com:80/x?utm_medium=cpc", strip_params=True,
    ...                  remove_default_port=True)
    'http://example.com/x'
    """
    if remove_default_port is not False:
        remove_default_port = check_flag("remove_default_port", remove_default_port)
    result = None
    if type(url) is str and FAST_PATH and encoding is None and query_separator == "&":
        result = _fast(url, keep_fragments, keep_blank_values)
    if result is None:
        result = canonical_form(url, keep_fragments, keep_blank_values, encoding, query_separator)
    if rules is None and strip_params is None and not remove_default_port:
        return result
    if rules is not None and not isinstance(rules, UrlRules):
        rules = UrlRules(rules)
    return _extras(result, keep_fragments, check_strip_params(strip_params),
                   remove_default_port, rules)


def _extras(result: str, keep_fragments: bool, params: Optional[ParamFilter],
            remove_default_port: bool, rules: Optional["UrlRules"]) -> str:
    """The opt-in extras of canonicalize_url on w3lib's canonical URL."""
    if rules is not None:
        hit = rules._apply(result, keep_fragments)
        if hit is not None:
            result = hit[0]
    if params is not None:
        result = drop_params(result, params)
    if remove_default_port:
        result = drop_default_port(result)
    return result


def canonicalize_urls(
    urls: Iterable[Union[str, bytes]],
    keep_blank_values: bool = True,
    keep_fragments: bool = False,
    encoding: Optional[str] = None,
    *,
    query_separator: str = "&",
    strip_params: Union[None, bool, Iterable[str]] = None,
    remove_default_port: bool = False,
    rules: Optional[Union["UrlRules", Iterable["UrlRule"]]] = None,
    errors: str = "raise",
) -> List[Optional[str]]:
    """``[canonicalize_url(url, ...) for url in urls]``, faster: the URLs on
    the fast path (``str`` or UTF-8 ``bytes``) are canonicalized in one
    compiled loop that releases the GIL, a large batch on several threads
    (see :func:`crawldedup.set_threads`); the others go to w3lib one by one.

    ``errors="raise"`` raises what :func:`canonicalize_url` raises for the
    first URL that has no canonical form (naming its index);
    ``errors="none"`` gives ``None`` for those URLs (a port out of range, a
    str with lone surrogates...) and keeps going.  Every argument is checked
    before any URL is canonicalized.

    >>> canonicalize_urls(["http://A.com/?b=1&a=2", b"https://a.com/%7e", "http://[::1/"],
    ...                   errors="none")
    ['http://a.com/?a=2&b=1', 'https://a.com/~', None]
    """
    if errors not in ("raise", "none"):
        raise ValueError(f"errors must be 'raise' or 'none', got {errors!r}")
    items = as_list(urls)
    if encoding is not None and not isinstance(encoding, str):
        raise TypeError(f"encoding must be a codec name (str) or None, not "
                        f"{type(encoding).__name__}")
    params = check_strip_params(strip_params)
    remove_default_port = check_flag("remove_default_port", remove_default_port)
    if rules is not None and not isinstance(rules, UrlRules):
        rules = UrlRules(rules)
    fast = (FAST_PATH and query_separator == "&"
            and (encoding is None or encoding.lower() in UTF8_NAMES))
    out = cast(List[Optional[str]], _fast_many(items, keep_fragments, keep_blank_values)
               if fast else [None] * len(items))
    # The kernel answers None for every item it cannot take, wrong types
    # included: checking those (all of them, before w3lib sees any) checks
    # the whole batch.
    missing = [i for i, result in enumerate(out) if result is None]
    check_url_types(items, missing)
    for i in missing:
        try:
            out[i] = canonical_form(items[i], keep_fragments, keep_blank_values, encoding,
                                    query_separator)
        except (TypeError, ValueError) as exc:
            if errors == "none" and not isinstance(exc, TypeError):
                continue
            raise at_index(exc, i) from exc
    if params is not None or remove_default_port or rules is not None:
        out = [None if result is None else
               _extras(result, keep_fragments, params, remove_default_port, rules)
               for result in out]
    return out


# ------------------------------------------------------------ per-site rules

class CanonicalUrl(NamedTuple):
    """What :meth:`UrlRules.resolve` returns: the canonical URL and the class
    of the rule that matched (``None`` when no rule gave one)."""

    url: str
    url_class: Optional[str]


@dataclass(frozen=True)
class UrlRule:
    r"""One per-site URL rule.

    ``host``: an exact host (``"item.jd.com"``) or ``"*.jd.com"`` for every
    subdomain of jd.com (not jd.com itself); compared lower-case, without port
    (a non-ASCII host is converted to its IDNA form, as canonical URLs carry it).
    ``pattern``: a regular expression matched (``re.match``, so anchored at the
    start) against the canonical URL's path, ``;params`` and ``?query`` (query
    arguments sorted, as w3lib leaves them).  ``replacement``: optional
    ``re`` template (``\1``, ``\g<name>``) giving the canonical URL: a whole
    URL (``"https://item.jd.com/\1.html"``) or a path starting with "/" on
    the same scheme and host; the result is canonicalized again.
    ``url_class``: optional label read back by :meth:`UrlRules.classify`
    (e.g. ``"item"``, ``"list"``).

    >>> rule = UrlRule("item.jd.com", r"/(\d+)\.html", r"https://item.jd.com/\1.html", "item")
    >>> canonicalize_url("http://item.jd.com/100012043978.html?spm=1.2&from=list", rules=[rule])
    'https://item.jd.com/100012043978.html'
    """

    host: str
    pattern: str
    replacement: Optional[str] = None
    url_class: Optional[str] = None
    regex: "re.Pattern[str]" = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.host, str):
            raise TypeError(f"host must be str, not {type(self.host).__name__}")
        host = self.host.strip().lower()
        bare = host[2:] if host.startswith("*.") else host
        if not bare or "*" in bare or "/" in bare or ":" in bare:
            raise ValueError("host must be a host name such as 'item.jd.com' or '*.jd.com' "
                             f"(no scheme, port or path), got {self.host!r}")
        if not bare.isascii():  # canonical URLs carry IDNA (punycode) hosts
            try:
                idna = bare.encode("idna").decode("ascii")
            except UnicodeError:
                raise ValueError(f"host {self.host!r} is not a valid internationalized "
                                 "host name") from None
            host = host[:len(host) - len(bare)] + idna
        object.__setattr__(self, "host", host)
        if not isinstance(self.pattern, str):
            raise TypeError(f"pattern must be str, not {type(self.pattern).__name__}")
        try:
            regex = re.compile(self.pattern)
        except re.error as exc:
            raise ValueError(f"pattern {self.pattern!r} is not a valid regular expression: "
                             f"{exc}") from None
        object.__setattr__(self, "regex", regex)
        if self.replacement is not None and not isinstance(self.replacement, str):
            raise TypeError(f"replacement must be str or None, not "
                            f"{type(self.replacement).__name__}")
        if self.url_class is not None and not isinstance(self.url_class, str):
            raise TypeError(f"url_class must be str or None, not {type(self.url_class).__name__}")
        if self.replacement is None and self.url_class is None:
            raise ValueError("a UrlRule needs a replacement, a url_class or both")

    @classmethod
    def from_line(cls, line: str, replacement: Optional[str] = None,
                  url_class: Optional[str] = None) -> "UrlRule":
        """A rule from a ``host|pattern`` line, the template format of
        vertical crawlers (``book.jd.com|^/[0-9]+\\.html.*$``)."""
        host, bar, pattern = line.partition("|")
        if not bar:
            raise ValueError(f"a rule line is 'host|pattern', got {line!r}")
        return cls(host.strip(), pattern.strip(), replacement, url_class)

    def matches_host(self, host: str) -> bool:
        if self.host.startswith("*."):
            return host.endswith(self.host[1:]) and len(host) > len(self.host) - 1
        return host == self.host


class UrlRules:
    r"""An ordered list of :class:`UrlRule`; the first rule whose host and
    pattern match a URL decides its canonical form and class.

    >>> rules = UrlRules([
    ...     UrlRule("item.jd.com", r"/(\d+)\.html", r"https://item.jd.com/\1.html", "item"),
    ...     UrlRule("list.jd.com", r"/list\.html\?", url_class="list"),
    ... ])
    >>> rules.resolve("https://item.jd.com/100012043978.html?utm_source=x#comments")
    CanonicalUrl(url='https://item.jd.com/100012043978.html', url_class='item')
    >>> rules.classify("https://list.jd.com/list.html?cat=652,828")
    'list'
    >>> rules.classify("https://www.jd.com/") is None
    True
    """

    def __init__(self, rules: Iterable[UrlRule] = ()) -> None:
        if isinstance(rules, UrlRule):
            rules = [rules]
        try:
            items = list(rules)
        except TypeError:
            raise TypeError(f"rules must be an iterable of UrlRule, not "
                            f"{type(rules).__name__}") from None
        for rule in items:
            if not isinstance(rule, UrlRule):
                raise TypeError(f"rules must hold UrlRule objects, got {type(rule).__name__}")
        self._rules: List[UrlRule] = items
        self._exact: Dict[str, List[int]] = {}
        for index, rule in enumerate(items):
            if not rule.host.startswith("*."):
                self._exact.setdefault(rule.host, []).append(index)
        self._wild = [i for i, r in enumerate(items) if r.host.startswith("*.")]

    def __len__(self) -> int:
        return len(self._rules)

    def __iter__(self) -> Iterator[UrlRule]:
        return iter(self._rules)

    def __repr__(self) -> str:
        return f"UrlRules({self._rules!r})"

    def _candidates(self, host: str) -> List[UrlRule]:
        indices = list(self._exact.get(host, ()))
        indices += [i for i in self._wild if self._rules[i].matches_host(host)]
        indices.sort()
        return [self._rules[i] for i in indices]

    def _apply(self, canonical: str, keep_fragments: bool) -> Optional[Tuple[str, Optional[str]]]:
        """(rewritten canonical URL, class) for the first matching rule, or None."""
        origin, path, query, fragment = split(canonical)
        if not origin:
            return None
        scheme, host, _port = host_port(origin)
        rules = self._candidates(host)
        if not rules:
            return None
        target = path + ("?" + query if query else "")
        for rule in rules:
            m = rule.regex.match(target)
            if m is None:
                continue
            url = canonical
            if rule.replacement is not None:
                new = m.expand(rule.replacement)
                if "://" not in new:
                    if not new.startswith("/"):
                        raise ValueError(f"rule {rule!r} produced {new!r}: a replacement must "
                                         "give a whole URL or a path starting with '/'")
                    new = origin + new
                url = canonical_form(new, keep_fragments, True, None, "&")
            return url, rule.url_class
        return None

    def resolve(self, url: Union[str, bytes], **kwargs: Any) -> CanonicalUrl:
        """The canonical URL (``kwargs`` as for :func:`canonicalize_url`,
        with these rules) and the class of the matching rule."""
        if "rules" in kwargs:
            raise TypeError("resolve() uses its own rules; do not pass rules=")
        keep_fragments = bool(kwargs.get("keep_fragments", False))
        base = dict(kwargs)
        strip, port = base.pop("strip_params", None), base.pop("remove_default_port", False)
        port = check_flag("remove_default_port", port)
        canonical = canonicalize_url(url, **base)
        hit = self._apply(canonical, keep_fragments)
        url_class = None
        if hit is not None:
            canonical, url_class = hit
        if strip is not None and strip is not False:
            canonical = drop_params(canonical, check_strip_params(strip))  # type: ignore[arg-type]
        if port:
            canonical = drop_default_port(canonical)
        return CanonicalUrl(canonical, url_class)

    def classify(self, url: Union[str, bytes], **kwargs: Any) -> Optional[str]:
        """The ``url_class`` of the first rule matching url, or None."""
        return self.resolve(url, **kwargs).url_class
