"""crawldedup.warc: documents of WARC/WET files made here with warcio, damaged
records included (they are reported with file and offset, and skipped)."""

import io

import pytest

from conftest import require_module

require_module("warcio")
require_module("resiliparse")

from warcio.statusandheaders import StatusAndHeaders  # noqa: E402
from warcio.warcwriter import WARCWriter  # noqa: E402

from crawldedup.warc import (  # noqa: E402
    WarcDocument,
    WarcProblem,
    html_to_text,
    is_warc_path,
    iter_warc,
    read_documents,
)

PAGE = ("<html><head><title>T</title><style>p {{color: red}}</style>"
        "<script>var x = '{n}';</script></head><body><p>Page {n}: hello <b>w</b>orld</p>"
        "<div>second block {n}</div></body></html>")


def _write(records, gz):
    """Serialize records (uri, kind, payload, content type); returns the bytes
    and the offset of each record."""
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=gz)
    offsets = []
    for uri, kind, payload, ctype in records:
        offsets.append(buf.tell())
        if kind == "response":
            http = StatusAndHeaders("200 OK", [("Content-Type", ctype)], protocol="HTTP/1.1")
            rec = writer.create_warc_record(uri, "response", payload=io.BytesIO(payload),
                                            length=len(payload), http_headers=http)
        elif kind == "warcinfo":
            rec = writer.create_warcinfo_record("x.warc", {"software": "tests"})
        else:
            rec = writer.create_warc_record(uri, kind, payload=io.BytesIO(payload),
                                            length=len(payload), warc_content_type=ctype)
        writer.write_record(rec)
    return bytearray(buf.getvalue()), offsets


def html(n):
    return PAGE.format(n=n).encode("utf-8")


def damaged_archives(tmp_path):
    """Three files with documents and damage; returns their paths."""
    # a.warc.gz: a damaged gzip member in the middle and a cut-short last record
    recs = [("http://a.example/0", "response", html(0), "text/html; charset=utf-8"),
            ("http://a.example/img", "response", b"\x89PNG....", "image/png"),
            ("http://a.example/1", "response", html(1), "text/html"),
            ("http://a.example/2", "response", "Grüße, plain".encode("latin-1"),
             "text/plain; charset=iso-8859-1"),
            ("http://a.example/3", "response", html(3), "text/html"),
            ("http://a.example/4", "response", html(4), "text/html")]
    data, offsets = _write(recs, gz=True)
    data[offsets[2] + 12:offsets[2] + 40] = b"\x00" * 28  # inside member 2's deflate data
    a = tmp_path / "a.warc.gz"
    a.write_bytes(bytes(data[:-25]))  # the last record cut short
    # b.warc: uncompressed, a broken header line
    recs = [("", "warcinfo", b"", ""),
            ("http://b.example/0", "response", html(10), "text/html"),
            ("http://b.example/1", "response", html(11), "application/xhtml+xml"),
            ("http://b.example/2", "response", html(12), "text/html"),
            ("http://b.example/3", "request", b"GET / HTTP/1.1\r\n\r\n", "application/http")]
    data, offsets = _write(recs, gz=False)
    data[offsets[2]:offsets[2] + 8] = b"WARX/9.9"
    b = tmp_path / "b.warc"
    b.write_bytes(bytes(data))
    # c.wet.gz: conversion records, one garbled gzip member header
    recs = [("", "warcinfo", b"", ""),
            ("http://c.example/0", "conversion", "Plain text zero 零".encode(), "text/plain"),
            ("http://c.example/1", "conversion", b"Plain text one", "text/plain"),
            ("http://c.example/2", "conversion", b"Plain text two", "text/plain")]
    data, offsets = _write(recs, gz=True)
    data[offsets[2]:offsets[2] + 3] = b"XYZ"
    c = tmp_path / "c.wet.gz"
    c.write_bytes(bytes(data))
    return [a, b, c]


def test_documents_and_problems(tmp_path):
    a, b, c = damaged_archives(tmp_path)
    items = list(iter_warc(a))
    docs = [i for i in items if isinstance(i, WarcDocument)]
    problems = [i for i in items if isinstance(i, WarcProblem)]
    assert [d.uri for d in docs] == ["http://a.example/0", "http://a.example/2",
                                     "http://a.example/3"]
    assert docs[0].text == "Page 0: hello world\n\nsecond block 0"
    assert docs[1].text == "Grüße, plain"
    assert len(problems) == 2 and all(p.path == str(a) for p in problems)
    assert "cut short" in problems[-1].reason
    # the offsets are those of the damaged records
    assert problems[0].offset > docs[0].offset and problems[1].offset > docs[2].offset

    items = list(iter_warc(b))
    assert [i.uri for i in items if isinstance(i, WarcDocument)] == [
        "http://b.example/0", "http://b.example/2"]
    (problem,) = [i for i in items if isinstance(i, WarcProblem)]
    assert "WARX/9.9" in problem.reason
    raw = b.read_bytes()
    assert raw[problem.offset:problem.offset + 8] == b"WARX/9.9"
    assert str(problem) == f"{b} at offset {problem.offset}: {problem.reason}"

    items = list(iter_warc(c))
    assert [(i.uri, i.text) for i in items if isinstance(i, WarcDocument)] == [
        ("http://c.example/0", "Plain text zero 零"), ("http://c.example/2", "Plain text two")]
    (problem,) = [i for i in items if isinstance(i, WarcProblem)]
    assert c.read_bytes()[problem.offset:problem.offset + 3] == b"XYZ"


