"""pytest-benchmark suite for crawldedup.SimhashIndex (and faiss, if installed).

    pip install pytest-benchmark faiss-cpu
    pytest benchmarks/test_bench_index.py --benchmark-only --benchmark-group-by=group

The workload of compare_index.py at n = 200,000: random 64-bit fingerprints,
10,000 queries (half of them stored fingerprints with 1-3 bits flipped), k = 3.
compare_index.py is the side-by-side run with every peer and a report.
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pytest_benchmark", reason="pip install pytest-benchmark")

import crawldedup  # noqa: E402

N, Q, K = 200_000, 10_000, 3


def _load_compare():
    name = "_crawldedup_bench_compare_index"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, Path(__file__).with_name("compare_index.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


compare = _load_compare()
FPS = compare.fingerprints(N)
QUERIES = compare.queries(Q, N)
IDS = np.arange(N, dtype=np.uint64)


def _index():
    ix = crawldedup.SimhashIndex(K)
    ix.add_many(IDS, FPS)
    return ix


@pytest.mark.benchmark(group="index build")
def test_build_crawldedup(benchmark):
    ix = benchmark(_index)
    assert len(ix) == N


@pytest.mark.benchmark(group="index query batch")
def test_query_many_crawldedup(benchmark):
    ix = _index()
    offsets, ids, _ = benchmark(ix.query_many, QUERIES)
    assert len(offsets) == Q + 1 and offsets[-1] >= Q // 2   # every perturbed stored fp found


@pytest.mark.benchmark(group="index pairs")
def test_pairs_crawldedup(benchmark):
    ix = _index()
    benchmark(lambda: sum(1 for _ in ix.pairs()))


def _faiss_index():
    faiss = pytest.importorskip("faiss")
    faiss.omp_set_num_threads(1)
    ix = faiss.IndexBinaryMultiHash(64, 4, 16)
    ix.nflip = 0
    ix.add(FPS.view("uint8").reshape(-1, 8))
    return ix


@pytest.mark.benchmark(group="index build")
def test_build_faiss_multihash(benchmark):
    pytest.importorskip("faiss")
    ix = benchmark(_faiss_index)
    assert ix.ntotal == N


@pytest.mark.benchmark(group="index query batch")
def test_query_batch_faiss_multihash(benchmark):
    ix = _faiss_index()
    lims, _, _ = benchmark(ix.range_search, QUERIES.view("uint8").reshape(-1, 8), K + 1)
    assert len(lims) == Q + 1
