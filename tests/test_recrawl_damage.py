"""A recrawl state that holds values RecrawlState never writes (a damaged
SQLite file, a hand-edited Redis key) is refused wherever it is read, with
an error naming the page, host or setting; a batch that would add to a
damaged value writes nothing, so the damage is not hidden by the next write.
Both stores, on the real servers."""

import os
import pathlib
import sqlite3
import subprocess
import sys
import uuid

import numpy as np
import pytest

from crawldedup.errors import (
    CorruptDatabaseError,
    CorruptFileError,
    CorruptStateError,
    StoreUnavailableError,
)
from crawldedup.recrawl import RecrawlState, SQLiteRecrawlStore
from crawldedup.recrawl.pages import Pages, pack, page_sums, unpack
from crawldedup.recrawl.stores import HOST_FIELDS, SQLITE_FORMAT, _hist_sums
from crawldedup.redis import RedisKeyTypeError

T0 = 1_700_000_000.0
DAY = 86400.0
URLS = [f"https://h{i % 2}.example/{i}" for i in range(6)]


def fetches(version, at):
    return [{"url": url, "status": 200, "time": at,
             "headers": {"ETag": f'"{i}-{version}"',
                         "Last-Modified": "Tue, 01 Dec 2026 00:00:00 GMT"},
             "digest": bytes([version]) * 16} for i, url in enumerate(URLS)]


class SQLiteDamage:
    """Writes values into a state's SQLite file behind its back."""

    error = CorruptFileError

    def __init__(self, path):
        self.path = path

    def open(self):
        return RecrawlState(self.path, canonical=False)

    def _sql(self, sql, args=()):
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.close()

    def page_number(self, url, field, value):
        (blob, due), = self._sql("SELECT data, due_at FROM pages WHERE url = ?", (url,))
        num = unpack([blob], [due])
        num[field] = value
        self._sql("UPDATE pages SET data = ? WHERE url = ?", (pack(num)[0], url))

    def page_etag(self, url):
        self._sql("UPDATE pages SET etag = x'ff00' WHERE url = ?", (url,))

    def seal(self, url):
        """Give a page edited here the checksum crawldedup would write (as
        if crawldedup had written its values)."""
        rows = self._sql("SELECT url, host, etag, last_modified, due_at, data FROM pages "
                         "WHERE url = ?", (url,))
        (u, host, etag, lm, due, blob), = rows
        pages = Pages([u], [host], [etag], [lm], unpack([blob], [due]))
        self._sql("UPDATE pages SET sum = ? WHERE url = ?", (int(page_sums(pages)[0]), url))

    def host(self, host, field, value):
        self._sql(f"UPDATE hosts SET {field} = ? WHERE host = ?", (value, host))

    def hist(self, value):
        self._sql("UPDATE hist SET n = ? WHERE bin = (SELECT min(bin) FROM hist)", (value,))

    def seal_hist(self):
        """Give the histogram's rows the checksums crawldedup would write."""
        items = self._sql("SELECT bin, n FROM hist")
        for (b, n), s in zip(items, _hist_sums(items).tolist()):
            self._sql("UPDATE hist SET sum = ? WHERE bin = ?", (s, b))

    def meta(self, key, value):
        self._sql("INSERT OR REPLACE INTO meta (key, value, sum) VALUES (?, ?, 0)",
                  (key, value))

    def snapshot(self):
        return [self._sql(f"SELECT * FROM {table} ORDER BY 1")
                for table in ("pages", "hosts", "hist", "meta")]


