"""Near-duplicate documents in a stream, as ``crawldedup near-dups`` finds
them: each pair once, as (earlier, later), or the clusters the pairs join,
against an index of earlier documents: a SimhashIndex (pairs within Hamming
distance k of their SimHash fingerprints) or a MinHashIndex (pairs sharing
an LSH band of their MinHash signatures, kept when their estimated Jaccard
similarity reaches ``min_jaccard``).

>>> from crawldedup import SimhashIndex, simhash_many
>>> page = ("crawldedup tells a crawler whether it has seen a url a request or a page "
...         "before exactly or approximately in one process or shared by a fleet of "
...         "crawlers through redis or over a crawl archive on spark")
>>> texts = [page, page.replace("a crawler", "the crawler"), "rice and beans, slowly cooked"]
>>> near = NearDuplicates(SimhashIndex(k=3))
>>> for ident in ("a", "b", "c"):
...     near.arrive(ident)
>>> [(a, b) for a, b, distance in near.add(["a", "b", "c"], simhash_many(texts))]
[('a', 'b')]
"""

from __future__ import annotations

from typing import Any, Dict, Hashable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from crawldedup.near.index import SimhashIndex
from crawldedup.near.lsh import MinHashIndex
from crawldedup.near.minhash import EMPTY_VALUE

Index = Union[SimhashIndex, MinHashIndex]


class _Clusters:
    """Union-find over document ids."""

    def __init__(self) -> None:
        self.parent: Dict[Hashable, Hashable] = {}

    def find(self, x: Hashable) -> Hashable:
        parent = self.parent
        parent.setdefault(x, x)
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    def union(self, a: Hashable, b: Hashable) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra

    def groups(self, rank: Dict[Hashable, Tuple[int, str]]) -> List[List[Hashable]]:
        members: Dict[Hashable, List[Hashable]] = {}
        for x in self.parent:
            members.setdefault(self.find(x), []).append(x)
        out = [sorted(group, key=rank.__getitem__) for group in members.values()]
        out.sort(key=lambda group: rank[group[0]])
        return out


