"""The key mode of a ``crawldedup urls`` state (URLs as read, --canonical,
--canonical --strip-tracking) is recorded with the state, and a run with
another mode is refused: it would print again, as new, the URLs whose key
differs (55 of 371 URLs were printed again, without a word)."""

import subprocess
import sys

import pytest

from cli_states import ENV, states
from crawldedup import SQLiteStore

MODE_KINDS = ["bloom", "rotating", "exact", "disk", "sqlite", "postgresql", "mariadb", "redis",
              "redis-db"]
# Equal canonical forms (the query sorted), the second with a tracking parameter too.
LINES = b"https://a.example/p?b=2&a=1\nhttps://a.example/p?a=1&b=2&utm_source=x\n"
AS_READ, CANONICAL, STRIP = [], ["--canonical"], ["--canonical", "--strip-tracking"]


@pytest.fixture
def state_of(tmp_path):
    with states(tmp_path) as make:
        yield make


def urls(state, mode, data=LINES):
    return subprocess.run([sys.executable, "-m", "crawldedup", "urls", *map(str, state.args),
                           *mode], input=data, capture_output=True, env=ENV, timeout=120)


def refused(run, made):
    assert run.returncode == 2, run.stderr
    assert not run.stdout
    lines = run.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    assert f"was made {made}" in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("kind", MODE_KINDS)
def test_another_key_mode_is_refused(kind, state_of):
    state = state_of(kind)
    first = urls(state, AS_READ)
    assert first.returncode == 0, first.stderr
    assert len(first.stdout.splitlines()) == 2
    message = refused(urls(state, CANONICAL), "without --canonical")
    assert "this run has --canonical" in message
    refused(urls(state, STRIP), "without --canonical")
    again = urls(state, AS_READ, LINES + b"https://b.example/\n")  # the state is as it was
    assert again.returncode == 0 and again.stdout == b"https://b.example/\n", again.stderr


@pytest.mark.parametrize("kind", ["bloom", "exact", "sqlite", "redis", "redis-db"])
def test_canonical_and_strip_tracking_are_two_modes(kind, state_of):
    state = state_of(kind)
    made = urls(state, STRIP)
    assert made.returncode == 0 and len(made.stdout.splitlines()) == 1, made.stderr
    refused(urls(state, CANONICAL), "with --canonical --strip-tracking")
    refused(urls(state, AS_READ), "with --canonical --strip-tracking")
    same = urls(state, STRIP)
    assert same.returncode == 0 and same.stdout == b"", same.stderr


@pytest.mark.parametrize("kind", MODE_KINDS)
def test_a_state_without_a_recorded_mode_keeps_working(kind, state_of):
    """A state made before the mode was recorded: the first run records its
    own mode (with a note), and later runs keep to it."""
    state = state_of(kind)
    assert urls(state, CANONICAL).returncode == 0
    state.forget_mode()
    run = urls(state, CANONICAL, LINES + b"https://c.example/\n")
    assert run.returncode == 0, run.stderr
    assert run.stdout == b"https://c.example/\n"
    assert b"records no key mode" in run.stderr
    refused(urls(state, AS_READ), "with --canonical (no --strip-tracking)")


@pytest.mark.parametrize("kind", ["bloom", "exact"])
def test_a_new_state_file_replaces_a_stale_record(kind, state_of, tmp_path):
    state = state_of(kind)
    assert urls(state, AS_READ).returncode == 0
    path = state.args[1]
    path.unlink()  # the state is made anew; its record stayed
    run = urls(state, CANONICAL)
    assert run.returncode == 0 and len(run.stdout.splitlines()) == 2, run.stderr
    assert b"records no key mode" not in run.stderr
    refused(urls(state, AS_READ), "with --canonical (no --strip-tracking)")


def test_an_emptied_database_takes_a_new_mode(state_of):
    state = state_of("sqlite")
    assert urls(state, AS_READ).returncode == 0
    with SQLiteStore(state.args[3][len("sqlite:///"):]) as store:
        store.clear()
    run = urls(state, CANONICAL)
    assert run.returncode == 0 and len(run.stdout.splitlines()) == 2, run.stderr
    refused(urls(state, AS_READ), "with --canonical (no --strip-tracking)")
