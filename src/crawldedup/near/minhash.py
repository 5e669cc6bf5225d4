"""MinHash signatures for near-duplicate text, computed in the core.

A MinHash signature is ``num_perm`` 32-bit values; the fraction of positions
at which two signatures agree estimates the Jaccard similarity of the two
documents' shingle sets (:func:`jaccard`).  Near duplicates are found among
many signatures by banding them (:class:`crawldedup.near.lsh.MinHashIndex`).

Shingles are n-grams of ``shingle`` units, cut by the SimHash tokenizers:
the ``"auto"`` tokenizer lower-cases the text and makes word n-grams of
space-separated scripts and character n-grams of scripts written without
spaces (Chinese, Japanese kana, Thai, ...), so mixed pages work.  A text
with fewer units than ``shingle`` is one shingle, itself.

Each unit is hashed once (a word with :func:`crawldedup.hash64` of its
UTF-8, a character from its code point); a shingle's hash is a polynomial
of its units' hashes, mixed by the MurmurHash3 finalizer; its low 32 bits x
enter the signature, whose
value j is the minimum over the shingles of ``a[j] * x + b[j] mod 2**32``,
with odd ``a[j]`` and ``b[j]`` drawn from ``seed`` by :func:`permutations`.
All of it is frozen: the same text, num_perm and seed give the same
signature in every release (``crawldedup._reference.minhash`` is the
definition in Python).

>>> from crawldedup.near.minhash import minhash, jaccard
>>> page = ("Crawlers fetch the same article from many portals, and a page that "
...         "differs only in a counter or a footer is a near duplicate of the "
...         "first copy they stored.")
>>> sig = minhash(page, shingle=3)
>>> sig.shape, sig.dtype
((128,), dtype('uint32'))
>>> round(jaccard(sig, minhash(page.replace("counter", "clock"), shingle=3)), 1) >= 0.6
True
>>> jaccard(sig, minhash("An unrelated page about something else.", shingle=3)) < 0.1
True
"""

from __future__ import annotations

import functools
import operator
from typing import Callable, Iterable, List, Tuple, Union

import numpy as np

from crawldedup import _kernel
from crawldedup.near.simhash import _plan, _text_list

__all__ = ["minhash", "minhash_many", "jaccard", "jaccard_many", "permutations",
           "MAX_PERM", "EMPTY_VALUE"]

# The most permutations a signature may have.
MAX_PERM = 1 << 16
# Every value of the signature of a document without shingles.
EMPTY_VALUE = (1 << 32) - 1

_MASK64 = (1 << 64) - 1

Tokenizer = Union[str, Callable[[str], Iterable[Union[str, bytes]]]]
Shingle = Union[int, Tuple[int, int]]


def _num_perm(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"num_perm must be an int, not {type(value).__name__}")
    if not 1 <= value <= MAX_PERM:
        raise ValueError(f"num_perm must be in [1, {MAX_PERM}], got {value}")
    return value


def _seed(value: object) -> int:
    if isinstance(value, bool):
        raise TypeError("seed must be an int, not bool")
    try:
        seed = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"seed must be an int, not {type(value).__name__}") from None
    if not 0 <= seed <= _MASK64:
        raise ValueError(f"seed must be in [0, 2**64), got {seed}")
    return seed