class RedisDamage:
    """Writes values into a state's Redis keys behind its back."""

    error = CorruptStateError

    def __init__(self, url, prefix, cluster):
        import redis
        self.url, self.prefix = url, prefix
        # a Redis Cluster's keys carry the prefix as their hash tag
        self.keys = "{" + prefix + "}" if cluster else prefix
        self.client = (redis.cluster.RedisCluster if cluster else redis.Redis).from_url(url)

    def open(self):
        return RecrawlState(self.url, prefix=self.prefix, canonical=False)

    def page_number(self, url, field, value):
        if isinstance(value, float) and not np.isfinite(value):
            value = "nan" if np.isnan(value) else "inf"
        self.client.hset(f"{self.keys}:page:{url}", field, value)

    def page_etag(self, url):
        self.client.hset(f"{self.keys}:page:{url}", "etag", b"\xff\x00")

    def seal(self, url):
        """(Redis keeps no checksums.)"""

    def host(self, host, field, value):
        self.client.hset(f"{self.keys}:host:{host}", field, value)

    def hist(self, value):
        key = f"{self.keys}:hist"
        self.client.hset(key, min(self.client.hkeys(key), key=int), value)

    def seal_hist(self):
        """(Redis keeps no checksums.)"""

    def meta(self, key, value):
        self.client.hset(f"{self.keys}:meta", key, value)

    def snapshot(self):
        out = {}
        for key in sorted(self.client.scan_iter(match=f"{self.keys}:*")):
            kind = self.client.type(key)
            out[key] = (self.client.hgetall(key) if kind == b"hash"
                        else self.client.zrange(key, 0, -1, withscores=True)
                        if kind == b"zset" else self.client.get(key))
        return out

    def clean(self):
        keys = list(self.client.scan_iter(match=f"{self.keys}:*"))
        if keys:
            self.client.delete(*keys)
        self.client.close()


def _recorded(request, kind, tmp_path):
    if kind == "sqlite":
        tool = SQLiteDamage(str(tmp_path / "recrawl.db"))
    else:
        cluster = kind == "cluster"
        tool = RedisDamage(request.getfixturevalue("redis_cluster_url" if cluster
                                                   else "redis_url"),
                           f"test:recrawl-damage:{uuid.uuid4().hex}", cluster)
    state = tool.open()
    state.record_many(fetches(1, T0))
    state.record_many(fetches(2, T0 + DAY))
    state.due(T0 + 2 * DAY, 2)
    state.close()
    return tool


@pytest.fixture(params=["sqlite", "redis", "cluster"])
def damage(request, tmp_path):
    """A store of each kind with two crawls of URLS recorded (so it holds
    pages, host sums, a rate histogram and the scheduler's mu), and the means
    to damage it."""
    tool = _recorded(request, request.param, tmp_path)
    yield tool
    if request.param != "sqlite":
        tool.clean()


@pytest.fixture(params=["redis", "cluster"])
def redis_damage(request, tmp_path):
    """The same, on Redis and on the cluster only."""
    tool = _recorded(request, request.param, tmp_path)
    yield tool
    tool.clean()


def refused_everywhere(tool, match, *, reads=("get", "record", "due")):
    """Each call in ``reads`` raises the store's damage error matching
    ``match``, and the refused batch wrote nothing."""
    state = tool.open()
    try:
        before = tool.snapshot()
        calls = {"get": lambda: [state.get(url) for url in URLS],
                 "record": lambda: state.record_many(fetches(3, T0 + 400 * DAY)),
                 "due": lambda: state.due(T0 + 400 * DAY, 100),
                 "host_stats": lambda: state.host_stats("h0.example")}
        for name in reads:
            with pytest.raises(tool.error, match=match):
                calls[name]()
        assert tool.snapshot() == before
    finally:
        state.close()


@pytest.mark.parametrize("field, value, said", [
    ("fetches", 0, r"\d+ changes in 0 fetches"),
    ("changes", -1, "-1 changes in 2 fetches"),
    ("changes", 5, "5 changes in 2 fetches"),
    ("last_fetched", np.nan, "not a finite number.*last_fetched=nan"),
    ("first_seen", np.inf, "not a finite number.*first_seen=inf"),
    ("rate", -1.0, "negative or infinite rate.*rate=-1.0"),
    ("interval", np.inf, "negative or infinite rate.*interval=inf"),
    ("t_unchanged", -5.0, "negative or infinite rate.*t_unchanged=-5.0"),
])
def test_a_page_with_numbers_never_written_is_named(damage, field, value, said):
    damage.page_number(URLS[3], field, value)
    # due reads every number of a SQLite page, and those it ranks by of a
    # Redis page
    due = (isinstance(damage, SQLiteDamage)
           or field in ("fetches", "changes", "last_fetched", "t_unchanged"))
    refused_everywhere(damage, f"page 'https://h1.example/3' is damaged: .*({said})",
                       reads=("get", "record", "due") if due else ("get", "record"))


