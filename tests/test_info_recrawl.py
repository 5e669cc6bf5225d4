"""``crawldedup info`` on a re-crawl state (issue 30, item 5): the SQLite
file that ``RecrawlState`` and ``crawldedup record`` keep is described
(kind, pages, hosts, due pages, scheduler settings) and left as it was, not
a byte or a file more in its folder, also while a writer has it open."""

import hashlib
import json
import os
import sqlite3
import subprocess
import sys

import pytest

from crawldedup.recrawl import RecrawlState
from crawldedup.recrawl.stores import SQLITE_FORMAT


def crawldedup(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "crawldedup", *args], input=stdin,
                          capture_output=True, text=True)


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def fetches(time, text):
    return "".join(json.dumps({"url": f"https://{host}.example/{i}", "status": 200,
                               "headers": {}, "text": f"{text} {host} {i}", "time": time}) + "\n"
                   for host in ("a", "b", "c") for i in range(4))


@pytest.fixture
def state(tmp_path):
    path = str(tmp_path / "recrawl.db")
    run = crawldedup("record", "--state", path, stdin=fetches(1_000, "first"))
    assert run.returncode == 0, run.stderr
    run = crawldedup("record", "--state", path, stdin=fetches(90_000, "second"))
    assert run.returncode == 0, run.stderr
    run = crawldedup("due", "--state", path, "--limit", "3", "--now", "200000")
    assert run.returncode == 0, run.stderr
    return path


def test_info_describes_a_recrawl_state_and_changes_nothing(state, tmp_path):
    before, listing = digest(state), sorted(os.listdir(tmp_path))
    for extra in ([], ["--verify"]):
        run = crawldedup("info", *extra, state)
        assert run.returncode == 0, run.stderr
        text = run.stdout
        assert "kind: re-crawl state" in text and f"format {SQLITE_FORMAT}" in text
        assert "pages: 12\n" in text and "hosts: 3\n" in text
        assert "due now: 12" in text
        assert "last due call 1970-01-03 07:33:20 UTC" in text
        assert ("integrity: SQLite integrity check passed" in text) == bool(extra)
        assert digest(state) == before
        assert sorted(os.listdir(tmp_path)) == listing  # no -wal, no -shm


def test_info_reads_a_state_a_writer_has_open(tmp_path):
    path = str(tmp_path / "open.db")
    with RecrawlState(path) as rs:
        rs.record("https://a.example/x", 200, {}, text="one", now=10.0)
        listing = sorted(os.listdir(tmp_path))
        assert any(name.endswith("-wal") for name in listing)
        run = crawldedup("info", path)
        assert run.returncode == 0, run.stderr
        assert "pages: 1\n" in run.stdout  # read from the writer's WAL
        assert sorted(os.listdir(tmp_path)) == listing
        rs.record("https://a.example/y", 200, {}, text="two", now=11.0)
    with RecrawlState(path) as rs:  # the writer went on after info read it
        assert len(rs.store.read_pages(["https://a.example/x", "https://a.example/y"]).keys) == 2


def test_info_names_damage_in_a_recrawl_state(state):
    with open(state, "r+b") as f:
        f.seek(8192)  # the second page (8 KiB pages): a b-tree page of a table
        f.write(b"\xff" * 200)
    damaged = digest(state)
    run = crawldedup("info", "--verify", state)
    assert run.returncode == 1
    assert state in run.stderr and "Traceback" not in run.stderr
    assert "SQLite reports" in run.stderr or "SQLite integrity check" in run.stderr
    assert digest(state) == damaged


def test_info_on_other_sqlite_files_and_repair(tmp_path, state):
    other = str(tmp_path / "other.db")
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE things (x)")
    conn.commit()
    conn.close()
    run = crawldedup("info", other)
    assert run.returncode == 0, run.stderr
    assert "a SQLite database, not a crawldedup re-crawl state (tables: things)" in run.stdout
    before = digest(state)
    run = crawldedup("info", "--repair", state)
    assert run.returncode == 1 and "--repair seals crawldedup's own state files" in run.stderr
    assert digest(state) == before
