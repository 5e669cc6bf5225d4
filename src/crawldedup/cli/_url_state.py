"""What ``crawldedup urls`` keeps its URLs in: one small interface, several kinds.

The command's loop (``crawldedup.cli``) only talks to a :class:`UrlState`:

* ``keys(lines)``: the keys of a chunk of input lines (the lines themselves
  for a Bloom filter, their MD5 digests for an exact state...), computed once
  per chunk and passed to the two calls below;
* ``contains_many(keys)`` / ``add_many(keys)``: numpy bool arrays, as
  BloomFilter's (``add_many``: True where this call added the key, the first
  of repeats within a call counting as new).  The command looks a chunk up,
  records the keys not found with ``add_many`` and prints the lines whose
  keys that call added.  For a state shared by several crawlers (a database)
  ``add_many`` is the store's atomic insert-if-absent, which alone decides
  what is new, and ``contains_many`` may answer from what this process knows
  the store holds (a local cache that saves the round trips for repeats);
* where ``takes_spans`` is True, ``span_keys(canonical, data, spans)``: the
  keys of the lines ``data[a:b]`` of a block, one row (a, b) of spans a
  line, as a numpy array that ``contains_many`` / ``add_many`` take too (the
  command's block mode, no object per line; see ``Deliverer.uses_blocks``),
  and ``block_repeats`` (whether that mode skips the lines met before with
  --canonical);
* ``keys_are_lines``: whether ``keys`` gives the lines as they are (no
  pass of its own, so the command computes no keys ahead);
* ``record_piece``: for a state shared with other processes, the most keys
  one ``add_many`` takes (the journal records each one's answer);
* ``refresh``: True when keys met again are added again so that they stay
  remembered (a rotating filter);
* ``read_size``: how many bytes of input the command reads per chunk (a
  database wants big batches; a local state small ones, for latency);
* ``describe()`` (the summary line), ``warnings()``, ``close()``.

Each kind of state is one class here or in its own module: Bloom filters and
rotating Bloom filters (:class:`BloomState`), exact fingerprint sets and
fingerprint stores (``crawldedup.cli._exact_state.ExactState``).  A new kind
(another store, say) is one more class and one more branch where the command
opens its state.
"""

from __future__ import annotations

from typing import Any, Callable, List

import numpy as np

from crawldedup._kernel import hash128, span_key_hashes
from crawldedup.bloom.rotating import RotatingBloomFilter

LOCAL_READ_SIZE = 1 << 16
#: ``UrlState.record_piece`` of the states shared with other processes: a
#: round trip for each 10,000 keys costs little beside their work in the
#: store, and bounds what a kill leaves unknown.
SHARED_PIECE = 10_000
_LOW64 = (1 << 64) - 1


class UrlState:
    """The interface (see the module docstring), with the defaults of a
    local state whose keys are the lines."""

    refresh = False
    read_size = LOCAL_READ_SIZE
    #: Whether ``keys`` gives the lines themselves (see the module docstring).
    keys_are_lines = True
    #: Whether ``span_keys`` gives the keys of a block's lines (block mode).
    takes_spans = False
    #: With --canonical in block mode (``span_keys``), whether the command
    #: skips the lines met before in the run before computing keys: a
    #: 128-bit hash and a set insert per line, worth it when a key costs more.
    block_repeats = True
    #: Whether a key found stays found until the command ends (keys are
    #: only ever added), so that a block's keys may be looked up ahead, on
    #: the worker thread (``Deliverer._seen_ahead``).
    lookup_ahead = False
    #: For a state shared with other processes: how many keys an add_many
    #: takes at most, the journal recording each one's answer, so that a
    #: kill leaves at most this many keys whose answer is lost (see
    #: ``Deliverer.replay``).  0: a chunk at once (a local state: one
    #: writer, whose answer a replay can tell without it).
    record_piece = 0
    #: Whether ``add_many_once(keys, receipt)`` / ``forget_receipt(receipt)``
    #: are there: a store that records a piece's answer with its adds, under
    #: the journal's receipt, so that the run that finishes a killed run's
    #: journal learns the answer of the piece that was cut
    #: (FingerprintStore.add_many_once).
    receipts = False

    # Given by every subclass.
    contains_many: Callable[[Any], np.ndarray]
    add_many: Callable[[Any], np.ndarray]

    def keys(self, lines: List[bytes]) -> Any:
        return lines

    def span_keys(self, canonical: Any, data: bytes, spans: np.ndarray) -> np.ndarray:
        """The keys of the lines ``data[a:b]`` of a block (``takes_spans``)."""
        raise NotImplementedError(f"{type(self).__name__} takes no block of spans")

    def add_many_once(self, keys: Any, receipt: bytes) -> np.ndarray:
        """add_many, its answer recorded under ``receipt`` (``receipts``)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no receipts")

    def forget_receipt(self, receipt: bytes) -> None:
        """Drop the answers recorded under ``receipt`` (``receipts``)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no receipts")

    def canonical_keys(self, canonical: Any, lines: List[bytes]) -> Any:
        """The keys with --canonical (``canonical``: the command's
        canonicalizer, which gives the canonical forms as UTF-8 bytes)."""
        return self.keys(canonical(lines))

    def expect(self, lines: int) -> None:
        """About this many lines of input are coming (an estimate from the
        input files' sizes): a state may make room for them."""

    def describe(self) -> str:
        return ""

    def warnings(self) -> List[str]:
        return []

    def close(self) -> None:
        pass


