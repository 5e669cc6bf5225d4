"""The JSON-lines reader of near-dups (jsonl_documents): the compiled core
against the pure-Python twin, and the twin's documents against json.loads,
on JSON documents, damaged ones and the corners of JSON's grammar."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawldedup._reference import jsonl as twin

# Pieces whose concatenations make lines: valid documents and fragments of
# every part of the grammar json.loads reads or refuses.
PIECES = [
    b'{"id": 1, "text": "a b"}', b'{"id":"x","text":"y"}', b"{", b"}", b"[", b"]", b",", b":",
    b'"id"', b'"text"', b'"te\\u0078t"', b'"i\\u0064"', b'"other"', b" ", b"\t", b"\r", b"\x0b",
    b"\x0c", b"1", b"-", b"0", b"01", b"1.5", b"1e9", b"-0", b"1.", b".5", b"1E+2", b"NaN",
    b"Infinity", b"-Infinity", b"-NaN", b"true", b"false", b"null", b"tru", b'"\\n"',
    b'"\\u00e9"', b'"\\ud83d\\ude00"', b'"\\ud800"', b'"\\udc00x"', b'"\\ud800\\u0041"',
    b'"\\u12"', b'"\\x"', b'"\\/"', b'"a\tb"', "\"é夏\"".encode(), b'"\xff"', b'"\xc0\xaf"',
    b'"\xed\xa0\x80"', b'"\xf4\x90\x80\x80"', b'"\xe5\xa4"', b"\xef\xbb\xbf",
    b"99999999999999999999", b"-123456789012345678", b"1234567890123456789", b'"',
    b'\\', b"\x00", b"\x7f",
]

lines = st.lists(st.sampled_from(PIECES), max_size=14).map(b"".join)
blocks = st.lists(lines, max_size=6).map(b"\n".join) | st.lists(lines, max_size=6).map(
    lambda xs: b"".join(x + b"\n" for x in xs))
keys = st.sampled_from([b"text", b"id", b"other", b"", "é".encode()])

ids = st.one_of(st.integers(min_value=-(10 ** 30), max_value=10 ** 30),
                st.text(max_size=8))
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                 max_size=3),
    max_leaves=8)
documents = st.fixed_dictionaries({"id": ids, "text": st.text(max_size=40)},
                                  optional={"extra": values, "more": values})


def same(a, b):
    """Equal results, the ids' types included (1 is not "1", nor True)."""
    return a == b and [type(x) for x in a[1]] == [type(x) for x in b[1]]


@given(blocks, keys, keys)
def test_core_equals_the_twin(core, block, text_key, id_key):
    got = core.jsonl_documents(block, text_key, id_key)
    want = twin.jsonl_documents(block, text_key, id_key)
    assert same(got, want)


@given(st.lists(documents, max_size=8), st.booleans(), st.sampled_from([None, 0, 2]),
       st.sampled_from([(", ", ": "), (",", ":")]))
def test_documents_are_read_as_json_loads_reads_them(impl, docs, ascii_only, indent,
                                                     separators):
    block = b"".join(json.dumps(d, ensure_ascii=ascii_only, separators=separators)
                     .encode("utf-8", "surrogatepass") + b"\n" for d in docs)
    status, got_ids, texts = impl.jsonl_documents(block, b"text", b"id")
    assert status == bytes([1] * len(docs))
    assert got_ids == [d["id"] for d in docs] and texts == [d["text"] for d in docs]
    assert [type(x) for x in got_ids] == [type(d["id"]) for d in docs]


@pytest.mark.parametrize("line, status, ident, text", [
    (b'{"id": 1, "text": "a\\nb\\u00e9\\ud83d\\ude00"}', 1, 1, "a\nb\u00e9\U0001F600"),
    (b'{"id": "a", "text": "x", "id": 99999999999999999999999}', 1, 99999999999999999999999,
     "x"),
    (b'{"te\\u0078t": "z", "id": -0}', 1, 0, "z"),
    (b'{"id": 1, "text": "\\ud800"}', 1, 1, "\ud800"),
    (b'{"id": 1, "text": "\\ud800\\u0041"}', 1, 1, "\ud800A"),
    (b'{"id": 1, "text": "a", "o": [NaN, -Infinity, Infinity, {"a": []}]}', 1, 1, "a"),
    (b' \t{"id": 1, "text": "a"}\r\r', 1, 1, "a"),
    (b'{"id": 1.0, "text": "a"}', 2, None, None),
    (b'{"id": NaN, "text": "a"}', 2, None, None),
    (b'{"id": true, "text": "a"}', 2, None, None),
    (b'{"id": 1, "text": null}', 2, None, None),
    (b'{"id": 1}', 2, None, None),
    (b'{}', 2, None, None),
    (b'[1]', 2, None, None),
    (b'{"id": 1, "text": "a"} x', 2, None, None),
    (b'{"id": 1, "text": "a",}', 2, None, None),
    (b'{"id": 01, "text": "a"}', 2, None, None),
    (b'{"id": 1, "text": "a\\x"}', 2, None, None),
    (b'{"id": 1, "text": "a\tb"}', 2, None, None),
    (b'{"id": 1, "text": "\xff"}', 2, None, None),
    (b'{"id": 1, "text": "\xed\xa0\x80"}', 2, None, None),
    (b'{"id": 1, "text": "\xc0\xaf"}', 2, None, None),
    (b'\xef\xbb\xbf{"id": 1, "text": "a"}', 2, None, None),
    (b'{"id": 1, "text": "a"}\x0c', 2, None, None),
    (b' \t\x0b\x0c\r', 0, None, None),
])
def test_corners(impl, line, status, ident, text):
    got = impl.jsonl_documents(line, b"text", b"id")
    assert got[0] == bytes([status])
    assert got[1] == [ident] and type(got[1][0]) is type(ident)
    assert got[2] == [text if status == 1 else None if status == 0 else line]


@pytest.mark.parametrize("depth, status", [(99, 1), (100, 1), (101, 2), (5000, 2)])
def test_nesting_deeper_than_the_limit_is_left_to_the_caller(impl, depth, status):
    """The document object is level 1: containers nested to MAX_DEPTH are
    read, deeper ones (json.loads fails on them at Python's recursion limit)
    handed back."""
    inner = b"[" * (depth - 1) + b"]" * (depth - 1)
    line = b'{"id": 1, "text": "a", "d": ' + inner + b"}"
    assert twin.MAX_DEPTH == 100
    assert impl.jsonl_documents(line, b"text", b"id")[0] == bytes([status])


def test_lines_are_numbered_as_split_gives_them(impl):
    block = b'\n{"id": 1, "text": "a"}\n\n[]\n{"id": 2, "text": "b"}'
    status, got_ids, texts = impl.jsonl_documents(block, b"text", b"id")
    assert status == bytes([0, 1, 0, 2, 1])
    assert got_ids == [None, 1, None, None, 2]
    assert texts == [None, "a", None, b"[]", "b"]
    assert impl.jsonl_documents(block + b"\n", b"text", b"id") == (status, got_ids, texts)
    assert impl.jsonl_documents(b"", b"text", b"id") == (b"", [], [])
    assert impl.jsonl_documents(b"\n", b"text", b"id") == (b"\x00", [None], [None])


@pytest.mark.parametrize("args, message", [
    (("x", b"text", b"id"), "data must be bytes, not str"),
    ((b"x", "text", b"id"), "text_key must be bytes, not str"),
    ((b"x", b"text", None), "id_key must be bytes, not NoneType"),
])
def test_arguments_are_checked(impl, args, message):
    with pytest.raises(TypeError, match=message):
        impl.jsonl_documents(*args)
