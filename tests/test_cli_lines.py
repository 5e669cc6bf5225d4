"""The input splitter of ``crawldedup urls`` (``split_lines``): the compiled
kernel against its pure-Python twin, and against the rule it implements."""

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
