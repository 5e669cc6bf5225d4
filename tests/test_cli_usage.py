"""Bad input and usage of the command line (issue 11, B): one clear line,
the right exit status, and nothing changed."""

import os
import pathlib
import re
import stat
import subprocess
import sys

import pytest

from crawldedup import BloomFilter, FingerprintSet, SimhashIndex

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"


def crawldedup(*args, stdin=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "crawldedup", *map(str, args)],
                          input=stdin, capture_output=True, timeout=timeout)


def one_error_line(run):
    text = run.stderr.decode()
    assert "Traceback" not in text, text
    errors = [line for line in text.splitlines() if line.startswith("crawldedup: error")]
    assert len(errors) == 1, text
    return errors[0]


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir()
                  if p.name.endswith((".lock", ".pending", ".log")))


# ------------------------------------------------- item 10: read-only states

@pytest.mark.parametrize("mode", [[], ["--exact"], ["--rotate-every", "1d"]])
def test_a_read_only_state_is_refused_in_every_mode(tmp_path, mode):
    state = tmp_path / "seen"
    assert crawldedup("urls", "--state", state, *mode, stdin=b"https://a/1\n").returncode == 0
    before = state.read_bytes()
    os.chmod(state, 0o444)
    try:
        run = crawldedup("urls", "--state", state, *mode, stdin=b"https://a/2\n")
        assert run.returncode == 1 and run.stdout == b""
        assert "read-only" in one_error_line(run)
        assert state.read_bytes() == before
        assert stat.S_IMODE(os.stat(state).st_mode) == 0o444  # not replaced
    finally:
        os.chmod(state, 0o644)
    assert leftovers(tmp_path) == []


# ------------------------------------------------- item 11: huge sizes

def test_a_huge_in_memory_filter_is_a_value_error_naming_the_memory():
    with pytest.raises(ValueError, match=r"capacity.*PiB"):
        BloomFilter(capacity=10**15)


@pytest.mark.parametrize("args, flag", [
    (["--capacity", "100000000000000"], "--capacity"),
    (["--error-rate", "1e-30"], "--error-rate"),
    (["--capacity", "100000000000000", "--rotate-every", "1d"], "--capacity"),
])
def test_huge_sizes_are_usage_errors(tmp_path, args, flag):
    state = tmp_path / "seen"
    run = crawldedup("urls", "--state", state, *args, stdin=b"u\n")
    assert run.returncode == 2, run.stderr
    line = one_error_line(run)
    assert flag in line
    if flag == "--capacity":
        assert re.search(r"\d+(\.\d+)? TiB", line), line  # the size it would need
    assert not state.exists() and leftovers(tmp_path) == []


# ------------------------------------------------- item 12: --generations alone

def test_generations_without_rotate_every_is_a_usage_error(tmp_path):
    state = tmp_path / "seen"
    run = crawldedup("urls", "--state", state, "--generations", 3, stdin=b"u\n")
    assert run.returncode == 2
    assert "--generations needs --rotate-every" in one_error_line(run)
    assert not state.exists()


# ------------------------------------------------- item 13: one estimate

def test_over_capacity_warning_and_info_give_the_same_count(tmp_path):
    state = tmp_path / "seen"
    urls = b"".join(b"https://shop.example/item/%d\n" % i for i in range(30_000))
    run = crawldedup("urls", "--state", state, "--capacity", 5000, stdin=urls)
    assert run.returncode == 0
    warned = re.search(r"holds about ([\d,]+) URLs", run.stderr.decode())
    assert warned, run.stderr
    info = crawldedup("info", state)
    counted = re.search(r"estimated count: ([\d,]+)", info.stdout.decode())
    assert warned.group(1) == counted.group(1)
    # and it is an estimate of the truth, not the 5,000 the filter was sized for
    assert abs(int(warned.group(1).replace(",", "")) - 30_000) < 3_000


# ------------------------------------------------- item 14: unparseable URLs

@pytest.mark.parametrize("exact", [[], ["--exact"]])
def test_canonical_counts_the_lines_it_compares_as_read(tmp_path, exact):
    data = (b"http://[::1\nhttp://[::2/x\nhttps://a.example/?b=1&a=2\n"
            b"https://a.example/?a=2&b=1\nhttp://[::1\n")
    run = crawldedup("urls", "--state", tmp_path / "s", "--canonical", *exact, stdin=data)
    assert run.returncode == 0, run.stderr
    assert run.stdout.decode().splitlines() == ["http://[::1", "http://[::2/x",
                                                "https://a.example/?b=1&a=2"]
    assert b"3 lines not canonicalizable" in run.stderr  # every such line counts
    clean = crawldedup("urls", "--state", tmp_path / "t", "--canonical", stdin=b"https://a/\n")
    assert b"canonicalizable" not in clean.stderr


# ------------------------------------------------- item 17: messages

@pytest.mark.parametrize("args, words", [
    (["--generations", "0", "--rotate-every", "1d"], "must be in [2, 64], got 0"),
    (["--generations", "1", "--rotate-every", "1d"], "must be in [2, 64], got 1"),
    (["--rotate-every", "-1d"], "must be a positive duration, got '-1d'"),
    (["--capacity", "-5"], "must be at least 1, got -5"),
])
def test_range_messages(tmp_path, args, words):
    run = crawldedup("urls", "--state", tmp_path / "s", *args, stdin=b"u\n")
    assert run.returncode == 2
    assert words in run.stderr.decode()
    assert "expected one argument" not in run.stderr.decode()


