"""Public names imported on first use (PEP 562), for the packages whose
parts pull in heavy dependencies (w3lib, SQLite, redis-py...)."""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Dict, Iterable, List, Tuple


def lazy_names(package: str, homes: Dict[str, str],
               public: Iterable[str]) -> Tuple[Callable[[str], Any], Callable[[], List[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``homes`` maps each lazy
    name to the module that defines it under that name; a name is imported
    on first access and then kept in the package's namespace."""
    names = list(public)

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)  # the next access is a plain lookup
        return value

    def __dir__() -> List[str]:
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__
