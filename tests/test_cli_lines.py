"""The input splitter of ``crawldedup urls`` (``split_lines``): the compiled
kernel against its pure-Python twin, and against the rule it implements."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

# Bytes biased to the characters the splitter cares about.
EDGES = st.sampled_from([b"\n", b"\r", b" ", b"\t", b"\x0b", b"\x0c", b"\x1c", b"\x85",
                         b"\xa0", b"a", b"/", b"\x00", b"\xff"])
BLOCKS = st.lists(st.one_of(EDGES, st.binary(max_size=20)), max_size=40).map(b"".join)


@given(BLOCKS, st.booleans())
def test_core_equals_twin(core, reference, data, final):
    assert core.split_lines(data, final) == reference.split_lines(data, final)


@given(BLOCKS, st.booleans())
def test_lines_are_stripped_and_non_blank(impl, data, final):
    lines, used = impl.split_lines(data, final)
    whole = data[:used]
    assert used == (len(data) if final else data.rfind(b"\n") + 1)
    assert lines == [x.strip() for x in whole.split(b"\n") if x.strip()]


@given(st.lists(BLOCKS, max_size=6))
def test_blocks_split_anywhere_give_the_same_lines(impl, blocks):
    """The command feeds the unused tail of one read into the next."""
    pending, lines = b"", []
    for block in blocks:
        got, used = impl.split_lines(pending + block, False)
        lines += got
        pending = (pending + block)[used:]
    lines += impl.split_lines(pending, True)[0]
    assert lines == impl.split_lines(b"".join(blocks), True)[0]


def test_bad_input(impl):
    for bad in ("text", bytearray(b"x"), None):
        with pytest.raises(TypeError, match="data must be bytes"):
            impl.split_lines(bad, True)


# line_hashes: the 128-bit MurmurHash3 of each line, end to end, which
# `crawldedup urls --canonical` uses to skip the lines met before in a run

@given(st.lists(st.binary(max_size=80), max_size=30))
def test_line_hashes_core_equals_twin_and_hash128(core, reference, impl, lines):
    import crawldedup
    got = impl.line_hashes(lines)
    assert got == core.line_hashes(lines) == reference.line_hashes(lines)
    assert len(got) == 16 * len(lines)
    for i, line in enumerate(lines):  # hash128's value, h1 (low half) first
        assert int.from_bytes(got[16 * i:16 * i + 16], "little") == crawldedup.hash128(line)


def test_line_hashes_bad_input(impl):
    with pytest.raises(TypeError, match="lines must be a list, not tuple"):
        impl.line_hashes((b"a",))
    with pytest.raises(TypeError, match=r"lines\[1\] must be bytes, not str"):
        impl.line_hashes([b"a", "b"])


# line_spans, span_digests, gather_spans: a chunk as one bytes object and the
# [start, stop) of each line (the exact modes of `crawldedup urls`)

@given(BLOCKS, st.booleans())
def test_line_spans_find_split_lines(core, reference, impl, data, final):
    spans, used = impl.line_spans(data, final)
    assert spans.dtype == np.int64 and spans.shape == (len(spans), 2)
    lines, used_too = impl.split_lines(data, final)
    assert used == used_too
    assert [data[a:b] for a, b in spans.tolist()] == lines
    other = (core if impl is reference else reference).line_spans(data, final)
    assert other[1] == used and other[0].tolist() == spans.tolist()


URLISH = st.lists(st.sampled_from([b"http://a.example/x?b=1&a=2", b"https://b.example/",
                                   b"http://[::1", b"ftp://c/", b"\xff\xfe", b"plain",
                                   b"http://a.example/x?a=2&b=1", b" "]) | st.binary(max_size=12),
                  max_size=12).map(lambda parts: b"\n".join(parts))


@given(URLISH, st.booleans())
def test_span_digests_equal_the_packed_digests_of_the_lines(core, reference, impl, data,
                                                           canonical):
    spans, _ = impl.line_spans(data, True)
    lines = [data[a:b] for a, b in spans.tolist()]
    got = impl.span_digests(data, spans, canonical)
    assert got == impl.url_digests_packed(lines, canonical)
    assert got == (core if impl is reference else reference).span_digests(data, spans, canonical)


@given(BLOCKS, st.data())
def test_gather_spans(impl, data, draw):
    spans, _ = impl.line_spans(data, True)
    keep = np.array(draw.draw(st.lists(st.booleans(), min_size=len(spans),
                                       max_size=len(spans))), dtype=bool)
    picked = spans[keep] if len(spans) else spans
    assert impl.gather_spans(data, picked) == b"".join(data[a:b] + b"\n"
                                                       for a, b in picked.tolist())


def test_spans_bad_input(impl):
    good = np.array([[0, 1]], dtype=np.int64)
    for call in (impl.span_digests, impl.gather_spans):
        with pytest.raises(TypeError, match="data must be bytes"):
            call("ab", good)
        with pytest.raises(TypeError, match=r"int64 numpy array of shape \(n, 2\)"):
            call(b"ab", np.array([[0, 1]], dtype=np.int32))
        with pytest.raises(TypeError, match=r"int64 numpy array of shape \(n, 2\)"):
            call(b"ab", [[0, 1]])
        with pytest.raises(ValueError, match=r"spans\[1\] = \[1, 5\) is not within the 2 bytes"):
            call(b"ab", np.array([[0, 1], [1, 5]], dtype=np.int64))
        with pytest.raises(ValueError, match=r"spans\[0\] = \[2, 1\)"):
            call(b"ab", np.array([[2, 1]], dtype=np.int64))
    with pytest.raises(TypeError, match="data must be bytes"):
        impl.line_spans(bytearray(b"a\n"), True)


@given(BLOCKS)
def test_span_hashes_equal_line_hashes(core, reference, impl, data):
    spans, _ = impl.line_spans(data, True)
    got = impl.span_hashes(data, spans)
    assert got == impl.line_hashes([data[a:b] for a, b in spans.tolist()])
    assert got == (core if impl is reference else reference).span_hashes(data, spans)


# span_key_hashes: the (h1, h2) halves of hash128(key, seed) of each line, or
# of its canonical form (the Bloom block mode of `crawldedup urls`)

def _halves(impl, key, seed):
    h = impl.hash128(key, seed)
    return [h & ((1 << 64) - 1), h >> 64]


@given(URLISH, st.integers(0, 2 ** 32 - 1))
def test_span_key_hashes_are_hash128_of_the_lines(core, reference, impl, data, seed):
    spans, _ = impl.line_spans(data, True)
    hashes, missing = impl.span_key_hashes(data, spans, seed)
    assert hashes.dtype == np.uint64 and hashes.shape == (len(spans), 2) and missing == []
    assert hashes.tolist() == [_halves(impl, data[a:b], seed) for a, b in spans.tolist()]
    other = (core if impl is reference else reference).span_key_hashes(data, spans, seed)
    assert other[0].tolist() == hashes.tolist() and other[1] == []


@given(URLISH, st.integers(0, 2 ** 32 - 1))
def test_span_key_hashes_of_canonical_forms(core, reference, impl, data, seed):
    spans, _ = impl.line_spans(data, True)
    lines = [data[a:b] for a, b in spans.tolist()]
    forms = impl.canonicalize_urls_fast(lines, False, True, True)
    hashes, missing = impl.span_key_hashes(data, spans, seed, True)
    assert missing == [i for i, form in enumerate(forms) if form is None]
    assert hashes.tolist() == [[0, 0] if form is None else _halves(impl, form, seed)
                               for form in forms]
    other = (core if impl is reference else reference).span_key_hashes(data, spans, seed, True)
    assert other[0].tolist() == hashes.tolist() and other[1] == missing


def test_span_key_hashes_bad_input(impl):
    good = np.array([[0, 1]], dtype=np.int64)
    for canonical in (False, True):
        with pytest.raises(TypeError, match="data must be bytes"):
            impl.span_key_hashes("ab", good, 0, canonical)
        with pytest.raises(TypeError, match=r"int64 numpy array of shape \(n, 2\)"):
            impl.span_key_hashes(b"ab", np.array([[0, 1]], dtype=np.uint64), 0, canonical)
        with pytest.raises(ValueError, match=r"spans\[1\] = \[1, 5\) is not within the 2 bytes"):
            impl.span_key_hashes(b"ab", np.array([[0, 1], [1, 5]], dtype=np.int64), 0, canonical)
        with pytest.raises(ValueError, match="seed"):
            impl.span_key_hashes(b"ab", good, -1, canonical)
        with pytest.raises(TypeError, match="seed"):
            impl.span_key_hashes(b"ab", good, "0", canonical)
