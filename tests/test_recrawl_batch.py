"""record_many's batch paths against their one-at-a-time definitions: the
column-wise reading of a batch (recrawl/columns.py) against parse_fetch,
and the SQLite store's in-place update of the pages it read."""

import random
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawldedup.errors import CorruptFileError
from crawldedup.fingerprint import canonicalize_url
from crawldedup.recrawl import NutchPolicy, RecrawlState, SQLiteRecrawlStore, Verdict
from crawldedup.recrawl.columns import parse_columns
from crawldedup.recrawl.fetches import parse_fetch
from crawldedup.recrawl.pages import Pages, page_sums, unpack

T0 = 1_700_000_000.0
CLOCK = T0 + 0.25


def key_of(url):
    """RecrawlState.key with canonical=True, without a state."""
    if isinstance(url, (bytes, bytearray)):
        url = bytes(url).decode("utf-8")
    if not isinstance(url, str):
        raise TypeError(f"url must be str or bytes, got {type(url).__name__}")
    if not url.strip():
        raise ValueError("url is empty")
    return canonicalize_url(url)


HEADER_VALUES = st.sampled_from(['"v1"', ' "v2" ', "", "Tue, 01 Dec 2026 00:00:00 GMT",
                                 "yesterday", "12", " 7 ", "many", "caf\u00e9", b'"b"',
                                 ['"l1"', '"l2"'], [], 5, str((1 << 63) - 1),
                                 str(1 << 63)])
HEADER_NAMES = st.sampled_from(["ETag", "etag", "Last-Modified", "last-modified",
                                "Content-Length", "X-Other", b"ETag", 3])
HEADERS = st.one_of(
    st.none(),
    st.dictionaries(HEADER_NAMES, HEADER_VALUES, max_size=4),
    st.dictionaries(st.sampled_from(["ETag", "Last-Modified", "Content-Length", "Server"]),
                    st.sampled_from(['"a"', "Tue, 01 Dec 2026 00:00:00 GMT", "10", "x"]),
                    max_size=4),
    st.lists(st.tuples(HEADER_NAMES, HEADER_VALUES), max_size=3))
URLS = st.sampled_from(["https://a.example/x", "https://a.example/x?b=2&a=1",
                        "HTTP://B.Example:8080/y#f", "https://c.example", "not a url", "",
                        "  ", " https://a.example/x", b"https://a.example/z", 7])
FETCH = st.fixed_dictionaries(
    {"url": URLS,
     "status": st.sampled_from([200, 204, 304, 404, "200", True, None])},
    optional={
        "time": st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                          st.integers(-10, 10**20), st.just(10**400), st.none(),
                          st.just("now")),
        "headers": HEADERS,
        "body": st.one_of(st.none(), st.binary(max_size=20), st.just("str"),
                          st.just(bytearray(b"arr"))),
        "text": st.one_of(st.none(), st.text(max_size=20), st.just(b"bytes")),
        "digest": st.one_of(st.none(), st.binary(min_size=16, max_size=16),
                            st.binary(max_size=17), st.just("00" * 16), st.just("xyz")),
    })
# Batches a crawler sends: mostly the plain shape, so that the column-wise
# path (not only the fallback) is taken.
PLAIN = st.fixed_dictionaries(
    {"url": st.sampled_from(["https://a.example/1", "https://b.example/2",
                             "https://a.example/3?x=1"]),
     "status": st.sampled_from([200, 304]),
     "time": st.floats(T0, T0 + 1e6),
     "headers": st.one_of(st.none(), st.dictionaries(
         st.sampled_from(["ETag", "Last-Modified", "Content-Length", "Server"]),
         st.sampled_from(['"a"', " \"b\" ", "Tue, 01 Dec 2026 00:00:00 GMT", "soon", "10",
                          "x", "", "99999999999999999999"]), max_size=4))},
    optional={"digest": st.binary(min_size=16, max_size=16), "body": st.binary(max_size=8),
              "text": st.text(max_size=8)})


def one_by_one(batch, canonical):
    key = key_of if canonical else str
    try:
        return [tuple(parse_fetch(i, item, CLOCK, key, canonical))
                for i, item in enumerate(batch)]
    except (TypeError, ValueError, OverflowError) as exc:
        return (type(exc), str(exc))


def columns(batch, canonical):
    key = key_of if canonical else str
    try:
        return [tuple(row) for row in parse_columns(iter(batch), CLOCK, key, canonical).rows()]
    except (TypeError, ValueError, OverflowError) as exc:
        return (type(exc), str(exc))


@given(st.one_of(st.lists(FETCH, max_size=6), st.lists(PLAIN, max_size=12),
                 st.lists(st.one_of(PLAIN, FETCH), max_size=8)), st.booleans())