@functools.lru_cache(maxsize=64)
def _permutations(num_perm: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    # SplitMix64 (Steele, Lea and Flood 2014), output i from the state
    # seed + i * gamma; numpy's uint64 arrays wrap modulo 2**64 as it wants.
    step = np.arange(1, 2 * num_perm + 1, dtype=np.uint64)
    z = np.uint64(seed) + step * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    low = (z & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    a = low[0::2] | np.uint32(1)
    b = low[1::2].copy()
    a.flags.writeable = False
    b.flags.writeable = False
    return a, b


def permutations(num_perm: int = 128, seed: int = 1) -> Tuple[np.ndarray, np.ndarray]:
    """The permutation parameters (a, b) of a signature: two read-only uint32
    arrays of num_perm values, a odd.  They are the low 32 bits of the
    SplitMix64 sequence started at seed, taken in pairs (a | 1, b): frozen.

    >>> a, b = permutations(4, seed=1)
    >>> bool((a % 2 == 1).all()), a.dtype
    (True, dtype('uint32'))
    """
    return _permutations(_num_perm(num_perm), _seed(seed))


def _tokens(tokens: Iterable[object], name: str) -> List[Union[str, bytes]]:
    out: List[Union[str, bytes]] = []
    for i, tok in enumerate(tokens):
        if not isinstance(tok, (str, bytes)):
            raise TypeError(f"{name}[{i}] must be str or bytes, not {type(tok).__name__}")
        out.append(tok)
    return out


def minhash(text_or_tokens: Union[str, Iterable[Union[str, bytes]]], num_perm: int = 128, *,
            shingle: Shingle = 5, tokenizer: Tokenizer = "auto", seed: int = 1) -> np.ndarray:
    """MinHash signature of a text, or of a sequence of tokens, as a numpy
    uint32 array of num_perm values.

    text (str): cut into shingles by ``tokenizer``: ``"auto"`` (default;
    word n-grams of space-separated scripts, character n-grams of CJK and
    other unspaced scripts), ``"words"`` (word n-grams), ``"chars"``
    (character n-grams of all word characters), or a callable returning the
    tokens (str or bytes) of the text, used as they are.  ``shingle``: the n
    of the n-grams, or for ``"auto"`` a (word_n, char_n) pair; from 1 to 16.
    A text without shingles (empty, whitespace or punctuation only) gives
    :data:`EMPTY_VALUE` everywhere.

    tokens (an iterable of str or bytes): each token is hashed as it is (str
    as UTF-8); repeats count once, as in a set.

    >>> bool((minhash(["tall", "green", "tree"]) == minhash(["tree", "green", "tall"])).all())
    True
    >>> int(minhash("")[0]) == EMPTY_VALUE
    True
    """
    a, b = permutations(num_perm, seed)
    if isinstance(text_or_tokens, str):
        if callable(tokenizer):
            return _from_tokens(tokenizer(text_or_tokens), "tokenizer(text)", a, b)
        mode, word_n, char_n = _plan(tokenizer, shingle, "shingle")
        return _kernel.minhash_text(text_or_tokens, mode, word_n, char_n, a, b)
    if isinstance(text_or_tokens, (bytes, bytearray, memoryview)):
        raise TypeError("text_or_tokens must be str or an iterable of str or bytes tokens, "
                        f"not {type(text_or_tokens).__name__} (decode bytes first)")
    try:
        iterator = iter(text_or_tokens)
    except TypeError:
        raise TypeError("text_or_tokens must be str or an iterable of str or bytes tokens, "
                        f"not {type(text_or_tokens).__name__}") from None
    return _from_tokens(iterator, "text_or_tokens", a, b)


def _from_tokens(tokens: Iterable[object], name: str, a: np.ndarray,
                 b: np.ndarray) -> np.ndarray:
    mins = np.full(a.shape[0], EMPTY_VALUE, dtype=np.uint32)
    _kernel.minhash_keys(_tokens(tokens, name), a, b, mins)
    return mins


def minhash_many(texts: Iterable[str], num_perm: int = 128, *, shingle: Shingle = 5,
                 tokenizer: Tokenizer = "auto", seed: int = 1) -> np.ndarray:
    """:func:`minhash` of every text, as an (n, num_perm) numpy uint32 array.
    The built-in tokenizers run in the core with the GIL released for the
    whole batch, and a batch of more than a few hundred thousand characters
    runs on every core (``crawldedup.set_threads`` caps them).

    >>> minhash_many(["a text", "another text", ""], num_perm=64).shape
    (3, 64)
    """
    items = _text_list(texts)
    a, b = permutations(num_perm, seed)
    if callable(tokenizer):
        out = np.empty((len(items), a.shape[0]), dtype=np.uint32)
        for i, t in enumerate(items):
            out[i] = _from_tokens(tokenizer(t), f"tokenizer(texts[{i}])", a, b)
        return out
    mode, word_n, char_n = _plan(tokenizer, shingle, "shingle")
    return _kernel.minhash_texts(items, mode, word_n, char_n, a, b)


def _signature(value: object, name: str) -> np.ndarray:
    sig = np.asarray(value)
    if sig.ndim != 1:
        raise ValueError(f"{name} must be one signature (one-dimensional), got shape {sig.shape}")
    if sig.shape[0] == 0:
        raise ValueError("signatures must not be empty")
    if sig.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers, not {sig.dtype}")
    return sig


def jaccard(a: object, b: object) -> float:
    """The Jaccard similarity of two documents estimated from their
    signatures: the fraction of positions where they agree.

    >>> jaccard([1, 2, 3, 4], [1, 2, 0, 0])
    0.5
    """
    x = _signature(a, "a")
    y = _signature(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"signatures of different lengths: {x.shape[0]} and {y.shape[0]}")
    return float(np.count_nonzero(x == y)) / int(x.shape[0])


def jaccard_many(signatures: object, signature: object) -> np.ndarray:
    """:func:`jaccard` of signature against each row of signatures (an
    (n, num_perm) array), as a float64 array.

    >>> jaccard_many([[1, 2], [1, 3], [0, 0]], [1, 2]).tolist()
    [1.0, 0.5, 0.0]
    """
    rows = np.asarray(signatures)
    sig = _signature(signature, "signature")
    if rows.ndim != 2 or rows.shape[1] != sig.shape[0]:
        raise ValueError(f"signatures must be an (n, {sig.shape[0]}) array, got shape "
                         f"{rows.shape}")
    if rows.dtype.kind not in "iu":
        raise TypeError(f"signatures must hold integers, not {rows.dtype}")
    out: np.ndarray = np.count_nonzero(rows == sig[None, :], axis=1) / sig.shape[0]
    return out