def test_page_fields_that_are_not_numbers_or_text(damage):
    if isinstance(damage, RedisDamage):
        damage.page_number(URLS[2], "changes", "many")
        refused_everywhere(damage, "h0.example/2' is damaged: its changes is b'many'",
                           reads=("get", "record"))
        damage.page_number(URLS[2], "changes", "0")
        damage.page_number(URLS[2], "last_fetched", "soon")
        refused_everywhere(damage, "h0.example/2' is damaged")
    else:
        damage.page_number(URLS[2], "flags", 64)
        refused_everywhere(damage, "h0.example/2' is damaged: unknown flags 64")
    damage.page_number(URLS[2], "last_fetched", T0 + DAY)
    damage.page_number(URLS[2], "flags" if isinstance(damage, SQLiteDamage) else "changes", 0)
    damage.seal(URLS[2])
    damage.page_etag(URLS[4])
    refused_everywhere(damage, r"h0.example/4' is damaged: its (ETag|etag) is b'\\xff\\x00'",
                       reads=("get", "record"))


@pytest.mark.parametrize("field", ["t_unchanged", "lm_lies"])
@pytest.mark.parametrize("value", ["x", -5.0, float("inf")])
def test_a_host_with_sums_never_written_is_named_and_not_added_to(damage, field, value):
    if isinstance(damage, RedisDamage) and isinstance(value, float) and value > 0:
        value = "inf"
    damage.host("h1.example", field, value)
    # t_unchanged pools the host's rate (read by due and record); lm_lies
    # is read where the host's validators are judged, and is added to by a
    # batch, which is refused rather than hide it
    reads = ("record", "due") if field == "t_unchanged" else ("record",)
    refused_everywhere(damage, f"host 'h1.example' is damaged: its {field} is", reads=reads)


def test_a_damaged_histogram_is_named_and_not_added_to(damage):
    damage.hist("lots")
    refused_everywhere(damage, "rate histogram is damaged: bin .* holds .*lots",
                       reads=("record", "due"))


def test_a_redis_due_set_of_another_type_stops_the_batch_before_it_writes(redis_damage):
    """In MULTI/EXEC a ZADD on a key of another type fails alone: the batch
    is refused before its transaction instead of half written."""
    damage = redis_damage
    damage.client.delete(f"{damage.keys}:due")
    damage.client.set(f"{damage.keys}:due", b"not a sorted set")
    state = damage.open()
    try:
        before = damage.snapshot()
        with pytest.raises(RedisKeyTypeError, match=r"due.*holds a value of another type"):
            state.record_many(fetches(3, T0 + 400 * DAY))
        assert damage.snapshot() == before
    finally:
        state.close()


def test_a_negative_histogram_count_counts_zero(damage):
    """Two crawlers re-recording one page at once each take it out of its
    old rate bin: a count below zero is drift, not damage."""
    damage.hist(-3)
    damage.seal_hist()  # as crawldedup writes drift
    state = damage.open()
    try:
        assert state.store.histogram().min() == 0
        assert state.due(T0 + 400 * DAY, 100)
    finally:
        state.close()


@pytest.mark.parametrize("key, value", [("mu", "abc"), ("mu", -1.0), ("budget", 0.0),
                                        ("last_due", "yesterday")])
def test_damaged_scheduler_settings_are_named_at_open(damage, key, value):
    damage.meta(key, value)
    with pytest.raises(damage.error, match=f"setting '{key}' is damaged"):
        damage.open()


def test_the_redis_error_names_the_server_and_prefix(damage):
    damage.page_number(URLS[0], "fetches", 0)
    state = damage.open()
    try:
        with pytest.raises(CorruptFileError) as caught:
            state.get(URLS[0])
    finally:
        state.close()
    where = damage.prefix if isinstance(damage, RedisDamage) else damage.path
    assert where in str(caught.value)