def test_columns_read_a_batch_like_parse_fetch(batch, canonical):
    """Same Fetch values, or the same error, for any batch."""
    assert columns(batch, canonical) == one_by_one(batch, canonical)


def test_columns_take_the_plain_shape_without_parse_fetch(monkeypatch):
    import crawldedup.recrawl.columns as module
    batch = [{"url": f"https://h{i % 3}.example/{i}", "status": 200 if i % 4 else 304,
              "time": T0 + i, "headers": {"ETag": f'"{i}"', "Last-Modified": "bad date",
                                          "Content-Length": "12"},
              "digest": bytes([i]) * 16} for i in range(20)]
    expected = one_by_one(batch, False)
    monkeypatch.setattr(module, "parse_fetch", None)  # any call would fail
    assert columns(batch, False) == expected


def test_pages_changed_by_another_process_meanwhile_are_still_written(tmp_path):
    """commit updates the pages get_pages read by their row ids; a row that
    was removed, or whose id went to another URL, in between is written as
    a new page instead (nothing lost, nothing overwritten)."""
    path = str(tmp_path / "r.db")
    state = RecrawlState(path)
    urls = [f"https://m.example/{i}" for i in range(4)]
    state.record_many([{"url": u, "status": 200, "body": b"v1", "time": T0} for u in urls])
    store = state.store
    assert isinstance(store, SQLiteRecrawlStore)
    row = list(state.get(urls[2]))
    rows = [[u, *row[1:]] for u in urls]
    store.get_pages(urls)  # remembers the row ids
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("DELETE FROM pages WHERE url = ?", (urls[0],))
    other.execute("UPDATE pages SET url = 'https://m.example/moved' WHERE url = ?",
                  (urls[1],))
    # with the checksum another crawldedup process would have written
    (u, host, etag, lm, due, blob), = other.execute(
        "SELECT url, host, etag, last_modified, due_at, data FROM pages WHERE url = ?",
        ("https://m.example/moved",)).fetchall()
    other.execute("UPDATE pages SET sum = ? WHERE url = ?",
                  (int(page_sums(Pages([u], [host], [etag], [lm], unpack([blob], [due])))[0]), u))
    other.close()
    store.commit(rows, {}, {})
    for u in urls:
        assert state.get(u) is not None and state.get(u).fetches == 1
    assert state.get("https://m.example/moved") is not None
    assert len(state) == 5
    assert state.record(urls[0], 200, body=b"v1", now=T0 + 60) is Verdict.UNCHANGED
    state.close()


def test_sqlite_cache_size_is_an_option(tmp_path):
    store = SQLiteRecrawlStore(str(tmp_path / "c.db"), cache_mib=8)
    assert store._connection().execute("PRAGMA cache_size").fetchone()[0] == -8 * 1024
    store.close()
    default = RecrawlState(str(tmp_path / "d.db"))
    assert default.store._connection().execute("PRAGMA cache_size").fetchone()[0] == -256 * 1024
    default.close()
    for bad in (0, -1):
        with pytest.raises(ValueError, match="cache_mib"):
            SQLiteRecrawlStore(str(tmp_path / "e.db"), cache_mib=bad)
    for bad in (1.5, 256.0, True, "64"):
        with pytest.raises(TypeError, match="cache_mib"):
            SQLiteRecrawlStore(str(tmp_path / "e.db"), cache_mib=bad)


def test_recrawl_flags_must_be_booleans(tmp_path):
    """A flag given "x" or 1 is refused with a TypeError naming it, never
    taken as True."""
    path = str(tmp_path / "f.db")
    for name in ("canonical", "near_duplicate_is_change"):
        for bad in ("x", 1, None):
            with pytest.raises(TypeError, match=name):
                RecrawlState(path, **{name: bad})
    for bad in ("x", 0):
        with pytest.raises(TypeError, match="sync_delta"):
            NutchPolicy(sync_delta=bad)


def test_a_content_length_beyond_64_bits_is_a_bad_length(tmp_path):
    """Counted and ignored like any unparseable length, in a batch of the
    plain shape and one by one; the largest signed 64-bit value is kept."""
    state = RecrawlState(str(tmp_path / "l.db"))
    huge, largest = str(1 << 63), str((1 << 63) - 1)
    fetches = [{"url": f"https://l.example/{i}", "status": 200, "time": T0, "body": b"x",
                "headers": {"Content-Length": value}} for i, value in enumerate((huge, largest))]
    assert state.record_many(fetches) == [Verdict.NEW, Verdict.NEW]
    assert state.record("https://l.example/2", 200, {"Content-Length": huge}, body=b"y",
                        now=T0) is Verdict.NEW
    # a bad header's length is the body's
    assert state.get("https://l.example/0").content_length == 1
    assert state.get("https://l.example/1").content_length == (1 << 63) - 1
    assert state.get("https://l.example/2").content_length == 1
    assert state.stats["bad_lengths"] == 2
    assert state.host_stats("l.example")["bad_lengths"] == 2
    state.close()


