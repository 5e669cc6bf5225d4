"""64-bit SimHash fingerprints for near-duplicate text, computed in the core.

A SimHash maps a document to 64 bits so that similar documents differ in few
bits: compare two fingerprints with :func:`hamming` and call them near
duplicates at distance <= 3 (the usual choice for 64 bits).

The default tokenizer, ``"auto"``, lower-cases the text (``str.lower()``),
keeps word characters (those of ``re``'s ``\\w``), and makes words (unigrams)
of space-separated scripts and character bigrams of scripts written without
spaces (Chinese, Japanese kana, Thai, Lao, Khmer, Myanmar), so mixed
Chinese/English pages work.  Each distinct feature counts once and is hashed
with MurmurHash3 (:func:`crawldedup.hash64` of its UTF-8).

>>> from crawldedup import simhash, hamming
>>> page = ("Crawlers fetch the same article from many portals. A page that differs "
...         "only in a counter, an advertisement or a footer is a near duplicate, and a "
...         "crawler that recognises it saves bandwidth, storage and the time of everyone "
...         "who reads the index later. SimHash fingerprints make that check cheap: "
...         "similar pages get fingerprints that differ in few bits.")
>>> hamming(simhash(page), simhash(page.replace("bandwidth", "money"))) <= 3
True
>>> hamming(simhash(page), simhash("An unrelated page about something else entirely.")) > 10
True
>>> simhash("")          # no features
0
"""

from __future__ import annotations

import operator
from typing import Callable, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from crawldedup import _kernel

__all__ = ["simhash", "simhash_many", "simhash_features", "hamming", "hamming_many",
           "TOKENIZERS"]

TOKENIZERS = ("auto", "words", "chars")
_MODES = {"auto": _kernel.TOKENIZER_AUTO, "words": _kernel.TOKENIZER_WORDS,
          "chars": _kernel.TOKENIZER_CHARS}
# Default n-gram sizes (word n-gram, character n-gram): docs/simhash.md says
# why ("Why these defaults"), docs/benchmarks/simhash.md gives the recall.
_DEFAULT_NGRAM = {"auto": (1, 2), "words": (1, 1), "chars": (4, 4)}
_MASK64 = (1 << 64) - 1

Tokenizer = Union[str, Callable[[str], Iterable[str]]]
NGram = Union[None, int, Tuple[int, int]]


def _ngram_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not 1 <= value <= _kernel.MAX_NGRAM:
        raise ValueError(f"{name} must be in [1, {_kernel.MAX_NGRAM}], got {value}")
    return value


def _plan(tokenizer: object, ngram: object, name: str = "ngram") -> Tuple[int, int, int]:
    """(mode, word_n, char_n) for a built-in tokenizer name; name is what the
    caller calls ngram in its messages."""
    if not isinstance(tokenizer, str):
        raise TypeError(f"tokenizer must be one of {TOKENIZERS} or a callable, "
                        f"not {type(tokenizer).__name__}")
    if tokenizer not in _MODES:
        raise ValueError(f"tokenizer must be one of {TOKENIZERS} or a callable, "
                         f"got {tokenizer!r}")
    if ngram is None:
        word_n, char_n = _DEFAULT_NGRAM[tokenizer]
    elif isinstance(ngram, tuple):
        if tokenizer != "auto" or len(ngram) != 2:
            raise ValueError(f"{name} may be a (word_n, char_n) pair only with "
                             "tokenizer='auto'")
        word_n = _ngram_int(ngram[0], f"{name}[0]")
        char_n = _ngram_int(ngram[1], f"{name}[1]")
    else:
        word_n = char_n = _ngram_int(ngram, name)
    return _MODES[tokenizer], word_n, char_n


def _feature_hashes(features: Iterable[object], name: str) -> np.ndarray:
    out = []
    for i, feat in enumerate(features):
        if not isinstance(feat, str):
            raise TypeError(f"{name}[{i}] must be str, not {type(feat).__name__}")
        out.append(_kernel.hash64(feat))
    return np.array(out, dtype=np.uint64)


