"""pytest-benchmark suite for crawldedup's BloomFilter and hashing.

    pip install pytest-benchmark rbloom mmh3      # peers are optional
    pytest benchmarks/ --benchmark-only
    pytest benchmarks/ --benchmark-only --benchmark-group-by=group -k "add or contains"

Each timed round of a loop over 100,000 URL strings gets fresh copies of the
strings (made in the untimed setup), so no peer profits from the hash() or
UTF-8 form that Python caches inside a str.  Times are per round (100,000
keys); ``extra_info["ns_per_key"]`` has the median per key.  Peers that are not
installed are skipped.  compare.py in this folder is the side-by-side run with
every peer and a markdown report.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("pytest_benchmark", reason="pip install pytest-benchmark")

import crawldedup  # noqa: E402


def _load_compare():
    """compare.py (the workload and the peer adapters), loaded by path: this
    folder is not a package and need not be on sys.path."""
    name = "_crawldedup_bench_compare"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("compare.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


compare = _load_compare()

N_KEYS = 100_000
ERROR_RATE = 0.01
ROUNDS = 10
SINGLE_PEERS = ["crawldedup", "rbloom", "set"]
PEER_CLASSES = {cls.name: cls for cls in compare.ALL_PEERS}


@pytest.fixture(scope="session")
def urls():
    """(present, absent): N_KEYS distinct URL strings each, disjoint, the
    same generator as compare.py."""
    return compare.make_urls(N_KEYS)


@pytest.fixture(scope="session")
def fresh():
    """Copies a list of str into new str objects: no cached hash() or UTF-8."""
    return compare.fresh


def get_peer(name):
    """The compare.py adapter for a peer (the same loops), or skip."""
    cls = PEER_CLASSES[name]
    pytest.importorskip(cls.module)
    return cls()


def record_per_key(benchmark, n=N_KEYS):
    stats = getattr(benchmark, "stats", None)
    if stats is not None and getattr(stats, "stats", None) is not None:
        benchmark.extra_info["ns_per_key"] = round(stats.stats.median / n * 1e9, 1)
    benchmark.extra_info["keys_per_round"] = n


def filled(peer, keys, capacity=N_KEYS):
    f = peer.new(capacity, ERROR_RATE)
    peer.add_loop(f, keys)
    return f


# ------------------------------------------------------------ one call per key

@pytest.mark.benchmark(group="add: 100k URLs, one call per key")
@pytest.mark.parametrize("name", SINGLE_PEERS)
def test_add(benchmark, name, urls, fresh):
    peer = get_peer(name)
    present, _ = urls

    def setup():
        return (peer.new(N_KEYS, ERROR_RATE), fresh(present)), {}

    benchmark.pedantic(peer.add_loop, setup=setup, rounds=ROUNDS)
    record_per_key(benchmark)


@pytest.mark.parametrize("which", ["present", "absent"])
@pytest.mark.parametrize("name", SINGLE_PEERS)
def test_contains(benchmark, name, which, urls, fresh):
    peer = get_peer(name)
    present, absent = urls
    f = filled(peer, present)
    keys = present if which == "present" else absent
    benchmark.group = f"contains: 100k {which} URLs, one call per key"

    def setup():
        return (f, fresh(keys)), {}

    hits = benchmark.pedantic(peer.contains_loop, setup=setup, rounds=ROUNDS)
    record_per_key(benchmark)
    if which == "present":
        assert hits == N_KEYS
    else:
        assert hits < N_KEYS * ERROR_RATE * 2 or name == "set" and hits == 0


# ------------------------------------------------------------------ batch calls

@pytest.mark.benchmark(group="add_many: 100k URLs in one call")
@pytest.mark.parametrize("name", SINGLE_PEERS)
def test_add_many(benchmark, name, urls, fresh):
    # BloomFilter.add_many; rbloom.update and set.update are the peers' batch adds.
    peer = get_peer(name)
    present, _ = urls

    def setup():
        return (peer.new(N_KEYS, ERROR_RATE), fresh(present)), {}

    benchmark.pedantic(peer.add_batch, setup=setup, rounds=ROUNDS)
    record_per_key(benchmark)


@pytest.mark.parametrize("which", ["present", "absent"])
def test_contains_many(benchmark, which, urls, fresh):
    present, absent = urls
    bf = crawldedup.BloomFilter(N_KEYS, ERROR_RATE)
    bf.add_many(present)
    keys = present if which == "present" else absent
    benchmark.group = f"contains_many: 100k {which} URLs in one call"

    def setup():
        return (fresh(keys),), {}

    out = benchmark.pedantic(bf.contains_many, setup=setup, rounds=ROUNDS)
    record_per_key(benchmark)
    if which == "present":
        assert out.all()


# ---------------------------------------------------------------------- hashing

def _hash128_impl(name):
    if name == "crawldedup":
        return crawldedup.hash128
    return pytest.importorskip("mmh3").hash128


@pytest.mark.benchmark(group="hash128: one key")
@pytest.mark.parametrize("kind", ["str", "bytes"])
@pytest.mark.parametrize("name", ["crawldedup", "mmh3"])
def test_hash128(benchmark, name, kind, urls):
    hash128 = _hash128_impl(name)
    key = urls[0][0]  # an ASCII URL: its UTF-8 form is its storage, nothing cached
    assert key.isascii()
    if kind == "bytes":
        key = key.encode()
    result = benchmark(hash128, key)
    assert result == crawldedup.hash128(key)


@pytest.mark.benchmark(group="hash128: 100k URLs, one call per key")
@pytest.mark.parametrize("name", ["crawldedup", "mmh3"])
def test_hash128_many(benchmark, name, urls, fresh):
    hash128 = _hash128_impl(name)
    present, _ = urls

    def loop(keys):
        for k in keys:
            hash128(k)

    benchmark.pedantic(loop, setup=lambda: ((fresh(present),), {}), rounds=ROUNDS)
    record_per_key(benchmark)


# ------------------------------------------------------------------ persistence

SAVE_CAPACITY = 1_000_000


@pytest.fixture(scope="module")
def saved_filters(urls, tmp_path_factory):
    """A 1M-capacity filter holding the 100k URLs, per implementation, saved."""
    present, _ = urls
    folder = tmp_path_factory.mktemp("bloom-files")
    out = {}
    bf = crawldedup.BloomFilter(SAVE_CAPACITY, ERROR_RATE)
    bf.add_many(present)
    out["crawldedup"] = (bf, folder / "crawldedup.bloom")
    bf.save(out["crawldedup"][1])
    try:
        import rbloom
    except ImportError:
        pass
    else:
        rb = rbloom.Bloom(SAVE_CAPACITY, ERROR_RATE, hash_func=compare._sha256_hash)
        rb.update(present)
        out["rbloom-sha256"] = (rb, folder / "rbloom.bloom")
        rb.save(str(out["rbloom-sha256"][1]))
    return out


def _saved(saved_filters, name):
    if name not in saved_filters:
        pytest.skip(f"{name} is not installed")
    return saved_filters[name]


@pytest.mark.benchmark(group="save: 1M-capacity filter (1.1 MiB)")
@pytest.mark.parametrize("name", ["crawldedup", "rbloom-sha256"])
def test_save(benchmark, name, saved_filters, tmp_path):
    f, _ = _saved(saved_filters, name)
    path = tmp_path / "out.bloom"
    benchmark(f.save, str(path))
    assert path.stat().st_size >= SAVE_CAPACITY * 9 // 8


@pytest.mark.benchmark(group="load: 1M-capacity filter (1.1 MiB)")
@pytest.mark.parametrize("name", ["crawldedup", "rbloom-sha256"])
def test_load(benchmark, name, saved_filters):
    f, path = _saved(saved_filters, name)
    if name == "crawldedup":
        loaded = benchmark(crawldedup.BloomFilter.load, path)
    else:
        import rbloom
        loaded = benchmark(rbloom.Bloom.load, str(path), compare._sha256_hash)
    assert loaded == f
