"""Exactly one "new" per key across processes sharing a mapped file
(issue 30, item 4): the core's adds to a shared mapping decide on one bit's
fetch-or.  Eight processes add overlapping keys at once and no key is told
"new" twice; in one process, the mapped (atomic) path gives the answers of
the twin and of a filter in memory, hypothesis-checked."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import implementations
from conftest import platform_lacks
from crawldedup import BloomFilter, RotatingBloomFilter

POSIX = sys.platform != "win32"


def core_env():
    env = dict(os.environ)
    env.pop("CRAWLDEDUP_PURE_PYTHON", None)
    return env


ADDER = textwrap.dedent("""
    import sys
    import numpy as np
    from crawldedup import BloomFilter, RotatingBloomFilter
    path, out, who, count, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), \\
        int(sys.argv[4]), int(sys.argv[5])
    new = np.zeros((rounds, count), dtype=np.int64)
    cls = RotatingBloomFilter if path.endswith(".rbf") else BloomFilter
    with cls.open(path) as bf:
        for r in range(rounds):
            # Fresh keys each round, every process in the same order (one in
            # four backwards), started together: they race on the same keys.
            keys = [f"https://shared.example/{r}/{i}" for i in range(count)]
            order = np.arange(count)
            if who % 4 == 3:
                order = order[::-1]
            print("ready", flush=True)
            sys.stdin.readline()
            if r % 2 == 0:
                # One batch of all the keys: the probes run in C at tens of
                # nanoseconds a key, and a process that reads bits another
                # one set runs faster and catches up with it.
                new[r, order] += bf.add_many([keys[i] for i in order])
                continue
            at = 0
            while at < count:
                step = 1 + (at * 7 + who * 13 + r) % 32
                part = order[at:at + step]
                if (at + who) % 3:
                    answers = bf.add_many([keys[i] for i in part])
                else:
                    answers = np.array([bf.add(keys[i]) for i in part], dtype=bool)
                new[r, part] += answers
                at += step
    np.save(out, new)
    print("done", flush=True)
""")


@platform_lacks(not POSIX, "shared mappings with flock")
@pytest.mark.parametrize("layout", ["standard", "blocked", "rotating"])
def test_eight_processes_are_told_new_once_per_key(tmp_path, layout):
    count, rounds = 100_000, 6
    if layout == "rotating":
        # A rotating file inherits it: its newest generation's add decides
        # (no rotation happens here; one in the middle of adds moves them to
        # the next generation, docs/format.md).
        path = tmp_path / "shared.rbf"
        RotatingBloomFilter.open(path, capacity=count * rounds, error_rate=0.01,
                                 generations=2).close()
    else:
        path = tmp_path / "shared.bloom"
        BloomFilter.open(path, capacity=count * rounds, error_rate=0.01, layout=layout).close()
    procs = []
    for who in range(8):
        procs.append(subprocess.Popen(
            [sys.executable, "-c", ADDER, str(path), str(tmp_path / f"p{who}.npy"), str(who),
             str(count), str(rounds)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=core_env()))
    for _ in range(rounds):
        for proc in procs:
            assert proc.stdout.readline().strip() == "ready"
        for proc in procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0 and "done" in out
    told = sum(np.load(tmp_path / f"p{who}.npy") for who in range(8))
    twice = int((told > 1).sum())
    assert twice == 0, f"{twice} of {count * rounds} keys were told new more than once"
    # A key told "new" by nobody was a false positive before anyone added it.
    never = int((told == 0).sum())
    assert never < count * rounds * 0.02
    with (RotatingBloomFilter if layout == "rotating" else BloomFilter).open(path,
                                                                            mode="r") as bf:
        assert bf.insert_count == int(told.sum())
        assert bf.contains_many([f"https://shared.example/{r}/{i}" for r in range(rounds)
                                 for i in range(count)]).all()


# ------------------------------------------ one process: the same answers

keys_st = st.lists(st.one_of(st.binary(max_size=12), st.integers(0, 300).map(str)),
                   max_size=120)


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.tuples(st.booleans(), keys_st), min_size=1, max_size=6),
       capacity=st.sampled_from([1, 7, 50, 1_000]),
       layout=st.sampled_from(["standard", "blocked"]))
def test_the_mapped_path_answers_as_the_twin_and_memory(tmp_path_factory, batches, capacity,
                                                        layout):
    folder = tmp_path_factory.mktemp("once")
    path = str(folder / "f.bloom")
    core_api = implementations.package("core").api
    ref_api = implementations.package("reference").api
    mapped = core_api.BloomFilter.open(path, capacity=capacity, layout=layout, mode="w")
    ref_mapped = ref_api.BloomFilter.open(str(folder / "r.bloom"), capacity=capacity,
                                          layout=layout, mode="w")
    memory = core_api.BloomFilter(capacity, layout=layout)
    twin = ref_api.BloomFilter(capacity, layout=layout)
    seen = set()
    try:
        for single, keys in batches:
            if single:
                got = [[f.add(k) for k in keys] for f in (mapped, ref_mapped, memory, twin)]
            else:
                got = [f.add_many(keys).tolist() for f in (mapped, ref_mapped, memory, twin)]
            assert got[0] == got[1] == got[2] == got[3]
            # A key added before is never new again (a key not added before
            # is new, or a false positive).
            for key, fresh in zip(keys, got[0]):
                norm = key.encode() if isinstance(key, str) else key
                assert not (fresh and norm in seen)
                seen.add(norm)
        assert mapped.insert_count == twin.insert_count
        assert mapped.to_bytes()[4096:] == twin.to_bytes()[4096:]
    finally:
        mapped.close()
        ref_mapped.close()


def test_a_key_probing_one_bit_twice_is_new_once(tmp_path):
    # A filter of one 512-bit block, or of 12 bits: a key's probes often hit
    # one bit twice, which must not make the deciding bit read as set.
    for capacity, layout in ((1, "standard"), (1, "blocked"), (3, "standard")):
        path = str(tmp_path / f"{capacity}-{layout}.bloom")
        with BloomFilter.open(path, capacity=capacity, layout=layout, error_rate=0.5) as bf:
            memory = BloomFilter(capacity, layout=layout, error_rate=0.5)
            keys = [f"k{i}" for i in range(200)]
            assert [bf.add(k) for k in keys] == [memory.add(k) for k in keys]
            assert bf.add_many(keys).tolist() == [False] * 200