def test_an_error_inside_a_write_leaves_no_transaction_open(tmp_path):
    """A value sqlite3 cannot bind, met halfway through a transaction,
    rolls it back: nothing of it is kept and the next call works."""
    state = RecrawlState(str(tmp_path / "t.db"))
    store = state.store
    page = Pages.from_rows([("https://a.example/0", "a.example", None, None, None, None, None,
                             T0, T0, T0, 1, 0, 0.0, 0.0, 1e-6, 3600.0, T0 + 3600)])
    with pytest.raises(UnicodeEncodeError):  # the host's name, bound after the page's insert
        store.write_pages(page, {"a.example": [1.0] * 10, "b\ud800.example": [1.0] * 10}, {})
    assert not store._connection().in_transaction
    assert store.get_hosts(["a.example"]) == {} and len(store) == 0
    assert state.record("https://a.example/1", 200, {}, body=b"x", now=T0) is Verdict.NEW
    state.close()


def test_a_batch_that_cannot_be_written_counts_nothing(tmp_path):
    """The file locked by another connection: the batch fails naming the file,
    and neither the file nor the state's counts keep anything of it."""
    from crawldedup.errors import StoreUnavailableError
    path = str(tmp_path / "k.db")
    state = RecrawlState(path, timeout=0)
    url = "https://k.example/1"
    state.record(url, 200, {"ETag": '"v1"'}, body=b"one", now=T0)
    before = dict(state.stats)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreUnavailableError, match="k.db"):
        # the same ETag on new content: a lie, a changed page, a bad date
        state.record(url, 200, {"ETag": '"v1"', "Last-Modified": "soon"}, body=b"two",
                     now=T0 + 60)
    assert dict(state.stats) == before
    other.execute("ROLLBACK")
    other.close()
    assert state.get(url).fetches == 1
    assert state.record(url, 200, {"ETag": '"v1"', "Last-Modified": "soon"}, body=b"two",
                        now=T0 + 60) is Verdict.CHANGED
    assert state.stats["etag_lies"] == 1 and state.stats["bad_dates"] == 1
    state.close()


def test_a_new_file_has_pages_of_8_kib_and_an_old_one_keeps_its_own(tmp_path):
    new = str(tmp_path / "new.db")
    state = RecrawlState(new)
    state.record("https://a.example/", 200, {}, body=b"x", now=T0)
    state.close()
    old = str(tmp_path / "old.db")
    conn = sqlite3.connect(old)
    conn.execute("PRAGMA page_size = 4096")
    conn.execute("CREATE TABLE unrelated (x)")  # the file exists before the store opens it
    conn.close()
    state = RecrawlState(old)
    state.record("https://a.example/", 200, {}, body=b"x", now=T0)
    assert state.get("https://a.example/").fetches == 1
    state.close()
    sizes = []
    for path in (new, old):
        conn = sqlite3.connect(path)
        sizes.append(conn.execute("PRAGMA page_size").fetchone()[0])
        conn.close()
    assert sizes == [8192, 4096]


def _batch(rnd, at):
    return [{"url": f"https://h{rnd.randrange(7)}.example/{rnd.randrange(20)}.html",
             "status": 200, "time": at + i, "headers": {"ETag": f'"{rnd.randrange(3)}"'},
             "digest": bytes([rnd.randrange(3)]) * 16} for i in range(rnd.randrange(1, 40))]


def test_a_host_damaged_between_two_batches_of_one_open_state_is_named(tmp_path):
    """Damage made by another program while the state is open is found by
    the next batch, and that batch writes nothing."""
    path = str(tmp_path / "d.db")
    state = RecrawlState(path, canonical=False)
    rnd = random.Random(7)
    for step in range(3):
        state.record_many(list({f["url"]: f for f in _batch(rnd, T0 + step * 86400)}.values()))
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("UPDATE hosts SET t_unchanged = 'x'")
    conn.close()
    def tables():
        conn = sqlite3.connect(path)
        try:
            return [conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
                    for t in ("pages", "hosts", "hist")]
        finally:
            conn.close()
    before = tables()
    with pytest.raises(CorruptFileError, match="host .* is damaged: its t_unchanged is 'x'"):
        state.record_many(list({f["url"]: f for f in _batch(rnd, T0 + 9 * 86400)}.values()))
    assert tables() == before
    state.close()
