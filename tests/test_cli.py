"""``crawldedup urls`` end to end, as a user runs it: real processes, real files."""

import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import platform_lacks
from crawldedup import BloomFilter

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def crawldedup(*args, stdin=None, cwd=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "crawldedup", *map(str, args)],
                          input=stdin, capture_output=True, cwd=cwd, timeout=timeout)


def lines(data):
    return data.decode().splitlines()


def test_two_runs_over_overlapping_files(tmp_path):
    first = tmp_path / "monday.txt"
    second = tmp_path / "tuesday.txt"
    first.write_text("https://a.example/1\nhttps://a.example/2\nhttps://a.example/1\n")
    second.write_text("https://a.example/2\nhttps://a.example/3\n\n   https://a.example/4  \n")
    state = tmp_path / "seen.bloom"
    run1 = crawldedup("urls", first, "--state", state, "--capacity", 1000)
    assert run1.returncode == 0, run1.stderr
    assert lines(run1.stdout) == ["https://a.example/1", "https://a.example/2"]
    assert b"read 3, new 2, duplicates 1" in run1.stderr
    run2 = crawldedup("urls", second, "--state", state)
    assert run2.returncode == 0, run2.stderr
    assert lines(run2.stdout) == ["https://a.example/3", "https://a.example/4"]
    assert BloomFilter.load(state).capacity == 1000


def test_reads_stdin_and_several_files(tmp_path):
    a = tmp_path / "a.txt"
    a.write_bytes(b"u1\r\nu2\n")
    state = tmp_path / "s"
    run = crawldedup("urls", a, "-", "--state", state, stdin=b"u2\nu3\nu1")
    assert run.returncode == 0, run.stderr
    assert lines(run.stdout) == ["u1", "u2", "u3"]
    again = crawldedup("urls", "--state", state, stdin=b"u3\nu4\n")
    assert lines(again.stdout) == ["u4"]


def test_sample_input(tmp_path):
    sample = EXAMPLES / "urls.txt"
    assert sample.exists(), "examples/ ships beside tests/ (repository and sdist)"
    urls = [u.strip() for u in sample.read_text().splitlines() if u.strip()]
    run = crawldedup("urls", sample, "--state", tmp_path / "s")
    assert run.returncode == 0
    assert lines(run.stdout) == list(dict.fromkeys(urls))


def test_non_utf8_and_long_lines_pass_through(tmp_path):
    data = b"http://x/\xff\xfe\n" + b"http://y/" + b"a" * 200_000 + b"\n" + "http://新闻/".encode()
    run = crawldedup("urls", "--state", tmp_path / "s", stdin=data)
    assert run.returncode == 0, run.stderr
    assert run.stdout == data + b"\n"


def test_parameters_of_an_existing_state_win(tmp_path):
    state = tmp_path / "s"
    crawldedup("urls", "--state", state, "--capacity", 500, "--error-rate", 0.001, stdin=b"x\n")
    run = crawldedup("urls", "--state", state, "--capacity", 9000, stdin=b"x\ny\n")
    assert run.returncode == 0
    assert lines(run.stdout) == ["y"]
    assert b"created with capacity 500, error rate 0.001" in run.stderr
    assert b"--capacity 9000" in run.stderr
    assert BloomFilter.load(state).capacity == 500


def test_over_capacity_warning(tmp_path):
    run = crawldedup("urls", "--state", tmp_path / "s", "--capacity", 10,
                     stdin="".join(f"u{i}\n" for i in range(50)).encode())
    assert run.returncode == 0
    assert b"more than its capacity 10" in run.stderr


@pytest.mark.parametrize("args,words", [
    ([], b"the following arguments are required: --state"),
    (["--capacity", "0"], b"must be at least 1"),
    (["--capacity", "ten"], b"not an integer"),
    (["--error-rate", "1"], b"open interval (0, 1)"),
    (["--error-rate", "x"], b"not a number"),
])
def test_usage_errors_exit_2(tmp_path, args, words):
    if args:
        args = [*args, "--state", tmp_path / "s"]
    run = crawldedup("urls", *args, stdin=b"")
    assert run.returncode == 2
    assert words in run.stderr
    assert b"Traceback" not in run.stderr


def test_no_command_is_a_usage_error():
    assert crawldedup().returncode == 2


