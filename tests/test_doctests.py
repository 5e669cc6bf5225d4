"""The examples in docstrings, in README.md and in docs/ run and say what
they show: every module that has some, found by reading the installed
package, and every Python block of the pages, run here and nowhere else."""

import ast
import doctest
import importlib
import pathlib
import re

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
    assert {"crawldedup", "crawldedup.bloom.filter", "crawldedup.bloom.rotating",
            "crawldedup.fingerprint", "crawldedup._reference.bloom",
            "crawldedup._core"} <= set(MODULES)


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


# ------------------------------------------------------- README.md and docs/

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# Every page: the README and docs/ with its subfolders (benchmarks/, api/).
PAGES = [ROOT / "README.md"] + sorted(DOCS.rglob("*.md"))
# A ```python block of a page; "<!-- sketch: WHY -->" on the line before marks
# one that cannot run here (it needs a network, a remote server, a Spark
# session): its imports are run and the names it gives must exist.
BLOCK = re.compile(r"(?:<!-- sketch: (?P<why>[^>]+?) -->\n)?```python\n(?P<code>.*?)```", re.S)
# "crawldedup.scrapy.DupeFilter" in settings and text: a dotted name to resolve.
DOTTED = re.compile(r"[\"'](crawldedup(?:\.\w+)+)[\"']")


def docs_blocks():
    blocks = []
    for path in PAGES:
        text = path.read_text(encoding="utf-8")
        page = path.relative_to(ROOT).as_posix()
        for m in BLOCK.finditer(text):
            line = text.count("\n", 0, m.start("code")) + 1
            blocks.append(pytest.param(f"{page}:{line}", m.group("code"),
                                       m.group("why"), id=f"{page}:{line}"))
    return blocks


DOCS_BLOCKS = docs_blocks()


def test_the_docs_blocks_are_found():
    assert ROOT / "README.md" in PAGES and any(p.parent == DOCS / "benchmarks" for p in PAGES)
    names = {p.id.rsplit(":", 1)[0] for p in DOCS_BLOCKS}
    assert {"README.md", "docs/index.md", "docs/bloom.md", "docs/simhash.md",
            "docs/simhash-index.md", "docs/fpset.md", "docs/urls.md", "docs/scrapy.md"} <= names
    # most of them run whole, their claims checked
    assert sum(p.values[2] is None for p in DOCS_BLOCKS) >= 8


def run_doctest(where, code, globs):
    parser = doctest.DocTestParser()
    test = parser.get_doctest(code, globs, where, where, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert test.examples and runner.failures == 0, f"{where}: {runner.failures} failed"


def resolve(dotted):
    """The object a dotted name gives ("crawldedup.scrapy.DupeFilter"): an
    integration's module needs its dependency (require_module)."""
    module, _, name = dotted.rpartition(".")
    try:
        return getattr(require_module(module), name)
    except AttributeError:
        return importlib.import_module(dotted)  # a module its package does not import


@pytest.mark.parametrize("where, code, sketch", DOCS_BLOCKS)
def test_docs_examples(where, code, sketch, tmp_path, monkeypatch):
    """Each block runs (in an empty folder) and shows what it claims: the
    outputs of a ">>>" block are checked, a plain block's asserts hold, and
    every crawldedup name it gives exists."""
    monkeypatch.chdir(tmp_path)
    if sketch is not None:
        tree = ast.parse(code, where)
        imports = ast.Module([n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))],
                             type_ignores=[])
        for node in imports.body:
            for alias in getattr(node, "names", []):
                top = (node.module if isinstance(node, ast.ImportFrom) else alias.name)
                require_module(top.split(".")[0] if not top.startswith("crawldedup") else top)
        exec(compile(imports, where, "exec"), {})
    elif ">>>" in code:
        run_doctest(where, code, {})
        if "# from simhash import" in code:
            # "as with the package": the same block on the package itself
            require_module("simhash")
            package = code.replace(">>> # from simhash import", ">>> from simhash import")
            package = package.replace(">>> from crawldedup.compat.simhash import",
                                      ">>> # from crawldedup.compat.simhash import")
            run_doctest(where + " (the simhash package)", package, {})
    else:
        # A bare expression shows a value that nothing checks (what the
        # simhash-compat example did, finding nothing): such a block is
        # written as ">>>" lines with their output, or asserts.
        shown = [node.lineno for node in ast.parse(code, where).body
                 if isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant)]
        assert not shown, f"{where}: lines {shown} show values that nothing checks"
        exec(compile(code, where, "exec"), {"__name__": "__docs__"})
    for dotted in DOTTED.findall(code):
        assert resolve(dotted) is not None, dotted
