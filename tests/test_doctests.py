"""The examples in docstrings run and say what they show."""

import doctest
import importlib

import pytest

MODULES = ["crawldedup", "crawldedup.bloom", "crawldedup.scalable", "crawldedup.rotating",
           "crawldedup._reference", "crawldedup._core"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = finder.find(module, name)
    examples = sum(len(t.examples) for t in tests)
    assert examples > 0, f"{name} has no docstring examples"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test)
    assert runner.failures == 0
