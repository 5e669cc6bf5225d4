"""The fingerprint kernels (compiled SHA-1 and MD5 over the fast path's
canonical URL) against their twin and against hashlib."""

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from test_url_canonical import fast_urls, urls

TOKEN_METHODS = ["GET", "POST", "M-SEARCH", "X_Y.1", "!#$%&'*+-.^_`|~", "a"]


def scrapy_json(method, canonical, body):
    return ('{"body": "%s", "headers": {}, "method": "%s", "url": "%s"}'
            % (body.hex(), method, canonical)).encode()


@given(url=fast_urls() | urls(), method=st.sampled_from(TOKEN_METHODS),
       body=st.binary(max_size=300), keep_fragments=st.booleans())
def test_request_kernel_core_equals_reference(core, reference, url, method, body, keep_fragments):
    got = core.request_fingerprint_fast(url, method, body, keep_fragments)
    assert got == reference.request_fingerprint_fast(url, method, body, keep_fragments)


@given(url=fast_urls() | urls(), keep_fragments=st.booleans(), keep_blank_values=st.booleans())
def test_url_kernel_core_equals_reference(core, reference, url, keep_fragments, keep_blank_values):
    got = core.url_fingerprint_fast(url, keep_fragments, keep_blank_values)
    assert got == reference.url_fingerprint_fast(url, keep_fragments, keep_blank_values)


@pytest.mark.parametrize("size", list(range(0, 200)) + [1000, 4095, 4096, 70_000])
def test_sha1_and_md5_every_padding_case(impl, size):
    # Body and path lengths walk the message across every 64-byte block
    # boundary of SHA-1 and MD5 padding (55, 56, 63, 64, 119, 120...).
    body = bytes((i * 7 + size) & 0xFF for i in range(size))
    url = "http://a.com/" + "x" * size
    canonical = impl.canonicalize_url_fast(url)
    assert canonical == url
    assert impl.request_fingerprint_fast(url, "POST", body) == \
        hashlib.sha1(scrapy_json("POST", canonical, body)).digest()
    assert impl.url_fingerprint_fast(url) == hashlib.md5(canonical.encode()).digest()


def test_kernels_decline_outside_fast_path(impl):
    assert impl.url_fingerprint_fast("http://例子.测试/") is None
    assert impl.request_fingerprint_fast("http://user@a.com/", "GET", b"") is None


@pytest.mark.parametrize("method, body, error", [
    (b"GET", b"", TypeError), (None, b"", TypeError), ("GET", "x", TypeError),
    ("GET", bytearray(b"x"), TypeError), ("", b"", ValueError), ("G T", b"", ValueError),
    ("GÉT", b"", ValueError), ("G\x00", b"", ValueError), ('G"', b"", ValueError),
])
def test_request_kernel_checks_arguments(impl, method, body, error):
    with pytest.raises(error, match="method|body"):
        impl.request_fingerprint_fast("http://a.com/", method, body)


def test_kernels_reject_non_str_url(impl):
    with pytest.raises(TypeError, match="url must be str"):
        impl.url_fingerprint_fast(b"http://a.com/")
    with pytest.raises(TypeError, match="url must be str"):
        impl.request_fingerprint_fast(None, "GET", b"")
