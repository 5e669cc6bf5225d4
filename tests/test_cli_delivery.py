"""``crawldedup urls`` delivers every new URL once, in real processes killed
with SIGKILL at random moments: for every kind of state, one process after
another, and several processes on one machine sharing a Redis state or a
database."""

import collections
import hashlib
import os
import random
import struct
import subprocess
import sys
import tempfile
import time

import pytest

from cli_states import ENV, KINDS, Run, states, urls
from conftest import require_module
from crawldedup import SQLiteStore


@pytest.fixture
def state_of(tmp_path):
    with states(tmp_path) as make:
        yield make


#: The most one write into the output's pipe takes (a Linux pipe's default
#: size, 64 KiB).
PIPE_WRITE = 1 << 16


def write_tail(run):
    """The lines of a killed run's output that one pipe write reaches: what
    a kill between that write's return and the journal's record of it
    leaves to be printed again (docs/cli.md; a pipe cannot say what its
    reader got).  The next run prints again from the start of the line the
    write began in, so the line that crosses the write's start counts too."""
    tail, size = [], 0
    for line in reversed(run.lines()):
        tail.append(line)
        size += len(line) + 1
        if size >= PIPE_WRITE:
            break
    return set(tail)


def check_once(runs, expected, killed=()):
    """Every expected URL printed, and once: but for a killed run's last
    write, which the next run may print again (write_tail), once."""
    printed = collections.Counter(line for run in runs for line in run.lines())
    allowed = collections.Counter(url for run in killed for url in write_tail(run))
    twice = {url: n for url, n in printed.items() if n - 1 > allowed[url]}
    assert not twice, f"{len(twice)} URLs printed more than once, e.g. {list(twice)[:3]}"
    assert set(printed) == set(expected), (len(set(expected) - set(printed)), "lost")


@pytest.mark.parametrize("kind", KINDS)
def test_kill_minus_nine_at_any_moment_prints_each_url_once(kind, state_of, tmp_path):
    """Runs over overlapping inputs (most of each run's URLs were printed by
    an earlier one), each killed with SIGKILL at a random moment, then runs
    to the end: across all their outputs, every URL is printed once.  The
    pending journal of a --db run used to hold every line its in-process
    cache did not know, so the run after a kill printed again URLs that
    the database had had for long.  (A kill between a write's return and
    the journal's record of it prints that write again: a pipe cannot say
    what its reader got; check_once allows that, and nothing more.)"""
    args = state_of(kind).args
    rng = random.Random(f"{kind}-kills")
    inputs = []
    for n, (start, stop) in enumerate([(0, 30_000), (10_000, 45_000), (0, 60_000)]):
        path = tmp_path / f"in{n}.txt"
        path.write_text("\n".join(urls(start, stop)) + "\n")
        inputs.append(path)
    runs = []
    first = Run(args, inputs[0], folder=tmp_path)  # an unkilled run: it knows how long a run takes
    t0 = time.monotonic()
    assert first.wait() == 0, first.err
    took = time.monotonic() - t0
    runs.append(first)
    killed = []
    for n in range(6):
        run = Run(args, inputs[1 + n % 2], folder=tmp_path)
        time.sleep(rng.uniform(0.1, 1.2) * took)
        run.kill()
        run.wait()
        runs.append(run)
        killed.append(run)
    for source in inputs:
        run = Run(args, source, folder=tmp_path)
        assert run.wait() == 0, run.err
        runs.append(run)
    check_once(runs, urls(0, 60_000), killed)
    again = Run(args, inputs[2], folder=tmp_path)
    assert again.wait() == 0 and again.lines() == []  # all recorded