def test_read_documents_reports_and_counts(tmp_path):
    _, b, _ = damaged_archives(tmp_path)
    problems, report = [], io.StringIO()
    docs = list(read_documents(b, problems, report))
    assert [uri for uri, _ in docs] == ["http://b.example/0", "http://b.example/2"]
    assert len(problems) == 1
    assert report.getvalue() == f"crawldedup: skipped a damaged record in {problems[0]}\n"


def test_an_undamaged_file_has_no_problems(tmp_path):
    recs = [(f"http://ok.example/{i}", "response", html(i), "text/html") for i in range(50)]
    for gz, name in ((True, "ok.warc.gz"), (False, "ok.warc")):
        data, _ = _write(recs, gz)
        path = tmp_path / name
        path.write_bytes(bytes(data))
        items = list(iter_warc(path))
        assert all(isinstance(i, WarcDocument) for i in items)
        assert [i.uri for i in items] == [u for u, *_ in recs]


def test_garbage_and_empty_files(tmp_path):
    empty = tmp_path / "empty.warc"
    empty.write_bytes(b"")
    assert list(iter_warc(empty)) == []
    junk = tmp_path / "junk.warc.gz"
    junk.write_bytes(b"\x1f\x8b\x08 this is not gzip at all" * 10)
    items = list(iter_warc(junk))
    assert items and all(isinstance(i, WarcProblem) for i in items)
    with pytest.raises(OSError):
        list(iter_warc(tmp_path / "missing.warc"))


def test_html_to_text_and_names():
    assert html_to_text(html(5), "utf-8") == "Page 5: hello world\n\nsecond block 5"
    assert html_to_text("<p>caf\u00e9</p>".encode("latin-1"), "no-such-charset") == "café"
    assert is_warc_path("x.warc.gz") and is_warc_path("X.WET.GZ") and is_warc_path("y.warc")
    assert not is_warc_path("docs.jsonl")


def test_near_dups_command_reads_warc_files(tmp_path, capsys):
    from crawldedup import simhash
    from crawldedup.cli import main
    a, b, c = damaged_archives(tmp_path)
    # two more copies of pages in a.warc.gz and b.warc, under other URIs
    recs = [("http://copy.example/0", "response", html(0), "text/html"),
            ("http://copy.example/10", "response", html(10), "text/html"),
            ("http://copy.example/zh", "conversion", "Plain text zero 零".encode(), "text/plain")]
    data, _ = _write(recs, gz=True)
    d = tmp_path / "d.warc.gz"
    d.write_bytes(bytes(data))
    jsonl = tmp_path / "more.jsonl"
    jsonl.write_text('{"id": "json-1", "text": "Page 0: hello world\\n\\nsecond block 0"}\n')
    assert main(["near-dups", str(a), str(b), str(c), str(d), str(jsonl), "--k", "0"]) == 0
    captured = capsys.readouterr()
    pairs = {(p["a"], p["b"], p["distance"])
             for p in map(__import__("json").loads, captured.out.splitlines())}
    assert pairs == {("http://a.example/0", "http://copy.example/0", 0),
                     ("http://b.example/0", "http://copy.example/10", 0),
                     ("http://c.example/0", "http://copy.example/zh", 0),
                     ("http://a.example/0", "json-1", 0),
                     ("http://copy.example/0", "json-1", 0)}
    # every damaged record is reported with its file and offset, and counted
    reports = [line for line in captured.err.splitlines() if "damaged record" in line]
    assert len(reports) == 4
    assert any(f"{a} at offset" in line for line in reports)
    assert any(f"{b} at offset" in line for line in reports)
    assert "11 documents, 5 near-duplicate pairs" in captured.err
    assert "4 bad lines skipped" in captured.err
    # the text of a WARC document is the same as read locally
    docs = [i for i in iter_warc(d) if isinstance(i, WarcDocument)]
    assert simhash(docs[0].text) == simhash("Page 0: hello world\n\nsecond block 0")


def test_near_dups_minhash_reads_warc_files(tmp_path, capsys):
    """--method minhash reads WARC files as the SimHash method does: the
    identical pages pair with an estimated Jaccard of 1."""
    from crawldedup.cli import main
    a, b, c = damaged_archives(tmp_path)
    recs = [("http://copy.example/0", "response", html(0), "text/html"),
            ("http://copy.example/10", "response", html(10), "text/html")]
    data, _ = _write(recs, gz=True)
    d = tmp_path / "d.warc.gz"
    d.write_bytes(bytes(data))
    assert main(["near-dups", "--method", "minhash", "--threshold", "0.9", str(a), str(b),
                 str(c), str(d)]) == 0
    captured = capsys.readouterr()
    pairs = {(p["a"], p["b"], p["jaccard"])
             for p in map(__import__("json").loads, captured.out.splitlines())}
    assert ("http://a.example/0", "http://copy.example/0", 1.0) in pairs
    assert ("http://b.example/0", "http://copy.example/10", 1.0) in pairs
    assert all(j >= 0.9 for _, _, j in pairs)
    assert len([line for line in captured.err.splitlines() if "damaged record" in line]) == 4
