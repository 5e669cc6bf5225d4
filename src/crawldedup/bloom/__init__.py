"""Bloom filters: "have I seen this URL?" in a few bits per key.

- ``filter``: :class:`BloomFilter` (standard and blocked layouts, saved,
  loaded or memory-mapped) and :func:`optimal_parameters`;
- ``sizing``: bits and hashes for a capacity and error rate, memory checks;
- ``members``: what the filters made of several Bloom filters share;
- ``scalable``: :class:`ScalableBloomFilter`, which grows;
- ``rotating``, ``schedule``, ``rotating_ring``, ``rotating_file``:
  :class:`RotatingBloomFilter`, which forgets by time window, its rotation
  schedule, and its memory-mapped form shared between processes.
"""

from typing import TYPE_CHECKING

from crawldedup._lazy import lazy_names

# Pickles of a BloomFilter made by releases before 0.1.0 restore through
# crawldedup.bloom._restore, the file format's restore.
from crawldedup.formats.files import restore as _restore  # noqa: F401

if TYPE_CHECKING:
    from crawldedup.bloom.filter import BloomFilter, optimal_parameters
    from crawldedup.bloom.rotating import RotatingBloomFilter
    from crawldedup.bloom.scalable import ScalableBloomFilter

_HOMES = {
    "BloomFilter": "crawldedup.bloom.filter",
    "optimal_parameters": "crawldedup.bloom.filter",
    "RotatingBloomFilter": "crawldedup.bloom.rotating",
    "ScalableBloomFilter": "crawldedup.bloom.scalable",
}
__all__ = ["BloomFilter", "RotatingBloomFilter", "ScalableBloomFilter", "optimal_parameters"]

# Imported on first use (PEP 562), so that importing one module of the
# family (sizing, say) loads no other.
__getattr__, __dir__ = lazy_names(__name__, _HOMES, __all__)
