"""What the Redis structures share about keys: the Redis Cluster hash slot
of a key, the names the structures take, the slot groups of a structure spread over the slots,
and the receipts hash (with the script that forgets a receipt) of a store
or a Bloom filter shard."""

from __future__ import annotations

import binascii
from typing import Any, List

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


def has_tag(name: bytes) -> bool:
    """Whether a name holds a hash tag (a non-empty ``{...}``), which pins
    every key that starts with it to one cluster slot."""
    start = name.find(b"{")
    return start >= 0 and name.find(b"}", start + 1) > start + 1


def group_prefixes(name: bytes, count: int) -> List[bytes]:
    """The start of the keys of each of ``count`` slot groups of a
    structure named ``name``, each group's keys in one cluster slot.

    A name with a hash tag keeps its slot: one group, ``NAME:``.  Otherwise
    group 0 is ``{NAME}:`` (the name's own slot) and group g is
    ``{NAME:TAG}:`` with a tag that puts it g/count of the way round the
    16,384 slots from the name's: the groups spread evenly over a cluster
    whose masters hold equal ranges of slots (as ``redis-cli --cluster
    create`` and rebalancing leave them), and the structures of different
    names start at different slots.  Braces in a name without a hash tag
    become parentheses in these keys."""
    if has_tag(name):
        return [name + b":"]
    base = name.replace(b"{", b"(").replace(b"}", b")")
    first = key_slot(b"{%s}" % base)
    out = [b"{%s}:" % base]
    for group in range(1, count):
        lo = (first + group * CLUSTER_SLOTS // count) % CLUSTER_SLOTS
        size = max(1, CLUSTER_SLOTS // count)
        j = 0
        while True:
            tag = b"%s:%d.%d" % (base, group, j)
            if (key_slot(b"{%s}" % tag) - lo) % CLUSTER_SLOTS < size:
                break
            j += 1
        out.append(b"{%s}:" % tag)
    return out


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
