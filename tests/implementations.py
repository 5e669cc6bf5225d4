"""The package built on each kernel, so that one pytest run tests the wrappers
over both (the ``api`` fixture of conftest.py).

The wrappers bind their kernel when they are imported (``class
BloomFilter(BloomBits)``, with ``BloomBits`` from ``crawldedup._kernel``), so
the package on the other kernel is a second import of every module that
depends on ``_kernel``, made with ``CRAWLDEDUP_PURE_PYTHON`` saying the other
kernel.  The modules that do not depend on it (errors, the file format, the
kernels themselves) are shared, so an exception class or a file kind is the
same object whichever package raised or wrote it.

While a test runs on a package, ``active`` puts that package's modules into
``sys.modules`` (and takes them out afterwards): imports inside functions,
pickle and ``import crawldedup`` in the test then all find the classes the
test was given.
"""

import contextlib
import importlib
import os
import sys
import types

import crawldedup
from crawldedup import _kernel
from test_architecture import imports, modules

KERNELS = {"core": "crawldedup._core", "reference": "crawldedup._reference"}
# the modules each package imports when it is built (the rest come on first use)
WRAPPERS = ("crawldedup", "crawldedup.bloom.filter", "crawldedup.bloom.scalable",
            "crawldedup.bloom.rotating",
            "crawldedup.exact.fpset", "crawldedup.near.index", "crawldedup.near.simhash")


def _kernel_dependent():
    """The package's modules whose import runs an import of
    ``crawldedup._kernel``, directly or through another module's."""
    graph = {}
    for name, tree in modules():
        edges = set()
        for imported, _ in imports(tree, top_level_only=True):
            if imported == "crawldedup" or imported.startswith("crawldedup."):
                edges.add(imported)
        graph[name] = edges
    dependent = {"crawldedup._kernel"}
    changed = True
    while changed:
        changed = False
        for name, edges in graph.items():
            if name not in dependent and edges & dependent:
                dependent.add(name)
                changed = True
    # The packages above them too: ``from crawldedup.bloom import members``
    # reads the package's attribute, which must be this package's module.
    for name in list(dependent):
        parts = name.split(".")
        dependent.update(".".join(parts[:i]) for i in range(1, len(parts))
                         if ".".join(parts[:i]) in graph)
    return dependent


DEPENDENT = _kernel_dependent()


def _ours(name):
    return name == "crawldedup" or name.startswith("crawldedup.")


def _link(mods):
    """Each module an attribute of its parent package, as a first import
    makes it (``import crawldedup.x`` then reads ``crawldedup.x``), unless
    the package put something else under that name (crawldedup.simhash is
    the function)."""
    for name in sorted(mods):
        parent, _, child = name.rpartition(".")
        if parent and parent in sys.modules:
            current = getattr(sys.modules[parent], child, None)
            if current is None or isinstance(current, types.ModuleType):
                setattr(sys.modules[parent], child, sys.modules[name])


class Package:
    """The modules of crawldedup that depend on the kernel, as imported for
    one kernel; the other modules are those in sys.modules."""

    def __init__(self, kernel, mods):
        self.kernel = kernel
        self.modules = mods

    @property
    def api(self):
        return self.modules["crawldedup"]


_loaded = {}


def _default():
    return Package(_kernel.IMPLEMENTATION,
                   {n: m for n, m in sys.modules.items() if n in DEPENDENT})


@contextlib.contextmanager
def active(package):
    """package's modules in sys.modules, for the block's duration."""
    if package.kernel == _kernel.IMPLEMENTATION and sys.modules.get("crawldedup") is crawldedup:
        yield  # the package the environment chose: nothing to swap
        return
    saved = {n: m for n, m in sys.modules.items() if n in DEPENDENT}
    for name in saved:
        del sys.modules[name]
    sys.modules.update(package.modules)
    _link(n for n in sys.modules if _ours(n))
    try:
        yield
    finally:
        for name in [n for n in sys.modules if _ours(n)]:
            if name in DEPENDENT:
                # a module first imported during the test belongs to this package
                package.modules[name] = sys.modules.pop(name)
        sys.modules.update(saved)
        _link(n for n in sys.modules if _ours(n))


def package(kernel):
    """crawldedup on kernel ("core" or "reference"), imported once."""
    if kernel == _kernel.IMPLEMENTATION:
        return _default()
    if kernel not in _loaded:
        importlib.import_module(KERNELS[kernel])  # a broken build fails here, loudly
        saved_env = os.environ.get("CRAWLDEDUP_PURE_PYTHON")
        os.environ["CRAWLDEDUP_PURE_PYTHON"] = "1" if kernel == "reference" else "0"
        empty = Package(kernel, {})
        try:
            with active(empty):
                for name in WRAPPERS:
                    importlib.import_module(name)
                api = sys.modules["crawldedup"]
                for name in api.__all__:  # the lazy names, while this package is active
                    getattr(api, name)
        finally:
            if saved_env is None:
                del os.environ["CRAWLDEDUP_PURE_PYTHON"]
            else:
                os.environ["CRAWLDEDUP_PURE_PYTHON"] = saved_env
        _loaded[kernel] = empty
    built = _loaded[kernel]
    api = built.api
    assert api.IMPLEMENTATION == kernel, (api.IMPLEMENTATION, kernel)
    kernel_module = sys.modules[KERNELS[kernel]]
    assert built.modules["crawldedup._kernel"].impl is kernel_module
    assert issubclass(api.BloomFilter, kernel_module.BloomBits)
    assert issubclass(api.FingerprintSet, kernel_module.FingerprintTable)
    return built


def subclass(base, module_name, slots=True):
    """An empty subclass of base (a class of one package), made once and
    kept as a global of the test module module_name, where pickle looks
    it up by name: ``Mine_core`` or ``Mine_reference``."""
    module = sys.modules[module_name]
    name = f"Mine_{sys.modules['crawldedup'].IMPLEMENTATION}"  # the active package's
    cls = getattr(module, name, None)
    if cls is None or base not in cls.__mro__:
        namespace = {"__module__": module_name, "__qualname__": name}
        if slots:
            namespace["__slots__"] = ()
        cls = type(name, (base,), namespace)
        setattr(module, name, cls)
    return cls
