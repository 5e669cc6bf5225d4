"""The examples in docstrings run and say what they show."""

import doctest
import importlib


MODULES = ["crawldedup", "crawldedup.bloom", "crawldedup.scalable", "crawldedup.rotating",
           "crawldedup._rotating_ring", "crawldedup._reference.bloom", "crawldedup._core"]


def test_docstring_examples():
    """Every module's examples, run once, by one runner."""
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for name in MODULES:
        module = importlib.import_module(name)
        tests = finder.find(module, name)
        assert sum(len(t.examples) for t in tests) > 0, f"{name} has no docstring examples"
        for test in tests:
            runner.run(test)
    assert runner.failures == 0
