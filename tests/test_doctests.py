"""The examples in docstrings run and say what they show: every module that
has some, found by reading the installed package, run here and nowhere else."""

import ast
import doctest
import pathlib

import pytest

import crawldedup
from conftest import require_module

PACKAGE = pathlib.Path(crawldedup.__file__).resolve().parent


def modules_with_examples():
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(">>>" in (ast.get_docstring(node, clean=False) or "")
               for node in ast.walk(tree)
               if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                    ast.AsyncFunctionDef))):
            parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            names.append(".".join(parts))
    return names + ["crawldedup._core"]  # compiled: its docstrings are read when imported


MODULES = modules_with_examples()


def test_the_modules_are_found():
    assert {"crawldedup", "crawldedup.bloom", "crawldedup.rotating", "crawldedup.fingerprint",
            "crawldedup._reference.bloom", "crawldedup._core"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    # The modules of integrations need their dependency (scrapy, pyspark,
    # warcio): missing, the test skips, or fails under CRAWLDEDUP_REQUIRE_SERVICES.
    module = require_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = finder.find(module, name)
    assert sum(len(t.examples) for t in tests) > 0, f"{name} has no docstring examples"
    for test in tests:
        runner.run(test)
    assert runner.failures == 0
