"""The import rules of docs/architecture.md, checked on the sources.

The package's modules are read as text (ast), from the installed package,
so the rules hold for what users get."""

import ast
import pathlib
import subprocess
import sys

import crawldedup

PACKAGE = pathlib.Path(crawldedup.__file__).resolve().parent
INTEGRATIONS = ("crawldedup.redis", "crawldedup.scrapy", "crawldedup.recrawl",
                "crawldedup.spark", "crawldedup.warc")
COMMAND_LINE = ("crawldedup.cli", "crawldedup.cli.near_dups", "crawldedup.__main__")
OPTIONAL = ("redis", "hiredis", "scrapy", "twisted", "scrapy_redis", "pyspark", "pyarrow",
            "pandas", "sqlalchemy", "psycopg", "pymysql", "warcio", "tqdm", "selectolax",
            "resiliparse", "lxml", "w3lib_html", "scipy")


def module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield module_name(path), ast.parse(path.read_text(encoding="utf-8"))


def imports(tree, top_level_only=False):
    """(module imported, line) for every import; with top_level_only, those
    that run when the module is imported (not inside a function, and not
    under `if TYPE_CHECKING`)."""
    def walk(node, top):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                if not top_level_only:
                    yield from walk(child, False)
                continue
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.dump(child.test):
                continue
            if isinstance(child, ast.Try) and any(
                    isinstance(h.type, ast.Name) and h.type.id in ("ImportError",
                                                                     "ModuleNotFoundError")
                    for h in child.handlers):
                continue  # an optional import with a fallback
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, child.lineno
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                yield child.module, child.lineno
                for alias in child.names:
                    yield f"{child.module}.{alias.name}", child.lineno
            yield from walk(child, top)
    yield from walk(tree, True)


def under(name, prefixes):
    return any(name == p or name.startswith(p + ".") for p in prefixes)


ALL = list(modules())


NAMES = {name for name, _ in ALL} | {"crawldedup._core"}  # the compiled core too


def dependencies(tree):
    """The package's modules that a module imports, anywhere in it (inside
    functions and under ``if TYPE_CHECKING`` too): ``from P import N`` is
    an import of the module P.N when there is one, else of P."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "crawldedup":
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.split(".")[0] != "crawldedup":
                continue
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                yield (child if child in NAMES else node.module), node.lineno


def import_graph():
    return {name: {dep for dep, _ in dependencies(tree) if dep != name} for name, tree in ALL}


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_twin_imports_only_the_standard_library_and_numpy():
    allowed = set(sys.stdlib_module_names) | {"numpy", "crawldedup"} \
        if hasattr(sys, "stdlib_module_names") else None
    for name, tree in ALL:
        if not name.startswith("crawldedup._reference"):
            continue
        for imported, line in imports(tree):
            root = imported.split(".")[0]
            if root == "crawldedup":
                assert imported.startswith(("crawldedup._reference", "crawldedup.errors")), \
                    f"{name}:{line} imports {imported}"
            elif allowed is not None:
                assert root in allowed, f"{name}:{line} imports {imported}"


def test_only_the_selector_names_an_implementation():
    for name, tree in ALL:
        if name == "crawldedup._kernel" or name.startswith("crawldedup._reference"):
            continue
        for imported, line in imports(tree):
            assert not under(imported, ("crawldedup._core", "crawldedup._reference")), \
                f"{name}:{line} imports {imported}; wrappers import kernels from _kernel"


def test_nothing_but_the_command_line_imports_it():
    for name, tree in ALL:
        if under(name, COMMAND_LINE):
            continue
        for imported, line in imports(tree):
            assert not under(imported, ("crawldedup.cli",)), f"{name}:{line} imports {imported}"


def test_no_argparse_outside_the_command_line():
    """Argument parsing is the command line's: every subcommand under cli/."""
    for name, tree in ALL:
        if under(name, COMMAND_LINE):
            continue
        for imported, line in imports(tree):
            assert imported != "argparse", f"{name}:{line} imports argparse"


def test_the_local_library_never_imports_integrations_or_the_command_line():
    for name, tree in ALL:
        if under(name, INTEGRATIONS + COMMAND_LINE):
            continue
        for imported, line in imports(tree):
            assert not under(imported, INTEGRATIONS + COMMAND_LINE), \
                f"{name}:{line} imports {imported}"


def test_optional_dependencies_are_imported_lazily():
    for name, tree in ALL:
        # An integration package may import its own dependency in a private
        # module that only its public classes load (checked below).
        if under(name, INTEGRATIONS):
            continue
        for imported, line in imports(tree, top_level_only=True):
            assert imported.split(".")[0] not in OPTIONAL, \
                f"{name}:{line} imports the optional {imported} when it is imported"


_BLOCKED = """
import sys
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError(f"No module named {{name!r}} (blocked by the test)")
sys.meta_path.insert(0, Blocker())
import crawldedup, crawldedup.exact.stores, crawldedup.cli
bf = crawldedup.BloomFilter(1000)
assert bf.add("x")
print("ok")
"""


def test_import_crawldedup_needs_no_optional_dependency():
    code = _BLOCKED.format(blocked=set(OPTIONAL))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


def test_public_names_resolve_lazily_and_simhash_stays_the_function():
    # The package imports most public names on first use (PEP 562): each
    # must resolve to the object its home module defines, and importing the
    # submodule crawldedup.near.simhash must not shadow the function simhash.
    code = ("import importlib, crawldedup, crawldedup.near.simhash, crawldedup.near.index\n"
            "assert callable(crawldedup.simhash) and crawldedup.simhash('a b') == "
            "crawldedup.simhash('a b')\n"
            "for name in crawldedup.__all__:\n"
            "    value = getattr(crawldedup, name)\n"
            "    home = crawldedup._HOMES.get(name)\n"
            "    if home:\n"
            "        assert value is getattr(importlib.import_module(home), name), name\n"
            "assert set(dir(crawldedup)) >= set(crawldedup.__all__)\n"
            "try:\n"
            "    crawldedup.no_such_name\n"
            "except AttributeError as exc:\n"
            "    assert 'no_such_name' in str(exc)\n"
            "else:\n"
            "    raise AssertionError('no AttributeError')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_import_loads_no_url_canonicalization():
    code = ("import sys, crawldedup\n"
            "print(sorted(m for m in sys.modules if m.startswith(("
            "'w3lib', 'crawldedup.fingerprint', 'crawldedup.urls',"
            " 'crawldedup.near.index', 'crawldedup.exact.stores', 'sqlite3'))))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_the_core_defines_every_name_of_the_twin_and_the_selector_gives_them():
    from crawldedup import _core, _kernel, _reference
    assert not [name for name in _reference.__all__ if not hasattr(_core, name)]
    public = [name for name in _reference.__all__ if not name.startswith("_")]
    assert all(getattr(_kernel, name) is getattr(_kernel.impl, name) for name in public)
    assert _kernel.impl is (_reference if _kernel.PURE_PYTHON else _core)
