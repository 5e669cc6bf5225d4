"""How a message names an optional extra (``[project.optional-dependencies]``
in pyproject.toml): the command that installs it from PyPI and the one that
installs it from a clone of the repository, as the README installs, where
the first fails ("No matching distribution found" until a release)."""

from __future__ import annotations

# The extras that optional integrations name in their ImportErrors.
EXTRAS = ("progress", "redis", "scrapy", "spark", "sql", "warc")


def install_hint(extra: str) -> str:
    """``pip install 'crawldedup[EXTRA]'`` and its form in a clone."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; known: {', '.join(EXTRAS)}")
    return (f"pip install 'crawldedup[{extra}]' (or, in a clone of crawldedup, "
            f"pip install '.[{extra}]')")
