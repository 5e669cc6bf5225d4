"""State machines over the two kernel implementations at once.

Each step runs on the compiled core and on the pure-Python twin, and on a
model (a Python set): after every step the two kernels must hold the same
bytes and agree on every answer, and neither may forget a key the model
holds.  Keys are drawn so that batches cross the core's chunk size and the
filter is small enough to fill up (false positives happen, and must be the
same ones in both).
"""

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from conftest import load_impl

CORE = load_impl("core")
TWIN = load_impl("reference")

# Fewer examples than the profile: each runs many steps on both kernels.
_profile = settings()
_machine_settings = settings(max_examples=max(10, _profile.max_examples // 5),
                             stateful_step_count=30, deadline=None)

keys = st.one_of(st.integers(0, 3000).map(lambda i: f"https://a.example/{i}"),
                 st.integers(0, 300).map(lambda i: f"新闻/{i}".encode()),
                 st.text(max_size=12))
batches = st.lists(keys, max_size=700)


class BloomBitsMachine(RuleBasedStateMachine):
    """BloomBits on both implementations against a set."""

    @initialize(num_bits=st.sampled_from([64, 513, 4096, 8192]), k=st.integers(1, 9),
                seed=st.integers(0, 2**32 - 1), blocked=st.booleans())
    def build(self, num_bits, k, seed, blocked):
        layout = "blocked" if blocked else "standard"
        if blocked:
            num_bits = max(512, num_bits - num_bits % 512)
        self.core, self.twin = CORE.BloomBits(), TWIN.BloomBits()
        self.core._init_bits(num_bits, k, seed, layout=layout)
        self.twin._init_bits(num_bits, k, seed, layout=layout)
        self.model = set()

    @rule(key=keys)
    def add(self, key):
        assert self.core.add(key) == self.twin.add(key)
        self.model.add(key)

    @rule(batch=batches)
    def add_many(self, batch):
        a, b = self.core.add_many(batch), self.twin.add_many(batch)
        assert a.dtype == b.dtype == np.bool_
        assert a.tolist() == b.tolist()
        self.model.update(batch)

    @rule(batch=batches)
    def contains_many(self, batch):
        a, b = self.core.contains_many(batch), self.twin.contains_many(batch)
        assert a.tolist() == b.tolist()
        assert all(a[i] for i, key in enumerate(batch) if key in self.model)

    @rule(key=keys)
    def contains(self, key):
        assert (key in self.core) == (key in self.twin)
        if key in self.model:
            assert key in self.core

    @rule()
    def clear(self):
        self.core._clear()
        self.twin._clear()
        self.model.clear()

    @rule(batch=batches, union=st.booleans())
    def merge(self, batch, union):
        others = []
        for impl, mine in ((CORE, self.core), (TWIN, self.twin)):
            other = impl.BloomBits()
            other._init_bits(mine.num_bits, mine.num_hashes, mine.seed, layout=mine.layout)
            other.add_many(batch)
            (mine._or_from if union else mine._and_from)(other)
            others.append(other)
        if union:
            self.model.update(batch)
        else:
            self.model &= set(batch)

    @invariant()
    def same_bits(self):
        if hasattr(self, "core"):  # invariants also run before initialize
            assert bytes(self.core._bits_view()) == bytes(self.twin._bits_view())
            assert self.core._popcount() == self.twin._popcount()
            assert self.core.insert_count == self.twin.insert_count


class FingerprintTableMachine(RuleBasedStateMachine):
    """FingerprintTable on both implementations against a set of digests."""

    def __init__(self):
        super().__init__()
        self.core, self.twin = CORE.FingerprintTable(8), TWIN.FingerprintTable(8)
        self.model = set()

    digests = st.one_of(st.binary(min_size=8, max_size=8),
                        st.integers(0, 2000).map(lambda i: i.to_bytes(8, "little")),
                        # Equal low bytes: the same home slot, long probe runs.
                        st.integers(0, 200).map(lambda i: bytes(4) + i.to_bytes(4, "little")))

    @rule(digest=digests)
    def add(self, digest):
        fresh = self.core.add(digest)
        assert fresh == self.twin.add(digest) == (digest not in self.model)
        self.model.add(digest)

    @rule(batch=st.lists(digests, max_size=1200))
    def add_many(self, batch):
        array = np.array(batch, dtype="S8") if batch else np.zeros(0, dtype="S8")
        a, b = self.core.add_many(array), self.twin.add_many(array)
        expected, seen = [], set(self.model)
        for d in batch:
            expected.append(d not in seen)
            seen.add(d)
        assert a.tolist() == b.tolist() == expected
        self.model = seen

    @rule(batch=st.lists(digests, max_size=300))
    def contains_many(self, batch):
        array = np.array(batch, dtype="S8") if batch else np.zeros(0, dtype="S8")
        expected = [d in self.model for d in batch]
        assert self.core.contains_many(array).tolist() == expected
        assert self.twin.contains_many(array).tolist() == expected

    @rule()
    def clear(self):
        self.core.clear()
        self.twin.clear()
        self.model.clear()

    @rule()
    def reload(self):
        data = self.core.to_bytes()
        assert sorted(data[i:i + 8] for i in range(0, len(data), 8)) == sorted(self.model)
        self.core, old = CORE.FingerprintTable(8), self.core
        self.core.load(self.twin.to_bytes())
        assert len(self.core) == len(old)

    @invariant()
    def same_size(self):
        assert len(self.core) == len(self.twin) == len(self.model)


TestBloomBitsMachine = BloomBitsMachine.TestCase
TestBloomBitsMachine.settings = _machine_settings
TestFingerprintTableMachine = FingerprintTableMachine.TestCase
TestFingerprintTableMachine.settings = _machine_settings
