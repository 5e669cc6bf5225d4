"""``crawldedup near-dups`` end to end: real processes, real files, results
checked against a brute-force scan of the same fingerprints."""

import json
import os
import random
import shutil
import subprocess
import sys

import numpy as np
import pytest

import crawldedup
from conftest import platform_lacks

WORDS = ("crawler news market river city price model data search page world team "
         "report policy energy water music travel health school science market season "
         "growth budget region storm bridge museum garden harbor village island").split()


def crawldedup_cli(*args, stdin=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "crawldedup", *map(str, args)],
                          input=stdin, capture_output=True, timeout=timeout)


def corpus(n_base=40, copies=2, seed=3):
    """Documents of 150 words; each base document has `copies` near copies
    with 1 to 3 words changed, placed later in the stream."""
    rng = random.Random(seed)
    docs = []
    for b in range(n_base):
        words = [rng.choice(WORDS) + str(rng.randrange(50)) for _ in range(150)]
        docs.append((f"doc{b}", " ".join(words)))
        for c in range(copies):
            edited = list(words)
            for _ in range(rng.randint(1, 3)):
                edited[rng.randrange(len(edited))] = rng.choice(WORDS) + "x"
            docs.append((f"doc{b}-copy{c}", " ".join(edited)))
    rng.shuffle(docs)
    return docs


def brute_force_pairs(docs, k):
    fps = crawldedup.simhash_many([text for _, text in docs])
    ids = [i for i, _ in docs]
    pairs = []
    for later in range(len(docs)):
        x = np.bitwise_xor(fps[:later], fps[later])
        dist = np.array([bin(int(v)).count("1") for v in x], dtype=int)
        for earlier in np.nonzero(dist <= k)[0].tolist():
            pairs.append((ids[earlier], ids[later], int(dist[earlier])))
    return pairs


def write_jsonl(path, docs, **extra):
    with open(path, "w", encoding="utf-8") as f:
        for ident, text in docs:
            f.write(json.dumps({"id": ident, "text": text, **extra}, ensure_ascii=False) + "\n")


@pytest.mark.parametrize("k", [0, 3, 6])
def test_pairs_equal_a_brute_force_scan(tmp_path, k):
    docs = corpus()
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, docs)
    run = crawldedup_cli("near-dups", path, "--k", k)
    assert run.returncode == 0, run.stderr
    got = [json.loads(line) for line in run.stdout.decode().splitlines()]
    expected = brute_force_pairs(docs, k)
    assert sorted((p["a"], p["b"], p["distance"]) for p in got) == sorted(expected)
    position = {ident: i for i, (ident, _) in enumerate(docs)}
    assert all(position[p["a"]] < position[p["b"]] for p in got)
    if k == 3:
        assert len(expected) >= 40  # most planted copies are within 3 bits
    assert f"{len(docs)} documents, {len(expected)} near-duplicate pairs".encode() in run.stderr


def test_clusters_are_the_connected_components(tmp_path):
    docs = corpus(n_base=25)
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, docs)
    run = crawldedup_cli("near-dups", path, "--format", "clusters")
    assert run.returncode == 0, run.stderr
    clusters = [json.loads(line) for line in run.stdout.decode().splitlines()]
    position = {ident: i for i, (ident, _) in enumerate(docs)}
    # Components of the brute-force pairs.
    parent = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x
    for a, b, _ in brute_force_pairs(docs, 3):
        parent[find(b)] = find(a)
    groups = {}
    for x in parent:
        groups.setdefault(find(x), set()).add(x)
    assert (sorted(sorted(c["members"]) for c in clusters)
            == sorted(sorted(g) for g in groups.values()))
    for c in clusters:
        assert c["size"] == len(c["members"]) >= 2
        assert c["members"] == sorted(c["members"], key=position.__getitem__)
        assert c["representative"] == c["members"][0]
    reps = [position[c["representative"]] for c in clusters]
    assert reps == sorted(reps)