def _as_weights(weights: object, n: int) -> np.ndarray:
    try:
        w = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"weights must be a sequence of numbers, not "
                        f"{type(weights).__name__}") from None
    if w.ndim != 1 or w.shape[0] != n:
        raise ValueError(f"weights must have one number per feature ({n}), got shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError("weights must be finite numbers")
    return np.ascontiguousarray(w)


def _as_u64(values: object, name: str) -> np.ndarray:
    """A contiguous uint64 array of values in [0, 2**64)."""
    if isinstance(values, np.ndarray) and values.dtype != object:
        if values.ndim != 1:
            raise ValueError(f"{name} must be one-dimensional, got shape {values.shape}")
        if values.dtype.kind not in "iu":
            raise TypeError(f"{name} must hold integers, not {values.dtype}")
        if values.dtype.kind == "i" and values.size and values.min() < 0:
            raise ValueError(f"{name} must hold integers in [0, 2**64)")
        return np.ascontiguousarray(values, dtype=np.uint64)
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of integers, not {type(values).__name__}")
    try:
        items = list(values)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(f"{name} must be a sequence of integers, not "
                        f"{type(values).__name__}") from None
    out = np.empty(len(items), dtype=np.uint64)
    for i, v in enumerate(items):
        out[i] = _fp(v, f"{name}[{i}]")
    return out


def _fp(value: object, name: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not bool")
    try:
        v = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None
    if not 0 <= v <= _MASK64:
        raise ValueError(f"{name} must be in [0, 2**64), got {v}")
    return v


def simhash(text_or_features: Union[str, Iterable[str]], *, tokenizer: Tokenizer = "auto",
            ngram: NGram = None, weights: Optional[Sequence[float]] = None) -> int:
    """64-bit SimHash of a text, or of a sequence of str features.

    text: tokenized by ``tokenizer``: ``"auto"`` (default; words for
    space-separated scripts, character n-grams for CJK and other unspaced
    scripts), ``"words"`` (word n-grams), ``"chars"`` (character n-grams of all
    word characters concatenated), or a callable returning the str features of
    the (original, not lower-cased) text, each weighted 1 like a feature
    sequence.  ``ngram``: an int, or for ``"auto"`` a (word_n, char_n) pair;
    defaults (1, 2) for "auto", 1 for "words", 4 for "chars".  Built-in
    tokenizers count each distinct feature once.  A text without features
    (empty, whitespace or punctuation only) gives 0.

    features: each str is hashed with :func:`crawldedup.hash64`; ``weights``
    (finite numbers, one per feature; default 1 each) weight them, and bit j is
    set when the features with bit j set carry more than half of the total.

    >>> simhash(["tall", "green", "tree"]) == simhash(["tree", "green", "tall"])
    True
    """
    if isinstance(text_or_features, str):
        if weights is not None:
            raise ValueError("weights apply to a sequence of features, not to a text")
        if callable(tokenizer):
            return simhash_features(_feature_hashes(tokenizer(text_or_features),
                                                    "tokenizer(text)"))
        mode, word_n, char_n = _plan(tokenizer, ngram)
        return _kernel.simhash_text(text_or_features, mode, word_n, char_n)
    if isinstance(text_or_features, (bytes, bytearray, memoryview)):
        raise TypeError("text_or_features must be str or an iterable of str features, not "
                        f"{type(text_or_features).__name__} (decode bytes first)")
    try:
        iterator = iter(text_or_features)
    except TypeError:
        raise TypeError("text_or_features must be str or an iterable of str features, not "
                        f"{type(text_or_features).__name__}") from None
    hashes = _feature_hashes(iterator, "text_or_features")
    return simhash_features(hashes, weights)


def _text_list(texts: Iterable[str]) -> List[str]:
    """texts as a list of str (the batch of simhash_many and minhash_many);
    TypeError naming the first that is not a str."""
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"texts must be an iterable of str, not {type(texts).__name__}")
    try:
        items = list(texts)
    except TypeError:
        raise TypeError(f"texts must be an iterable of str, not {type(texts).__name__}") from None
    for i, t in enumerate(items):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] must be str, not {type(t).__name__}")
    return items


def simhash_many(texts: Iterable[str], *, tokenizer: Tokenizer = "auto",
                 ngram: NGram = None) -> np.ndarray:
    """:func:`simhash` of every text, as a numpy uint64 array.  The built-in
    tokenizers run in the core with the GIL released for the whole batch.

    >>> simhash_many(["a text", "another text", ""]).dtype
    dtype('uint64')
    """
    items = _text_list(texts)
    if callable(tokenizer):
        return np.array([simhash(t, tokenizer=tokenizer) for t in items], dtype=np.uint64)
    mode, word_n, char_n = _plan(tokenizer, ngram)
    return _kernel.simhash_texts(items, mode, word_n, char_n)


def simhash_features(hashes: Iterable[int], weights: Optional[Sequence[float]] = None) -> int:
    """SimHash of 64-bit feature hashes (ints in [0, 2**64) or a numpy
    integer array): bit j is set when the features with bit j set carry more
    than half of the total weight (default weight 1 each; weights are finite
    numbers, summed in order as float64).  No features give 0.

    >>> simhash_features([0b1011, 0b0011, 0b0110])
    3
    """
    hs = _as_u64(hashes, "hashes")
    if weights is None:
        return _kernel.simhash_hashes(hs)
    return _kernel.simhash_hashes(hs, _as_weights(weights, hs.shape[0]))


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two 64-bit fingerprints.

    >>> hamming(0b1011, 0b0001)
    2
    """
    x = _fp(a, "a") ^ _fp(b, "b")
    return bin(x).count("1")


def hamming_many(fps: Union[np.ndarray, Iterable[int]], fp: int) -> np.ndarray:
    """Hamming distance between fp and each of fps, as a numpy uint8 array.

    >>> hamming_many([0, 1, 3], 1).tolist()
    [1, 0, 1]
    """
    return _kernel.hamming_many(_as_u64(fps, "fps"), _fp(fp, "fp"))

