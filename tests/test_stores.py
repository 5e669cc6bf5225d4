"""Fingerprint stores: SQLite (embedded), and PostgreSQL, MariaDB and SQLite
through SQLAlchemy, all behind one interface, against the real servers."""

import hashlib
import json
import subprocess
import sys
import textwrap
import time
import uuid

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import examples, require_service
from crawldedup import SQLiteStore, SQLStore, StoreUnavailableError
from crawldedup.errors import CorruptFileError, CrawldedupError
from crawldedup.exact.stores import open_store

KINDS = ["sqlite", "sqlalchemy-sqlite", "postgresql", "mariadb"]


def md5(i):
    return hashlib.md5(str(i).encode()).digest()


def store_spec(kind, tmp_path):
    """(factory name, target, table) for a fresh, uniquely named table."""
    table = f"t_{uuid.uuid4().hex[:16]}"
    if kind == "sqlite":
        return ("sqlite", str(tmp_path / "fps.db"), table)
    if kind == "sqlalchemy-sqlite":
        return ("sql", f"sqlite:///{tmp_path / 'fps-sa.db'}", table)
    return ("sql", require_service(kind), table)


def make(spec, **kwargs):
    factory, target, table = spec
    cls = SQLiteStore if factory == "sqlite" else SQLStore
    return cls(target, table=table, **kwargs)


@pytest.fixture(params=KINDS)
def spec(request, tmp_path):
    spec = store_spec(request.param, tmp_path)
    yield spec
    if spec[0] == "sql":
        with SQLStore(spec[1], table=spec[2]) as store:
            store.drop()


@pytest.fixture
def store(spec):
    with make(spec) as store:
        yield store


def test_interface(store):
    a, b, c = md5(1), md5(2), md5(3)
    assert len(store) == 0
    assert store.add(a) is True
    assert store.add(a) is False
    assert a in store and b not in store
    new = store.add_many([b, a, b, c])
    assert new.dtype == np.bool_ and new.tolist() == [True, False, False, True]
    assert store.contains_many([a, md5(9), c]).tolist() == [True, False, True]
    assert len(store) == 3
    arr = np.array([md5(i) for i in range(2, 8)], dtype="S16")
    assert store.add_many(arr).tolist() == [False, False, True, True, True, True]
    assert store.add_many([]).shape == (0,)
    assert store.contains_many(np.zeros(0, dtype="S16")).shape == (0,)
    store.clear()
    assert len(store) == 0 and a not in store
    # Digests with NUL bytes and bytes-like inputs round-trip exactly.
    zero, tail = bytes(16), b"x" * 15 + b"\0"
    assert store.add_many([bytearray(zero), memoryview(tail)]).all()
    assert store.contains_many([zero, tail, b"x" * 15 + b"\1"]).tolist() == [True, True, False]


def test_large_batch_and_reopen(spec):
    fps = [md5(i) for i in range(5000)]
    with make(spec) as store:
        assert store.add_many(fps).all()
        assert not store.add_many(fps[::3]).any()
    with make(spec) as store:  # the data is committed and the table reused
        assert len(store) == 5000
        assert store.contains_many(fps).all()


@settings(max_examples=examples(1 / 12), deadline=None)  # 25 under the ci profile
@given(st.lists(st.lists(st.integers(0, 40).map(md5), max_size=25), max_size=5))
def test_batches_match_a_python_set(tmp_path_factory, batches):
    store = SQLiteStore(tmp_path_factory.mktemp("h") / "h.db")
    model = set()
    with store:
        for batch in batches:
            expected = []
            for fp in batch:
                expected.append(fp not in model)
                model.add(fp)
            assert store.add_many(batch).tolist() == expected
        assert len(store) == len(model)


