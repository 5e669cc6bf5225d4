"""Twin of ``src/_core_minhash.pxi``: MinHash signatures.

A signature of k values is kept as the k minimums, over the document's
32-bit feature hashes x, of the permutations ``a[j] * x + b[j] mod 2**32``
(``a[j]`` odd).  The callers choose a and b (crawldedup.near.minhash makes
its own, crawldedup.compat.datasketch takes datasketch's); a document without
features keeps every minimum at ``2**32 - 1``.

The feature hashes:

* texts (``minhash_text``): the word n-grams and character n-grams of the
  lower-cased text, cut as ``simhash_text`` cuts it, each hashed from the
  hashes of its units (``shingle_hashes`` of ``word_hash`` and
  ``char_hash``), low 32 bits;
* keys (``minhash_keys``): the low 32 bits of ``hash64`` of each key (str
  as UTF-8, or bytes);
* keys (``minhash_sha1``): datasketch's default, the first four bytes of
  the key's SHA-1 read little-endian, then the MurmurHash3 32-bit finalizer
  (datasketch's "affine32" scheme);
* given 32-bit hashes (``minhash_hashes``), optionally through the
  finalizer first.
"""

from __future__ import annotations

import hashlib
from typing import Any, List, Tuple

import numpy as np

from crawldedup._reference.bloom import _key_bytes, hash64
from crawldedup._reference.lsh import _MASK64, _fmix64
from crawldedup._reference.simhash import _check_tokenizer, text_units

_MASK32 = 0xFFFFFFFF


def _params(a: Any, b: Any) -> Tuple[np.ndarray, np.ndarray]:
    a = np.asarray(a)
    b = np.asarray(b)
    if a.dtype != np.uint32 or b.dtype != np.uint32 or a.ndim != 1 or b.ndim != 1:
        raise TypeError("a and b must be one-dimensional uint32 arrays")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same length, got {a.shape[0]} and {b.shape[0]}")
    return a, b


def _check_mins(mins: Any, k: int) -> np.ndarray:
    if not isinstance(mins, np.ndarray) or mins.dtype != np.uint32 or mins.ndim != 1:
        raise TypeError("mins must be a one-dimensional uint32 array")
    if mins.shape[0] != k:
        raise ValueError(f"mins must have one value per permutation ({k}), got {mins.shape[0]}")
    return mins


def fmix32(h: int) -> int:
    """The MurmurHash3 32-bit finalizer."""
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    return h ^ (h >> 16)


def _fold(mins: np.ndarray, hashes: List[int], a: np.ndarray, b: np.ndarray) -> None:
    """mins[j] = min(mins[j], min of (a[j] * x + b[j]) mod 2**32 over hashes)."""
    if not hashes or not len(mins):
        return
    x = np.array(sorted(set(hashes)), dtype=np.uint64)[:, None]
    values = (a.astype(np.uint64)[None, :] * x + b.astype(np.uint64)[None, :]) & _MASK32
    mins[:] = np.minimum(mins, values.min(axis=0).astype(np.uint32))




# The base of a shingle's polynomial, and the salt of a character's hash.
_BASE = 0x9E3779B97F4A7C15
_CHAR_SALT = 0x2545F4914F6CDD1D


def word_hash(word: str) -> int:
    """A word's hash: hash64 of its UTF-8."""
    return hash64(word.encode("utf-8"))


def char_hash(ch: str) -> int:
    """A character's hash (a unit of the character stream): the MurmurHash3
    finalizer of its code point xor a salt."""
    return _fmix64(ord(ch) ^ _CHAR_SALT)


def shingle_hashes(unit_hashes: List[int], n: int) -> List[int]:
    """The 64-bit hashes of the n-grams of a sequence of units, given the
    units' hashes (the whole sequence as one n-gram when shorter): for
    units u_0 .. u_{m-1}, the sum of h(u_i) * B**(m - 1 - i) modulo 2**64,
    mixed by the MurmurHash3 finalizer."""
    if not unit_hashes:
        return []
    n = min(n, len(unit_hashes))
    out = []
    for i in range(len(unit_hashes) - n + 1):
        acc = 0
        for h in unit_hashes[i:i + n]:
            acc = (acc * _BASE + h) & _MASK64
        out.append(_fmix64(acc))
    return out