def test_usage_errors_show_the_command_usage(tmp_path):
    run = crawldedup("urls", "--state", tmp_path / "s", "--strip-tracking", stdin=b"u\n")
    assert run.returncode == 2
    assert run.stderr.decode().startswith("usage: crawldedup urls ")
    assert "--strip-tracking needs --canonical" in one_error_line(run)


@pytest.mark.parametrize("args, usage, bad", [
    (["near-dups", "--bogus"], "crawldedup near-dups", "--bogus"),
    (["urls", "--state", "S", "--bogus", "-x"], "crawldedup urls", "--bogus -x"),
    (["info", "P", "extra"], "crawldedup info", "extra"),
    (["due", "--state", "S", "--limit", "5", "--no-such-option"], "crawldedup due",
     "--no-such-option"),
    (["--bogus", "urls", "--state", "S"], "crawldedup", "--bogus"),  # before the command
])
def test_an_unknown_option_shows_its_command_usage(tmp_path, args, usage, bad):
    # issue 30, item 7: f99a5f4 showed the top-level usage for every one
    args = [str(tmp_path / a) if a in ("S", "P") else a for a in args]
    run = crawldedup(*args, stdin=b"")
    assert run.returncode == 2
    text = run.stderr.decode()
    assert text.startswith(f"usage: {usage} "), text
    assert text.rstrip().endswith(f"error: unrecognized arguments: {bad}"), text
    assert list(tmp_path.iterdir()) == []   # nothing was run


def test_a_file_of_another_kind_is_named(tmp_path):
    index = SimhashIndex()
    index.add(1, 5)
    index.save(tmp_path / "idx")
    fps = FingerprintSet()
    fps.save(tmp_path / "fps")
    BloomFilter(100).save(tmp_path / "bloom")
    for args, words in [(["urls", "--state", tmp_path / "idx"], "holds a SimHash index"),
                        (["urls", "--state", tmp_path / "fps"], "holds a fingerprint set"),
                        (["near-dups", "--index", tmp_path / "bloom"], "holds a Bloom filter")]:
        run = crawldedup(*args, stdin=b'{"id": 1, "text": "a b c"}\n')
        assert run.returncode == 1
        line = one_error_line(run)
        assert words in line and "not a valid crawldedup file" not in line, line
    assert leftovers(tmp_path) == []


def test_info_on_a_db_state_path_says_what_it_is(tmp_path):
    state = tmp_path / "local"
    run = crawldedup("urls", "--state", state, "--db", f"sqlite:///{tmp_path / 'seen.db'}",
                     stdin=b"u\n")
    assert run.returncode == 0, run.stderr
    info = crawldedup("info", state)
    assert info.returncode == 1
    line = one_error_line(info)
    assert "Errno" not in line and "no state file" in line and "--db" in line
    assert leftovers(tmp_path) == []


def test_no_lock_files_are_left_behind(tmp_path):
    good = tmp_path / "good"
    assert crawldedup("urls", "--state", good, stdin=b"u\n").returncode == 0
    bad = tmp_path / "bad"
    bad.write_bytes(b"garbage")
    assert crawldedup("urls", "--state", bad, stdin=b"u\n").returncode == 1
    assert crawldedup("urls", "--state", tmp_path / "x", "--exact", stdin=b"u\n").returncode == 0
    assert leftovers(tmp_path) == []


def test_notes_and_summaries_are_grammatical(tmp_path):
    fps = tmp_path / "seen.fps"
    one = crawldedup("urls", "--state", fps, "--exact", "--capacity", 10, stdin=b"v\n")
    assert b"--capacity only applies to Bloom filter states" in one.stderr
    two = crawldedup("urls", "--state", fps, "--exact", "--capacity", 10, "--layout", "blocked",
                     stdin=b"v\n")
    assert b"--capacity and --layout only apply to Bloom filter states" in two.stderr
    near = crawldedup("near-dups", "--lines", stdin=b"one line of text\n")
    assert near.returncode == 0
    assert b"1 document, 0 near-duplicate pairs" in near.stderr


@pytest.mark.parametrize("line, words", [
    (b'{"id": true, "text": "a"}', "id true is a JSON boolean"),
    (b'{"id": null, "text": "a"}', "id null is a JSON null"),
    (b'{"id": [1, "x"], "text": "a"}', 'id [1, "x"] is a JSON array'),
])
def test_jsonl_errors_show_json_values(line, words):
    run = crawldedup("near-dups", stdin=line + b"\n")
    assert run.returncode == 1
    assert words in one_error_line(run)


def test_repeated_ids_are_shown_as_json():
    run = crawldedup("near-dups", stdin=b'{"id": "x", "text": "a"}\n{"id": "x", "text": "b"}\n')
    assert run.returncode == 1
    assert 'id "x" was already given' in one_error_line(run)


# ------------------------------------------------- item 18: docs

def test_the_simhash_doc_example_runs_and_is_true():
    text = (DOCS / "simhash.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert "near duplicates" in code and "assert hamming(a, b)" in code
    exec(compile(code, "docs/simhash.md", "exec"), {})


def test_format_doc_says_once_which_calls_take_a_clock():
    text = (DOCS / "format.md").read_text()
    assert text.count("Neither stores the clock") == 1
    assert "`load`,\n`from_bytes` and `open` take one" in text
