"""The ``api`` fixture: the package on each kernel, really, and nothing mixed."""

import importlib
import pickle
import sys

import crawldedup
import implementations
from crawldedup.formats import files

KERNEL_BLOOM = {"core": "crawldedup._core", "reference": "crawldedup._reference.bloom"}


def test_each_package_is_built_on_its_kernel(api):
    kernel = importlib.import_module(implementations.KERNELS[api.IMPLEMENTATION])
    assert api.BloomFilter.__mro__[1].__module__ == KERNEL_BLOOM[api.IMPLEMENTATION]
    assert issubclass(api.FingerprintSet, kernel.FingerprintTable)
    assert sys.modules["crawldedup._kernel"].impl is kernel
    # while the test runs, imports find the package the test was given
    assert importlib.import_module("crawldedup") is api
    assert importlib.import_module("crawldedup.bloom.rotating").RotatingBloomFilter \
        is api.RotatingBloomFilter
    # what does not depend on the kernel is shared: one class per error
    assert api.CorruptFileError is crawldedup.CorruptFileError
    assert importlib.import_module("crawldedup.formats.files") is files
    assert callable(api.simhash)  # the function, not the submodule


def test_pickles_come_back_as_the_package_classes(api):
    bf = api.BloomFilter(100)
    bf.add("x")
    fps = api.FingerprintSet()
    fps.add(bytes(16))
    index = api.SimhashIndex()
    index.add(1, 5)
    for thing in (bf, api.ScalableBloomFilter(10), api.RotatingBloomFilter(10), fps, index):
        clone = pickle.loads(pickle.dumps(thing))
        assert type(clone) is type(thing)


def test_the_package_of_the_environment_is_back_after_a_swap():
    other = "reference" if crawldedup.IMPLEMENTATION == "core" else "core"
    package = implementations.package(other)
    with implementations.active(package):
        import crawldedup.bloom.filter as during
        assert during.BloomFilter is package.api.BloomFilter
    import crawldedup.bloom.filter as after
    assert sys.modules["crawldedup"] is crawldedup
    assert after.BloomFilter is crawldedup.BloomFilter is not package.api.BloomFilter
    assert callable(crawldedup.simhash)
