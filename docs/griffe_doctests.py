"""A griffe extension for the API reference: crawldedup's docstrings are
plain prose with doctest examples and a few Sphinx roles, which Markdown
would show as nested quotes and literal ``:meth:`` text.  Each doctest block
becomes a fenced ``pycon`` block and each role the code span of its target,
when mkdocstrings loads the docstrings; the docstrings themselves stay as
they are (the tests run their examples with doctest)."""

from __future__ import annotations

import re
from typing import Any, List

import griffe

# :class:`BloomFilter`, :meth:`~crawldedup.BloomFilter.open`, :func:`x` ...
ROLE = re.compile(r":(?:py:)?(?:class|meth|func|mod|attr|data|exc|obj|const):`~?([^`]+)`")


def fence_doctests(text: str) -> str:
    """The docstring with every doctest block (a ``>>>`` line and what
    follows it up to a blank line) in a ``pycon`` fence at its indent, and
    Sphinx roles turned into code spans; fenced blocks already there are
    left alone."""
    out: List[str] = []
    lines = text.split("\n")
    i = 0
    in_fence = False
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if stripped.startswith("```"):
            in_fence = not in_fence
        if not in_fence and stripped.startswith(">>>"):
            indent = line[: len(line) - len(stripped)]
            if out and out[-1].strip():
                out.append("")
            out.append(indent + "```pycon")
            while i < len(lines) and lines[i].strip():
                out.append(lines[i])
                i += 1
            out.append(indent + "```")
            continue
        out.append(line if in_fence else ROLE.sub(r"`\1`", line))
        i += 1
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    """Rewrites the docstring of every object griffe loads, statically or by
    inspection (the compiled core is inspected)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)
