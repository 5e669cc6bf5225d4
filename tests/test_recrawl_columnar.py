"""record_many's column-wise compare (recrawl/columnar.py) against its
fetch-by-fetch definition (verdicts.compare), and the packed page rows of
the SQLite store (recrawl/pages.py): format 2, and the conversion of a
format-1 file."""

import sqlite3
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawldedup.errors import CorruptFileError
from crawldedup.recrawl import RecrawlState, SQLiteRecrawlStore, Verdict
from crawldedup.recrawl.columnar import compare_columns
from crawldedup.recrawl.columns import Columns
from crawldedup.recrawl.pages import PACKED_SIZE, PAGE_FIELDS, Pages, pack, unpack
from crawldedup.recrawl.stores import SQLITE_FORMAT
from crawldedup.recrawl.verdicts import compare

T0 = 1_700_000_000.0
KEYS = [f"https://h{i % 3}.example/{i}" for i in range(8)]
ETAGS = st.sampled_from([None, '"a"', '"b"'])
DATES = st.sampled_from([None, "Tue, 01 Dec 2026 00:00:00 GMT", "Wed, 02 Dec 2026 00:00:00 GMT"])
DIGESTS = st.sampled_from([bytes(16), b"\x01" * 16, b"\x00" * 15 + b"\x02"])
# SimHashes 0, 1 and 3 bits apart, and one far away
SIMS = st.sampled_from([None, 0, 1, 0b111, (1 << 64) - 1, 1 << 63])
TIMES = st.sampled_from([T0, T0 + 60.0, T0 + 3600.5, T0 - 10.0])


@st.composite
def stored_row(draw, key):
    sim = draw(SIMS)
    return (key, key.split("/")[2], draw(ETAGS), draw(DATES),
            draw(st.one_of(st.none(), st.integers(0, 10**6))), draw(st.one_of(st.none(), DIGESTS)),
            None if sim is None else sim - (1 << 64) if sim >= 1 << 63 else sim,
            T0 - 7200.0, draw(TIMES), T0 - 3600.0, draw(st.integers(1, 9)),
            draw(st.integers(0, 5)), draw(st.floats(0, 1e6)), draw(st.floats(0, 1e6)),
            draw(st.floats(1e-9, 1e-3)), draw(st.floats(60, 1e6)), draw(TIMES))


@st.composite
def case(draw):
    known = draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=6))
    stored = [draw(stored_row(key)) for key in known]
    keys = draw(st.lists(st.sampled_from(KEYS), unique=True, min_size=1, max_size=8))
    fetches = []
    sims = []
    for key in keys:
        status = draw(st.sampled_from([200, 304] if key in known else [200]))
        fetches.append((key, key.split("/")[2], status, draw(ETAGS), draw(DATES),
                        draw(st.one_of(st.none(), st.integers(0, 10**6))),
                        None if status == 304 else draw(DIGESTS), None, draw(TIMES),
                        draw(st.booleans()), draw(st.booleans())))
        sims.append(None if status == 304 else draw(SIMS))
    return stored, Columns(*(list(c) for c in zip(*fetches))), sims


@settings(max_examples=300, deadline=None)
@given(case(), st.integers(0, 4), st.booleans())
def test_compare_columns_is_compare(data, k, near_is_change):
    stored, batch, sims = data
    hosts = list(dict.fromkeys(batch.host))
    stats_rows, stats_columns = Counter(), Counter()
    by_rows = compare(zip(*batch), sims, {row[0]: row for row in stored}, hosts, k=k,
                      near_duplicate_is_change=near_is_change, nutch=False, stats=stats_rows)
    by_columns = compare_columns(batch, sims, Pages.from_rows(stored), k=k,
                                 near_duplicate_is_change=near_is_change, stats=stats_columns)
    assert by_columns.verdicts == by_rows.verdicts
    assert [tuple(row) for row in by_columns.pages.rows()] == [
        tuple(by_rows.rows[key]) for key in batch.key]
    assert by_columns.hosts == hosts
    assert by_columns.deltas.tolist() == [by_rows.deltas[h] for h in hosts]
    assert by_columns.old_rates.tolist() == list(by_rows.old_rates.values())
    assert stats_columns == stats_rows


@given(st.lists(st.sampled_from(KEYS), unique=True).flatmap(
    lambda keys: st.tuples(*(stored_row(key) for key in keys))))
def test_rows_survive_packing(rows):
    pages = Pages.from_rows(list(rows))
    blobs = pack(pages.num)
    assert all(len(b) == PACKED_SIZE for b in blobs)
    back = Pages(pages.keys, pages.host, pages.etag, pages.last_modified,
                 unpack(blobs, pages.num["due_at"].tolist()))
    assert back.rows() == [tuple(r) for r in rows]


def test_batches_with_a_page_twice_take_the_row_path(tmp_path):
    """A batch that fetches a page twice (and one of distinct pages) give
    what recording the fetches one at a time gives."""
    fetches = [{"url": "https://a.example/1", "status": 200, "body": b"one", "time": T0},
               {"url": "https://a.example/1", "status": 200, "body": b"two", "time": T0 + 60},
               {"url": "https://a.example/2", "status": 200, "body": b"x", "time": T0}]
    batch = RecrawlState(str(tmp_path / "b.db"))
    single = RecrawlState(str(tmp_path / "s.db"))
    assert batch.record_many(fetches) == [Verdict.NEW, Verdict.CHANGED, Verdict.NEW]
    assert [single.record_many([f])[0] for f in fetches] == [Verdict.NEW, Verdict.CHANGED,
                                                            Verdict.NEW]
    for url in ("https://a.example/1", "https://a.example/2"):
        assert batch.get(url) == single.get(url)
    batch.close()
    single.close()


