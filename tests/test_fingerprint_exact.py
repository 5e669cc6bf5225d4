"""request_fingerprint at the edges, held to Scrapy's Request and
scrapy.utils.request.fingerprint (issue 11, items 19, 20 and 21): where
Scrapy gives a value, the same value; where it raises, raise."""

import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawldedup import request_fingerprint, request_fingerprints
from test_url_canonical import fast_urls

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # scrapy's own import-time deprecations
    from scrapy import Request
    from scrapy.utils.request import fingerprint as scrapy_fingerprint

RAISES = "raises"


# The reference is the current Scrapy (2.14 and later), which these tests
# run against on every Python it supports.  The newest Scrapy for Python 3.9
# (2.13) differs in two places, both since fixed upstream: its Headers
# normalize a name twice when built (so Headers({"aéb": "v"}).get("aéb") is
# None), and a falsy body that is not None (0, [], bytearray()) raises.
# On such a Scrapy the tests first bring those two up to date, so that what
# they compare against is the behaviour crawldedup promises.
def _scrapy_is_current():
    from scrapy.http.headers import Headers
    try:
        Request("http://a.com/", body=0)
    except TypeError:
        return False
    return Headers({"aéb": "v"}).get("aéb") == b"v"


@pytest.fixture(autouse=True)
def current_scrapy(monkeypatch):
    if _scrapy_is_current():
        return
    from collections.abc import Mapping

    from scrapy.http.headers import Headers

    def update(self, seq):
        merged = {}
        for key, value in (seq.items() if isinstance(seq, Mapping) else seq):
            merged.setdefault(self.normkey(key), []).extend(self.normvalue(value))
        dict.update(self, merged)

    original_set_body = Request._set_body

    def set_body(self, body):
        original_set_body(self, body if body else None)

    monkeypatch.setattr(Headers, "update", update)
    monkeypatch.setattr(Request, "_set_body", set_body)


def scrapy_outcome(url, method="GET", body=None, headers=None, **kwargs):
    """Scrapy's fingerprint, or RAISES (the types differ in places: Scrapy
    raises AttributeError for an int header name, we TypeError)."""
    try:
        return scrapy_fingerprint(Request(url, method=method, body=body, headers=headers),
                                  **kwargs)
    except Exception:  # noqa: BLE001 - raising is the answer
        return RAISES


def our_outcome(url, method="GET", body=None, headers=None, **kwargs):
    try:
        return request_fingerprint(url, method, body, headers, **kwargs)
    except (TypeError, ValueError):
        return RAISES


# ------------------------------------------------------------------ item 19

@pytest.mark.parametrize("port", ["0" * 4301, "0" * 4300 + "80", "9" * 4400, "000080", "99999"])
def test_long_port_raises_where_scrapy_raises(port):
    url = f"http://a.com:{port}/x?b=1&a=2"
    expected = scrapy_outcome(url)
    assert our_outcome(url) == expected
    assert our_outcome(url, include_headers=["a"], headers={"a": "1"}) == \
        scrapy_outcome(url, include_headers=["a"], headers={"a": "1"})
    if len(port) > 4300:
        assert expected == RAISES
    if expected == RAISES:
        with pytest.raises(ValueError):
            request_fingerprint(url)
        with pytest.raises(ValueError):
            request_fingerprints(["http://a.com/", url])
    else:
        assert request_fingerprints(["http://a.com/", url])[1] == expected


# ------------------------------------------------------------------ item 20

@pytest.mark.parametrize("name, include", [
    ("aéb", "aéb"), ("aéb", "AÉB"), ("Aéb", "aéb"), ("aéb".encode(), "aéb"),
    ("aéb", "aéb".encode()), ("x-中文-token", "X-中文-TOKEN"), ("straße", "STRASSE"),
    ("ǆx", "ǆx"), ("İd", "i̇d"), ("a1b", "A1B"), ("é", "é"), ("x-ÿy", "x-ÿy"),
])
def test_non_ascii_header_names_as_scrapy(name, include):
    url = "http://a.com/?b=1&a=2"
    for value in ("v", ["v1", b"v2"], 7):
        expected = scrapy_outcome(url, headers={name: value}, include_headers=[include])
        assert our_outcome(url, headers={name: value}, include_headers=[include]) == expected


def test_header_scrapy_cannot_find_counts_as_none():
    # Scrapy stores "aéb" as b"A\xc3\xa9b" and looks b"a\xc3\xa9b" up as
    # b"A\xc3\xa9B": not found, so the fingerprint is the one without headers.
    url = "http://a.com/"
    got = request_fingerprint(url, headers={"aéb": "v"}, include_headers=["aéb"])
    assert got == request_fingerprint(url) == scrapy_outcome(url, headers={"aéb": "v"},
                                                             include_headers=["aéb"])


names = st.text(alphabet="aBz-_1éÉß中ǆİıÿ", min_size=1, max_size=5)
header_values = (st.text(max_size=4) | st.binary(max_size=4) | st.integers(-5, 10**6)
                 | st.booleans() | st.none() | st.floats(allow_nan=False)
                 | st.lists(st.text(max_size=3) | st.binary(max_size=3) | st.integers(0, 9)
                            | st.booleans(), max_size=3)
                 | st.tuples(st.text(max_size=2)) | st.builds(bytearray, st.binary(max_size=2)))
