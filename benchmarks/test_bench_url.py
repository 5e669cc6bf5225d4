"""pytest-benchmark suite for URL canonicalization and request fingerprints.

    pip install pytest-benchmark scrapy w3lib
    pytest benchmarks/test_bench_url.py --benchmark-only --benchmark-group-by=group

Each round is one call per URL over 10,000 URLs of the realistic corpus
(url_corpus.py), on fresh str objects made in the untimed setup.
compare_url.py in this folder is the side-by-side run with a markdown report.
"""

import importlib.util
import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("pytest_benchmark", reason="pip install pytest-benchmark")

import crawldedup  # noqa: E402


def _load(name):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


URLS = _load("url_corpus").realistic_urls(10_000)


def _canonicalizers():
    out = {"crawldedup": crawldedup.canonicalize_url}
    try:
        from w3lib.url import canonicalize_url
        out["w3lib"] = canonicalize_url
    except ImportError:
        pass
    return out


def _fingerprinters():
    out = {"crawldedup": crawldedup.request_fingerprint}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from scrapy import Request
            from scrapy.utils.request import fingerprint
        out["scrapy"] = lambda u: fingerprint(Request(u))
    except ImportError:
        pass
    return out


def _run(benchmark, fn):
    def setup():
        return ([(u + "\x00")[:-1] for u in URLS],), {}

    def loop(urls):
        for u in urls:
            fn(u)

    benchmark.pedantic(loop, setup=setup, rounds=5)


@pytest.mark.parametrize("name", sorted(_canonicalizers()))
def test_canonicalize_url(benchmark, name):
    benchmark.group = "canonicalize_url (10,000 URLs)"
    _run(benchmark, _canonicalizers()[name])


@pytest.mark.parametrize("name", sorted(_fingerprinters()))
def test_request_fingerprint(benchmark, name):
    benchmark.group = "request fingerprint (10,000 URLs)"
    _run(benchmark, _fingerprinters()[name])