def test_plain_lines_use_line_numbers(tmp_path):
    text = "one two three four five six seven eight nine ten eleven twelve thirteen"
    path = tmp_path / "docs.txt"
    path.write_text(f"{text}\n\nsomething else entirely, about markets and prices\n{text}\n")
    run = crawldedup_cli("near-dups", path, "--lines")
    assert run.returncode == 0, run.stderr
    assert [json.loads(line) for line in run.stdout.decode().splitlines()] == \
        [{"a": 1, "b": 4, "distance": 0}]


def test_a_bad_line_stops_with_its_number_after_the_lines_before_it(tmp_path):
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu"
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"id": 1, "text": text}) + "\n"
                    + json.dumps({"id": 2, "text": text}) + "\n"
                    + '{"id": 3, "text": \n'
                    + json.dumps({"id": 4, "text": text}) + "\n")
    run = crawldedup_cli("near-dups", path)
    assert run.returncode == 1
    assert f"{path}:3: not a JSON document".encode() in run.stderr
    assert [json.loads(line) for line in run.stdout.decode().splitlines()] == \
        [{"a": 1, "b": 2, "distance": 0}]


@pytest.mark.parametrize("line, words", [
    ('{"id": 3}', "no 'text' field"),
    ('{"id": 3, "text": 5}', "field 'text' is a JSON number, not a string"),
    ('{"text": "x"}', "no 'id' field"),
    ('{"id": [1], "text": "x"}', "ids must be strings or integers"),
    ('{"id": 1, "text": "again"}', "id 1 was already given"),
    ('[1, 2]', "a JSON list, not an object"),
    ('{"id": 3, "text": "x", "deep": ' + "[" * 100_000 + "]" * 100_000 + "}",
     "not a JSON document (nested too deeply to read)"),
])
def test_skip_bad_reports_and_goes_on(tmp_path, line, words):
    path = tmp_path / "docs.jsonl"
    path.write_bytes((json.dumps({"id": 1, "text": "a b c d e f g h"}) + "\n" + line + "\n"
                      + json.dumps({"id": 2, "text": "a b c d e f g h"}) + "\n").encode()
                     + b'{"id": 9, "text": "\xff"}\n')
    strict = crawldedup_cli("near-dups", path)
    assert strict.returncode == 1 and b":2: " in strict.stderr
    assert words.encode() in strict.stderr
    run = crawldedup_cli("near-dups", path, "--skip-bad")
    assert run.returncode == 0, run.stderr
    assert f"skipped {path}:2: ".encode() in run.stderr and words.encode() in run.stderr
    assert f"skipped {path}:4: not UTF-8".encode() in run.stderr
    assert b"2 bad lines skipped" in run.stderr
    assert [json.loads(x) for x in run.stdout.decode().splitlines()] == \
        [{"a": 1, "b": 2, "distance": 0}]