def reserve_room(fps: Any, n: int) -> None:
    """``fps.reserve(n)`` when memory allows it.  Room taken ahead only saves
    the set's growth steps: a machine short of memory goes on without it
    (the set then grows as it fills, as it would have without the estimate)."""
    try:
        fps.reserve(n)
    except MemoryError:
        pass


def estimated_urls(bf: Any) -> int:
    """The number of distinct URLs a Bloom filter holds, as ``crawldedup
    info`` reports it: its estimate from the set bits (``estimated_count``),
    which counts what every writer added, where ``insert_count`` may not."""
    return int(bf.estimated_count())


class BloomState(UrlState):
    """A BloomFilter or RotatingBloomFilter used in place in its file.

    A BloomFilter also takes a block of input as spans (``span_keys``, for
    the command's block mode): its keys are then the lines' 128-bit hashes
    with the filter's seed, an (n, 2) uint64 array, which ``contains_many``
    and ``add_many`` hand to the filter's ``contains_hashed`` and
    ``add_hashed``: the same bits as the lines themselves as keys."""

    # The compiled canonicalization and hash of a line cost less than
    # remembering it (a 128-bit hash and an insert into a set of millions,
    # on the worker thread the command waits for): the block mode computes
    # every line's key.  The output and the state are the same either way.
    block_repeats = False

    def __init__(self, bf: Any) -> None:
        self.bf = bf
        self.rotating = isinstance(bf, RotatingBloomFilter)
        self.refresh = self.rotating
        self.takes_spans = not self.rotating
        self.lookup_ahead = not self.rotating  # bits are only ever set
        if self.rotating:
            self.contains_many = bf.contains_many
            self.add_many = bf.add_many
        else:
            self.contains_many = self._contains_many
            self.add_many = self._add_many

    def _contains_many(self, keys: Any) -> np.ndarray:
        if isinstance(keys, np.ndarray):
            return self.bf.contains_hashed(keys)  # type: ignore[no-any-return]
        return self.bf.contains_many(keys)  # type: ignore[no-any-return]

    def _add_many(self, keys: Any) -> np.ndarray:
        if isinstance(keys, np.ndarray):
            return self.bf.add_hashed(keys)  # type: ignore[no-any-return]
        return self.bf.add_many(keys)  # type: ignore[no-any-return]

    def span_keys(self, canonical: Any, data: bytes, spans: np.ndarray) -> np.ndarray:
        """The hashes (the filter's seed) of the lines ``data[a:b]`` for each
        row (a, b) of spans, of their canonical forms with a canonicalizer
        (the command's, whose slow path gives the forms of the lines the
        compiled one declines), in one compiled pass: no object per line."""
        seed = self.bf.seed
        hashes, missing = span_key_hashes(data, spans, seed, canonical is not None)
        if missing:
            hashes = hashes.copy()
            lines = [data[int(spans[i, 0]):int(spans[i, 1])] for i in missing]
            for i, key in zip(missing, canonical.slow_keys(lines)):
                h = hash128(key, seed)
                hashes[i] = (h & _LOW64, h >> 64)
        return hashes

    def describe(self) -> str:
        return f"fill ratio {self.bf.fill_ratio:.4g}"

    def warnings(self) -> List[str]:
        bf = self.bf
        newest = bf.filters[-1] if self.rotating else bf
        count = estimated_urls(newest)
        if count <= bf.capacity:
            return []
        where = "its newest generation holds about" if self.rotating else "the state holds about"
        return [f"{where} {count:,} URLs, more than its capacity {bf.capacity:,}; its "
                f"false-positive rate is now about {bf.estimated_error_rate:.3g} (asked: "
                f"{bf.error_rate:g}). Start a new state with a larger --capacity"
                + (" or rotate more often" if self.rotating else "") + "."]

    def close(self) -> None:
        self.bf.close()


def fill_missing(blob: bytes, missing: List[int], digests: Any) -> np.ndarray:
    """The packed 16-byte digests (``url_digests_packed``) with those of the
    indexes it left to Python put in place."""
    buf = bytearray(blob)
    for i, digest in zip(missing, digests):
        buf[16 * i:16 * (i + 1)] = digest
    return np.frombuffer(bytes(buf), dtype="S16")