def test_a_file_sqlite_finds_damaged_is_a_corrupt_database(tmp_path):
    """A state file that is not a database, or whose pages SQLite finds
    malformed, raises CorruptDatabaseError: a CorruptFileError naming the
    file, and not a StoreUnavailableError (which a caller may retry)."""
    junk = tmp_path / "junk.db"
    junk.write_bytes(bytes(range(256)) * 40)
    with pytest.raises(CorruptDatabaseError, match="junk.db.*not a database") as caught:
        RecrawlState(str(junk))
    assert isinstance(caught.value, CorruptFileError)
    assert not isinstance(caught.value, StoreUnavailableError)
    assert caught.value.path == str(junk)

    path = str(tmp_path / "cut.db")
    state = RecrawlState(path, canonical=False)
    state.record_many([{"url": f"https://h{i % 50}.example/{i}", "status": 200,
                        "digest": i.to_bytes(16, "little"), "time": T0}
                       for i in range(3000)])
    state.close()
    size = os.path.getsize(path)
    with open(path, "r+b") as f:  # a page in the middle of the tables, zeroed
        f.seek(size // 2 // 4096 * 4096)
        f.write(bytes(4096))
    with pytest.raises(CorruptDatabaseError, match="cut.db.*(malformed|integrity_check)"):
        state = RecrawlState(path, canonical=False)
        try:
            state.due(T0 + 400 * DAY, 5000)
            [state.get(f"https://h{i % 50}.example/{i}") for i in range(3000)]
        finally:
            state.close()


# ------------------------------------------------- SQLite: one byte changed

def _crawled_file(path, pages=300, hosts=7):
    """A SQLite state of a few hundred pages over a few hosts, crawled twice
    (validators, 304s, changed pages), with a due call's settings saved."""
    urls = [f"https://h{i % hosts}.example/page/{i}?q={i * 7}" for i in range(pages)]
    state = RecrawlState(path, canonical=False)
    state.record_many([{"url": u, "status": 200, "time": T0,
                        "headers": {"ETag": f'"e{i}"', "Content-Length": str(100 + i),
                                    "Last-Modified": "Tue, 01 Dec 2026 00:00:00 GMT"},
                        "text": f"page {i} words {i % 5}"} for i, u in enumerate(urls)])
    state.record_many([{"url": u, "status": 200 if i % 3 else 304, "time": T0 + DAY,
                        "headers": {"ETag": f'"f{i}"'} if i % 3 else {},
                        "text": f"page {i} changed {i % 4}"} for i, u in enumerate(urls)])
    state.due(T0 + 2 * DAY, 5)
    state.close()
    return urls, [f"h{i}.example" for i in range(hosts)]


def _everything(path, urls, hosts):
    """All a state answers: every page, host, the histogram, the settings,
    the counts and the URLs due (due saves settings: read them first)."""
    state = RecrawlState(path, canonical=False)
    try:
        return {"meta": state.store.get_meta(), "pages": [state.get(u) for u in urls],
                "headers": [state.conditional_headers(u) for u in urls[:20]],
                "hosts": [state.host_stats(h) for h in hosts],
                "hist": state.store.histogram().tolist(), "len": len(state),
                "count": state.count_due(T0 + 3 * DAY),
                "due": state.due(T0 + 400 * DAY, 1000)}
    finally:
        state.close()


def test_one_changed_byte_anywhere_in_a_sqlite_state_is_named_or_changes_nothing(tmp_path):
    """300 trials, each a copy of one state with one byte changed at a
    random place of the file: each either raises CorruptFileError naming
    the copy (never a plain StoreUnavailableError) or answers exactly what
    the undamaged state answers."""
    base = str(tmp_path / "base.db")
    urls, hosts = _crawled_file(base)
    size = os.path.getsize(base)
    with open(base, "rb") as f:
        original = f.read()
    good = tmp_path / "good.db"
    good.write_bytes(original)
    expected = _everything(str(good), urls, hosts)
    rnd = np.random.default_rng(2026)
    outcomes = {"named": 0, "same": 0}
    for trial in range(300):
        path = tmp_path / f"t{trial}.db"
        data = bytearray(original)
        at = int(rnd.integers(size))
        data[at] ^= int(rnd.integers(1, 256))
        path.write_bytes(bytes(data))
        try:
            got = _everything(str(path), urls, hosts)
        except CorruptFileError as exc:
            assert exc.path == str(path), (at, exc)
            outcomes["named"] += 1
        else:
            assert got == expected, f"byte {at} changed: a wrong answer without an error"
            outcomes["same"] += 1
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(f"{path}{suffix}"):
                os.remove(f"{path}{suffix}")
    assert outcomes["named"] > 50 and outcomes["same"] > 50, outcomes


def _sql(path, sql, args=()):
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("edit, read, said", [
    ("UPDATE pages SET etag = '\"e9\"' WHERE url = 'https://h3.example/page/3?q=21'",
     "get", "page 'https://h3.example/page/3.*does not match its checksum"),
    ("UPDATE pages SET due_at = due_at + 1 WHERE url = 'https://h3.example/page/3?q=21'",
     "get", "page 'https://h3.example/page/3.*does not match its checksum"),
    ("UPDATE hosts SET changes = changes + 1 WHERE host = 'h2.example'",
     "host_stats", "host 'h2.example' is damaged: its row does not match its checksum"),
    ("UPDATE hosts SET host = 'h2.exbmple' WHERE host = 'h2.example'",
     "host_stats", "host 'h2.exbmple' is damaged: its row does not match"),
    ("UPDATE hist SET n = n + 1 WHERE bin = (SELECT min(bin) FROM hist)",
     "due", "histogram is damaged: bin .* does not match its checksum"),
    ("UPDATE meta SET value = value + 1 WHERE key = 'last_due'",
     "open", "setting 'last_due' is damaged: its row does not match its checksum"),
])
def test_sound_looking_values_changed_behind_the_store_are_named(tmp_path, edit, read, said):
    """Values crawldedup could have written, but did not: the row's
    checksum names them where they are read."""
    path = str(tmp_path / "s.db")
    urls, hosts = _crawled_file(path, pages=30)
    _sql(path, edit)
    if read == "open":
        with pytest.raises(CorruptFileError, match=said):
            RecrawlState(path, canonical=False)
        return
    state = RecrawlState(path, canonical=False)
    try:
        calls = {"get": lambda: [state.get(u) for u in urls],
                 "host_stats": lambda: [state.host_stats(h) for h in hosts + ["h2.exbmple"]],
                 "due": lambda: state.due(T0 + 400 * DAY, 100)}
        with pytest.raises(CorruptFileError, match=said):
            calls[read]()
    finally:
        state.close()


def test_a_damaged_copy_of_a_url_in_its_index_is_found_at_open(tmp_path):
    """A URL is kept twice, in its row and in the URL index.  A changed byte
    in the index copy makes the page unreachable by its URL (it would read
    as new): SQLite's integrity check, run at open, finds it."""
    path = str(tmp_path / "i.db")
    urls, _ = _crawled_file(path, pages=50)
    with open(path, "rb") as f:
        original = f.read()
    needle = urls[17].encode()
    places = [i for i in range(len(original)) if original.startswith(needle, i)]
    assert len(places) == 2  # the row and the index entry
    for place in places:
        data = bytearray(original)
        data[place + len(needle) - 1] ^= 0x01
        with open(path, "wb") as f:
            f.write(bytes(data))
        with pytest.raises(CorruptFileError, match="i.db"):
            with RecrawlState(path, canonical=False) as state:
                state.get(urls[17])


@pytest.mark.parametrize("offset, value, said", [
    (16, b"\x03\x00", "page size 768"),
    (18, b"\x03", "file format versions 3"),
    (20, b"\x08", "8 reserved bytes a page"),
    (21, b"\x41", "payload fractions"),
    (56, b"\x00\x00\x00\x02", "text encoding 2"),
    (80, b"\x01", "its reserved bytes 72 to 91"),
    (28, b"\x00\x00\x7f\x00", "it counts 32512 pages"),
])
def test_a_damaged_sqlite_header_is_refused_before_sqlite_reads_it(tmp_path, offset, value,
                                                                   said):
    path = str(tmp_path / "h.db")
    _crawled_file(path, pages=20)
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(value)
    with open(path, "rb") as f:
        before = f.read()
    with pytest.raises(CorruptDatabaseError, match=f"h.db.*header is damaged: {said}"):
        RecrawlState(path)
    with open(path, "rb") as f:
        assert f.read() == before  # refused without a byte written
    assert not os.path.exists(path + "-wal")


def test_the_file_check_at_open_is_an_option(tmp_path):
    path = str(tmp_path / "q.db")
    _crawled_file(path, pages=20)
    for check in ("full", "quick"):
        with RecrawlState(path, canonical=False, check=check) as state:
            assert len(state) == 20 and state.store.check == check
    with pytest.raises(ValueError, match="check must be one of"):
        RecrawlState(path, check="none")


V2_TABLES = (
    "CREATE TABLE pages (id INTEGER PRIMARY KEY, url TEXT NOT NULL UNIQUE, host TEXT NOT NULL, "
    "etag TEXT, last_modified TEXT, due_at REAL NOT NULL, data BLOB NOT NULL)",
    "CREATE INDEX pages_due ON pages (due_at)",
    "CREATE TABLE hosts (host TEXT PRIMARY KEY NOT NULL, "
    + ", ".join(f"{f} REAL NOT NULL DEFAULT 0" for f in HOST_FIELDS) + ") WITHOUT ROWID",
    "CREATE TABLE hist (bin INTEGER PRIMARY KEY, n INTEGER NOT NULL)",
    "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value REAL) WITHOUT ROWID",
    "PRAGMA user_version = 2")


def _as_format_2(source, path):
    """The state of ``source`` written as crawldedup wrote format 2 (no
    checksums, the hosts keyed by name)."""
    conn = sqlite3.connect(path, isolation_level=None)
    for sql in V2_TABLES:
        conn.execute(sql)
    old = sqlite3.connect(source)
    conn.executemany("INSERT INTO pages VALUES (?, ?, ?, ?, ?, ?, ?)", old.execute(
        "SELECT id, url, host, etag, last_modified, due_at, data FROM pages"))
    conn.executemany(f"INSERT INTO hosts VALUES ({','.join('?' * (len(HOST_FIELDS) + 1))})",
                     old.execute(f"SELECT host, {', '.join(HOST_FIELDS)} FROM hosts"))
    conn.executemany("INSERT INTO hist VALUES (?, ?)", old.execute("SELECT bin, n FROM hist"))
    conn.executemany("INSERT INTO meta VALUES (?, ?)", old.execute("SELECT key, value FROM meta"))
    old.close()
    conn.close()


def test_a_format_2_file_is_checked_and_converted_on_open(tmp_path):
    source = str(tmp_path / "now.db")
    urls, hosts = _crawled_file(source, pages=40)
    (tmp_path / "copy.db").write_bytes((tmp_path / "now.db").read_bytes())
    expected = _everything(str(tmp_path / "copy.db"), urls, hosts)
    path = str(tmp_path / "v2.db")
    _as_format_2(source, path)
    assert _everything(path, urls, hosts) == expected
    assert _sql(path, "PRAGMA user_version") == [(SQLITE_FORMAT,)]
    assert _sql(path, "SELECT count(*) FROM pages WHERE sum IS NOT NULL") == [(40,)]
    # a damaged format-2 file is refused whole, and left as it was
    bad = str(tmp_path / "bad.db")
    _as_format_2(source, bad)
    _sql(bad, "UPDATE hosts SET lm_lies = -1 WHERE host = 'h1.example'")
    with pytest.raises(CorruptFileError, match="host 'h1.example' is damaged: its lm_lies"):
        RecrawlState(bad)
    assert _sql(bad, "PRAGMA user_version") == [(2,)]
    assert _sql(bad, "SELECT lm_lies FROM hosts WHERE host = 'h1.example'") == [(-1.0,)]


def test_host_sums_add_up_when_another_process_wrote_the_host_meanwhile(tmp_path):
    """A batch writes its hosts from the sums it read, only while each
    row's checksum is still the one read; a host another store wrote in
    between (or created) is read again, and no increment is lost."""
    path = str(tmp_path / "c.db")
    one, other = SQLiteRecrawlStore(path), SQLiteRecrawlStore(path)
    try:
        one.commit([], {"old.example": [1.0] * 10}, {})
        one.get_hosts(["old.example", "new.example"])
        other.commit([], {"old.example": [2.0] * 10, "new.example": [2.0] * 10}, {})
        one.commit([], {"old.example": [4.0] * 10, "new.example": [4.0] * 10}, {})
        assert other.get_hosts(["old.example", "new.example"]) == {
            "old.example": [7.0] * 10, "new.example": [6.0] * 10}
    finally:
        one.close()
        other.close()


_KILLED_WRITER = """
import os, signal, sys
from crawldedup.recrawl import RecrawlState
path, n = sys.argv[1], int(sys.argv[2])
state = RecrawlState(path, canonical=False)
for version in range(1, n + 1):
    state.record_many([{"url": f"https://h{i % 3}.example/{i}", "status": 200,
                        "time": 1_700_000_000.0 + version * 86400.0,
                        "headers": {"ETag": f'"{i}-{version}"'}, "digest": bytes([version]) * 16}
                       for i in range(40)])
os.kill(os.getpid(), signal.SIGKILL)
"""


def _killed_writer_state(path, versions=5):
    """A state whose writer was killed after committing ``versions``
    batches: they are all in the WAL left beside the file."""
    subprocess.run([sys.executable, "-c", _KILLED_WRITER, path, str(versions)],
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, check=False)
    assert os.path.getsize(path + "-wal") > 0


def test_one_changed_byte_in_a_wal_left_by_a_killed_writer_is_named(tmp_path):
    """SQLite replays a WAL up to its first frame that does not check out
    and drops the rest without an error: one changed byte in the WAL of a
    killed writer made every batch after it (or the whole state) vanish.
    Every frame but the last commit (which a power failure may cut) is
    checked: a changed byte there raises CorruptFileError naming the file,
    and the refused open leaves the file and its WAL as they were."""
    base = str(tmp_path / "base.db")
    _killed_writer_state(base)
    files = {suffix: pathlib.Path(base + suffix).read_bytes() for suffix in ("", "-wal")}
    frame = 24 + int.from_bytes(files["-wal"][8:12], "big")
    frames = (len(files["-wal"]) - 32) // frame
    path = str(tmp_path / "t.db")

    def copy(wal):
        for suffix, data in (("", files[""]), ("-wal", wal)):
            pathlib.Path(path + suffix).write_bytes(data)
        if os.path.exists(path + "-shm"):
            os.remove(path + "-shm")

    copy(files["-wal"])
    with RecrawlState(path, canonical=False) as state:
        assert state.get("https://h1.example/1").fetches == 5
    rnd = np.random.default_rng(7)
    # the WAL's header, then bytes of every frame before the last
    spots = [int(rnd.integers(32))] + [32 + i * frame + int(rnd.integers(frame))
                                       for i in range(frames - 1)]
    for at in spots:
        wal = bytearray(files["-wal"])
        wal[at] ^= 1 << int(rnd.integers(8))
        copy(bytes(wal))
        with pytest.raises(CorruptFileError, match="its WAL .* is damaged") as info:
            RecrawlState(path, canonical=False)
        assert info.value.path == path
        assert pathlib.Path(path + "-wal").read_bytes() == bytes(wal)
        assert pathlib.Path(path).read_bytes() == files[""]


def test_a_wal_being_written_by_another_process_is_not_taken_for_damage(tmp_path):
    """A writer appending to the WAL while another process opens the state
    is no damage: 40 opens during 60 batches of a live writer."""
    path = str(tmp_path / "live.db")
    with RecrawlState(path, canonical=False):
        pass
    writer = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, path, "60"],
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        opens = 0
        while writer.poll() is None and opens < 40:
            with RecrawlState(path, canonical=False) as state:
                state.get("https://h1.example/1")
            opens += 1
    finally:
        writer.wait(timeout=120)
    assert opens > 5


