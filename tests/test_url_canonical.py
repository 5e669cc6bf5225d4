"""canonicalize_url: the compiled fast path against its twin, and both against
w3lib.url.canonicalize_url, on generated URLs and on a realistic corpus."""

import importlib.util
import pathlib
import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from w3lib.url import canonicalize_url as w3lib_canonicalize_url

from crawldedup import _reference, canonicalize_url, fingerprint
from crawldedup._kernel import IMPLEMENTATION, canonicalize_url_fast

ROOT = pathlib.Path(__file__).resolve().parent.parent

# The kernels reproduce w3lib 2.5 (the version on Python 3.10+).  With an
# older w3lib (Python 3.9) the wrapper sends every URL to w3lib, and the
# kernels are checked against their pure-Python twin instead, which the runs
# on newer Pythons check against w3lib 2.5.
W3LIB_25 = fingerprint.FAST_PATH


def twin_agrees(impl, url, keep_fragments=False, keep_blank_values=False):
    """The kernel's answer equals the twin's (for an older w3lib)."""
    got = impl.canonicalize_url_fast(url, keep_fragments, keep_blank_values)
    return got == _reference.canonicalize_url_fast(url, keep_fragments, keep_blank_values)


def load_corpus():
    spec = importlib.util.spec_from_file_location("url_corpus",
                                                  ROOT / "benchmarks" / "url_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def w3lib_outcome(url, **kwargs):
    """w3lib's answer, or the type of the exception it raises."""
    try:
        return w3lib_canonicalize_url(url, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the exception type is the answer
        return type(exc)


def our_outcome(url, **kwargs):
    try:
        return canonicalize_url(url, **kwargs)
    except Exception as exc:  # noqa: BLE001
        return type(exc)


# ------------------------------------------------------------------ strategies

# Tokens aimed at the rules' edges: kept escapes (%25 %2F %3B %3F) in both
# cases, decodable and undecodable escapes, dot segments, ";" params, bytes
# that get quoted, "+" and "=" and "&" in queries, non-ASCII, whitespace.
PATH_TOKENS = ["a", "Z", "0", "-", "_", "~", ".", "..", "/", "//", ";", ";x=1", "=", ",",
               "%", "%%", "%2", "%2f", "%2F", "%25", "%2525", "%3b", "%3B", "%3f", "%3F",
               "%41", "%7e", "%7E", "%e4%b8%ad", "%E4%B8%AD", "%zz", "%g1", "%2e", "%2E%2e",
               "%23", "%20", "%5B", "%7C", "%00", "%FF", "[", "]", "|", "\"", "<", ">", "^",
               "`", "{", "}", "'", "(", ")", "*", "!", "$", "@", ":", "+", "é", "中文", "ü",
               "\u3000", "\U0001F600", " ", "\t", "\\", "\x7f", "\x01"]
QUERY_TOKENS = ["a", "b", "B", "a=1", "b=2", "=", "&", "&&", "+", "%20", "%2B", "%2b", "%26",
                "%3D", "%", "%4", "%zz", "%e4%b8%ad", "%E4%b8%AD", "%FF", "%00", "é", "中",
                "'", "\"", "<", "[", "]", "|", "~", ";", ",", "/", "?", ":", "@", "*",
                "utm_source=x", "id=7", " ", "\t", "\\", "A=", "=x"]
FRAG_TOKENS = ["top", "#", "%", "%41", "a b", "é", "[", "|", "?", "/", "&", "'", "\"", "%zz"]
HOSTS = ["example.com", "EXAMPLE.COM", "Www.Example.Com", "a", "a.b-c_d~e.", "xn--fsq.com",
         "例子.测试", "Bücher.de", "[::1]", "[2001:DB8::0:1]", "[::ffff:1.2.3.4]", "127.0.0.1",
         "", "a%41.com", "a b.com", "ex!ample.com", "[v1.x]", "[1.2.3.4]", "[::1"]
SCHEMES = ["http", "https", "HTTP", "Https", "hTTpS", "ftp", "ws", "wss", "file", "mailto",
           "foo+bar.baz-1", "data", "about", "1http", "h"]


# The code points whose NFKC form holds a URL separator ("/?#@:"): urllib's
# urlsplit refuses a netloc with one (test_url_exact checks this list is
# every such code point); other non-ASCII, NFKC-stable or not ("ｆ" is "f",
# "ﬁ" is "fi", "①" is "1"), leaves a userinfo on the fast path.
NFKC_SEPARATORS = ("\uff0f\uff1a\uff20\uff1f\uff03\u2100\u2101\u2105\u2106\u2047\u2048"
                   "\u2049\u2a74\ufe13\ufe16\ufe55\ufe56\ufe5f\ufe6b")
USERINFO_ALPHABET = "aZ09-._~!$&'()*+,;=%:@" + "é中ｆﬁ①ª\u3000" + NFKC_SEPARATORS


def userinfos(max_size=6):
    """A userinfo with its "@" (or none): ASCII, non-ASCII and NFKC separators."""
    return st.just("") | st.text(alphabet=USERINFO_ALPHABET, max_size=max_size).map(
        lambda u: u + "@")


def joined(tokens, max_size=12):
    return st.lists(st.sampled_from(tokens), max_size=max_size).map("".join)


@st.composite
def urls(draw):
    scheme = draw(st.sampled_from(SCHEMES))
    sep = draw(st.sampled_from(["://"] * 8 + [":/", ":", ":///", "//"]))
    userinfo = draw(st.sampled_from(["", "", "", "", "user@", "user:pass@", "u%40x:p%3Aw@",
                                     "us er:p@ss@", "@", ":@"]) | userinfos())
    host = draw(st.sampled_from(HOSTS) | st.text(
        alphabet="abcXYZ019.-_~%:@", max_size=8))
    port = draw(st.sampled_from(["", "", "", ":", ":80", ":0080", ":443", ":8080", ":0",
                                 ":65535", ":65536", ":99999999", ":8x", ":1:2", ":-1"]))
    path = draw(joined(PATH_TOKENS))
    if path and not path.startswith("/") and draw(st.booleans()):
        path = "/" + path
    url = scheme + sep + userinfo + host + port + path
    if draw(st.booleans()):
        url += "?" + draw(joined(QUERY_TOKENS))
    if draw(st.integers(0, 3)) == 0:
        url += "#" + draw(joined(FRAG_TOKENS, 5))
    lead = draw(st.sampled_from(["", "", "", "", " ", "\t", "\x00", "\n "]))
    trail = draw(st.sampled_from(["", "", "", "", " ", "\r\n", "\x1f"]))
    return lead + url + trail


# The URLs the fast path is built for: http(s), plain host, anything in the
# path and query.
@st.composite
def fast_urls(draw):
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "Https"]))
    host = draw(st.text(alphabet="abcXYZ019.-_~", min_size=1, max_size=12))
    port = draw(st.sampled_from(["", ":", ":80", ":0080", ":443", ":8080", ":0", ":65535",
                                 ":00000000000000000000001"]))
    path = draw(joined([t for t in PATH_TOKENS if t not in (" ", "\t", "\\", "\x7f", "\x01")]))
    if path and not path.startswith("/"):
        path = "/" + path
    userinfo = draw(userinfos()) if draw(st.integers(0, 3)) == 0 else ""
    url = f"{scheme}://{userinfo}{host}{port}{path}"
    if draw(st.booleans()):
        url += "?" + draw(joined([t for t in QUERY_TOKENS if t not in (" ", "\t", "\\")]))
    if draw(st.booleans()):
        url += "#" + draw(joined([t for t in FRAG_TOKENS if t != "a b"], 5))
    return url