name_forms = names | names.map(str.encode) | st.sampled_from([1, None, 2.5, bytearray(b"x")])


@st.composite
def header_args(draw):
    pairs = draw(st.lists(st.tuples(name_forms, header_values), max_size=4))
    form = draw(st.sampled_from(["dict", "list", "tuple", "generator", "none", "empty",
                                 "bad"]))
    if form == "dict":
        try:
            headers = dict(pairs)
        except TypeError:
            headers = dict(pairs[:0])
    elif form == "list":
        headers = [list(p) if draw(st.booleans()) else p for p in pairs]
    elif form == "tuple":
        headers = tuple(pairs)
    elif form == "generator":
        headers = ("generator", pairs)  # built fresh for each side below
    elif form == "none":
        headers = None
    elif form == "empty":
        headers = draw(st.sampled_from([{}, [], (), "", 0]))
    else:
        headers = draw(st.sampled_from([5, True, "ab", "Accept: x", [("a",)], [("a", "b", "c")],
                                        [5], [None], ["ab"], [b"ab"]]))
    included = [p[0] for p in pairs if isinstance(p[0], (str, bytes))]
    include = draw(st.sampled_from(["none", "names", "cased", "str", "mixed", "bad"]))
    if include == "none":
        include_headers = draw(st.sampled_from([None, [], (), ""]))
    elif include == "names":
        include_headers = included + draw(st.lists(names, max_size=2))
    elif include == "cased":
        include_headers = [n.upper() if draw(st.booleans()) else n.swapcase() for n in included]
    elif include == "str":
        include_headers = draw(names)   # Scrapy: a str is an iterable of one-letter names
    elif include == "mixed":
        include_headers = ["a", b"a"]
    else:
        include_headers = draw(st.sampled_from([[5], [None], 5, [bytearray(b"a")], b"ab"]))
    return headers, include_headers


def fresh(headers):
    if isinstance(headers, tuple) and len(headers) == 2 and headers[0] == "generator":
        return (pair for pair in headers[1])
    return headers


bodies = (st.binary(max_size=8) | st.text(max_size=8) | st.none()
          | st.sampled_from([0, 0.0, False, [], {}, (), 1, True, 2.5, [1], b"", ""])
          | st.builds(bytearray, st.binary(max_size=4))
          | st.builds(memoryview, st.binary(max_size=4)))


@given(args=header_args(), body=bodies, url=fast_urls() | st.sampled_from(
    ["http://例子.测试/?b=1&a=2", "https://a.com/ x", "http://user@a.com/"]),
    keep_fragments=st.booleans())
def test_headers_and_bodies_as_scrapy(args, body, url, keep_fragments):
    headers, include_headers = args
    expected = scrapy_outcome(url, "POST", body, fresh(headers),
                              include_headers=include_headers, keep_fragments=keep_fragments)
    got = our_outcome(url, "POST", body, fresh(headers),
                      include_headers=include_headers, keep_fragments=keep_fragments)
    assert got == expected


# ------------------------------------------------------------------ item 21, case by case

@pytest.mark.parametrize("kwargs", [
    dict(headers={"X": 1.5}),
    dict(headers={1: "v"}),
    dict(headers={"X": 1.5}, include_headers=["x"]),
    dict(headers={1: "v"}, include_headers=["x"]),
    dict(body=bytearray(b"x")),
    dict(body=memoryview(b"x")),
    dict(body=5),
    dict(headers=5),
    dict(headers="Accept: x"),
    dict(headers=[(bytearray(b"X"), "v")]),
    dict(include_headers=[5]),
    dict(include_headers=["a", b"b"]),
])
def test_raises_where_scrapy_raises(kwargs):
    url = "http://a.com/?b=1&a=2"
    assert scrapy_outcome(url, **kwargs) == RAISES
    with pytest.raises((TypeError, ValueError), match="header|body"):
        request_fingerprint(url, **kwargs)


@pytest.mark.parametrize("kwargs", [
    dict(headers={"X": True}, include_headers=["x"]),
    dict(headers={"X": [True, 0, b"b"]}, include_headers=["X"]),
    dict(body=0),
    dict(body=False),
    dict(body=bytearray()),
    dict(body=[]),
    dict(headers=((k, v) for k, v in [("X", "1"), ("x", "2")]), include_headers=["x"]),
    dict(headers=iter([("X", "1")]), include_headers=["x"]),
    dict(headers={"X": "1"}, include_headers="x"),
    dict(headers={"X": "1", "y": "2"}, include_headers="yx"),
    dict(headers=[["X", "1"], "Yv"], include_headers=["y", "x"]),
    dict(headers={"X": None}, include_headers=["x"]),
    dict(headers={"X": bytearray(b"ab")}, include_headers=["x"]),
    dict(headers=0, include_headers=["x"]),
])
def test_values_where_scrapy_gives_values(kwargs):
    url = "http://a.com/?b=1&a=2"
    # A generator is consumed once: rebuild the arguments for our side.
    ours = dict(kwargs)
    if "headers" in ours and hasattr(ours["headers"], "__next__"):
        pairs = list(ours["headers"])
        kwargs = dict(kwargs, headers=iter(pairs))
        ours["headers"] = iter(pairs)
    expected = scrapy_outcome(url, **kwargs)
    assert isinstance(expected, bytes)
    assert request_fingerprint(url, **ours) == expected
