"""The module paths of earlier releases, kept importable for what names
them: pickles (a pickle names the module of the function or class that
restores it) and users' imports of documented modules.

Each old path is served by a small module that hands every attribute
lookup to the module that lives at the new path, so a class or function
found through either path is the same object.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types
from typing import Any, Optional, Sequence

#: old module path -> the module that holds its names now.  A path that was
#: a package keeps its submodules under the same names.
MOVED = {
    "crawldedup._files": "crawldedup.formats.files",
    "crawldedup._mapped": "crawldedup.formats.mapped",
    "crawldedup.compat._simhash_index": "crawldedup.compat.simhash",
    "crawldedup.fpset": "crawldedup.exact.fpset",
    "crawldedup.index": "crawldedup.near.index",
    "crawldedup.rotating": "crawldedup.bloom.rotating",
    "crawldedup.scalable": "crawldedup.bloom.scalable",
    "crawldedup.stores": "crawldedup.exact.stores",
}
PACKAGES = {"crawldedup.stores"}


def new_path(name: str) -> Optional[str]:
    """Where the module an earlier release called ``name`` lives now."""
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old):]
    return None


class _Forward:
    """The loader of an old path (importlib's loader protocol; not derived
    from importlib.abc, whose import costs every ``import crawldedup``)."""

    def __init__(self, target: str, package: bool) -> None:
        self.target = target
        self.package = package

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module

    def exec_module(self, module: types.ModuleType) -> None:
        real = importlib.import_module(self.target)
        vars(module).update(
            __doc__=f"Moved: this module is {self.target}.",
            __getattr__=lambda name: getattr(real, name),
            __dir__=lambda: dir(real),
        )
        if self.package:
            module.__path__ = []  # its submodules come through this finder too


class MovedModules:
    """Finds the old paths (asked last, after the package's own files)."""

    def find_spec(self, name: str, path: Optional[Sequence[str]] = None,
                  target: Any = None) -> Optional[importlib.machinery.ModuleSpec]:
        new = new_path(name)
        if new is None:
            return None
        package = name in PACKAGES
        loader: Any = _Forward(new, package)  # a Loader by protocol
        return importlib.machinery.ModuleSpec(name, loader, is_package=package)


def install() -> None:
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(MovedModules())