def test_an_index_carries_documents_to_the_next_run(tmp_path):
    docs = corpus(n_base=20, copies=1)
    first, second = docs[:len(docs) // 2], docs[len(docs) // 2:]
    index = tmp_path / "docs.idx"
    write_jsonl(tmp_path / "a.jsonl", first)
    write_jsonl(tmp_path / "b.jsonl", second)
    run1 = crawldedup_cli("near-dups", tmp_path / "a.jsonl", "--index", index)
    assert run1.returncode == 0, run1.stderr
    run2 = crawldedup_cli("near-dups", tmp_path / "b.jsonl", "--index", index)
    assert run2.returncode == 0, run2.stderr
    expected = brute_force_pairs(docs, 3)
    got = [json.loads(x) for x in run1.stdout.decode().splitlines()
           + run2.stdout.decode().splitlines()]
    assert sorted((p["a"], p["b"], p["distance"]) for p in got) == sorted(expected)
    stored = crawldedup.SimhashIndex.load(index)
    assert len(stored) == len(docs) and stored.k == 3
    # The index remembers the ids: giving one again is a bad line.
    again = crawldedup_cli("near-dups", tmp_path / "a.jsonl", "--index", index)
    assert again.returncode == 1 and b"was already given (in the index)" in again.stderr
    other_k = crawldedup_cli("near-dups", tmp_path / "a.jsonl", "--index", index, "--k", 5)
    assert other_k.returncode == 1 and b"built for k=3" in other_k.stderr


@pytest.mark.parametrize("args, words", [(["--k", "9"], b"must be in [0, 8]"),
                                         (["--k", "x"], b"not an integer"),
                                         (["--format", "tree"], b"invalid choice")])
def test_usage_errors(tmp_path, args, words):
    run = crawldedup_cli("near-dups", *args, stdin=b"")
    assert run.returncode == 2 and words in run.stderr


@platform_lacks(sys.platform == "win32", "pty")
def test_progress_bar_on_a_terminal_only(tmp_path):
    assert __import__("tqdm")  # in the test extra; the bar needs it
    import pty
    docs = corpus(n_base=5)
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, docs)
    quiet = crawldedup_cli("near-dups", path)
    assert b"near-dups:" not in quiet.stderr
    # stderr on a terminal: a tqdm bar.
    import fcntl
    import struct
    import termios
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "crawldedup", "near-dups", str(path)],
                            stdout=subprocess.PIPE, stderr=follower, stdin=subprocess.DEVNULL)
    os.close(follower)
    out, _ = proc.communicate(timeout=120)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert proc.returncode == 0
    assert b"near-dups:" in shown and b"docs" in shown
    assert len(out.splitlines()) == len(brute_force_pairs(docs, 3))


def test_info_describes_an_index(tmp_path):
    index = crawldedup.SimhashIndex(k=4)
    index.add_many(np.arange(7, dtype=np.uint64), np.arange(7, dtype=np.uint64) * 3)
    index.save(tmp_path / "docs.idx")
    run = crawldedup_cli("info", tmp_path / "docs.idx")
    assert run.returncode == 0, run.stderr
    assert b"kind: SimHash index" in run.stdout and b"k=4, entries=7" in run.stdout


# ------------------------------------------- documents without features (issue 11, 16)

FEATURELESS = ["", "   ", "!!!", "... --- ...", "\u3002\uff01", "\t()[]{}", "\u2014 \u2014"]


def featureless_docs(n):
    return [(f"blank{i}", FEATURELESS[i % len(FEATURELESS)]) for i in range(n)]


def mixed_corpus(n_blank=300):
    docs = corpus(n_base=15) + featureless_docs(n_blank)
    random.Random(5).shuffle(docs)
    return docs


def test_featureless_documents_are_left_out_and_counted(tmp_path):
    docs = mixed_corpus()
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, docs)
    index = tmp_path / "docs.idx"
    run = crawldedup_cli("near-dups", path, "--index", index)
    assert run.returncode == 0, run.stderr
    got = [json.loads(line) for line in run.stdout.decode().splitlines()]
    with_features = [d for d in docs if not d[0].startswith("blank")]
    assert sorted((p["a"], p["b"], p["distance"]) for p in got) == \
        sorted(brute_force_pairs(with_features, 3))
    assert b"300 documents without features" in run.stderr
    assert f"{len(docs)} documents,".encode() in run.stderr
    assert len(crawldedup.SimhashIndex.load(index)) == len(with_features)


def test_include_featureless_pairs_them_as_before(tmp_path):
    docs = mixed_corpus(n_blank=40)
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, docs)
    run = crawldedup_cli("near-dups", path, "--include-featureless")
    assert run.returncode == 0, run.stderr
    got = [json.loads(line) for line in run.stdout.decode().splitlines()]
    expected = brute_force_pairs(docs, 3)
    assert sorted((p["a"], p["b"], p["distance"]) for p in got) == sorted(expected)
    assert sum(1 for a, b, _ in expected if a.startswith("blank") and b.startswith("blank")) \
        == 40 * 39 // 2
    assert b"without features" not in run.stderr


