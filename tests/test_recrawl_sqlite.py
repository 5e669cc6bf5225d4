"""The SQLite re-crawl store's layout: pages keyed by a 64-bit hash of the
URL, URLs whose keys collide, files of the first layout converted when
opened, files of a newer layout refused."""

import sqlite3

import pytest

from crawldedup.errors import StoreUnavailableError
from crawldedup.recrawl import RecrawlState, Verdict, stores
from crawldedup.recrawl.stores import PAGE_FIELDS, SQLITE_LAYOUT, SQLiteRecrawlStore, url_key

T0 = 1_700_000_000.0


def ok(url, body, at, etag=None):
    return {"url": url, "status": 200, "headers": {"ETag": etag} if etag else {},
            "body": body, "time": at}


def test_url_key_is_signed_murmur3():
    from crawldedup import hash64
    key = url_key("https://example.com/")
    assert -(1 << 63) <= key < 1 << 63
    assert key % (1 << 64) == hash64("https://example.com/")
    assert url_key("https://example.com/", 1) != key


@pytest.fixture
def colliding(monkeypatch):
    """Every URL containing "/c" gets the same first key (as if 64 bits
    collided); their later probes are their own."""
    real = stores.url_key

    def fake(url, probe=0):
        return 12345 if "/c" in url and probe == 0 else real(url, probe)
    monkeypatch.setattr(stores, "url_key", fake)
    return fake


def test_colliding_urls_keep_their_own_rows(tmp_path, colliding):
    path = str(tmp_path / "recrawl.db")
    urls = [f"https://site.example/c{i}" for i in range(4)]
    with RecrawlState(path, canonical=False) as state:
        # one batch with all of them, then one by one
        assert state.record_many([ok(u, f"body {u}".encode(), T0, f'"{i}"')
                                  for i, u in enumerate(urls[:3])]) == [Verdict.NEW] * 3
        assert state.record(urls[3], 200, {"ETag": '"3"'}, body=b"other", now=T0) is Verdict.NEW
        assert len(state) == 4
        for i, u in enumerate(urls):
            page = state.get(u)
            assert page is not None and page.url == u and page.etag == f'"{i}"'
            assert state.conditional_headers(u) == {"If-None-Match": f'"{i}"'}
        # re-recorded, in another order: each updates its own row
        verdicts = state.record_many([ok(urls[2], b"changed", T0 + 60, '"2b"'),
                                      ok(urls[0], f"body {urls[0]}".encode(), T0 + 60, '"0"'),
                                      {"url": urls[1], "status": 304, "time": T0 + 60}])
        assert verdicts == [Verdict.CHANGED, Verdict.UNCHANGED, Verdict.NOT_MODIFIED]
        assert state.get(urls[2]).etag == '"2b"' and state.get(urls[0]).fetches == 2
        assert state.get(urls[3]).fetches == 1
        # a lease moves the due time of exactly the URLs handed out
        due = state.due(T0 + 10 * 86400, 2, lease=3600)
        assert len(due) == 2
        for u in urls:
            expected = T0 + 10 * 86400 + 3600
            assert (state.get(u).due_at == expected) == (u in due)
        rows = state.store._run(lambda c: c.execute("SELECT key, url FROM pages").fetchall())
        assert sorted(u for _, u in rows) == sorted(urls)
        assert sum(1 for key, _ in rows if key == 12345) == 1
    # and a fresh process (a new store on the file) finds them all
    with RecrawlState(path, canonical=False) as state:
        assert [state.get(u).url for u in urls] == urls


# Layout 1, as crawldedup wrote it before layouts were numbered.
_TEXT = {"url", "host", "etag", "last_modified"}
_INT = {"content_length", "simhash", "fetches", "changes"}


def _layout_1(path, rows):
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    def kind(name):
        if name in _TEXT:
            return "TEXT"
        return "BLOB" if name == "digest" else "INTEGER" if name in _INT else "REAL"
    columns = ", ".join(f"{n} {kind(n)}" for n in PAGE_FIELDS[1:])
    conn.execute(f"CREATE TABLE pages (id INTEGER PRIMARY KEY, url TEXT NOT NULL UNIQUE, "
                 f"{columns})")
    conn.execute("CREATE INDEX pages_due ON pages (due_at)")
    conn.execute("CREATE TABLE hosts (host TEXT PRIMARY KEY NOT NULL, changes REAL NOT NULL "
                 "DEFAULT 0, t_changed REAL NOT NULL DEFAULT 0, t_unchanged REAL NOT NULL "
                 "DEFAULT 0, intervals REAL NOT NULL DEFAULT 0, lm_checks REAL NOT NULL "
                 "DEFAULT 0, lm_lies REAL NOT NULL DEFAULT 0, etag_checks REAL NOT NULL "
                 "DEFAULT 0, etag_lies REAL NOT NULL DEFAULT 0, bad_dates REAL NOT NULL "
                 "DEFAULT 0, bad_lengths REAL NOT NULL DEFAULT 0) WITHOUT ROWID")
    conn.execute("CREATE TABLE hist (bin INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value REAL) WITHOUT ROWID")
    conn.executemany(f"INSERT INTO pages ({', '.join(PAGE_FIELDS)}) VALUES ("
                     + ",".join("?" * len(PAGE_FIELDS)) + ")", rows)
    conn.execute("INSERT INTO hosts (host, intervals) VALUES ('old.example', 3)")
    conn.execute("INSERT INTO meta VALUES ('mu', 1234.5)")
    conn.close()


def test_layout_1_file_is_converted(tmp_path, colliding):
    path = str(tmp_path / "old.db")
    lm = "Tue, 01 Dec 2026 00:00:00 GMT"
    rows = []
    for i, url in enumerate(["https://old.example/a", "https://old.example/c1",
                             "https://old.example/c2"]):
        rows.append((url, "old.example", f'"e{i}"', lm, 10, bytes(16), None, T0, T0, T0, 1, 0,
                     0.0, 0.0, 1e-6, 3600.0, T0 + 3600 * (i + 1)))
    _layout_1(path, rows)
    with RecrawlState(path, canonical=False) as state:
        assert len(state) == 3
        assert state.store._run(lambda c: c.execute("PRAGMA user_version").fetchone()[0]) \
            == SQLITE_LAYOUT
        for i, row in enumerate(rows):
            assert tuple(state.get(row[0])) == row
        assert state.conditional_headers("https://old.example/c2") == {"If-None-Match": '"e2"'}
        assert state.host_stats("old.example")["intervals"] == 3
        assert state.store.get_meta()["mu"] == 1234.5
        assert state.due(T0 + 2 * 3600, 10, fill=False) != []
        assert state.record("https://old.example/c1", 304, {}, now=T0 + 7200) \
            is Verdict.NOT_MODIFIED
        tables = {r[0] for r in state.store._run(lambda c: c.execute(
            "SELECT name FROM sqlite_master").fetchall())}
        assert "pages_layout_1" not in tables and "pages_due" in tables
    with RecrawlState(path, canonical=False) as state:  # opened again: nothing to convert
        assert state.get("https://old.example/c1").fetches == 2


def test_newer_layout_is_refused(tmp_path):
    path = str(tmp_path / "new.db")
    SQLiteRecrawlStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SQLITE_LAYOUT + 1}")
    conn.close()
    with pytest.raises(StoreUnavailableError, match="newer crawldedup.*upgrade"):
        SQLiteRecrawlStore(path)


def test_cache_mib_is_checked(tmp_path):
    with pytest.raises(ValueError, match="cache_mib"):
        SQLiteRecrawlStore(str(tmp_path / "x.db"), cache_mib=0)
