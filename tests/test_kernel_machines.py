"""State machines over the two kernel implementations at once.

Each step runs on the compiled core and on the pure-Python twin, and on a
model (a Python set): after every step the two kernels must hold the same
bytes and agree on every answer, and neither may forget a key the model
holds.  Keys are drawn so that batches cross the core's chunk size and the
filter is small enough to fill up (false positives happen, and must be the
same ones in both).  The storage round trips of each kernel (a Bloom bit
array opened over another's bytes, a fingerprint table's ``to_bytes`` /
``load`` and pickle) go across: the core loads what the twin wrote, and the
twin what the core wrote.
"""

import pickle

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from conftest import examples, load_impl

CORE = load_impl("core")
TWIN = load_impl("reference")

# A share of the profile's examples: each runs many steps on both kernels.
_machine_settings = settings(max_examples=examples(0.2), stateful_step_count=30,
                             deadline=None)

keys = st.one_of(st.integers(0, 3000).map(lambda i: f"https://a.example/{i}"),
                 st.integers(0, 300).map(lambda i: f"新闻/{i}".encode()),
                 st.text(max_size=12),
                 st.binary(max_size=40).map(bytearray))
batches = st.lists(keys, max_size=700)


def same(key):
    """The bytes a key hashes as (a str and its UTF-8 are one key)."""
    return key.encode("utf-8") if isinstance(key, str) else bytes(key)


class BloomBitsMachine(RuleBasedStateMachine):
    """BloomBits on both implementations against a set: the same bits, the
    same answers, no false negative, and ``add`` never calls a key held new."""

    @initialize(num_bits=st.sampled_from([64, 65, 513, 4096, 8192]), k=st.integers(1, 9),
                seed=st.integers(0, 2**32 - 1), blocked=st.booleans())
    def build(self, num_bits, k, seed, blocked):
        layout = "blocked" if blocked else "standard"
        if blocked:
            num_bits = max(512, num_bits - num_bits % 512)
        self.core, self.twin = CORE.BloomBits(), TWIN.BloomBits()
        self.core._init_bits(num_bits, k, seed, layout=layout)
        self.twin._init_bits(num_bits, k, seed, layout=layout)
        self.model = set()
        self.new_keys = 0

    def _added(self, key, new):
        if same(key) in self.model:
            assert new is False
        self.new_keys += new
        self.model.add(same(key))

    @rule(key=keys)
    def add(self, key):
        new = self.core.add(key)
        assert new == self.twin.add(key)
        self._added(key, new)

    @rule(batch=batches, as_tuple=st.booleans())
    def add_many(self, batch, as_tuple):
        arg = tuple(batch) if as_tuple else batch
        a, b = self.core.add_many(arg), self.twin.add_many(arg)
        assert a.dtype == b.dtype == np.bool_
        assert a.tolist() == b.tolist()
        for key, new in zip(batch, a.tolist()):
            self._added(key, new)

    @rule(batch=batches)
    def contains_many(self, batch):
        a, b = self.core.contains_many(batch), self.twin.contains_many(batch)
        assert a.tolist() == b.tolist()
        assert all(a[i] for i, key in enumerate(batch) if same(key) in self.model)

    @rule(key=keys)
    def contains(self, key):
        assert (key in self.core) == (key in self.twin)
        if same(key) in self.model:
            assert key in self.core

    @rule()
    def clear(self):
        self.core._clear()
        self.twin._clear()
        self.model.clear()
        self.new_keys = 0

    @rule(batch=batches, union=st.booleans())
    def merge(self, batch, union):
        for impl, mine in ((CORE, self.core), (TWIN, self.twin)):
            other = impl.BloomBits()
            other._init_bits(mine.num_bits, mine.num_hashes, mine.seed, layout=mine.layout)
            other.add_many(batch)
            (mine._or_from if union else mine._and_from)(other)
        if union:
            self.model.update(same(key) for key in batch)
        else:
            self.model &= {same(key) for key in batch}
        # merges leave the insert count as it was (the wrappers set it)

    @rule()
    def reopen_across(self):
        # Each kernel opened over a copy of the other's storage bytes, with
        # its insert count: the bit arrays of files and mappings.
        core, twin = self.core, self.twin
        self.core, self.twin = CORE.BloomBits(), TWIN.BloomBits()
        for new, old in ((self.core, twin), (self.twin, core)):
            new._init_bits(old.num_bits, old.num_hashes, old.seed,
                           buffer=bytearray(old._bits_view()), layout=old.layout)
            new._set_insert_count(old.insert_count)

    @invariant()
    def same_bits(self):
        if hasattr(self, "core"):  # invariants also run before initialize
            assert bytes(self.core._bits_view()) == bytes(self.twin._bits_view())
            assert self.core._popcount() == self.twin._popcount()
            assert self.core.insert_count == self.twin.insert_count == self.new_keys