def components(docs, k):
    parent = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x
    for a, b, _ in brute_force_pairs(docs, k):
        parent[find(b)] = find(a)
    groups = {}
    for x in parent:
        groups.setdefault(find(x), set()).add(x)
    return sorted(sorted(g) for g in groups.values())


def test_clusters_of_identical_documents_without_n_squared_pairs(tmp_path, monkeypatch):
    """A group of n identical documents is joined in about n steps, and the
    clusters are still exactly the connected components."""
    import io

    from crawldedup import cli
    from crawldedup.cli import near_dups as _near_dups
    from crawldedup.near import stream
    base = corpus(n_base=12)
    same = [(f"same{i}", base[0][1]) for i in range(600)]  # near copies of base[0] too
    docs = base + same + featureless_docs(50)
    random.Random(9).shuffle(docs)
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, docs)
    unions = []
    real_union = stream._Clusters.union

    def counting_union(self, a, b):
        unions.append((a, b))
        return real_union(self, a, b)
    monkeypatch.setattr(stream._Clusters, "union", counting_union)
    for flags, expected_docs in ((["--include-featureless"], docs),
                                 ([], [d for d in docs if not d[0].startswith("blank")])):
        unions.clear()
        args = cli.build_parser().parse_args(["near-dups", str(path), "--format", "clusters",
                                              *flags])
        out, err = io.StringIO(), io.StringIO()
        assert _near_dups.run(args, out, err, None) == 0
        clusters = [json.loads(line) for line in out.getvalue().splitlines()]
        assert sorted(sorted(c["members"]) for c in clusters) == components(expected_docs, 3)
        # 650 identical documents would be 210,925 pairs; each joins once.
        assert len(unions) < len(docs) + 200
        position = {ident: i for i, (ident, _) in enumerate(docs)}
        for c in clusters:
            assert c["members"] == sorted(c["members"], key=position.__getitem__)
            assert c["representative"] == c["members"][0] and c["size"] == len(c["members"])


def test_clusters_with_an_index_of_earlier_runs(tmp_path):
    docs = corpus(n_base=20, copies=2)
    same = [(f"same{i}", docs[0][1]) for i in range(30)]
    first, second = docs[:30] + same[:10], docs[30:] + same[10:]
    write_jsonl(tmp_path / "a.jsonl", first)
    write_jsonl(tmp_path / "b.jsonl", second)
    index = tmp_path / "docs.idx"
    assert crawldedup_cli("near-dups", tmp_path / "a.jsonl", "--index", index).returncode == 0
    run = crawldedup_cli("near-dups", tmp_path / "b.jsonl", "--index", index,
                         "--format", "clusters")
    assert run.returncode == 0, run.stderr
    clusters = [json.loads(line) for line in run.stdout.decode().splitlines()]
    # The components of the pairs with at least one document of this run.
    later = {ident for ident, _ in second}
    parent = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x
    for a, b, _ in brute_force_pairs(first + second, 3):
        if a in later or b in later:
            parent[find(b)] = find(a)
    groups = {}
    for x in parent:
        groups.setdefault(find(x), set()).add(x)
    assert sorted(sorted(c["members"]) for c in clusters) == \
        sorted(sorted(g) for g in groups.values())
    assert any(len(c["members"]) >= 30 for c in clusters)
    assert len(crawldedup.SimhashIndex.load(index)) == len(first) + len(second)


