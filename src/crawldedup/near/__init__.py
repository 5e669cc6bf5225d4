"""Near duplicates by SimHash.

- ``simhash``: the 64-bit signatures and Hamming distances;
- ``index``: :class:`SimhashIndex`, the exact index of all fingerprints
  within k bits.

The package exports nothing itself: ``crawldedup.simhash`` is the function.
"""
