"""``crawldedup near-dups --method minhash`` end to end: real processes, real
files, results checked against a brute-force scan of the same signatures
(a pair shares an LSH band and reaches the estimated Jaccard floor)."""

import json

import numpy as np

from crawldedup.near.lsh import optimal_bands
from crawldedup.near.minhash import minhash_many
from test_cli_near_dups import corpus, crawldedup_cli, write_jsonl


def brute_force_pairs(docs, threshold=0.8, min_jaccard=None, num_perm=128, shingle=5):
    sigs = minhash_many([text for _, text in docs], num_perm, shingle=shingle)
    b, r = optimal_bands(threshold, num_perm)
    floor = threshold if min_jaccard is None else min_jaccard
    ids = [i for i, _ in docs]
    pairs = []
    for later in range(len(docs)):
        for earlier in range(later):
            x, y = sigs[earlier], sigs[later]
            if not any((x[j * r:(j + 1) * r] == y[j * r:(j + 1) * r]).all() for j in range(b)):
                continue
            jaccard = float((x == y).mean())
            if jaccard >= floor:
                pairs.append((ids[earlier], ids[later], jaccard))
    return pairs


def pairs_of(stdout):
    return [(p["a"], p["b"], p["jaccard"]) for p in map(json.loads, stdout.splitlines())]


def test_pairs_equal_brute_force(tmp_path):
    docs = corpus(n_base=30, copies=2)
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, docs)
    got = crawldedup_cli("near-dups", "--method", "minhash", path)
    assert got.returncode == 0, got.stderr
    pairs = pairs_of(got.stdout.decode())
    want = brute_force_pairs(docs)
    assert sorted(pairs) == sorted(want)
    assert len(want) >= 30        # the planted copies are found
    assert b"with an estimated Jaccard similarity of at least 0.8" in got.stderr
    # every LSH candidate, and other settings
    got = crawldedup_cli("near-dups", "--method", "minhash", "--min-jaccard", "0",
                         "--threshold", "0.5", "--num-perm", "64", "--shingle", "3", path)
    assert got.returncode == 0, got.stderr
    assert sorted(pairs_of(got.stdout.decode())) == sorted(brute_force_pairs(
        docs, threshold=0.5, min_jaccard=0.0, num_perm=64, shingle=3))


def test_clusters_join_the_pairs(tmp_path):
    docs = corpus(n_base=20, copies=3)
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, docs + [("twin", docs[0][1]), ("empty", "")])
    got = crawldedup_cli("near-dups", "--method", "minhash", "--format", "clusters", path)
    assert got.returncode == 0, got.stderr
    clusters = [json.loads(line) for line in got.stdout.decode().splitlines()]
    members = {m: c["representative"] for c in clusters for m in c["members"]}
    # the clusters are the connected components of the brute-force pairs
    parent = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x
    for a, b, _ in brute_force_pairs(docs + [("twin", docs[0][1])]):
        parent[find(b)] = find(a)
    groups = {}
    for x in list(parent):
        groups.setdefault(find(x), set()).add(x)
    assert sorted(map(sorted, groups.values())) == \
        sorted(sorted(c["members"]) for c in clusters)
    assert members["twin"] == members[docs[0][0]]
    assert "empty" not in members
    assert b"1 document without features" in got.stderr


def test_index_continues_and_checks_its_settings(tmp_path):
    docs = corpus(n_base=20, copies=2)
    first, second = docs[:len(docs) // 2], docs[len(docs) // 2:]
    index = tmp_path / "pages.mhx"
    for part in (first, second):
        path = tmp_path / "part.jsonl"
        write_jsonl(path, part)
        got = crawldedup_cli("near-dups", "--method", "minhash", "--index", index, path)
        assert got.returncode == 0, got.stderr
    # the second run's pairs include those with documents of the first run
    later = pairs_of(got.stdout.decode())
    want = [p for p in brute_force_pairs(docs) if p[1] in {i for i, _ in second}]
    assert sorted(later) == sorted(want)
    assert f"index {index} holds {len(docs)}".encode() in got.stderr
    for flag, value, kept in (("--shingle", "3", "5"), ("--threshold", "0.5", "0.8"),
                              ("--num-perm", "64", "128")):
        got = crawldedup_cli("near-dups", "--method", "minhash", "--index", index, flag,
                             value, path)
        assert got.returncode != 0
        assert f"built with {flag} {kept}".encode() in got.stderr, got.stderr
        assert b"Traceback" not in got.stderr
    got = crawldedup_cli("near-dups", "--index", index, path)
    assert got.returncode != 0 and b"give --method minhash" in got.stderr


def test_flags_of_the_other_method_are_refused(tmp_path):
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, [("a", "some words here")])
    got = crawldedup_cli("near-dups", "--method", "minhash", "--k", "3", path)
    assert got.returncode != 0 and b"--k is for --method simhash" in got.stderr
    got = crawldedup_cli("near-dups", "--threshold", "0.8", path)
    assert got.returncode != 0 and b"--threshold is for --method minhash" in got.stderr
    for flag, value in (("--threshold", "1.5"), ("--num-perm", "1"), ("--shingle", "0"),
                        ("--min-jaccard", "x")):
        got = crawldedup_cli("near-dups", "--method", "minhash", flag, value, path)
        assert got.returncode == 2 and b"Traceback" not in got.stderr


def test_chinese_pages(tmp_path):
    rng = np.random.default_rng(5)
    chars = [chr(0x4E00 + int(i)) for i in rng.integers(0, 2000, 3000)]
    base = "".join(chars[:600])
    edited = base[:300] + "新" + base[301:]
    other = "".join(chars[600:1200])
    path = tmp_path / "zh.jsonl"
    write_jsonl(path, [("a", base), ("b", edited), ("c", other)])
    got = crawldedup_cli("near-dups", "--method", "minhash", path)
    assert got.returncode == 0, got.stderr
    assert [(a, b) for a, b, _ in pairs_of(got.stdout.decode())] == [("a", "b")]
