"""The requests a page's callbacks made, kept beside the page in a
RecrawlState (SQLite and Redis stores): round trip, replacement, clearing,
bad input refused before anything is written, damage named."""

import sqlite3
import uuid
import zlib

import pytest

from crawldedup.errors import CorruptFileError, CorruptStateError
from crawldedup.recrawl import PageLinks, RecrawlState
from crawldedup.recrawl.links import decode_links, encode_links

URL = "https://example.com/a"
LINKS = [["https://example.com/b", None], ["https://example.com/c", "parse_item",
                                           {"meta": {"page": 2}, "priority": 3}]]


@pytest.fixture(params=["sqlite", "redis"])
def state(request, tmp_path):
    if request.param == "sqlite":
        opened = RecrawlState(str(tmp_path / "recrawl.db"))
        opened.damage = lambda url, value: _sqlite_damage(tmp_path / "recrawl.db", url, value)
        yield opened
        opened.close()
        return
    url = request.getfixturevalue("redis_url")
    prefix = f"test:recrawl-links:{uuid.uuid4().hex}"
    opened = RecrawlState(url, prefix=prefix)
    opened.damage = lambda key, value: opened.store.client.set(f"{prefix}:links:{key}", value)
    try:
        yield opened
    finally:
        opened.store.clear()
        opened.close()


def _sqlite_damage(path, url, value):
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE links SET data = ? WHERE url = ?", (value, url))
    conn.close()


def test_links_round_trip_replace_and_clear(state):
    digest = state.record(URL, 200, {}, body=b"<p>one</p>") and state.get(URL).digest
    assert state.get_links(URL) is None  # none kept yet
    state.set_links(URL, digest, LINKS)
    assert state.get_links(URL) == PageLinks(digest, LINKS)
    # keyed like the page: by the canonical URL
    assert state.get_links("HTTPS://EXAMPLE.COM/a") == PageLinks(digest, LINKS)
    state.set_links(URL, bytes(16), None)  # replaced: "could not be kept"
    assert state.get_links(URL) == PageLinks(bytes(16), None)
    state.set_links(URL, digest, [])
    assert state.get_links(URL) == PageLinks(digest, [])
    # with the version's body, for callbacks handed it on a 304
    body = "<p>caf\u00e9\n\x00</p>".encode("utf-8") * 50
    state.set_links(URL, digest, LINKS, body, {"Content-Type": "text/html; charset=utf-8"})
    assert state.get_links(URL) == PageLinks(digest, LINKS, body,
                                             {"Content-Type": "text/html; charset=utf-8"})
    state.store.clear()
    assert state.get_links(URL) is None and len(state) == 0


def test_bad_links_are_refused_before_anything_is_written(state):
    state.set_links(URL, bytes(16), LINKS)
    with pytest.raises(ValueError, match="digest must be 16 bytes"):
        state.set_links(URL, b"short", [])
    with pytest.raises(ValueError, match=r"links\[0\] must be \[url"):
        state.set_links(URL, bytes(16), [["", None]])
    with pytest.raises(ValueError, match=r"links\[1\] must be"):
        state.set_links(URL, bytes(16), [["https://x/", None], "https://y/"])
    with pytest.raises(TypeError, match="JSON values only"):
        state.set_links(URL, bytes(16), [["https://x/", None, {"meta": {"when": object()}}]])
    with pytest.raises(ValueError, match="links must be a list or None"):
        state.set_links(URL, bytes(16), "https://x/")
    with pytest.raises(TypeError, match="body must be bytes or None"):
        state.set_links(URL, bytes(16), [], "text")
    with pytest.raises(TypeError, match="headers must be a dict of str to str"):
        state.set_links(URL, bytes(16), [], b"", {"Content-Type": b"text/html"})
    assert state.get_links(URL) == PageLinks(bytes(16), LINKS)


