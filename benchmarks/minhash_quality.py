#!/usr/bin/env python3
"""Precision and recall of near-duplicate methods against the exact Jaccard
similarity of the documents' shingle sets.

A planted corpus (deterministic for a seed; benchmarks/simhash_corpus.py's
generator), in English and Chinese, per language:

* ``--base`` documents of about 1,000 characters;
* each with edited copies: 1%, 3%, 10%, 20% and 30% of its words
  (English) or characters (Chinese) replaced, inserted or deleted, and a
  copy with a block of sentences moved elsewhere (paragraph move);
* same-template pages: ``--templates`` templates of boilerplate (a header
  and a footer of about 40% of the page), each filled with two pages of
  different content: hard negatives whose similarity comes from the
  boilerplate.

The truth: the exact Jaccard similarity of two documents' sets of 5-shingles
(crawldedup's tokenizer: 5 words, or 5 characters of Chinese).  A pair is a
near duplicate at threshold t when it reaches t.  Every pair a method reports
and every planted pair is scored; documents made independently share almost
no shingles (their pairs are counted as below every threshold).

Methods, at thresholds 0.5, 0.7, 0.8 and 0.9:

* crawldedup ``MinHashIndex(t)`` (num_perm 128) with its LSH candidates
  kept when their estimated Jaccard reaches t (``min_jaccard``, the
  default of ``crawldedup near-dups --method minhash``), and all its
  candidates;
* datasketch ``MinHashLSH(t)`` over datasketch MinHash of the same
  shingles (its candidates, as its users take them);
* SimHash (crawldedup's default tokenizer) pairs within Hamming distance 3
  and 6, whatever the threshold.

    python benchmarks/minhash_quality.py              # --base 300: about a minute
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Dict, List, Set, Tuple

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

THRESHOLDS = (0.5, 0.7, 0.8, 0.9)
EDITS = (0.01, 0.03, 0.10, 0.20, 0.30)
Pair = Tuple[int, int]


def move_block(gen, doc: str, lang: str) -> str:
    """doc with a run of about a fifth of its sentences moved elsewhere."""
    stop = "." if lang == "en" else "。"
    parts = [p for p in doc.split(stop) if p]
    if len(parts) < 4:
        return doc
    k = max(1, len(parts) // 5)
    i = gen.rng.randrange(0, len(parts) - k)
    block, rest = parts[i:i + k], parts[:i] + parts[i + k:]
    j = gen.rng.randrange(0, len(rest) + 1)
    return stop.join(rest[:j] + block + rest[j:]) + stop


def corpus(base: int, templates: int, seed: int):
    from simhash_corpus import Generator
    gen = Generator(seed)
    docs: List[str] = []
    planted: List[Tuple[str, Pair]] = []
    for lang in ("en", "zh"):
        for _ in range(base):
            b = len(docs)
            docs.append(gen.document(lang))
            for rate in EDITS:
                docs.append(gen.edit(docs[b], lang, rate))
                planted.append((f"{lang} edit {rate:.0%}", (b, len(docs) - 1)))
            docs.append(move_block(gen, docs[b], lang))
            planted.append((f"{lang} paragraph move", (b, len(docs) - 1)))
        for _ in range(templates):
            head = gen.document(lang)[:200]
            foot = gen.document(lang)[:200]
            first = len(docs)
            for _ in range(2):
                docs.append(head + " " + gen.document(lang)[:600] + " " + foot)
            planted.append((f"{lang} same template", (first, first + 1)))
    return docs, planted


def shingle_sets(docs: List[str]) -> List[Set[str]]:
    from crawldedup._reference.simhash import text_features
    out = []
    for d in docs:
        words, chars = text_features(d, 0, 5, 5)
        out.append(set(words) | set(chars))
    return out


def jaccard(a: Set[str], b: Set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def simhash_pairs(docs: List[str], k: int) -> Set[Pair]:
    from crawldedup import SimhashIndex, simhash_many
    index = SimhashIndex(k)
    index.add_many(range(len(docs)), simhash_many(docs))
    return {(a, b) if a < b else (b, a) for a, b, _ in index.pairs()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=int, default=300, help="documents per language")
    ap.add_argument("--templates", type=int, default=150, help="templates per language")
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args()

    import datasketch

    from crawldedup import MinHashIndex, minhash_many

    docs, planted = corpus(args.base, args.templates, args.seed)
    sets = shingle_sets(docs)
    truth_cache: Dict[Pair, float] = {}

    def truth(p: Pair) -> float:
        if p not in truth_cache:
            truth_cache[p] = jaccard(sets[p[0]], sets[p[1]])
        return truth_cache[p]

    sigs = minhash_many(docs, 128, shingle=5)
    ds_mh = []
    for s in sets:
        m = datasketch.MinHash(num_perm=128)
        m.update_batch([x.encode("utf-8") for x in s])
        ds_mh.append(m)
    reported: Dict[Tuple[str, float], Set[Pair]] = {}
    for t in THRESHOLDS:
        index = MinHashIndex(t, 128)
        index.add_many(range(len(docs)), sigs)
        reported[("crawldedup MinHash LSH, verified", t)] = {
            (a, b) for a, b, _ in index.pairs(min_jaccard=t)}
        reported[("crawldedup MinHash LSH, candidates", t)] = {
            (a, b) for a, b, _ in index.pairs(min_jaccard=0.0)}
        lsh = datasketch.MinHashLSH(threshold=t, num_perm=128)
        for i, m in enumerate(ds_mh):
            lsh.insert(i, m)
        found = set()
        for i, m in enumerate(ds_mh):
            for j in lsh.query(m):
                if j != i:
                    found.add((min(i, j), max(i, j)))
        reported[("datasketch MinHashLSH, candidates", t)] = found
    for k in (3, 6):
        pairs = simhash_pairs(docs, k)
        for t in THRESHOLDS:
            reported[(f"SimHash k={k}", t)] = pairs

    planted_pairs = {p for _, p in planted}
    table: Dict[str, Dict[str, Dict[str, float]]] = {}
    for (method, t), pairs in reported.items():
        scored = pairs | planted_pairs
        near = {p for p in scored if truth(p) >= t}
        hits = len(pairs & near)
        table.setdefault(method, {})[f"{t:.1f}"] = {
            "precision": hits / len(pairs) if pairs else 1.0,
            "recall": hits / len(near) if near else 1.0,
            "reported": len(pairs), "near duplicates": len(near)}
    # the exact similarity of each kind of planted pair, for reading the table
    kinds: Dict[str, List[float]] = {}
    for kind, p in planted:
        kinds.setdefault(kind, []).append(truth(p))
    summary = {kind: {"mean Jaccard": float(np.mean(v)), "min": float(np.min(v)),
                      "max": float(np.max(v))} for kind, v in kinds.items()}
    report = {"documents": len(docs), "base per language": args.base,
              "templates per language": args.templates, "planted pairs": summary,
              "precision and recall": table}
    print(json.dumps(report, indent=2))
    print("\n| method | " + " | ".join(f"t = {t}" for t in THRESHOLDS) + " |")
    print("|---|" + "---:|" * len(THRESHOLDS))
    for method, by_t in table.items():
        cells = [f"{by_t[f'{t:.1f}']['precision']:.3f} / {by_t[f'{t:.1f}']['recall']:.3f}"
                 for t in THRESHOLDS]
        print(f"| {method} | " + " | ".join(cells) + " |")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "minhash_quality.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