class NearDuplicates:
    """The near duplicates of documents given in order, batch after batch.

    ``index`` holds the documents of earlier runs (they count as earlier
    than every document given here) and takes this run's: after
    :meth:`finish` it can be saved and given to the next run.  With
    ``clusters``, :meth:`add` yields nothing and :meth:`clusters` gives the
    connected components of the pairs, each earliest document first.
    Documents without features (empty, or no word character: SimHash
    fingerprint 0, or a MinHash signature of :data:`EMPTY_VALUE` only) are
    left out and counted in ``featureless``, unless ``include_featureless``.
    With a MinHashIndex, a pair's third value is its estimated Jaccard
    similarity, and pairs below ``min_jaccard`` are dropped (default: the
    index's threshold; 0 keeps every LSH candidate).
    """

    def __init__(self, index: Index, *, clusters: bool = False,
                 include_featureless: bool = False,
                 min_jaccard: Optional[float] = None) -> None:
        self.index = index
        self.earlier = len(index)
        self.include_featureless = include_featureless
        self.featureless = 0
        self._minhash = isinstance(index, MinHashIndex)
        self.min_jaccard = (None if not isinstance(index, MinHashIndex) else
                            index.threshold if min_jaccard is None else min_jaccard)
        # The order documents arrived in, for "earlier".
        self._order: Dict[Hashable, int] = {}
        self._clusters = _Clusters() if clusters else None
        # Clusters: the number of each distinct fingerprint of this run (in
        # the order met), the first document with each (the others of its
        # group join the cluster through it), the distinct fingerprints
        # under their numbers, and the run's documents, added to the index
        # by finish().
        self._first_with: Dict[Any, int] = {}
        self._firsts: List[Any] = []
        self._distinct: Index = (
            MinHashIndex(num_perm=index.num_perm, bands=index.bands, rows=index.rows)
            if isinstance(index, MinHashIndex) else SimhashIndex(index.k))
        self._run_ids: List[Any] = []
        self._run_fps: List[np.ndarray] = []

    def _keys(self, fps: np.ndarray) -> List[Any]:
        """A hashable key of each fingerprint or signature."""
        if self._minhash:
            return [row.tobytes() for row in fps]
        return fps.tolist()  # type: ignore[no-any-return]

    def _query(self, index: Index, fps: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        if isinstance(index, MinHashIndex):
            return index.query_many(fps, self.min_jaccard)
        return index.query_many(fps)

    @property
    def k(self) -> int:
        """The SimhashIndex's k (a MinHashIndex has none)."""
        if isinstance(self.index, MinHashIndex):
            raise AttributeError("a MinHash index has no k; see min_jaccard")
        return self.index.k

    def given(self, ident: Any) -> Optional[str]:
        """Where an id was given before: "run", "index", or None."""
        if ident in self._order:
            return "run"
        if self.earlier:
            try:
                if ident in self.index:
                    return "index"
            except TypeError:  # an id the index cannot hold
                return None
        return None

    def arrive(self, ident: Any) -> None:
        """Note the next document's id (its place in the order)."""
        self._order[ident] = len(self._order)

    def arrive_many(self, ids: List[Any]) -> bool:
        """Note the next documents' ids, in order, if none repeats and none
        was given before (True); else note nothing (False), for the caller
        to take them one at a time with given() and arrive()."""
        order = self._order
        try:
            if len(set(ids)) != len(ids) or not order.keys().isdisjoint(ids):
                return False
            if self.earlier and any(ident in self.index for ident in ids):
                return False
        except TypeError:           # an id that cannot be a dict key or an index's id
            return False
        order.update(zip(ids, range(len(order), len(order) + len(ids))))
        return True

    def add(self, ids: Sequence[Any], fps: np.ndarray) -> Iterator[Tuple[Any, Any, Any]]:
        """Add a batch (ids that arrived, their fingerprints or signatures)
        and yield each new pair (earlier, later, distance or estimated
        Jaccard): the pairs whose later document is in the batch, by the
        later one's place, then in the index's order."""
        ids = list(ids)
        keep = ((fps != EMPTY_VALUE).any(axis=1) if self._minhash else fps != 0)
        if not self.include_featureless and not keep.all():
            self.featureless += int(keep.size - np.count_nonzero(keep))
            ids = [ident for ident, kept in zip(ids, keep.tolist()) if kept]
            fps = fps[keep]
            if not ids:
                return
        if self._clusters is not None:
            self._cluster(ids, fps)  # added to the index by finish()
            return
        index, order = self.index, self._order
        index.add_many(ids, fps)
        offsets, found, distances = self._query(index, fps)
        found_list, dist_list = found.tolist(), distances.tolist()
        for i, ident in enumerate(ids):
            mine = order[ident]
            for j in range(int(offsets[i]), int(offsets[i + 1])):
                other = found_list[j]
                if other == ident or order.get(other, -1) > mine:
                    continue  # itself, or a later document (its own query finds this pair)
                yield other, ident, dist_list[j]

    def _cluster(self, ids: List[Any], fps: np.ndarray) -> None:
        """Join the documents to the clusters of their near duplicates.  A
        document whose fingerprint an earlier one of this run had joins that
        one; the first with each fingerprint is looked up among the distinct
        fingerprints of this run (so a big group of identical documents is
        one entry there) and in the index of earlier runs."""
        clusters, first_with, firsts = self._clusters, self._first_with, self._firsts
        assert clusters is not None
        self._run_ids.extend(ids)
        self._run_fps.append(fps)
        base = len(firsts)
        asked_rows = []
        for row, (ident, key) in enumerate(zip(ids, self._keys(fps))):
            number = first_with.setdefault(key, len(firsts))
            if number == len(firsts):           # a new fingerprint: its number
                firsts.append(ident)
                asked_rows.append(row)
            else:
                clusters.union(firsts[number], ident)
        if not asked_rows:
            return
        asked = fps if len(asked_rows) == len(fps) else fps[asked_rows]
        asked_ids = firsts[base:]
        self._distinct.add_many(range(base, len(firsts)), asked)
        offsets, found, _ = self._query(self._distinct, asked)
        found_list, offset_list = found.tolist(), offsets.tolist()
        for i, ident in enumerate(asked_ids):
            for j in range(offset_list[i], offset_list[i + 1]):
                if found_list[j] != base + i:
                    clusters.union(firsts[found_list[j]], ident)
        if self.earlier:
            offsets, found, _ = self._query(self.index, asked)
            found_list = found.tolist()
            for i, ident in enumerate(asked_ids):
                for j in range(int(offsets[i]), int(offsets[i + 1])):
                    clusters.union(found_list[j], ident)

    def clusters(self) -> List[List[Any]]:
        """The clusters, each earliest document first (its representative),
        in the order of their representatives (documents of the index
        first)."""
        if self._clusters is None:
            raise ValueError("clusters() needs NearDuplicates(..., clusters=True)")
        order = self._order
        rank = {ident: (order.get(ident, -1), str(ident)) for ident in self._clusters.parent}
        return self._clusters.groups(rank)

    def finish(self) -> None:
        """Put this run's documents into the index (clusters mode adds them
        only now), so that it can be saved for the next run."""
        if self._run_ids:
            self.index.add_many(self._run_ids, np.concatenate(self._run_fps))
            self._run_ids, self._run_fps = [], []
