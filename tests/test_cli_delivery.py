"""``crawldedup urls`` delivers every new URL once, in real processes killed
with SIGKILL at random moments: for every kind of state, one process after
another, and several processes on one machine sharing a Redis state or a
database."""

import collections
import os
import random
import struct
import subprocess
import sys
import time

import pytest

from cli_states import ENV, KINDS, Run, states, urls


@pytest.fixture
def state_of(tmp_path):
    with states(tmp_path) as make:
        yield make


def check_once(runs, expected):
    printed = collections.Counter(line for run in runs for line in run.lines())
    twice = {url: n for url, n in printed.items() if n > 1}
    assert not twice, f"{len(twice)} URLs printed more than once, e.g. {list(twice)[:3]}"
    assert set(printed) == set(expected), (len(set(expected) - set(printed)), "lost")


@pytest.mark.parametrize("kind", KINDS)
def test_kill_minus_nine_at_any_moment_prints_each_url_once(kind, state_of, tmp_path):
    """Runs over overlapping inputs (most of each run's URLs were printed by
    an earlier one), each killed with SIGKILL at a random moment, then runs
    to the end: across all their outputs, every URL is printed once.  The
    pending journal of a --db run used to hold every line its in-process
    cache did not know, so the run after a kill printed again URLs that
    the database had had for long."""
    args = state_of(kind).args
    rng = random.Random(f"{kind}-kills")
    inputs = []
    for n, (start, stop) in enumerate([(0, 30_000), (10_000, 45_000), (0, 60_000)]):
        path = tmp_path / f"in{n}.txt"
        path.write_text("\n".join(urls(start, stop)) + "\n")
        inputs.append(path)
    runs = []
    first = Run(args, inputs[0])  # an unkilled run: it knows how long a run takes
    t0 = time.monotonic()
    assert first.wait() == 0, first.err
    took = time.monotonic() - t0
    runs.append(first)
    for n in range(6):
        run = Run(args, inputs[1 + n % 2])
        time.sleep(rng.uniform(0.1, 1.2) * took)
        run.kill()
        run.wait()
        runs.append(run)
    for source in inputs:
        run = Run(args, source)
        assert run.wait() == 0, run.err
        runs.append(run)
    check_once(runs, urls(0, 60_000))
    again = Run(args, inputs[2])
    assert again.wait() == 0 and again.lines() == []  # all recorded


def unanswered(path):
    """The candidates of a pending journal whose run was killed before the
    state's answer was recorded (header: signature, candidates' length,
    answer start, 0 until the answer is known), else []."""
    data = path.read_bytes()
    if len(data) < 40 or struct.unpack_from("<Q", data, 16)[0]:
        return []
    held = struct.unpack_from("<Q", data, 8)[0]
    block = data[40:40 + held]
    return block[:block.rfind(b"\n") + 1].decode().splitlines()


@pytest.mark.parametrize("kind", ["redis", "redis-db", "sqlite", "postgresql"])
def test_four_processes_on_one_machine_share_a_state(kind, state_of, tmp_path):
    """Four processes on one machine (one temporary folder: a Redis state's
    journals are there), with one --state and overlapping inputs (each URL
    in three of them), run at once; one is killed with SIGKILL at a random
    moment, and a later run finishes its journal.  They used to be refused
    ("in use by another crawldedup process") but one.  Every URL is printed
    once overall; only when the kill cut the insert of a chunk (before the
    state's answer was recorded) may a URL of that chunk that another
    process added meanwhile be printed by both (docs/cli.md)."""
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
    fleet = [Run(args, source, env) for source in inputs]
    time.sleep(rng.uniform(0.6, 1.5))
    fleet[0].kill()
    codes = [run.wait() for run in fleet]
    assert codes[1:] == [0, 0, 0], [run.err for run in fleet[1:]]
    journals = [p for p in tmp_path.iterdir() if ".pending-" in p.name]
    assert len(journals) <= 1  # the killed process's, when it held a chunk
    cut = [url for p in journals for url in unanswered(p)]
    later = Run(args, inputs[0], env)  # finishes the killed process's journal first
    assert later.wait() == 0, later.err
    runs = fleet + [later]
    printed = collections.Counter(line for run in runs for line in run.lines())
    assert set(printed) == set(everything), "lost"
    twice = {url for url, n in printed.items() if n > 1}
    assert twice <= set(cut), f"{len(twice - set(cut))} URLs printed twice"
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