def minhash_text(text: str, mode: int, word_n: int, char_n: int, a: Any, b: Any) -> np.ndarray:
    """The signature (uint32, one value per permutation) of text: the low 32
    bits of the hashes of its word n-grams and character n-grams, cut as the
    SimHash tokenizers cut text (text_units in the SimHash twin)."""
    _check_tokenizer(mode, word_n, char_n)
    a, b = _params(a, b)
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    words, chars = text_units(text, mode)
    shingles = (shingle_hashes([word_hash(w) for w in words], word_n)
                + shingle_hashes([char_hash(c) for c in chars], char_n))
    mins = np.full(a.shape[0], _MASK32, dtype=np.uint32)
    _fold(mins, [h & _MASK32 for h in shingles], a, b)
    return mins


def minhash_texts(texts: List[str], mode: int, word_n: int, char_n: int, a: Any,
                  b: Any) -> np.ndarray:
    """minhash_text of every str in the list texts: an (n, k) uint32 array."""
    _check_tokenizer(mode, word_n, char_n)
    a, b = _params(a, b)
    if not isinstance(texts, list):
        raise TypeError(f"texts must be a list of str, not {type(texts).__name__}")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] must be str, not {type(t).__name__}")
    out = np.empty((len(texts), a.shape[0]), dtype=np.uint32)
    for i, t in enumerate(texts):
        out[i] = minhash_text(t, mode, word_n, char_n, a, b)
    return out


def _keys(keys: Any) -> List[bytes]:
    if not isinstance(keys, list):
        raise TypeError(f"keys must be a list, not {type(keys).__name__}")
    out = []
    for i, k in enumerate(keys):
        try:
            out.append(_key_bytes(k))
        except TypeError as e:
            raise TypeError(f"keys[{i}]: {e}") from None
    return out


def minhash_keys(keys: List[Any], a: Any, b: Any, mins: Any) -> None:
    """Fold the low 32 bits of hash64 of each key into mins."""
    a, b = _params(a, b)
    _check_mins(mins, a.shape[0])
    _fold(mins, [hash64(k) & _MASK32 for k in _keys(keys)], a, b)


def sha1_hash32(key: Any) -> int:
    """datasketch.hashfunc.sha1_hash32 of a key (str as UTF-8)."""
    return int.from_bytes(hashlib.sha1(_key_bytes(key)).digest()[:4], "little")


def minhash_sha1(keys: List[Any], a: Any, b: Any, mins: Any) -> None:
    """Fold fmix32(sha1_hash32(key)) of each key (bytes-like: a str is refused
    as hashlib refuses it) into mins (datasketch's default hash function and
    its "affine32" scheme)."""
    a, b = _params(a, b)
    _check_mins(mins, a.shape[0])
    if isinstance(keys, list):
        for i, k in enumerate(keys):
            if isinstance(k, str):
                raise TypeError(f"keys[{i}]: Strings must be encoded before hashing")
    _fold(mins, [fmix32(sha1_hash32(k)) for k in _keys(keys)], a, b)


def minhash_hashes(hashes: Any, a: Any, b: Any, mins: Any, mix: bool) -> None:
    """Fold the 32-bit hashes (through fmix32 first when mix) into mins."""
    a, b = _params(a, b)
    _check_mins(mins, a.shape[0])
    h = np.asarray(hashes)
    if h.dtype != np.uint32 or h.ndim != 1:
        raise TypeError("hashes must be a one-dimensional uint32 array")
    values = [int(x) for x in h]
    _fold(mins, [fmix32(x) for x in values] if mix else values, a, b)


def minhash_version() -> str:
    """Which version of the minimum kernel runs: the twin has one."""
    return "plain"
