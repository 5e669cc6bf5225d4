"""Twin of ``src/_core_resp.pxi``: the Redis BITFIELD operations of a batch
of keys for crawldedup.redis.RedisBloomFilter."""

from __future__ import annotations

from typing import Any, List, Tuple

import numpy as np

from crawldedup._reference.bloom import MAX_NUM_HASHES, _check_seed, _layout_code, hash_indices


def bloom_resp(keys: Any, k: int, m: int, seed: int, layout: str, shard_bits: int,
               shards: int, setting: bool) -> Tuple[List[bytes], np.ndarray]:
    """The BITFIELD operations for keys, grouped by shard (see the core's
    docstring): ``(ops, shard_of)``."""
    _check_seed(seed)
    layout = _layout_code(layout)
    for value in (k, m, shard_bits, shards):
        if not isinstance(value, int):
            raise TypeError("k, m, shard_bits and shards must be ints")
    if k < 1 or k > MAX_NUM_HASHES:
        raise ValueError(f"k must be in [1, {MAX_NUM_HASHES}], got {k}")
    if m < 1 or m >= 2 ** 64:
        raise ValueError(f"m must be in [1, 2**64), got {m}")
    if layout == "blocked" and m % 512:
        raise ValueError(f"m must be a multiple of 512 for the blocked layout, got {m}")
    if shards < 1 or shards > 1 << 16:
        raise ValueError(f"shards must be in [1, 65536], got {shards}")
    if shard_bits < 1 or shard_bits * shards < m:
        raise ValueError(f"shards * shard_bits must cover the m = {m} bits, "
                         f"got {shards} * {shard_bits}")
    if shards > 1 and (layout != "blocked" or shard_bits % 512):
        raise ValueError("several shards need the blocked layout and shard_bits a multiple "
                         "of 512 (all bits of a key in one shard)")
    keys = list(keys)
    head = b"$3\r\nSET\r\n$2\r\nu1\r\n" if setting else b"$3\r\nGET\r\n$2\r\nu1\r\n"
    tail = b"$1\r\n1\r\n" if setting else b""
    parts: List[List[bytes]] = [[] for _ in range(shards)]
    shard_of = np.zeros(len(keys), dtype=np.uint32)
    for i, key in enumerate(keys):
        positions = hash_indices(key, k, m, seed, layout)
        shard = positions[0] // shard_bits
        shard_of[i] = shard
        for p in positions:
            bit = p - shard * shard_bits
            # local storage: bit b is bit b % 8 (LSB first) of byte b // 8;
            # Redis counts a byte's bits from the most significant one
            offset = str((bit & ~7) | (7 - (bit & 7))).encode("ascii")
            parts[shard].append(head + b"$%d\r\n%s\r\n" % (len(offset), offset) + tail)
    return [b"".join(p) for p in parts], shard_of