@pytest.mark.parametrize("setup,words", [
    ("missing input", b"cannot read"),
    ("corrupt state", b"not a valid crawldedup file"),
    ("state in missing folder", b"No such file or directory"),
])
def test_errors_exit_1_with_one_line(tmp_path, setup, words):
    state = tmp_path / "s"
    args = ["urls", "--state", state]
    if setup == "missing input":
        args.append(tmp_path / "nope.txt")
    elif setup == "corrupt state":
        state.write_bytes(b"garbage")
    else:
        args[2] = tmp_path / "no" / "s"
    run = crawldedup(*args, stdin=b"u\n")
    assert run.returncode == 1
    assert words in run.stderr and b"Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert run.stdout == b""
    if setup == "corrupt state":
        assert state.read_bytes() == b"garbage"


@platform_lacks(sys.platform == "win32", "flock")
def test_second_process_on_the_same_state_is_refused(tmp_path):
    import fcntl
    state = tmp_path / "s"
    with open(str(state) + ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        run = crawldedup("urls", "--state", state, stdin=b"u\n")
    assert run.returncode == 1
    assert b"in use by another crawldedup process" in run.stderr
    assert not state.exists()


@platform_lacks(sys.platform == "win32", "POSIX signals")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_saves_what_was_printed(tmp_path, sig):
    state = tmp_path / "s"
    proc = subprocess.Popen([sys.executable, "-m", "crawldedup", "urls", "--state", str(state)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdin.write(b"".join(f"https://e.com/{i}\n".encode() for i in range(1000)))
    proc.stdin.flush()
    printed = []
    while len(printed) < 1000:
        printed.append(proc.stdout.readline().strip())
    time.sleep(0.2)  # the command is now blocked reading stdin
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert b"the state was saved" in err
    saved = BloomFilter.load(state)
    assert saved.contains_many(printed).all()
    rerun = crawldedup("urls", "--state", state, stdin=b"\n".join(printed) + b"\nhttps://e.com/new\n")
    assert lines(rerun.stdout) == ["https://e.com/new"]


@platform_lacks(sys.platform == "win32", "POSIX pipes")
def test_closed_output_loses_no_url(tmp_path):
    state = tmp_path / "s"
    urls = [f"https://e.com/{i}".encode() for i in range(300_000)]
    proc = subprocess.Popen([sys.executable, "-m", "crawldedup", "urls", "--state", str(state)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdin.write(b"first\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == b"first\n"
    proc.stdout.close()  # like `| head -1`
    try:
        proc.stdin.write(b"\n".join(urls) + b"\n")
    except BrokenPipeError:
        pass  # the command may already have stopped reading
    finally:
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass
    err = proc.stderr.read()
    proc.stderr.close()
    proc.wait(timeout=60)
    assert proc.returncode == 1, err
    assert b"the next run prints them" in err
    # Whatever was recorded but not delivered comes out of the next run.
    rerun = crawldedup("urls", "--state", state, stdin=b"\n".join(urls) + b"\n")
    assert rerun.returncode == 0, rerun.stderr
    assert set(urls) <= set(rerun.stdout.split())  # none was lost
    assert BloomFilter.load(state).contains_many(urls).all()


KILL_FEED = 200_000


@platform_lacks(sys.platform == "win32", "SIGKILL")
def test_kill_9_neither_loses_nor_repeats_urls(tmp_path):
    state = tmp_path / "s"
    urls = [f"https://e.com/{i}".encode() for i in range(KILL_FEED)]
    proc = subprocess.Popen([sys.executable, "-m", "crawldedup", "urls", "--state", str(state)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    first = []
    half = KILL_FEED // 2

    def feed():
        try:
            proc.stdin.write(b"\n".join(urls[:half]) + b"\n")
            proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # killed meanwhile

    feeder = threading.Thread(target=feed)
    feeder.start()
    while len(first) < 1000:
        first.append(proc.stdout.readline().strip())
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    feeder.join(timeout=60)
    rest = proc.stdout.read()
    # A killed run's output may end with part of a line, which the next run
    # prints whole: only the lines the output got whole count.
    first += rest[:rest.rfind(b"\n") + 1].split()
    proc.stdout.close()
    try:
        proc.stdin.close()
    except BrokenPipeError:
        pass
    printed_before = set(first)
    rerun = crawldedup("urls", "--state", state, stdin=b"\n".join(urls) + b"\n")
    assert rerun.returncode == 0, rerun.stderr
    second = rerun.stdout.split()
    # Nothing lost: every URL was printed by one run or the other.
    assert printed_before | set(second) == set(urls)
    # Nothing printed as new is printed as new again, except the chunk that
    # was in flight when the first run was killed (at most one read's worth).
    again = printed_before & set(second)
    assert len(again) < 10_000
    assert len(second) == len(set(second))


def test_info_describes_a_state(tmp_path):
    state = tmp_path / "s"
    crawldedup("urls", "--state", state, "--capacity", 1000, "--layout", "blocked",
               stdin=b"".join(f"u{i}\n".encode() for i in range(300)))
    run = crawldedup("info", state)
    assert run.returncode == 0, run.stderr
    text = run.stdout.decode()
    for words in ("kind: Bloom filter", "capacity: 1,000", "layout: blocked", "inserted: 300",
                  "fill ratio:", "estimated false-positive rate now:", "checksum: verified"):
        assert words in text, text
    bad = tmp_path / "bad"
    bad.write_bytes(b"nope")
    run = crawldedup("info", bad)
    assert run.returncode == 1 and b"not a valid crawldedup file" in run.stderr


def test_info_describes_and_verifies_a_disk_store(tmp_path):
    import numpy as np

    from crawldedup import DiskStore
    folder = tmp_path / "seen.disk"
    digests = np.random.default_rng(5).integers(0, 256, (50_000, 16), dtype=np.uint8)
    with DiskStore(folder, memory=1 << 20) as store:  # a small memtable: a few runs
        for part in np.split(digests.view("S16").ravel(), 10):
            store.add_many(part)
        runs, stored = store.runs, len(store)
    assert runs >= 1 and stored == 50_000
    run = crawldedup("info", folder)
    assert run.returncode == 0, run.stderr
    text = run.stdout.decode()
    assert "kind: disk store" in text and "digest size: 16 bytes" in text, text
    assert f"in {runs} run" in text, text
    run = crawldedup("info", folder, "--verify")
    assert run.returncode == 0, run.stderr
    assert "verified: every run's checksums; 50,000 digests in all" in run.stdout.decode()
    name = sorted(p for p in os.listdir(folder) if p.startswith("run-"))[0]
    with open(folder / name, "r+b") as f:
        f.seek(200)
        byte = f.read(1)
        f.seek(200)
        f.write(bytes([byte[0] ^ 1]))
    run = crawldedup("info", folder, "--verify")
    assert run.returncode == 1 and name.encode() in run.stderr, run.stderr
    assert b"Traceback" not in run.stderr


def test_info_repairs_a_killed_writers_file(tmp_path):
    state = tmp_path / "s"
    code = ("import os, sys; from crawldedup import BloomFilter; "
            "bf = BloomFilter.open(sys.argv[1], capacity=1000); bf.add('x'); os._exit(0)")
    subprocess.run([sys.executable, "-c", code, str(state)], check=True, timeout=60)
    run = crawldedup("info", state)
    assert b"not up to date" in run.stdout
    run = crawldedup("info", "--repair", state)
    assert run.returncode == 0 and b"inserted: 1" in run.stdout
    assert b"not up to date" not in crawldedup("info", state).stdout


def test_console_script_is_installed():
    script = pathlib.Path(sys.executable).with_name(
        "crawldedup.exe" if os.name == "nt" else "crawldedup")
    assert script.exists()
    run = subprocess.run([str(script), "--version"], capture_output=True, timeout=60)
    assert run.returncode == 0 and run.stdout.startswith(b"crawldedup ")


# ---------------------------------------------------------------- rotating states

def later(state, days):
    """Let `days` pass for the state file's rotation clock (the CLI uses the
    real clock; a handle with a clock that far ahead does the rotations due)."""
    from crawldedup.bloom.rotating import RotatingBloomFilter
    ahead = time.time() + days * 86400
    with RotatingBloomFilter.open(state, clock=lambda: ahead) as rf:
        return rf.rotate_if_due()


def test_rotating_state_forgets_urls_not_met_for_a_window(tmp_path):
    state = tmp_path / "seen.rbf"
    run = crawldedup("urls", "--state", state, "--rotate-every", "1d", "--capacity", 1000,
                     stdin=b"https://a/1\nhttps://a/2\n")
    assert run.returncode == 0, run.stderr
    assert lines(run.stdout) == ["https://a/1", "https://a/2"]
    assert lines(crawldedup("urls", "--state", state, stdin=b"https://a/1\n").stdout) == []
    assert later(state, 1.2) == 1  # a/2 now only in the older generation
    # a/1 met again: not printed, and refreshed into the newest generation.
    again = crawldedup("urls", "--state", state, stdin=b"https://a/1\nhttps://a/3\n")
    assert lines(again.stdout) == ["https://a/3"]
    assert later(state, 2.2) == 1  # the generation holding only a/2 is dropped
    run = crawldedup("urls", "--state", state,
                     stdin=b"https://a/1\nhttps://a/2\nhttps://a/3\n")
    assert run.returncode == 0, run.stderr
    assert lines(run.stdout) == ["https://a/2"]  # forgotten, so printed again


def test_rotating_state_parameters_and_info(tmp_path):
    state = tmp_path / "seen.rbf"
    run = crawldedup("urls", "--state", state, "--rotate-every", "12h", "--generations", 3,
                     "--capacity", 500, "--layout", "blocked", stdin=b"u1\nu2\n")
    assert run.returncode == 0, run.stderr
    # Later runs take the parameters from the file, and say so when asked others.
    run = crawldedup("urls", "--state", state, "--rotate-every", "1d", stdin=b"u3\n")
    assert run.returncode == 0 and lines(run.stdout) == ["u3"]
    assert b"rotation every 12h; using those, not --rotate-every 1d" in run.stderr
    info = crawldedup("info", state)
    assert info.returncode == 0, info.stderr
    text = info.stdout.decode()
    for expected in ("kind: rotating Bloom filter", "capacity: 500 per generation",
                     "layout: blocked", "generations: 3", "rotation: every 12h",
                     "rotations: 0", "inserted per generation (oldest first): 0, 0, 3",
                     "checksum: verified"):
        assert expected in text, text


def test_a_plain_state_cannot_rotate(tmp_path):
    state = tmp_path / "seen.bloom"
    assert crawldedup("urls", "--state", state, stdin=b"u1\n").returncode == 0
    run = crawldedup("urls", "--state", state, "--rotate-every", "1d", stdin=b"u2\n")
    assert run.returncode == 1
    assert b"holds a Bloom filter, which cannot rotate" in run.stderr
    assert run.stdout == b""


@pytest.mark.parametrize("text, seconds", [("3600", 3600), ("90s", 90), ("15m", 900),
                                           ("12h", 43200), ("7d", 604800), ("2w", 1209600),
                                           ("1d12h", 129600), ("0.5h", 1800)])
def test_durations(text, seconds):
    from crawldedup.cli import duration, format_duration
    assert duration(text) == seconds
    assert duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize("args, words", [
    (["--rotate-every", "soon"], b"not a duration"),
    (["--rotate-every", "0"], b"positive duration"),
    (["--rotate-every", "1d tomorrow"], b"not a duration"),
    (["--generations", "1"], b"must be in [2, 64]"),
    (["--generations", "65"], b"must be in [2, 64]"),
])
def test_rotation_usage_errors_exit_2(tmp_path, args, words):
    run = crawldedup("urls", "--state", tmp_path / "s", *args, stdin=b"u\n")
    assert run.returncode == 2 and words in run.stderr, run.stderr
    assert not (tmp_path / "s").exists()


# ---------------------------------------------------------------- canonical URLs

CANONICAL_INPUT = (b"https://a.example/x?b=2&a=1\n"
                   b"https://a.example/x?a=1&b=2#reviews\n"
                   b"HTTPS://A.EXAMPLE/x?a=1&b=2&utm_source=news&spm=a.b.c\n"
                   b"https://a.example/%7Euser/\n"
                   b"https://a.example/~user/\n")


def test_canonical_compares_canonical_forms_and_prints_the_lines_read(tmp_path):
    run = crawldedup("urls", "--state", tmp_path / "s", "--canonical", stdin=CANONICAL_INPUT)
    assert run.returncode == 0, run.stderr
    assert lines(run.stdout) == ["https://a.example/x?b=2&a=1",
                                 "HTTPS://A.EXAMPLE/x?a=1&b=2&utm_source=news&spm=a.b.c",
                                 "https://a.example/%7Euser/"]
    # A later run compares by canonical form too.
    again = crawldedup("urls", "--state", tmp_path / "s", "--canonical",
                       stdin=b"https://a.example/x?a=1&b=2\nhttps://a.example/y\n")
    assert lines(again.stdout) == ["https://a.example/y"]


def test_strip_tracking_and_exact_use_the_url_fingerprint(tmp_path):
    from crawldedup import FingerprintSet, url_fingerprint
    state = tmp_path / "seen.fps"
    run = crawldedup("urls", "--state", state, "--canonical", "--strip-tracking", "--exact",
                     stdin=CANONICAL_INPUT)
    assert run.returncode == 0, run.stderr
    assert lines(run.stdout) == ["https://a.example/x?b=2&a=1", "https://a.example/%7Euser/"]
    stored = FingerprintSet.load(state)
    assert len(stored) == 2
    assert url_fingerprint("https://a.example/x?a=1&b=2") in stored
    assert url_fingerprint("https://a.example/~user/") in stored


def test_strip_tracking_needs_canonical(tmp_path):
    run = crawldedup("urls", "--state", tmp_path / "s", "--strip-tracking", stdin=b"u\n")
    assert run.returncode == 2 and b"--strip-tracking needs --canonical" in run.stderr
