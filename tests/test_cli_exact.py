"""``crawldedup urls --exact`` and ``--db``: exact URL state in a
fingerprint-set file or a database, end to end in real processes."""

import hashlib
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import require_service
from crawldedup import BloomFilter, FingerprintSet, SQLiteStore, SQLStore


def crawldedup(*args, stdin=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "crawldedup", *map(str, args)],
                          input=stdin, capture_output=True, timeout=timeout)


def lines(data):
    return data.decode().splitlines()


def md5(url):
    return hashlib.md5(url.encode()).digest()


def test_exact_state_file_two_runs(tmp_path):
    urls = [f"https://shop.example/item/{i}" for i in range(20_000)]
    first = tmp_path / "a.txt"
    first.write_text("\n".join(urls[:15_000] + urls[:100]) + "\n")
    state = tmp_path / "seen.fps"
    run1 = crawldedup("urls", first, "--state", state, "--exact")
    assert run1.returncode == 0, run1.stderr
    assert lines(run1.stdout) == urls[:15_000]  # every URL once: no false positives
    assert b"read 15100, new 15000, duplicates 100, exact, 15000 URLs" in run1.stderr
    fps = FingerprintSet.load(state)  # the documented digest: MD5 of the URL
    assert len(fps) == 15_000 and fps.contains_many([md5(u) for u in urls[:15_000]]).all()
    assert not os.path.exists(str(state) + ".log")
    run2 = crawldedup("urls", "--state", state, "--exact",
                      stdin="\n".join(urls).encode())
    assert run2.returncode == 0, run2.stderr
    assert lines(run2.stdout) == urls[15_000:]
    info = crawldedup("info", state)
    assert info.returncode == 0 and b"fingerprint set" in info.stdout
    assert b"len=20000" in info.stdout


def test_exact_replays_the_log_of_a_killed_run(tmp_path):
    state = tmp_path / "seen.fps"
    seed = FingerprintSet()
    seed.add(md5("https://a/1"))
    seed.save(state)
    # What a run killed after recording two more URLs leaves: their digests
    # in the log, the last write cut short.
    (tmp_path / "seen.fps.log").write_bytes(md5("https://a/2") + md5("https://a/3")
                                            + md5("https://a/4")[:7])
    run = crawldedup("urls", "--state", state, "--exact",
                     stdin=b"https://a/1\nhttps://a/2\nhttps://a/3\nhttps://a/4\n")
    assert run.returncode == 0, run.stderr
    assert lines(run.stdout) == ["https://a/4"]
    assert len(FingerprintSet.load(state)) == 4


