"""The opt-in extras of canonicalize_url: tracking parameters, default ports,
per-site rules and URL classes."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from w3lib.url import canonicalize_url as w3lib_canonicalize_url

from crawldedup import DEFAULT_TRACKING_PARAMS, CanonicalUrl, UrlRule, UrlRules, canonicalize_url
from test_url_canonical import fast_urls, urls

# ------------------------------------------------------------------ tracking parameters

@pytest.mark.parametrize("url, expected", [
    ("https://a.com/p?id=7&utm_source=x&utm_medium=cpc&gclid=1&fbclid=2&spm=a.b.c",
     "https://a.com/p?id=7"),
    ("https://a.com/p?UTM_Source=x&Spm=1&id=7", "https://a.com/p?id=7"),
    ("https://a.com/p?utm_source=x#frag", "https://a.com/p"),
    ("https://a.com/p?utm=1&utmx=2&utm_=3", "https://a.com/p?utm=1&utmx=2"),
    ("https://a.com/p?%73pm=1&sp%6D=2&spmx=3", "https://a.com/p?spmx=3"),  # decoded names match
    ("https://a.com/p?ref=1&from=2&page=3", "https://a.com/p?from=2&page=3&ref=1"),
    ("https://a.com/p", "https://a.com/p"),
])
def test_default_tracking_list(url, expected):
    assert canonicalize_url(url, strip_params=True) == expected


def test_user_list_and_extending_defaults():
    url = "https://a.com/p?sid=9&session_x=1&utm_source=x&id=7&a+b=1"
    assert canonicalize_url(url, strip_params=["sid", "session_*"]) == \
        "https://a.com/p?a+b=1&id=7&utm_source=x"
    assert canonicalize_url(url, strip_params=(*DEFAULT_TRACKING_PARAMS, "sid")) == \
        "https://a.com/p?a+b=1&id=7&session_x=1"
    assert canonicalize_url(url, strip_params=["a b"]) == \
        "https://a.com/p?id=7&session_x=1&sid=9&utm_source=x"
    assert canonicalize_url(url, strip_params=[]) == canonicalize_url(url)
    assert canonicalize_url(url, strip_params=False) == canonicalize_url(url)


@given(url=fast_urls() | urls(), names=st.lists(st.sampled_from(
    ["a", "b", "B", "utm_*", "é", "a b", "x*", "%", "="]), max_size=3))
def test_stripping_only_removes_matching_fields(url, names):
    try:
        full = canonicalize_url(url, keep_fragments=True)
    except ValueError:
        return
    stripped = canonicalize_url(url, keep_fragments=True, strip_params=names or True)
    # The result is the canonical URL with some "&"-fields of its query gone,
    # the order of the rest unchanged.
    base, _, frag = full.partition("#")
    sbase, _, sfrag = stripped.partition("#")
    assert frag == sfrag
    head, _, query = base.partition("?")
    shead, _, squery = sbase.partition("?")
    assert head == shead
    fields, kept = query.split("&") if query else [], squery.split("&") if squery else []
    it = iter(fields)
    assert all(any(k == f for f in it) for k in kept)


@pytest.mark.parametrize("bad, error", [
    ("utm_source", TypeError), (b"x", TypeError), (5, TypeError), ([""], ValueError),
    (["*"], ValueError), ([None], ValueError),
])
def test_bad_strip_params(bad, error):
    with pytest.raises(error, match="strip_params"):
        canonicalize_url("http://a.com/?a=1", strip_params=bad)


def test_default_list_is_documented_and_sane():
    assert "utm_*" in DEFAULT_TRACKING_PARAMS and "gclid" in DEFAULT_TRACKING_PARAMS
    assert "fbclid" in DEFAULT_TRACKING_PARAMS and "spm" in DEFAULT_TRACKING_PARAMS
    # Parameters that change a page's content must never be in it.
    for name in ("id", "page", "q", "p", "sort", "ref", "from", "tid", "cat"):
        assert name not in DEFAULT_TRACKING_PARAMS


# ------------------------------------------------------------------ default ports

@pytest.mark.parametrize("url, expected", [
    ("http://a.com:80/x", "http://a.com/x"), ("https://a.com:443/x", "https://a.com/x"),
    ("HTTPS://A.com:0443", "https://a.com/"), ("http://a.com:443/", "http://a.com:443/"),
    ("https://a.com:80/", "https://a.com:80/"), ("http://a.com:8080/", "http://a.com:8080/"),
    ("ftp://a.com:21/f", "ftp://a.com/f"), ("http://u:p@a.com:80/", "http://u:p@a.com/"),
    ("http://[::1]:80/", "http://[::1]/"), ("http://[::1]/", "http://[::1]/"),
    ("http://a.com/x:80", "http://a.com/x:80"), ("mailto:a@b.c", "mailto:a@b.c"),
])
def test_remove_default_port(url, expected):
    assert canonicalize_url(url, remove_default_port=True) == expected


# ------------------------------------------------------------------ rules and classes

JD = [
    UrlRule("item.jd.com", r"/(\d+)\.html", r"https://item.jd.com/\1.html", "item"),
    UrlRule("list.jd.com", r"/list\.html\?", url_class="list"),
    UrlRule("*.taobao.com", r"/item\.htm\?(?:.*&)?id=(\d+)", r"https://item.taobao.com/item.htm?id=\1",
            "item"),
    UrlRule("book.jd.com", r"/(?P<id>[0-9]+)\.html", r"/\g<id>.html", "item"),
]


@pytest.mark.parametrize("url, canonical, url_class", [
    ("http://item.jd.com/100012043978.html", "https://item.jd.com/100012043978.html", "item"),
    ("https://ITEM.JD.COM/100012043978.html?spm=1&from=search#comments",
     "https://item.jd.com/100012043978.html", "item"),
    ("https://item.jd.com/100012043978.html;jsessionid=1?x",
     "https://item.jd.com/100012043978.html", "item"),
    ("https://list.jd.com/list.html?cat=9987,653&page=2", "https://list.jd.com/list.html?cat=9987%2C653&page=2",
     "list"),
    ("https://list.jd.com/other.html", "https://list.jd.com/other.html", None),
    ("https://detail.taobao.com/item.htm?spm=a1&id=12345&ali_refid=x",
     "https://item.taobao.com/item.htm?id=12345", "item"),
    ("https://taobao.com/item.htm?id=12345", "https://taobao.com/item.htm?id=12345", None),
    ("http://book.jd.com:8080/123.html?x=1", "http://book.jd.com:8080/123.html", "item"),
    ("https://www.jd.com/", "https://www.jd.com/", None),
    ("mailto:item.jd.com", "mailto:item.jd.com", None),
])
def test_rules_resolve(url, canonical, url_class):
    rules = UrlRules(JD)
    assert rules.resolve(url) == CanonicalUrl(canonical, url_class)
    assert rules.classify(url) == url_class
    assert canonicalize_url(url, rules=rules) == canonical
    assert canonicalize_url(url, rules=JD) == canonical


def test_first_matching_rule_wins_and_extras_follow_rules():
    rules = UrlRules([
        UrlRule("*.example.com", r"/a/", url_class="first"),
        UrlRule("www.example.com", r"/a/(\d+)", r"/item/\1", "second"),
    ])
    assert rules.resolve("https://www.example.com/a/1?utm_source=x") == \
        CanonicalUrl("https://www.example.com/a/1?utm_source=x", "first")
    assert rules.resolve("https://www.example.com:443/a/1?utm_source=x", strip_params=True,
                         remove_default_port=True) == \
        CanonicalUrl("https://www.example.com/a/1", "first")
    # Rules see every parameter before strip_params removes any.
    by_param = UrlRules([UrlRule("a.com", r"/p\?(?:.*&)?utm_source=promo", url_class="promo")])
    assert by_param.resolve("http://a.com/p?utm_source=promo", strip_params=True) == \
        CanonicalUrl("http://a.com/p", "promo")


def test_internationalized_host():
    rule = UrlRule("*.例子.测试", r"/item/(\d+)", r"/p/\1", "item")
    assert rule.host == "*.xn--fsqu00a.xn--0zwm56d"
    assert UrlRules([rule]).resolve("http://WWW.例子.测试/item/12?x=1") == \
        CanonicalUrl("http://www.xn--fsqu00a.xn--0zwm56d/p/12", "item")
    with pytest.raises(ValueError, match="internationalized"):
        UrlRule("a" * 70 + "é.com", "/", url_class="x")


def test_rule_from_line():
    rule = UrlRule.from_line("book.jd.com|^/[0-9]+\\.html.*$", url_class="item")
    assert rule.host == "book.jd.com" and rule.pattern == "^/[0-9]+\\.html.*$"
    assert UrlRules([rule]).classify("https://book.jd.com/12345.html?x=1") == "item"
    with pytest.raises(ValueError, match="host\\|pattern"):
        UrlRule.from_line("no bar here", url_class="x")


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(host=1, pattern="/"), TypeError, "host must be str"),
    (dict(host="", pattern="/", url_class="x"), ValueError, "host must be a host name"),
    (dict(host="http://a.com", pattern="/", url_class="x"), ValueError, "host must be"),
    (dict(host="a.com:80", pattern="/", url_class="x"), ValueError, "host must be"),
    (dict(host="a.*.com", pattern="/", url_class="x"), ValueError, "host must be"),
    (dict(host="a.com", pattern="(", url_class="x"), ValueError, "not a valid regular"),
    (dict(host="a.com", pattern=b"/", url_class="x"), TypeError, "pattern must be str"),
    (dict(host="a.com", pattern="/", replacement=1), TypeError, "replacement must be"),
    (dict(host="a.com", pattern="/", url_class=1), TypeError, "url_class must be"),
    (dict(host="a.com", pattern="/"), ValueError, "needs a replacement"),
])
def test_bad_rules(kwargs, error, match):
    with pytest.raises(error, match=match):
        UrlRule(**kwargs)


def test_bad_rule_collections_and_replacements():
    with pytest.raises(TypeError, match="iterable of UrlRule"):
        UrlRules(5)
    with pytest.raises(TypeError, match="UrlRule objects"):
        UrlRules(["a.com|/"])
    with pytest.raises(TypeError, match="own rules"):
        UrlRules(JD).resolve("http://a.com/", rules=JD)
    relative = UrlRules([UrlRule("a.com", r"/(\d+)", r"item/\1", "item")])
    with pytest.raises(ValueError, match="a replacement must"):
        relative.resolve("http://a.com/12")
    assert len(UrlRules(JD)) == 4 and list(UrlRules(JD)) == JD
    assert "item.jd.com" in repr(UrlRules(JD))
    assert UrlRules(JD[0]).classify("http://item.jd.com/1.html") == "item"


@given(url=fast_urls() | urls())
def test_extras_off_means_w3lib(url):
    try:
        expected = w3lib_canonicalize_url(url)
    except ValueError:
        return
    assert canonicalize_url(url, rules=UrlRules([]), strip_params=None,
                            remove_default_port=False) == expected
    # A rule for another host changes nothing either.
    other = [UrlRule("no-such-host.invalid", r"/", "https://x.invalid/", "x")]
    assert canonicalize_url(url, rules=other) == expected