def _documents_line_by_line(name, source, args, first_number):
    """The reading of near-dups' input as it was before blocks: one line of
    the binary file at a time, json.loads on each (the specification of
    _documents)."""
    from crawldedup.cli.near_dups import _json, _json_type
    for number, raw in enumerate(source, 1):
        where = f"{name}:{number}"
        line = raw.rstrip(b"\r\n")
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield where, f"{where}: not UTF-8 ({exc.reason} at byte {exc.start})"
            continue
        if args.lines:
            yield where, first_number + number, text
            continue
        try:
            doc = json.loads(text)
        except ValueError as exc:
            yield where, f"{where}: not a JSON document ({exc})"
            continue
        if not isinstance(doc, dict):
            yield where, f"{where}: a JSON {type(doc).__name__}, not an object"
            continue
        if "text" not in doc:
            yield where, f"{where}: no 'text' field"
            continue
        text = doc["text"]
        if not isinstance(text, str):
            yield where, f"{where}: field 'text' is a JSON {_json_type(text)}, not a string"
            continue
        if "id" not in doc:
            yield where, f"{where}: no 'id' field (or give --id-field)"
            continue
        ident = doc["id"]
        if isinstance(ident, bool) or not isinstance(ident, (str, int)):
            yield where, (f"{where}: id {_json(ident)} is a JSON {_json_type(ident)}; "
                          f"ids must be strings or integers")
            continue
        yield where, ident, text


_LINE_PIECES = [
    b'{"id": 1, "text": "a b"}', b'{"id": "x", "text": "\\u00e9t\\u00e9 \xe5\xa4\x8f"}',
    b' {"id": 2, "text": "lead"}', b'{"id": 3, "text": "trail"} ', b"\t", b"  ", b"\x0b\x0c",
    b"\xe3\x80\x80", b"\r", b"\xff\xfe", b"[1, 2]", b'{"id": 1.5, "text": "f"}',
    b'{"text": "no id"}', b'{"id": 4}', b'{"id": 5, "text": 7}', b"\xef\xbb\xbf{}", b"NaN",
    b'{"id": 6, "text": "x"}{"id": 7}', b'{"id": 8, "text": "un', b"", "一二三 四".encode(),
    b'{"id": true, "text": "b"}', b'"\\ud800"']


@pytest.mark.parametrize("lines", [False, True])
def test_reading_by_blocks_equals_reading_line_by_line(lines, monkeypatch):
    """near-dups reads its input in blocks, each read by the core's JSON-lines
    reader (--lines: decoded at once): the same documents, ids, line numbers
    and errors as reading, decoding and json.loads-ing a line at a time,
    whatever the block size, with CRLF, blank lines, lines cut by a block,
    bytes that are not UTF-8 and a last line without its newline."""
    import argparse
    import io

    from hypothesis import given
    from hypothesis import strategies as st

    from crawldedup.cli import near_dups as _near_dups

    args = argparse.Namespace(lines=lines, text_field="text", id_field="id")
    line = st.lists(st.sampled_from(_LINE_PIECES), max_size=3).map(b"".join)
    ending = st.sampled_from([b"\n", b"\r\n", b"\r\r\n"])

    def normal(items):
        flat = []
        for item in items:   # a block's documents come as one chunk
            flat.extend(item.one_by_one() if isinstance(item, _near_dups._Chunk) else [item])
        return [(w, str(x)) if isinstance(x, _near_dups.BadLine) else (w, x, t)
                for w, x, t in flat]

    @given(st.lists(st.tuples(line, ending), max_size=12), st.booleans(),
           st.integers(1, 40), st.integers(0, 5))
    def check(rows, cut_last, size, first):
        data = b"".join(a + b for a, b in rows)
        if cut_last and rows:
            data = data[:len(data) - len(rows[-1][1])]
        monkeypatch.setattr(_near_dups, "READ_SIZE", size)
        got = normal(_near_dups._documents("in", io.BytesIO(data), args, first))
        want = [x if len(x) == 3 else (x[0], x[1])
                for x in _documents_line_by_line("in", io.BytesIO(data), args, first)]
        assert got == want

    check()


# ------------------------------------------- messages that tell the truth (issue 30, item 7)