# ------------------------------------------------------------------ twin

@given(url=urls() | fast_urls() | st.text(max_size=40),
       keep_fragments=st.booleans(), keep_blank_values=st.booleans())
def test_core_matches_reference(core, reference, url, keep_fragments, keep_blank_values):
    got = core.canonicalize_url_fast(url, keep_fragments, keep_blank_values)
    assert got == reference.canonicalize_url_fast(url, keep_fragments, keep_blank_values)


@given(url=fast_urls(), keep_fragments=st.booleans(), keep_blank_values=st.booleans())
def test_fast_path_equals_w3lib(impl, url, keep_fragments, keep_blank_values):
    if not W3LIB_25:
        assert twin_agrees(impl, url, keep_fragments, keep_blank_values)
        return
    got = impl.canonicalize_url_fast(url, keep_fragments, keep_blank_values)
    expected = w3lib_outcome(url, keep_fragments=keep_fragments,
                             keep_blank_values=keep_blank_values)
    if got is None:
        # Only a port w3lib must judge leaves the fast path here: out of
        # range (w3lib raises) or of more than 5 digits (leading zeros); and
        # a userinfo with an NFKC separator (w3lib raises).
        netloc = re.split(r"[/?#]", url.split("//", 1)[1], maxsplit=1)[0]
        port = netloc.rpartition("@")[2].partition(":")[2]
        assert expected is ValueError or len(port) > 5
    else:
        assert got == expected