def test_bad_arguments(store, tmp_path):
    with pytest.raises(ValueError, match="exactly 16 bytes"):
        store.add(b"short")
    with pytest.raises(TypeError, match="not str"):
        store.add("https://example.com/")
    with pytest.raises(TypeError, match="not int"):
        5 in store
    with pytest.raises(TypeError, match="single bytes"):
        store.add_many(bytes(16))
    with pytest.raises(ValueError, match="S16"):
        store.add_many(np.zeros(2, dtype="S20"))
    with pytest.raises(ValueError, match="exactly 16 bytes"):
        store.add_many([md5(1), b"x"])
    assert md5(1) not in store  # a rejected batch adds nothing
    with pytest.raises(ValueError, match="table"):
        SQLiteStore(tmp_path / "x.db", table="fps; DROP TABLE x")
    with pytest.raises(ValueError, match="digest_size"):
        SQLiteStore(tmp_path / "x.db", digest_size=0)
    with pytest.raises(ValueError, match="digest_size"):
        SQLStore("sqlite:///" + str(tmp_path / "y.db"), digest_size=65)


def test_closed_store_refuses(spec):
    store = make(spec)
    store.close()
    store.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        store.add(md5(1))


def test_digest_size_20(spec):
    with make(spec, digest_size=20) as store:
        sha = hashlib.sha1(b"x").digest()
        assert store.add(sha) and sha in store
        with pytest.raises(ValueError, match="exactly 20 bytes"):
            store.add(md5(1))


# ------------------------------------------------------------ unavailable

def test_unreachable_servers_raise():
    for url in ("postgresql+psycopg://postgres@127.0.0.1:1/test",
                "mysql+pymysql://root@127.0.0.1:1/test"):
        with pytest.raises(StoreUnavailableError) as info:
            SQLStore(url)
        assert isinstance(info.value, CrawldedupError) and "127.0.0.1:1" in str(info.value)


def test_unopenable_sqlite_raises(tmp_path):
    with pytest.raises(StoreUnavailableError, match="missing-dir"):
        SQLiteStore(tmp_path / "missing-dir" / "x.db")
    with pytest.raises(StoreUnavailableError):
        SQLiteStore(tmp_path)  # a directory
    (tmp_path / "junk.db").write_bytes(b"not a database" * 100)
    with pytest.raises(CorruptFileError) as caught:
        SQLiteStore(tmp_path / "junk.db")
    # damage, said as such: a CorruptFileError naming the file, not a
    # StoreUnavailableError that a caller would retry
    assert not isinstance(caught.value, StoreUnavailableError)
    assert caught.value.path == str(tmp_path / "junk.db")


def test_a_failing_store_never_answers_not_seen(spec):
    # The table disappears under the store (another tool dropped it): every
    # call raises instead of reporting fingerprints as new or unseen.
    store = make(spec)
    store.add(md5(1))
    if spec[0] == "sqlite":
        import sqlite3
        conn = sqlite3.connect(spec[1])
        conn.execute(f'DROP TABLE "{spec[2]}"')
        conn.commit()
        conn.close()
    else:
        with SQLStore(spec[1], table=spec[2]) as other:
            other.drop()
    for call in (lambda: store.add(md5(2)), lambda: md5(1) in store,
                 lambda: store.add_many([md5(3)]), lambda: store.contains_many([md5(1)]),
                 lambda: len(store)):
        with pytest.raises(StoreUnavailableError):
            call()
    store.close()


