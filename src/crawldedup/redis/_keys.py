"""What the Redis structures share about keys: the Redis Cluster hash slot
of a key, the names the structures take, and the receipts hash (with the
script that forgets a receipt) of a store or a Bloom filter shard."""

from __future__ import annotations

import binascii
from typing import Any

CLUSTER_SLOTS = 16384


def key_slot(key: bytes) -> int:
    """The Redis Cluster hash slot of a key (CRC16-XMODEM of its hash tag)."""
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    return binascii.crc_hqx(key, 0) % CLUSTER_SLOTS


# forget_receipt: KEYS[1] the receipts, ARGV[1] the receipt.
FORGET_SCRIPT = b"""local calls = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0') or 0
for i = 0, calls - 1 do redis.call('HDEL', KEYS[1], ARGV[1] .. ':' .. i) end
return redis.call('HDEL', KEYS[1], ARGV[1])"""


def receipts_key(name: bytes) -> bytes:
    """The hash of a store's receipts, in the Redis Cluster slot of its set
    (a script takes both): the name's own hash tag when it has one, else
    the name as the tag; a name with a "{" that makes no tag (hashed whole)
    gets the first tag ``{receipts:N}`` in its slot."""
    start = name.find(b"{")
    end = name.find(b"}", start + 1) if start >= 0 else -1
    if start >= 0 and end > start + 1:
        return name + b":receipts"
    if start < 0:
        return b"{%s}:receipts" % name
    slot = key_slot(name)
    n = 0
    while key_slot(b"{receipts:%d}" % n) != slot:
        n += 1
    return b"%s:{receipts:%d}" % (name.replace(b"{", b"(").replace(b"}", b")"), n)


def check_name(name: Any) -> bytes:
    if isinstance(name, bytes):
        data = name
    elif isinstance(name, str):
        data = name.encode("utf-8")
    else:
        raise TypeError(f"name must be a str, not {type(name).__name__}")
    if not data:
        raise ValueError("name must not be empty")
    return data