def holding(folder, its, timeout):
    """Wait until the journal whose name holds its is not empty."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in folder.iterdir():
            if its in path.name:
                try:
                    if path.stat().st_size:
                        return
                except FileNotFoundError:  # taken by another process
                    return
        time.sleep(0.0005)


@pytest.mark.parametrize("kind", ["redis", "redis-db", "sqlite", "postgresql"])
def test_four_processes_on_one_machine_share_a_state(kind, state_of, tmp_path):
    """Four processes on one machine (one temporary folder: a Redis state's
    journals are there), with one --state and overlapping inputs (each URL
    in three of them), run at once; one is killed with SIGKILL at a random
    moment, and a later run finishes its journal.  Every URL is printed
    once overall: the state keeps each piece's answer under the journal's
    receipt, so the later run learns the answer of the piece the kill cut
    (not all of it printed again, with URLs that other processes added and
    printed meanwhile).  The one limit docs/cli.md gives: a kill between a
    write and its record in the journal prints that write again."""
    args = state_of(kind).args
    env = dict(ENV, TMPDIR=str(tmp_path))
    everything = urls(0, 60_000)
    rng = random.Random(f"{kind}-fleet")
    inputs = []
    for n in range(4):
        mine = [u for i, u in enumerate(everything) if i % 4 != n]
        rng.shuffle(mine)
        path = tmp_path / f"in{n}.txt"
        path.write_text("\n".join(mine) + "\n")
        inputs.append(path)
    made = crawldedup(args, env=env)  # the state the fleet shares exists before it starts
    assert made.returncode == 0, made.stderr
    fleet = [Run(args, source, env, tmp_path) for source in inputs]
    victim = fleet[0]
    # Killed while it holds a chunk (mostly: the poll takes a moment), not
    # while Python starts.
    its = f".pending-{victim.proc.pid}-"
    holding(tmp_path, its, timeout=60)
    time.sleep(rng.uniform(0, 0.3))
    holding(tmp_path, its, timeout=1)
    victim.kill()
    codes = [run.wait() for run in fleet]
    assert codes[1:] == [0, 0, 0], [run.err for run in fleet[1:]]
    later = Run(args, inputs[0], env, tmp_path)  # finishes the killed process's journal first
    assert later.wait() == 0, later.err
    runs = fleet + [later]
    printed = collections.Counter(line for run in runs for line in run.lines())
    assert set(printed) == set(everything), "lost"
    twice = {url for url, n in printed.items() if n > 1}
    # The limit (docs/cli.md): a kill between a write's return and the
    # journal's record of it prints that write again: lines at the end of
    # the killed run's output, one pipe write's worth at most, that the
    # later run printed as well.
    rewritten = twice
    if rewritten:
        tail = victim.lines()[-len(rewritten):]
        assert set(tail) == rewritten, f"{len(rewritten)} URLs printed twice"
        assert rewritten <= set(later.lines())
        assert sum(len(line) + 1 for line in tail) <= PIPE_WRITE, len(rewritten)
    assert not [p for p in tmp_path.iterdir() if ".pending" in p.name]  # all finished


def test_a_local_state_file_keeps_one_writer(tmp_path):
    state = tmp_path / "s.bloom"
    lock = os.open(str(state) + ".lock", os.O_RDWR | os.O_CREAT)
    import fcntl
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        run = subprocess.run([sys.executable, "-m", "crawldedup", "urls", "--state", str(state)],
                             input=b"https://a/\n", capture_output=True, env=ENV, timeout=60)
    finally:
        os.close(lock)
    assert run.returncode == 1 and not run.stdout
    assert b"in use by another crawldedup process" in run.stderr
    assert b"share a Redis state or a --db" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


# ---- journals written by hand: what a killed run leaves, read by the next

MAGIC = b"\x89CDPEND\n"


def journal(candidates, answer=None, printed=0, piece=0, answered=b""):
    """The bytes of a pending journal: the candidates held (recorded in
    pieces of piece lines, the answers of the first ones recorded), and the
    answer (the lines to print, after them) with how much of it was printed."""
    held = "".join(f"{u}\n" for u in candidates).encode()
    if answer is None:
        return struct.pack("<8sQQQQQQ", MAGIC, len(held), 0, 0, 0, piece, len(answered)) \
            + held + answered
    block = "".join(f"{u}\n" for u in answer).encode()
    return (struct.pack("<8sQQQQQQ", MAGIC, len(held), 56 + len(held), len(block), printed,
                        0, 0) + held + block)


def crawldedup(args, stdin=b"", env=ENV):
    return subprocess.run([sys.executable, "-m", "crawldedup", "urls", *map(str, args)],
                          input=stdin, capture_output=True, env=env, timeout=120)


def test_the_rest_of_a_recorded_answer_is_printed_from_its_last_whole_line(tmp_path):
    state = tmp_path / "s.bloom"
    answer = ["https://a/1", "https://a/2", "https://a/3"]
    # What the killed run recorded (https://a/0 was there before it).
    recorded = "".join(f"{u}\n" for u in ["https://a/0", *answer]).encode()
    assert crawldedup(["--state", state], recorded).returncode == 0
    # Killed while printing: 3 of 4 candidates were new, the output got the
    # first one and part of the second.
    (tmp_path / "s.bloom.pending").write_bytes(
        journal(["https://a/0", *answer], answer, len("https://a/1\nhttps://a/")))
    run = crawldedup(["--state", state], b"https://a/1\nhttps://a/4\n")
    assert run.returncode == 0, run.stderr
    assert run.stdout == b"https://a/2\nhttps://a/3\nhttps://a/4\n"
    assert b"printing 2 URLs that an interrupted run" in run.stderr
    assert not (tmp_path / "s.bloom.pending").exists()


@pytest.mark.parametrize("old_format", [False, True])
def test_candidates_without_an_answer_are_recorded_and_printed(tmp_path, old_format):
    """Killed while the state recorded a chunk: its candidates (absent from
    the state when looked up) are recorded again and printed; a journal of
    the format before the answer was journaled (the lines alone) too."""
    state = tmp_path / "s.fps"
    lines = ["https://b/1", "https://b/2"]
    data = "".join(f"{u}\n" for u in lines).encode() + b"https://b/3" if old_format \
        else journal(lines)[:-3]  # the last line's write was cut: not recorded yet
    (tmp_path / "s.fps.pending").write_bytes(data)
    run = crawldedup(["--state", state, "--exact"], b"https://b/2\nhttps://b/3\n")
    assert run.returncode == 0, run.stderr
    assert run.stdout == b"https://b/1\nhttps://b/2\nhttps://b/3\n"
    again = crawldedup(["--state", state, "--exact"], b"https://b/1\nhttps://b/3\n")
    assert again.returncode == 0 and again.stdout == b""


def test_a_damaged_journal_is_named_and_kept(tmp_path):
    state = tmp_path / "s.bloom"
    bad = bytearray(journal(["https://c/1"], ["https://c/1"]))
    bad[24:32] = struct.pack("<Q", 10_000)  # an answer longer than the file
    (tmp_path / "s.bloom.pending").write_bytes(bytes(bad))
    run = crawldedup(["--state", state], b"https://c/2\n")
    assert run.returncode == 1 and run.stdout == b""
    assert b"s.bloom.pending" in run.stderr and b"damaged" in run.stderr
    assert (tmp_path / "s.bloom.pending").read_bytes() == bytes(bad)


def test_a_shared_state_takes_orphaned_journals_not_live_ones(tmp_path):
    """--db: the journal of a killed process (no lock on it) is finished by
    the next process, once; one that a live process holds is left to it;
    BASE.pending, the single journal of an older crawldedup, is taken too."""
    import fcntl
    local = tmp_path / "local"
    args = ["--state", local, "--db", f"sqlite:///{tmp_path / 's.db'}"]
    assert crawldedup(args, b"https://d/1\n").returncode == 0  # what the killed one recorded
    dead = tmp_path / "local.pending-123-0123abcd"
    dead.write_bytes(journal(["https://d/1"], ["https://d/1"]))
    (tmp_path / "local.pending").write_bytes(b"https://d/2\n")
    live = tmp_path / "local.pending-456-89abcdef"
    live.write_bytes(journal(["https://d/3"]))
    held = os.open(live, os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        run = crawldedup(args, b"https://d/1\nhttps://d/4\n")
    finally:
        os.close(held)
    assert run.returncode == 0, run.stderr
    assert sorted(run.stdout.split()) == [b"https://d/1", b"https://d/2", b"https://d/4"]
    assert not dead.exists() and not (tmp_path / "local.pending").exists()
    assert live.exists()  # its owner was alive: now it is not, the next run takes it
    run = crawldedup(args)
    assert run.returncode == 0 and run.stdout == b"https://d/3\n"
    assert [p.name for p in tmp_path.iterdir() if "pending" in p.name] == []


def test_a_shared_state_journals_the_answer_of_each_piece(tmp_path):
    """--db records a chunk in pieces, journaling each piece's answer: a
    kill leaves unknown only the answer of the piece being recorded, whose
    candidates are all printed; of the pieces before it, those it added;
    of the pieces after it (never sent), those the next run adds."""
    local = tmp_path / "local"
    db = tmp_path / "s.db"
    args = ["--state", local, "--db", f"sqlite:///{db}"]
    lines = [f"https://e/{i}" for i in range(5)]
    with SQLiteStore(db) as store:  # 0 the killed run's, 1 and 4 other processes', 2 either's
        store.add_many([hashlib.md5(lines[i].encode()).digest() for i in (0, 1, 2, 4)])
    (tmp_path / "local.pending-99-00000000").write_bytes(
        journal(lines, piece=2, answered=b"\x01\x00"))
    run = crawldedup(args)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [b"https://e/0", b"https://e/2", b"https://e/3"]
    again = crawldedup(args, "".join(f"{u}\n" for u in lines).encode())
    assert again.returncode == 0 and again.stdout == b""


def killed_while_blocked(args, source, blocker, tmp_path, keep):
    """Run ``crawldedup urls ARGS SOURCE`` on a PostgreSQL --db while the
    test holds, uncommitted, the row of the digest blocker (as another
    process that is adding it); kill the run with SIGKILL once its insert
    waits for that row, then commit the row (keep: the other process added
    it) or roll it back.  The killed Run."""
    sa = require_module("sqlalchemy")
    engine = sa.create_engine(args[args.index("--db") + 1])
    try:
        with engine.connect() as conn:
            other = conn.begin()
            conn.exec_driver_sql("INSERT INTO crawldedup_fingerprints (fp) VALUES (%s)",
                                 (blocker,))
            holder = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
            run = Run(args, source, folder=tmp_path)
            deadline = time.monotonic() + 120
            # Out of a transaction: pg_stat_activity is read once a transaction.
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as watch:
                while not watch.exec_driver_sql(
                        "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY("
                        "pg_blocking_pids(pid))", (holder,)).scalar_one():
                    assert run.proc.poll() is None, run.err
                    assert time.monotonic() < deadline, "the run never waited for the row"
                    time.sleep(0.01)
            run.kill()
            run.wait()
            if keep:
                other.commit()
            else:
                other.rollback()
    finally:
        engine.dispose()
    return run


def md5_of(urls):
    return {url: hashlib.md5(url.encode()).digest() for url in urls}


def test_a_run_killed_while_it_finishes_a_journal_leaves_it_answered(state_of, tmp_path):
    """A run that finishes a killed run's journal records its candidates in
    the journal's pieces, journaling each piece's answer: killed in the
    middle (here while a row that the test holds blocks the third piece,
    after the database committed the pieces before it), it leaves the next
    run a journal that answers for every piece the database holds, and
    across the runs every candidate is printed once."""
    args = state_of("postgresql").args
    assert crawldedup(args).returncode == 0  # the table, and the key mode
    candidates = urls(0, 30_000)
    digests = md5_of(candidates)
    # The store inserts a piece in key order: the last piece's largest key
    # is inserted after the rest of that piece was committed.
    blocker = max(candidates[20_000:], key=digests.__getitem__)
    (tmp_path / "local.pending-1-0badc0de").write_bytes(journal(candidates, piece=10_000))
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    run = killed_while_blocked(args, empty, digests[blocker], tmp_path, keep=False)
    later = crawldedup(args)
    assert later.returncode == 0, later.stderr
    printed = collections.Counter(run.lines() + later.stdout.decode().splitlines())
    assert not run.lines()  # a replay prints once everything is recorded
    assert set(printed) == set(candidates), (len(set(candidates) - set(printed)), "lost")
    assert max(printed.values()) == 1
    assert crawldedup(args, "".join(f"{u}\n" for u in candidates).encode()).stdout == b""


def test_a_writer_killed_mid_piece_in_a_fleet_leaves_each_url_printed_once(state_of, tmp_path):
    """A fleet on PostgreSQL: a run is killed while its insert of a piece
    waits for a row that another process (the test) is adding; that
    process commits it, and prints it.  The next run finishes the killed
    run's journal: the piece's answer is the database's, under the
    journal's receipt (the killed run's transaction rolled back, so the
    next run's own insert of the piece answers), and the other process's
    URL is not printed again.  Without the receipt the next run would print
    the whole piece, that URL included."""
    args = state_of("postgresql").args
    assert crawldedup(args).returncode == 0
    candidates = urls(0, 30_000)
    digests = md5_of(candidates)
    source = tmp_path / "in.txt"
    source.write_text("\n".join(candidates) + "\n")
    blocker = max(candidates[10_000:20_000], key=digests.__getitem__)
    run = killed_while_blocked(args, source, digests[blocker], tmp_path, keep=True)
    assert not run.lines()  # killed before its chunk was printed
    pending = [p for p in tmp_path.iterdir() if ".pending-" in p.name]
    assert len(pending) == 1 and len(pending[0].name.rsplit("-", 1)[1]) == 32  # its receipt
    later = crawldedup(args)
    assert later.returncode == 0, later.stderr
    printed = collections.Counter(later.stdout.decode().splitlines() + [blocker])
    assert set(printed) == set(candidates), (len(set(candidates) - set(printed)), "lost")
    assert max(printed.values()) == 1, [u for u, n in printed.items() if n > 1]


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_the_receipt_of_a_cut_piece_tells_its_answer(kind, state_of, tmp_path):
    """A killed run had its piece recorded under its journal's receipt, one
    of its URLs added by another process before; the journal did not learn
    the answer.  The next run prints what the receipt says the killed run
    added (not the other process's URL), and forgets the receipt once the
    journal is finished."""
    env = dict(ENV, TMPDIR=str(tmp_path))  # where a Redis state's journals are
    args = state_of(kind).args
    assert crawldedup(args, env=env).returncode == 0
    lines = [f"https://f/{i}" for i in range(5)]
    token = "5" * 32
    if kind == "sqlite":
        db = tmp_path / "s.db"
        base = tmp_path / "local"
        structure = SQLiteStore(db)
        keys = [hashlib.md5(u.encode()).digest() for u in lines]
    else:
        from crawldedup.cli.redis_state import _parts, local_state_path
        from crawldedup.redis import RedisBloomFilter
        url = args[args.index("--state") + 1]
        base = local_state_path(url).replace(tempfile.gettempdir(), str(tmp_path), 1)
        structure = RedisBloomFilter(*_parts(url))
        keys = [u.encode() for u in lines]
    with structure:
        structure.add(keys[2])  # the other process's, which it printed
        assert structure.add_many_once(keys, bytes.fromhex(token)).tolist() == \
            [True, True, False, True, True]
        with open(f"{base}.pending-99-{token}", "wb") as f:
            f.write(journal(lines, piece=5))
        run = crawldedup(args, env=env)
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == [u.encode() for u in lines if u != lines[2]]
        # forgotten: under the receipt, the batch is answered afresh
        assert structure.add_many_once(keys, bytes.fromhex(token)).tolist() == [False] * 5