def test_exact_kill_minus_nine_loses_nothing(tmp_path):
    state = tmp_path / "seen.fps"
    proc = subprocess.Popen([sys.executable, "-m", "crawldedup", "urls", "--state", str(state),
                             "--exact"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdin.write(b"https://k/1\nhttps://k/2\n")
    proc.stdin.flush()
    printed = []
    while len(printed) < 2:
        printed.append(proc.stdout.readline().strip().decode())
    # Killed once the chunk is delivered (the pending journal is empty
    # again): a kill in between would make the next run print the chunk
    # again, the command's documented at-least-once rule.
    pending = tmp_path / "seen.fps.pending"
    deadline = time.time() + 30
    while pending.stat().st_size and time.time() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdin.close()
    proc.stdout.close()
    proc.stderr.close()
    assert printed == ["https://k/1", "https://k/2"]
    assert not state.exists()  # never saved: only the log holds them
    run = crawldedup("urls", "--state", state, "--exact",
                     stdin=b"https://k/1\nhttps://k/2\nhttps://k/3\n")
    assert run.returncode == 0, run.stderr
    assert lines(run.stdout) == ["https://k/3"]


def test_exact_refuses_a_bloom_state_and_vice_versa(tmp_path):
    bloom = tmp_path / "seen.bloom"
    assert crawldedup("urls", "--state", bloom, stdin=b"u\n").returncode == 0
    run = crawldedup("urls", "--state", bloom, "--exact", stdin=b"u\n")
    assert run.returncode == 1 and b"holds a Bloom filter" in run.stderr and not run.stdout
    fps = tmp_path / "seen.fps"
    assert crawldedup("urls", "--state", fps, "--exact", stdin=b"u\n").returncode == 0
    run = crawldedup("urls", "--state", fps, stdin=b"u\n")
    assert run.returncode == 1 and b"fingerprint set" in run.stderr and not run.stdout
    noted = crawldedup("urls", "--state", fps, "--exact", "--capacity", "10", stdin=b"v\n")
    assert noted.returncode == 0 and b"ignored" in noted.stderr and lines(noted.stdout) == ["v"]


def db_url(kind, tmp_path):
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'seen.db'}"
    return require_service(kind)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql", "mariadb"])
def test_db_shared_by_two_crawlers(kind, tmp_path):
    url = db_url(kind, tmp_path)
    # The CLI uses the default table: clean it before and after.
    def cleanup():
        if kind != "sqlite":
            with SQLStore(url) as store:
                store.drop()
    cleanup()
    try:
        urls = [f"https://news.example/{i}" for i in range(4000)]
        a = tmp_path / "a.txt"
        b = tmp_path / "b.txt"
        a.write_text("\n".join(urls[:3000]) + "\n")
        b.write_text("\n".join(urls[1000:]) + "\n")
        procs = [subprocess.Popen([sys.executable, "-m", "crawldedup", "urls", str(src),
                                   "--state", str(tmp_path / f"local-{n}"), "--db", url],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for n, src in enumerate((a, b))]
        outs = []
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err
            outs += lines(out)
        assert sorted(outs) == sorted(urls)  # each URL printed by exactly one crawler
        again = crawldedup("urls", a, "--state", tmp_path / "local-0", "--db", url)
        assert again.returncode == 0 and again.stdout == b""
        if kind == "sqlite":
            with SQLiteStore(tmp_path / "seen.db") as store:
                assert len(store) == 4000 and md5(urls[0]) in store
    finally:
        cleanup()


def test_db_unreachable_fails_loudly(tmp_path):
    run = crawldedup("urls", "--state", tmp_path / "s", "--db",
                     "postgresql+psycopg://postgres@127.0.0.1:1/test", stdin=b"u\n")
    assert run.returncode == 1 and not run.stdout
    assert b"error" in run.stderr and b"127.0.0.1:1" in run.stderr
    bad = crawldedup("urls", "--state", tmp_path / "s", "--db", "sqlite:///", stdin=b"u\n")
    assert bad.returncode == 1 and b"file path" in bad.stderr


# ---- keys computed ahead (--exact, --canonical): a worker thread hashes or
# canonicalizes the next chunk while this one is recorded and printed

AHEAD_MODES = [["--exact"], ["--canonical"], ["--canonical", "--exact"]]


@pytest.mark.parametrize("mode", AHEAD_MODES)
def test_keys_ahead_over_many_chunks_prints_each_url_once_in_order(tmp_path, mode):
    """A file of several 1 MiB chunks, with repeats within and across chunks
    and at chunk borders: the first occurrence of each URL, in input order."""
    urls = [f"https://news.example/section/{i % 997}/article-{i}?utm_source=x&page={i % 7}"
            for i in range(60_000)]
    feed = []
    for i, url in enumerate(urls):
        feed.append(url)
        if i % 3 == 0:
            feed.append(urls[(i * 7919) % (i + 1)])  # an earlier URL, or this one again
    path = tmp_path / "in.txt"
    path.write_text("\n".join(feed) + "\n")
    assert path.stat().st_size > 5 << 20  # several chunks
    run = crawldedup("urls", path, "--state", tmp_path / "s", *mode)
    assert run.returncode == 0, run.stderr
    expected = list(dict.fromkeys(feed))
    got = lines(run.stdout)
    if "--exact" in mode:
        assert got == expected  # no false positive, and the input order
    else:  # a Bloom filter: a false positive drops a URL, never reorders one
        kept = set(got)
        assert len(got) >= len(expected) - 5 and kept <= set(expected)
        assert got == [u for u in expected if u in kept]
    assert f"read {len(feed)}, new {len(got)}".encode() in run.stderr


@pytest.mark.parametrize("mode", AHEAD_MODES)
def test_keys_ahead_never_waits_for_more_input_on_a_pipe(tmp_path, mode):
    """A URL a crawler writes to the pipe is printed at once, while the
    pipe stays open (reading ahead would block until the next one)."""
    proc = subprocess.Popen([sys.executable, "-m", "crawldedup", "urls", "--state",
                             str(tmp_path / "s"), *mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for i in range(3):
            proc.stdin.write(f"https://p.example/{i}\n".encode())
            proc.stdin.flush()
            assert proc.stdout.readline() == f"https://p.example/{i}\n".encode()
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("mode", [[], ["--canonical"], ["--exact"]])
def test_signal_while_printing_a_big_chunk_keeps_what_was_printed(tmp_path, sig, mode):
    """Stopped by a signal while a big file streams in and the output pipe
    is full: every URL recorded was printed whole (a buffered write dropped
    most of a 1 MiB chunk here once), and a rerun prints exactly the others."""
    urls = [f"https://s.example/{i}" for i in range(400_000)]
    path = tmp_path / "in.txt"
    path.write_text("\n".join(urls) + "\n")
    state = tmp_path / "seen.fps"
    proc = subprocess.Popen([sys.executable, "-m", "crawldedup", "urls", str(path),
                             "--state", str(state), *mode],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    assert first == b"https://s.example/0\n"
    proc.send_signal(sig)
    out = proc.stdout.read()  # the rest, what readline buffered included
    err = proc.stderr.read()
    proc.wait(timeout=60)
    proc.stdout.close()
    proc.stderr.close()
    printed = [first.strip()] + out.split()
    if proc.returncode == 0:  # it had finished before the signal came
        assert len(printed) == len(urls)
    else:
        assert proc.returncode == 128 + sig, err
        assert b"the state was saved" in err
    assert f"new {len(printed)},".encode() in err  # what it says it printed came out
    if "--exact" in mode:
        fps = FingerprintSet.load(state)
        assert len(fps) == len(printed)
        assert fps.contains_many([hashlib.md5(u).digest() for u in printed]).all()
    else:
        assert BloomFilter.load(state).contains_many(printed).all()
    rerun = crawldedup("urls", path, "--state", state, *mode)
    assert rerun.returncode == 0, rerun.stderr
    assert sorted(rerun.stdout.split() + printed) == sorted(u.encode() for u in urls)


def test_canonical_rotating_state_refreshes_repeats(tmp_path):
    """A rotating state refreshes every key met again, so --canonical does
    not skip the repeats there: a URL met in every window is never forgotten."""
    state = tmp_path / "r"
    feed = b"https://a.example/?b=1&a=2\nhttps://a.example/?a=2&b=1\nhttps://b.example/\n"
    first = crawldedup("urls", "--state", state, "--canonical", "--rotate-every", "1d",
                       stdin=feed * 3)
    assert first.returncode == 0, first.stderr
    assert lines(first.stdout) == ["https://a.example/?b=1&a=2", "https://b.example/"]
    again = crawldedup("urls", "--state", state, "--canonical", stdin=feed)
    assert again.returncode == 0 and again.stdout == b"", again.stderr


def test_expected_lines_reads_nothing_and_knows_only_files(tmp_path):
    """The estimate of the input's lines that --exact and --canonical make
    room for: the files' bytes over the mean line length of the first
    64 KiB, from where each file stands, without moving it; nothing for a
    pipe or an empty file."""
    from crawldedup.cli.urls import expected_lines

    lines = [f"https://example.com/{i}?q={'x' * (i % 40)}\n".encode() for i in range(20_000)]
    a, b, empty = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "empty.txt"
    a.write_bytes(b"".join(lines))
    b.write_bytes(b"".join(lines[:5_000]))
    empty.write_bytes(b"")
    with open(a, "rb") as fa, open(b, "rb") as fb, open(empty, "rb") as fe:
        fa.read(100)  # counted from here
        guess = expected_lines([fa, fb, fe])
        assert fa.tell() == 100 and fb.tell() == 0
        assert 0.9 * 25_000 <= guess <= 1.1 * 25_000
        assert expected_lines([fe]) == 0
    r, w = os.pipe()
    try:
        with os.fdopen(r, "rb") as pipe:
            os.write(w, b"https://example.com/\n")
            assert expected_lines([pipe]) == 0
    finally:
        os.close(w)


@pytest.mark.parametrize("flags", [["--exact"], ["--exact", "--canonical"]])
def test_room_made_ahead_changes_no_output_nor_state(tmp_path, flags, monkeypatch,
                                                     capfdbinary):
    """With room made for the input ahead (FingerprintSet.reserve) and
    without it, the same URLs printed and the same state file."""
    from crawldedup.cli import _delivery, _exact_state, main

    urls = [f"https://example.com/{i % 7_000}?b=2&a={i % 3}\n".encode() for i in range(30_000)]
    src = tmp_path / "in.txt"
    src.write_bytes(b"".join(urls))

    def run(state):
        capfdbinary.readouterr()
        assert main(["urls", str(src), "--state", str(tmp_path / state), *flags]) == 0
        return capfdbinary.readouterr().out, (tmp_path / state).read_bytes()

    reserved = run("reserved.fps")
    assert reserved[0].count(b"\n") == 21_000  # (i % 7,000, i % 3): 21,000 distinct
    seen = []
    monkeypatch.setattr(FingerprintSet, "reserve", lambda self, n: seen.append(n))
    assert run("grown.fps") == reserved
    assert seen and max(seen) >= 28_000  # room was asked for the file's lines
    assert _exact_state.RESERVE_LIMIT and _delivery.REPEATS_LIMIT