def popcount_pairs(docs, k):
    """brute_force_pairs, vectorized (for a few thousand documents)."""
    fps = crawldedup.simhash_many([text for _, text in docs])
    ids = [i for i, _ in docs]
    table = np.array([bin(b).count("1") for b in range(256)], dtype=np.int64)
    pairs = set()
    for later in range(1, len(docs)):
        x = np.bitwise_xor(fps[:later], fps[later])
        dist = table[x.view(np.uint8).reshape(-1, 8)].sum(axis=1)
        for earlier in np.nonzero(dist <= k)[0].tolist():
            pairs.add((ids[earlier], ids[later], int(dist[earlier])))
    return pairs


def feed_then_interrupt(args, docs, out_path, wait_for_output=True):
    """Run near-dups on docs given on a pipe that stays open, wait until it
    has written (or for a while), press Ctrl-C (SIGINT); (status, stderr)."""
    import signal
    import time
    data = "".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in docs).encode()
    with open(out_path, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "crawldedup", "near-dups", *map(str, args)],
                                stdin=subprocess.PIPE, stdout=out, stderr=subprocess.PIPE)
        try:
            proc.stdin.write(data)
            proc.stdin.flush()
            deadline = time.monotonic() + 60
            while wait_for_output and os.path.getsize(out_path) == 0:
                assert time.monotonic() < deadline, "no output within 60 s"
                time.sleep(0.05)
            time.sleep(1.0)   # it is waiting for more input now
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return proc.returncode, err.decode()


@platform_lacks(sys.platform == "win32", "SIGINT to a child process")
def test_ctrl_c_says_what_was_written(tmp_path):
    # On f99a5f4 this said "interrupted before any work was done" after
    # thousands of pairs were written.
    docs = corpus(n_base=3000, copies=2, seed=5)   # 9,000 documents
    out_path = tmp_path / "pairs.jsonl"
    index = tmp_path / "docs.idx"
    status, err = feed_then_interrupt(["--index", index], docs, out_path)
    assert status == 130, err
    assert "before any work" not in err and "Traceback" not in err, err
    import re
    m = re.fullmatch(r"crawldedup: interrupted after reading 9,000 documents: ([\d,]+) "
                     r"near-duplicate pairs? written, every pair among the first ([\d,]+); the "
                     r"pairs of the later ones are missing; the index \S+ was not written\n", err)
    assert m, err
    written, first = (int(g.replace(",", "")) for g in m.groups())
    lines = out_path.read_text().splitlines()
    assert len(lines) == written > 0   # the count is the pairs in the output
    got = {(p["a"], p["b"], p["distance"]) for p in map(json.loads, lines)}
    assert 0 < first < 9000 and first % 4096 == 0   # whole batches were compared
    assert popcount_pairs(docs[:first], 3) <= got   # every pair among them
    assert not index.exists()


@platform_lacks(sys.platform == "win32", "SIGINT to a child process")
def test_ctrl_c_with_clusters_and_an_earlier_index(tmp_path):
    docs = corpus(n_base=2000, copies=1, seed=6)
    index = tmp_path / "docs.idx"
    write_jsonl(tmp_path / "first.jsonl", docs[:100])
    assert crawldedup_cli("near-dups", tmp_path / "first.jsonl", "--index", index).returncode == 0
    before = index.read_bytes()
    out_path = tmp_path / "clusters.jsonl"
    status, err = feed_then_interrupt(["--format", "clusters", "--index", index], docs[100:],
                                      out_path, wait_for_output=False)
    assert status == 130, err
    assert err == (f"crawldedup: interrupted after reading {len(docs) - 100:,} documents: no "
                   f"clusters written (they are written once every document is read); the "
                   f"index {index} was not saved (it is as it was before this run)\n")
    assert out_path.read_bytes() == b"" and index.read_bytes() == before