@given(url=urls(), keep_fragments=st.booleans(), keep_blank_values=st.booleans())
@example(url="http://a.com/%2525%252f/%2f%2F%3b%3F%25/..%2F..;p%3b?%2B+=%2b&&b",
         keep_fragments=True, keep_blank_values=True)
@example(url="https://a.b/x;y/z;;?#", keep_fragments=True, keep_blank_values=False)
def test_fast_path_never_disagrees(impl, url, keep_fragments, keep_blank_values):
    assert_fast_path_agrees(impl, url, keep_fragments, keep_blank_values)


def assert_fast_path_agrees(impl, url, keep_fragments, keep_blank_values):
    """The fast path gives w3lib's answer or none (with w3lib 2.5's rules;
    with another w3lib, the twin's answer)."""
    if not W3LIB_25:
        assert twin_agrees(impl, url, keep_fragments, keep_blank_values)
        return
    got = impl.canonicalize_url_fast(url, keep_fragments, keep_blank_values)
    if got is not None:
        assert got == w3lib_canonicalize_url(url, keep_fragments=keep_fragments,
                                             keep_blank_values=keep_blank_values)


@pytest.mark.parametrize("url", [
    "http://example.com/\ud800",            # lone surrogate: not UTF-8
    "http://例子.测试/", "http://[::ffff:1.2.3.4]/", "http://[::ffff:102:304]/",
    "http://[fe80::1%25eth0]/", "http://[v1.x]/", "http://[1.2.3.4]/", "http://[::1",
    "http://[::1:2:3:4:5:6:7:8]/", "http://u[x]@a.com/", "http://a.com/\x01b", "http://a.com/\x7f",
    "file:///x", "ws://a.com/;x", "wss://a.com/", "http://example.com:65536/",
    "http://example.com:8x/", "http:///path", "http:example.com",
    "mailto:a@b.c", "", "http://", "http://:80/",
])
def test_fast_path_declines(impl, url):
    assert impl.canonicalize_url_fast(url) is None


@pytest.mark.parametrize("url, expected", [
    ("http://www.example.com/do?c=3&b=5&b=2&a=50", "http://www.example.com/do?a=50&b=2&b=5&c=3"),
    ("HTTP://WWW.EXAMPLE.COM:0080", "http://www.example.com:80/"),
    ("http://a.com/a/./b/../c/%2e%2E/d", "http://a.com/a/d"),
    ("http://a.com/%7e%41%2f%25%3b%3f%zz", "http://a.com/~A%2F%25%3B%3F%zz"),
    ("http://a.com/x;p=[1]?q=a+b&q=%20&r", "http://a.com/x;p=%5B1%5D?q=+&q=a+b&r="),
    ("http://a.com/é?é=中", "http://a.com/%C3%A9?%C3%A9=%E4%B8%AD"),
    ("http://a.com?&&", "http://a.com/"),
    # userinfo, IPv6 hosts, the other special schemes, whitespace, backslashes
    ("http://User:P%41ss%zz@WWW.a.com/", "http://User:PAss%25zz@www.a.com/"),
    ("http://a@b:c:d@h/", "http://a%40b:c%3Ad@h/"),
    ("http://:@h/", "http://:@h/"),
    ("http://[2001:DB8:0:0:1:0:0:1]:0080/p", "http://[2001:db8::1:0:0:1]:80/p"),
    ("http://[0:0:0:0:0:0:0:0]/", "http://[::]/"),
    ("http://[::1:2:3:4:5:6:7]", "http://[0:1:2:3:4:5:6:7]/"),
    ("FTP://a.com/x?b=1&a=2", "ftp://a.com/x?a=2&b=1"),
    (" \thttp://a.com/a b/\n?q=x y \x00", "http://a.com/a%20b/?q=x+y"),
    ("http:\\\\a.com\\b\\..\\c?d\\e", "http://a.com/c?d%5Ce="),
])
def test_fast_path_examples(impl, url, expected):
    assert impl.canonicalize_url_fast(url) == expected
    if W3LIB_25:
        assert w3lib_canonicalize_url(url) == expected


def test_fast_path_type_error(impl):
    for bad in (5, bytearray(b"http://a.com/"), None):
        with pytest.raises(TypeError, match="url must be str or bytes"):
            impl.canonicalize_url_fast(bad)


def test_long_url_uses_the_heap(impl):
    # Beyond the stack buffer of the core: the same answer as w3lib.
    url = ("https://a.com/" + "%E4%B8%AD/" * 2000 + "?"
           + "&".join(f"k{i}=v" for i in range(3000, 0, -1)))
    got = impl.canonicalize_url_fast(url, True, True)
    assert got is not None and "k1=v&k10=v" in got
    assert got == (w3lib_canonicalize_url(url) if W3LIB_25
                   else _reference.canonicalize_url_fast(url, True, True))