V1_COLUMNS = ("url TEXT NOT NULL UNIQUE, host TEXT, etag TEXT, last_modified TEXT, "
              "content_length INTEGER, digest BLOB, simhash INTEGER, first_seen REAL, "
              "last_fetched REAL, last_changed REAL, fetches INTEGER, changes INTEGER, "
              "t_changed REAL, t_unchanged REAL, rate REAL, interval REAL, due_at REAL")


def write_v1(path, rows):
    """A state file as crawldedup wrote it before format 2 (a column a field)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"CREATE TABLE pages (id INTEGER PRIMARY KEY, {V1_COLUMNS})")
    conn.execute("CREATE INDEX pages_due ON pages (due_at)")
    conn.executemany(f"INSERT INTO pages ({', '.join(PAGE_FIELDS)}) VALUES ("
                     + ",".join("?" * len(PAGE_FIELDS)) + ")", rows)
    conn.close()


def test_a_format_1_file_is_converted(tmp_path):
    path = str(tmp_path / "v1.db")
    rows = [(f"https://a.example/{i}", "a.example", f'"{i}"', None, 10 * i if i % 2 else None,
             bytes([i]) * 16, -5 if i == 3 else i, T0, T0 + i, T0, 1 + i, i, 0.5 * i, 2.0 * i,
             1e-6, 3600.0, T0 + 3600 * i) for i in range(50)]
    write_v1(path, rows)
    state = RecrawlState(path)
    assert len(state) == 50
    for row in rows:
        assert tuple(state.get(row[0])) == tuple(row[:6]) + (row[6] % (1 << 64),) + row[7:]
    assert state.store._connection().execute("PRAGMA user_version").fetchone()[0] == \
        SQLITE_FORMAT
    assert sorted(state.due(T0 + 3600 * 2.5, 10)) == [rows[i][0] for i in (0, 1, 2)]
    assert state.record(rows[4][0], 200, {}, body=b"new", now=T0 + 10**5) is Verdict.CHANGED
    state.close()
    again = RecrawlState(path)  # this format now: opened as it is
    assert len(again) == 50 and again.get(rows[4][0]).fetches == 6
    again.close()


def test_damaged_rows_are_named(tmp_path):
    path = str(tmp_path / "d.db")
    state = RecrawlState(path)
    state.record_many([{"url": f"https://a.example/{i}", "status": 200, "body": b"x",
                        "time": T0} for i in range(3)])
    state.close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("UPDATE pages SET data = substr(data, 1, 50) WHERE url = ?",
                 ("https://a.example/1",))
    conn.close()
    state = RecrawlState(path)
    with pytest.raises(CorruptFileError, match=r"https://a.example/1.*50 bytes"):
        state.get("https://a.example/1")
    with pytest.raises(CorruptFileError, match="a.example/1"):
        state.record_many([{"url": f"https://a.example/{i}", "status": 200, "body": b"y",
                            "time": T0 + 60} for i in range(3)])
    assert state.get("https://a.example/0").fetches == 1  # nothing was written
    state.close()


def test_a_damaged_format_1_file_is_refused_and_left_as_it_was(tmp_path):
    path = str(tmp_path / "bad.db")
    rows = [("https://a.example/1", "a.example", None, None, None, b"x" * 16, 1, T0, T0, T0,
             "many", 0, 0.0, 0.0, 0.0, 0.0, T0)]
    write_v1(path, rows)
    with pytest.raises(CorruptFileError, match="damaged"):
        SQLiteRecrawlStore(path)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT fetches FROM pages").fetchall() == [("many",)]
    conn.close()


def test_a_file_of_another_format_is_refused(tmp_path):
    path = str(tmp_path / "v9.db")
    SQLiteRecrawlStore(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA user_version = 9")
    conn.close()
    with pytest.raises(CorruptFileError, match="format 9"):
        SQLiteRecrawlStore(path)


def test_a_page_another_process_recorded_after_due_is_read_again(tmp_path):
    """A fetch another crawler recorded between due and record is not lost."""
    path = str(tmp_path / "w.db")
    one, other = RecrawlState(path), RecrawlState(path)
    one.record_many([{"url": f"https://a.example/{i}", "status": 200, "body": b"v1",
                      "time": T0} for i in range(5)])
    due = one.due(T0 + 10**8, 5)
    assert other.record(due[0], 200, {}, body=b"v2", now=T0 + 10**8) is Verdict.CHANGED
    assert one.record(due[0], 200, {}, body=b"v2", now=T0 + 10**8 + 60) is Verdict.UNCHANGED
    page = one.get(due[0])
    assert (page.fetches, page.changes) == (3, 1)
    one.close()
    other.close()


def test_a_lease_is_seen_by_get(tmp_path):
    state = RecrawlState(str(tmp_path / "w.db"))
    state.record_many([{"url": f"https://a.example/{i}", "status": 200, "body": b"v1",
                        "time": T0} for i in range(5)])
    due = state.due(T0 + 10**8, 2, lease=600)
    assert state.get(due[0]).due_at == T0 + 10**8 + 600
    assert state.record(due[0], 200, {}, body=b"v1", now=T0 + 10**8) is Verdict.UNCHANGED
    state.close()
