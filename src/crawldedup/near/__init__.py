"""Near duplicates by SimHash.

- ``simhash``: the 64-bit signatures and Hamming distances;
- ``index``: :class:`SimhashIndex`, the exact index of all fingerprints
  within k bits;
- ``stream``: :class:`NearDuplicates`, the pairs (each once, as earlier and
  later) or clusters of a stream of documents against an index of earlier
  ones, as ``crawldedup near-dups`` prints them.

The package exports nothing itself: ``crawldedup.simhash`` is the function.
"""