# ------------------------------------------------------------------ word edges

# The core reads the host, the path and the query 8 bytes at a time and the
# other bytes one by one.  Runs of plain bytes of every length from 0 to 17
# put each special byte (and each "%HH", whole or cut short) at every offset
# of a word and across two words, and the URL's end anywhere in its last word.
EDGE_PATH_TOKENS = ["%", "%2", "%2e", "%2E", "%2f", "%2F", "%3B", "%3f", "%25", "%41", "%7E",
                    "%zz", "%e4%b8%ad", "%00", ";", ";p=1", ";;", "/", "//", "/.", "/..",
                    "/./", "/../", ".", "..", " ", "é", "中", "\U0001F600", "~", "^", "{", "}",
                    "'", "=", ",", "|", "[", "]", ":", "@", "+", "_", "\"", "`", "<", "\\", "\t",
                    "\n", "\x7f", "\x00", "\x1f", "?", "#"]
EDGE_QUERY_TOKENS = ["&", "=", "==", "&&", "+", "%", "%2", "%20", "%2B", "%3d", "%41", "%7e",
                     "%e4%b8%ad", "%ff", "~", "/", "é", "中", " ", ";", "?", ":", "'", "_", "-",
                     ".", "\\", "\t", "\x7f", "\x01", "#"]
EDGE_KEYS = ["a", "A", "b", "aa", "ab", "a_b", "a.b", "utm_source", "utm_source_x", "id",
             "a%41", "a+b", "a b", "é", "k"]


def edge_runs(alphabet, tokens, max_runs):
    return st.lists(st.tuples(st.text(alphabet, max_size=17), st.sampled_from(tokens)
                              | st.just("")), max_size=max_runs).map(
        lambda parts: "".join(run + token for run, token in parts))


@st.composite
def edge_query_fields(draw):
    key = draw(st.sampled_from(EDGE_KEYS) | edge_runs("aZ09-._", EDGE_QUERY_TOKENS, 2))
    if draw(st.integers(0, 4)) == 0:
        return key
    return key + "=" + draw(edge_runs("aZ09-._", EDGE_QUERY_TOKENS, 3))


@st.composite
def word_edge_urls(draw):
    scheme = draw(st.sampled_from(["http", "https", "HTTPS", "hTtP", "ftp", "FTP"]))
    userinfo = draw(userinfos(12)) if draw(st.integers(0, 3)) == 0 else ""
    host = draw(st.text(alphabet="abzAMZ09-._~", min_size=1, max_size=20))
    port = draw(st.sampled_from(["", "", "", ":8080", ":0", ":", ":00443"]))
    url = f"{scheme}://{userinfo}{host}{port}"
    path = draw(edge_runs("azAZ09-._/", EDGE_PATH_TOKENS, 6))
    if path or draw(st.booleans()):
        url += "/" + path
    if draw(st.booleans()):
        # up to 40 fields: the insertion sort (16 or fewer) and qsort
        url += "?" + "&".join(draw(st.lists(edge_query_fields(), max_size=40)))
    if draw(st.integers(0, 3)) == 0:
        url += "#" + draw(edge_runs("aZ09-._/?", ["%", "%41", " ", "é", "#", "\t", "\x7f"], 3))
    return url + draw(st.sampled_from(["", "", "", "", " ", "\n", "\x00"]))


@st.composite
def word_edge_bytes(draw):
    """A word-edge URL as bytes with raw bytes >= 0x80 (not always UTF-8) put in."""
    data = bytearray(draw(word_edge_urls()).encode("utf-8"))
    for _ in range(draw(st.integers(0, 4))):
        data.insert(draw(st.integers(0, len(data))), draw(st.integers(0x80, 0xFF)))
    return bytes(data)


@given(url=word_edge_urls() | word_edge_bytes(), keep_fragments=st.booleans(),
       keep_blank_values=st.booleans())
@example(url="http://a.com/abcdefgh/.ijklmnop/../%2e%2E/q", keep_fragments=False,
         keep_blank_values=True)
@example(url="https://ABCDEFGHIJKLMNOPQ.COM:080/a;b/c;d;e?x=1&y&&z=%41+#f g",
         keep_fragments=True, keep_blank_values=False)
def test_word_edges_core_matches_reference(core, reference, url, keep_fragments,
                                           keep_blank_values):
    got = core.canonicalize_url_fast(url, keep_fragments, keep_blank_values)
    assert got == reference.canonicalize_url_fast(url, keep_fragments, keep_blank_values)