@pytest.mark.parametrize("value, said", [
    (b"\x05" + bytes(16) + zlib.compress(b"[]"), "not a record of format 1"),
    (b"\x01" + bytes(3), "not a record of format 1"),
    (b"\x01" + bytes(16) + b"not zlib", "do not inflate"),
    (b"\x01" + bytes(16) + zlib.compress(b"[]")[:-3], "truncated"),
    (b"\x01" + bytes(16) + zlib.compress(b"{not json"), "not JSON"),
    (b"\x01" + bytes(16) + zlib.compress(b'[["https://x/", 5]]'), r"links\[0\] must be"),
    (b"\x00" + bytes(16) + zlib.compress(b"[]"), "not a record of format 1, 2, 3 or 4"),
    (b"\x03" + zlib.compress(bytes(15)), "its digest is 15 bytes"),
    (b"\x03" + bytes(16) + zlib.compress(b"[]"), "do not inflate"),
    (b"\x03" + zlib.compress(bytes(16) + b"{not json"), "not JSON"),
    (b"\x04" + zlib.compress(bytes(16) + b"[]"), "its body is missing"),
    (b"\x02" + bytes(16) + zlib.compress(b"[]"), "its body is missing"),
    (b"\x02" + bytes(16) + zlib.compress(b'[]\n<p>'), "header line is not"),
    (b"\x02" + bytes(16) + zlib.compress(b'{"links": [], "headers": {"a": 1}}\n<p>'),
     "header line is not"),
])
def test_a_damaged_links_record_is_named(state, value, said):
    state.set_links(URL, bytes(16), LINKS)
    state.damage(URL, value)
    error = CorruptFileError if isinstance(state.store.address, str) and \
        state.store.address.startswith("SQLite") else CorruptStateError
    with pytest.raises(error, match=f"the recrawl links of '{URL}' are damaged: .*{said}"):
        state.get_links(URL)


@pytest.mark.parametrize("body", [None, b"<p>kept</p>" * 20])
def test_every_byte_of_a_links_record_is_checked(state, body):
    """One changed byte anywhere in a stored record (its digest included)
    is named as damage, or reads back what was written: never the links of
    another version."""
    digest = bytes(range(16))
    headers = None if body is None else {"Content-Type": "text/html"}
    state.set_links(URL, digest, LINKS, body, headers)
    kept = state.get_links(URL)
    assert kept == PageLinks(digest, LINKS, body, headers)
    blob = state.store.read_links([state.key(URL)])[state.key(URL)]
    error = CorruptFileError if isinstance(state.store.address, str) and \
        state.store.address.startswith("SQLite") else CorruptStateError
    for at in range(len(blob)):
        for flip in (0x01, 0x80):
            damaged = bytearray(blob)
            damaged[at] ^= flip
            state.damage(URL, bytes(damaged))
            try:
                got = state.get_links(URL)
            except error:
                continue
            assert got == kept, f"byte {at} ^ {flip:#x} read back {got!r:.200}"


def test_records_of_formats_1_and_2_are_still_read(state):
    digest = bytes(range(16))
    state.set_links(URL, bytes(16), [])
    state.damage(URL, b"\x01" + digest + zlib.compress(b'[["https://x/",null]]'))
    assert state.get_links(URL) == PageLinks(digest, [["https://x/", None]])
    state.damage(URL, b"\x02" + digest + zlib.compress(b'{"links":[],"headers":{}}\n<p>'))
    assert state.get_links(URL) == PageLinks(digest, [], b"<p>", {})


def test_a_sqlite_links_row_that_is_not_bytes_is_named(tmp_path):
    path = tmp_path / "recrawl.db"
    with RecrawlState(str(path)) as state:
        state.set_links(URL, bytes(16), LINKS)
    _sqlite_damage(path, URL, "text")
    with RecrawlState(str(path)) as state:
        with pytest.raises(CorruptFileError, match="links of .* damaged: str instead of bytes"):
            state.get_links(URL)


def test_a_state_file_from_before_links_reads_none_and_takes_them(tmp_path):
    path = tmp_path / "recrawl.db"
    with RecrawlState(str(path)) as state:
        state.record(URL, 200, {}, body=b"x")
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'links'").fetchone() is None
    conn.close()
    with RecrawlState(str(path)) as state:
        assert state.get_links(URL) is None
        state.set_links(URL, state.get(URL).digest, LINKS)
        assert state.get_links(URL).links == LINKS


def test_codec_round_trip_is_compact():
    links = [[f"https://example.com/section/{i}/page.html", "parse_item"] for i in range(100)]
    blob = encode_links(bytes(range(16)), links)
    assert decode_links(blob) == PageLinks(bytes(range(16)), links)
    text = sum(len(link[0]) + len(link[1]) for link in links)
    assert len(blob) < text / 4  # URLs of a site share most of their bytes


def test_a_redis_links_key_of_another_type_is_named(redis_url):
    prefix = f"test:recrawl-links:{uuid.uuid4().hex}"
    with RecrawlState(redis_url, prefix=prefix) as state:
        try:
            state.store.client.rpush(f"{prefix}:links:{URL}", b"x")
            with pytest.raises(CorruptStateError,
                               match=f"the recrawl links of '{URL}' are damaged: their key "
                                     f"is not a string"):
                state.get_links(URL)
        finally:
            state.store.clear()