def test_a_closed_output_ends_quietly(tmp_path):
    # `near-dups | head -1`: the reader leaves after one line; f99a5f4 ended
    # with "crawldedup: error: [Errno 32] Broken pipe".
    docs = corpus(n_base=3000, copies=2, seed=7)
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, docs)
    for fmt in ("pairs", "clusters"):
        proc = subprocess.Popen([sys.executable, "-m", "crawldedup", "near-dups", str(path),
                                 "--format", fmt], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        first = proc.stdout.readline()
        proc.stdout.close()          # the pipe's reader is gone
        err = proc.stderr.read()
        proc.stderr.close()
        assert proc.wait(timeout=120) == 141   # as a filter stopped by SIGPIPE
        assert json.loads(first) and err == b"", err


def without_root_powers():
    """The command prefix that runs a process without root's power to write
    anywhere (CAP_DAC_OVERRIDE), so that a read-only folder is one; none
    when not root."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return []
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps", "-all"]


@platform_lacks(sys.platform == "win32" or (hasattr(os, "geteuid") and os.geteuid() == 0
                                            and shutil.which("setpriv") is None),
                "POSIX permissions (as root: setpriv, util-linux)")
def test_an_index_in_a_read_only_folder_is_refused_before_any_output(tmp_path):
    # f99a5f4 printed every pair, then failed naming its temporary file.
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, corpus(n_base=30))
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    index = folder / "docs.idx"
    try:
        run = subprocess.run([*without_root_powers(), sys.executable, "-m", "crawldedup",
                              "near-dups", str(path), "--index", str(index)],
                             capture_output=True, timeout=120)
        assert run.returncode == 1, run.stderr
        assert run.stdout == b""        # nothing printed before the refusal
        assert run.stderr.decode() == (
            f"crawldedup: error: cannot save the index {str(index)!r}: its folder {folder} "
            f"does not take new files (Permission denied); give another --index path\n")
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o755)


def _interrupt_while_writing(out_path, args, size, timeout, said):
    """near-dups ARGS into out_path, sent SIGINT once the output holds size
    bytes: it exits 130, its output ends with a whole line, and the count
    its message gives (said's group 1) is the number of lines written."""
    import re
    import signal
    import time
    with open(out_path, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "crawldedup", "near-dups", *args],
                                stdout=out, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + timeout
            while os.path.getsize(out_path) < size:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.01)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130, err
    m = re.search(said, err)
    assert m, err
    lines = out_path.read_bytes().split(b"\n")
    assert lines[-1] == b""  # whole lines only
    assert int(m.group(1).replace(b",", b"")) == len(lines) - 1, err


@platform_lacks(sys.platform == "win32", "SIGINT to a child process")
def test_ctrl_c_while_pairs_are_written_counts_every_pair_in_the_output(tmp_path):
    """Ctrl-C landing while pairs pour out: the count said is the number of
    pairs in the output, also when the interrupt comes as a write returns,
    before the count is taken."""
    rnd = np.random.default_rng(11)
    words = [f"w{i}" for i in range(3000)]
    bases = [" ".join(rnd.choice(words, 60)) for _ in range(2000)]
    path = tmp_path / "docs.txt"
    path.write_text("".join(f"{bases[i % 2000]}\n" for i in range(60000)))  # 30 copies each
    for trial in range(3):
        _interrupt_while_writing(tmp_path / f"pairs{trial}.jsonl", ["--lines", str(path)],
                                 (trial + 1) << 20, 120,
                                 rb"([\d,]+) near-duplicate pairs? written")


@platform_lacks(sys.platform == "win32", "SIGINT to a child process")
def test_ctrl_c_while_clusters_are_written_counts_every_cluster_in_the_output(tmp_path):
    rnd = np.random.default_rng(12)
    words = [f"w{i}" for i in range(5000)]
    path = tmp_path / "docs.txt"
    texts = [" ".join(rnd.choice(words, 40)) + "\n" for _ in range(40000)]
    path.write_text("".join(text * 2 for text in texts))  # 40,000 clusters of 2
    for trial in range(2):
        _interrupt_while_writing(tmp_path / f"clusters{trial}.jsonl",
                                 ["--lines", "--format", "clusters", str(path)],
                                 (trial + 1) << 20, 300, rb"writing the clusters: ([\d,]+) of")