@given(url=word_edge_urls() | word_edge_bytes(), keep_fragments=st.booleans(),
       keep_blank_values=st.booleans())
def test_word_edges_equal_w3lib(impl, url, keep_fragments, keep_blank_values):
    assert_fast_path_agrees(impl, url, keep_fragments, keep_blank_values)


@given(urls=st.lists(word_edge_urls() | word_edge_bytes(), max_size=20))
def test_word_edges_batch_equals_one_by_one(core, urls):
    assert core.canonicalize_urls_fast(urls, False, True) == \
        [core.canonicalize_url_fast(u, False, True) for u in urls]


# ------------------------------------------------------------------ wrapper = w3lib

@given(url=urls() | fast_urls() | st.text(max_size=30), keep_fragments=st.booleans(),
       keep_blank_values=st.booleans())
def test_canonicalize_url_equals_w3lib(url, keep_fragments, keep_blank_values):
    kwargs = dict(keep_fragments=keep_fragments, keep_blank_values=keep_blank_values)
    assert our_outcome(url, **kwargs) == w3lib_outcome(url, **kwargs)


@given(url=urls(), encoding=st.sampled_from(["utf-8", "UTF8", "latin-1", "gbk", "cp1252"]),
       separator=st.sampled_from(["&", ";"] if fingerprint._W3LIB_QUERY_SEPARATOR else ["&"]))
def test_encoding_and_separator_equal_w3lib(url, encoding, separator):
    kwargs = dict(encoding=encoding)
    if separator != "&":
        kwargs["query_separator"] = separator
    assert our_outcome(url, **kwargs) == w3lib_outcome(url, **kwargs)


@given(url=urls())
def test_bytes_url_equals_w3lib(url):
    data = url.encode("utf-8", "surrogatepass")
    assert our_outcome(data) == w3lib_outcome(data)


def test_realistic_corpus_equals_w3lib():
    corpus = load_corpus().realistic_urls(100_000)
    assert len(corpus) == len(set(corpus)) == 100_000
    fast = 0
    for keep_fragments in (False, True):
        for url in corpus:
            got = canonicalize_url(url, keep_fragments=keep_fragments)
            assert got == w3lib_canonicalize_url(url, keep_fragments=keep_fragments), url
            fast += canonicalize_url_fast(url, keep_fragments) is not None
    # The corpus is what the fast path is for: nearly all of it stays compiled.
    assert fast >= 0.95 * 2 * len(corpus)


def test_fast_path_is_used():
    import w3lib
    version = tuple(int(x) for x in w3lib.__version__.split(".")[:2])
    assert fingerprint.FAST_PATH == (version == (2, 5))
    assert IMPLEMENTATION in ("core", "reference")


def test_other_w3lib_falls_back(monkeypatch):
    calls = []
    # Every module of crawldedup.urls that reads the flag and calls the kernel.
    from crawldedup.urls import canonical, form
    for module in (canonical, form):
        monkeypatch.setattr(module, "FAST_PATH", False)
        monkeypatch.setattr(module, "_fast", lambda *a: calls.append(a))
    assert canonicalize_url("http://a.com/?b=1&a=2") == "http://a.com/?a=2&b=1"
    assert calls == []


@pytest.mark.parametrize("bad", [None, 1, 1.5, ["http://a.com"], object()])
def test_canonicalize_url_rejects_non_str(bad):
    with pytest.raises(TypeError, match="url must be str, bytes"):
        canonicalize_url(bad)


def test_invalid_port_raises_value_error():
    url = "http://example.com:70000/"
    if W3LIB_25:
        with pytest.raises(ValueError):
            canonicalize_url(url)
    else:  # w3lib 2.3 decides
        assert our_outcome(url) == w3lib_outcome(url)


def test_query_separator():
    url = "http://a.com/?b=1;a=2"
    if fingerprint._W3LIB_QUERY_SEPARATOR:
        assert canonicalize_url(url, query_separator=";") == "http://a.com/?a=2;b=1"
    else:  # w3lib before 2.4 (Python 3.9)
        with pytest.raises(ValueError, match="needs w3lib 2.4"):
            canonicalize_url(url, query_separator=";")


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(encoding=5), TypeError, "encoding must be"),
    (dict(encoding="no-such-codec"), LookupError, "unknown encoding"),
    (dict(query_separator=""), ValueError, "query_separator"),
    (dict(query_separator=b"&"), TypeError, "query_separator"),
])
def test_bad_canonicalize_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        canonicalize_url("http://a.com/?b=1&a=2", **kwargs)