def digest_strategy(size):
    """Digests of size bytes, aimed at the table's edges: a few small values
    (repeats), the all-zero digest (the empty slot's pattern), and digests
    equal in their first bytes (the same home slot, long probe runs)."""
    options = [st.binary(min_size=size, max_size=size),
               st.integers(0, min(2000, 256 ** size - 1)).map(
                   lambda i: i.to_bytes(size, "little")),
               st.just(bytes(size))]
    if size > 4:
        options.append(st.integers(0, 200).map(
            lambda i: bytes(4) + i.to_bytes(size - 4, "little")))
    return st.one_of(options)


class FingerprintTableMachine(RuleBasedStateMachine):
    """FingerprintTable on both implementations against a set of digests: the
    same answers, the same canonical bytes, and each loads the other's."""

    @initialize(size=st.sampled_from([1, 2, 8, 16, 20, 32, 64]))
    def build(self, size):
        self.size = size
        self.digests = digest_strategy(size)
        self.core, self.twin = CORE.FingerprintTable(size), TWIN.FingerprintTable(size)
        self.model = set()

    def _array(self, batch, as_array):
        if not as_array:
            return batch
        return np.array(batch, dtype=f"S{self.size}") if batch \
            else np.zeros(0, dtype=f"S{self.size}")

    @rule(data=st.data())
    def add(self, data):
        digest = data.draw(self.digests, label="digest")
        fresh = self.core.add(digest)
        assert fresh == self.twin.add(digest) == (digest not in self.model)
        self.model.add(digest)

    @rule(as_array=st.booleans(), n=st.integers(0, 1200), data=st.data())
    def add_many(self, as_array, n, data):
        batch = data.draw(st.lists(self.digests, max_size=n), label="batch")
        arg = self._array(batch, as_array)
        a, b = self.core.add_many(arg), self.twin.add_many(arg)
        expected, seen = [], set(self.model)
        for d in batch:
            expected.append(d not in seen)
            seen.add(d)
        assert a.dtype == b.dtype == np.bool_
        assert a.tolist() == b.tolist() == expected
        self.model = seen

    @rule(as_array=st.booleans(), data=st.data())
    def contains_many(self, as_array, data):
        batch = data.draw(st.lists(self.digests, max_size=300), label="batch")
        arg = self._array(batch, as_array)
        expected = [d in self.model for d in batch]
        assert self.core.contains_many(arg).tolist() == expected
        assert self.twin.contains_many(arg).tolist() == expected

    @rule(data=st.data())
    def contains(self, data):
        digest = data.draw(self.digests, label="digest")
        assert (digest in self.core) == (digest in self.twin) == (digest in self.model)
        assert self.core.contains(digest) == (digest in self.model)

    @rule()
    def clear(self):
        self.core.clear()
        self.twin.clear()
        self.model.clear()

    @rule()
    def load_across(self):
        # The core loads the twin's bytes, the twin the core's.
        core_bytes, twin_bytes = self.core.to_bytes(), self.twin.to_bytes()
        self.core, self.twin = CORE.FingerprintTable(self.size), TWIN.FingerprintTable(self.size)
        self.core.load(twin_bytes)
        self.twin.load(core_bytes)

    @rule()
    def pickle_round_trip(self):
        self.core = pickle.loads(pickle.dumps(self.core))
        self.twin = pickle.loads(pickle.dumps(self.twin))

    @invariant()
    def same_contents(self):
        if hasattr(self, "core"):
            assert len(self.core) == len(self.twin) == len(self.model)
            data = self.core.to_bytes()
            assert data == self.twin.to_bytes()  # one canonical order
            n = self.size
            assert sorted(data[i:i + n] for i in range(0, len(data), n)) == sorted(self.model)


TestBloomBitsMachine = BloomBitsMachine.TestCase
TestBloomBitsMachine.settings = _machine_settings
TestFingerprintTableMachine = FingerprintTableMachine.TestCase
TestFingerprintTableMachine.settings = _machine_settings
