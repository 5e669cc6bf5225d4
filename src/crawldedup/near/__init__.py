"""Near duplicates by SimHash and by MinHash.

- ``simhash``: the 64-bit signatures and Hamming distances;
- ``index``: :class:`SimhashIndex`, the exact index of all fingerprints
  within k bits;
- ``minhash``: MinHash signatures and the Jaccard estimate;
- ``lsh``: :class:`MinHashIndex`, LSH banding of signatures, and the choice
  of bands and rows for a threshold;
- ``stream``: :class:`NearDuplicates`, the pairs (each once, as earlier and
  later) or clusters of a stream of documents against an index of earlier
  ones, as ``crawldedup near-dups`` prints them.

The package exports nothing itself: ``crawldedup.simhash`` and
``crawldedup.minhash`` are the functions.
"""