def test_info_names_a_damaged_wal_and_writes_nothing(tmp_path):
    """crawldedup info on a state whose killed writer's WAL has a changed
    byte: the damage is named (exit 1), not a state described from the
    frames before it (it said "not a crawldedup re-crawl state (tables:
    none)" and exited 0, --verify too)."""
    path = str(tmp_path / "info.db")
    _killed_writer_state(path)
    wal = bytearray(pathlib.Path(path + "-wal").read_bytes())
    frame = 24 + int.from_bytes(wal[8:12], "big")
    wal[32 + 3 * frame + 500] ^= 1
    pathlib.Path(path + "-wal").write_bytes(bytes(wal))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for flags in ([], ["--verify"]):
        run = subprocess.run([sys.executable, "-m", "crawldedup", "info", *flags, path],
                             capture_output=True, text=True, env=env, timeout=120)
        assert run.returncode == 1 and run.stdout == "", (run.stdout, run.stderr)
        assert run.stderr.startswith(f"crawldedup: error: {path!r} is not a valid crawldedup "
                                     f"file: its WAL {path + '-wal'!r} is damaged: frame 4 of "
                                     f"{(len(wal) - 32) // frame} does not check out"), run.stderr
        assert run.stderr.count("\n") == 1, run.stderr
        assert pathlib.Path(path + "-wal").read_bytes() == bytes(wal)