def test_sqlite_store_is_locked_out_raises(tmp_path):
    import sqlite3
    path = tmp_path / "busy.db"
    SQLiteStore(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        store = SQLiteStore(path, timeout=0.2)
        with pytest.raises(StoreUnavailableError, match="locked"):
            store.add_many([md5(1)])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store.add(md5(1))  # usable again once the lock is gone
    store.close()


def test_open_store_urls(tmp_path):
    with open_store(f"sqlite:///{tmp_path / 'a.db'}") as store:
        assert isinstance(store, SQLiteStore) and store.add(md5(1))
    with pytest.raises(ValueError, match="file path"):
        open_store("sqlite:///")
    with pytest.raises(ValueError, match="url"):
        open_store("not a url at all")
    with pytest.raises(ValueError, match="dialect"):
        SQLStore("oracle://u@127.0.0.1:1/x")


def test_sqlalchemy_is_optional(tmp_path):
    code = textwrap.dedent("""
        import sys
        sys.modules["sqlalchemy"] = None
        import crawldedup
        from crawldedup import SQLiteStore, SQLStore
        with SQLiteStore(sys.argv[1]) as store:
            assert store.add(b"x" * 16)
        try:
            SQLStore("postgresql://u@127.0.0.1/x")
        except ImportError as exc:
            print(exc)
    """)
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s.db")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "pip install 'crawldedup[sql]'" in run.stdout


# ------------------------------------------------------------ concurrency

WORKER = textwrap.dedent("""
    import json, random, sys, time
    from crawldedup import SQLiteStore, SQLStore
    factory, target, table, seed, start, todo = sys.argv[1:7]
    rng = random.Random(int(seed))
    with open(todo) as f:
        fps = [bytes.fromhex(h) for h in json.load(f)]
    rng.shuffle(fps)
    cls = SQLiteStore if factory == "sqlite" else SQLStore
    store = cls(target, table=table)
    while time.time() < float(start):
        time.sleep(0.001)
    new = [fp for fp in fps[:150] if store.add(fp)]
    rest = fps[150:]
    for i in range(0, len(rest), 200):
        batch = rest[i:i + 200]
        new += [fp for fp, fresh in zip(batch, store.add_many(batch)) if fresh]
    store.close()
    print(json.dumps([fp.hex() for fp in new]))
""")


def test_concurrent_writers_report_each_fingerprint_new_once(spec, tmp_path):
    universe = [md5(i) for i in range(3000)]
    make(spec).close()  # the table exists before the race
    rng = np.random.default_rng(5)
    start = time.time() + 3
    workers = []
    for w in range(4):
        mine = [universe[i] for i in rng.choice(len(universe), 1600, replace=False)]
        todo = tmp_path / f"todo-{w}.json"
        todo.write_text(json.dumps([fp.hex() for fp in mine]))
        proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, spec[0], spec[1], spec[2], str(w), str(start),
             str(todo)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        workers.append((proc, mine))
    reported = []
    for proc, _ in workers:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        reported += [bytes.fromhex(h) for h in json.loads(out)]
    offered = {fp for _, mine in workers for fp in mine}
    assert len(reported) == len(set(reported)), "a fingerprint was reported new twice"
    assert set(reported) == offered
    with make(spec) as store:
        assert len(store) == len(offered)


@pytest.mark.parametrize("kind", ["sqlalchemy-sqlite", "mariadb"])
def test_statement_per_fingerprint_fallback(kind, tmp_path):
    # MySQL has no INSERT ... RETURNING: SQLStore then inserts one row per
    # statement and reads "new" from the affected-row count.  Forced here on
    # servers that do have RETURNING, with the same results.
    spec = store_spec(kind, tmp_path)
    store = make(spec)
    try:
        store._returning = False
        assert store.add(md5(1)) is True and store.add(md5(1)) is False
        assert store.add_many([md5(2), md5(1), md5(2), md5(3)]).tolist() == [
            True, False, False, True]
        assert len(store) == 3
    finally:
        store.drop()
        store.close()


OPENER = textwrap.dedent("""
    import sys, time
    from crawldedup import SQLiteStore
    start = float(sys.argv[2])
    while time.time() < start:  # all processes open at the same instant
        pass
    with SQLiteStore(sys.argv[1]) as store:
        print(store.add(sys.argv[3].encode().ljust(16, b"_")))
""")


def test_processes_creating_one_sqlite_store_at_once_all_succeed(tmp_path):
    # Two connections switching a new database to WAL at once: SQLite answers
    # "database is locked" at once, without its busy timeout; the store
    # waits and tries again instead of failing.
    for round_ in range(6):
        path = tmp_path / f"new-{round_}.db"
        start = time.time() + 1.0
        procs = [subprocess.Popen([sys.executable, "-c", OPENER, str(path), repr(start),
                                   f"p{n}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for n in range(4)]
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err.decode()[-2000:]
            assert out.strip() == b"True"
        with SQLiteStore(path) as store:
            assert len(store) == 4
