"""Twin of ``src/_core_simhash*.pxi``: SimHash of
texts and of feature hashes, Hamming distances, and the ``simhash``
package's (leonsim) values."""

from __future__ import annotations

import hashlib
from typing import Any, Iterable, List, Tuple

import numpy as np

from crawldedup._reference.bloom import Key, _key_bytes, hash64

TOKENIZER_AUTO = 0
TOKENIZER_WORDS = 1
TOKENIZER_CHARS = 2
MAX_NGRAM = 16

# Scripts written without spaces, cut into character n-grams by the "auto"
# tokenizer (see sh_is_unspaced in src/_core_simhash_text.pxi).
_UNSPACED = ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF), (0x3040, 0x30FF),
             (0x31F0, 0x31FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF),
             (0x20000, 0x3FFFF))


def _is_unspaced(ch: str) -> bool:
    c = ord(ch)
    return any(lo <= c <= hi for lo, hi in _UNSPACED)


def _is_word(ch: str) -> bool:
    """re's \\w on str patterns."""
    return ch.isalnum() or ch == "_"


def _check_tokenizer(mode: int, word_n: int, char_n: int) -> None:
    if mode not in (TOKENIZER_AUTO, TOKENIZER_WORDS, TOKENIZER_CHARS):
        raise ValueError(f"mode must be TOKENIZER_AUTO, _WORDS or _CHARS, got {mode}")
    if not (1 <= word_n <= MAX_NGRAM) or not (1 <= char_n <= MAX_NGRAM):
        raise ValueError(f"n-gram sizes must be in [1, {MAX_NGRAM}], got {word_n}, {char_n}")


def _ngrams(units: List[str], n: int, sep: str) -> List[str]:
    """n-grams of units joined by sep; the whole sequence when shorter."""
    if not units:
        return []
    n = min(n, len(units))
    return [sep.join(units[i:i + n]) for i in range(len(units) - n + 1)]


def _majority(hashes: Iterable[int]) -> int:
    counts = [0] * 64
    total = 0
    for h in hashes:
        total += 1
        for j in range(64):
            counts[j] += (h >> j) & 1
    return sum(1 << j for j in range(64) if 2 * counts[j] > total)


def lower_text(text: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    return text.lower()


def simhash_text(text: str, mode: int, word_n: int, char_n: int) -> int:
    """64-bit SimHash of text, lower-cased by str.lower().

    Word characters are those of re's \\w.  TOKENIZER_AUTO: the words (runs
    of word characters outside the unspaced scripts) make word n-grams joined
    by one space, and the unspaced-script characters, concatenated, make
    character n-grams.  TOKENIZER_WORDS: word n-grams over runs of all word
    characters.  TOKENIZER_CHARS: character n-grams over all word characters
    concatenated.  A sequence shorter than n gives one feature, itself.
    Features are hashed as hash64 of their UTF-8; each distinct word n-gram
    counts once, each character n-gram at every occurrence; bit j is set when
    more than half of the counted features have it.
    """
    _check_tokenizer(mode, word_n, char_n)
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    word_features, char_features = text_features(text, mode, word_n, char_n)
    hashes: List[int] = list(dict.fromkeys(hash64(f.encode("utf-8")) for f in word_features))
    hashes += [hash64(f.encode("utf-8")) for f in char_features]
    return _majority(hashes)


def text_units(text: str, mode: int) -> Tuple[List[str], List[str]]:
    """The words and the character stream of text, lower-cased by
    str.lower(), as simhash_text cuts them (the MinHash twin cuts them so
    too)."""
    text = text.lower()
    words: List[str] = []
    units: List[str] = []
    current: List[str] = []
    for ch in text:
        unspaced = mode == TOKENIZER_AUTO and _is_unspaced(ch)
        word = not unspaced and _is_word(ch)
        if mode == TOKENIZER_CHARS:
            if word:
                units.append(ch)
            continue
        if word:
            current.append(ch)
        elif current:
            words.append("".join(current))
            current = []
        if unspaced:
            units.append(ch)
    if current:
        words.append("".join(current))
    return words, units


def text_features(text: str, mode: int, word_n: int, char_n: int) -> Tuple[List[str], List[str]]:
    """The features of text as simhash_text defines them: its word n-grams
    and its character n-grams, in order, each at every occurrence."""
    words, units = text_units(text, mode)
    word_features = _ngrams(words, word_n, " ") if mode != TOKENIZER_CHARS else []
    char_features = _ngrams(units, char_n, "") if mode != TOKENIZER_WORDS else []
    return word_features, char_features


def simhash_texts(texts: List[str], mode: int, word_n: int, char_n: int) -> np.ndarray:
    _check_tokenizer(mode, word_n, char_n)
    if not isinstance(texts, list):
        raise TypeError(f"texts must be a list of str, not {type(texts).__name__}")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] must be str, not {type(t).__name__}")
    return np.array([simhash_text(t, mode, word_n, char_n) for t in texts], dtype=np.uint64)


def simhash_hashes(hashes: Any, weights: Any = None) -> int:
    """Bit j is set when the features with bit j set carry more than half of
    the total weight (weights summed in order as float64; None: all 1)."""
    hs = [int(h) for h in np.asarray(hashes, dtype=np.uint64)]
    if weights is None:
        return _majority(hs)
    ws = [float(w) for w in np.asarray(weights, dtype=np.float64)]
    if len(ws) != len(hs):
        raise ValueError(f"weights must have one entry per hash ({len(hs)}), got {len(ws)}")
    sums = [0.0] * 64
    total = 0.0
    for h, w in zip(hs, ws):
        for j in range(64):
            if (h >> j) & 1:
                sums[j] += w
        total += w
    return sum(1 << j for j in range(64) if 2.0 * sums[j] > total)


def hamming_many(fps: Any, fp: int) -> np.ndarray:
    """Hamming distance between fp and each of fps (numpy uint8)."""
    return np.array([bin(int(x) ^ fp).count("1") for x in np.asarray(fps, dtype=np.uint64)],
                    dtype=np.uint8)


def md5_digest(data: Key) -> bytes:
    return hashlib.md5(_key_bytes(data)).digest()


def _check_f(f: int) -> None:
    if f < 8 or f > 128 or f % 8:
        raise ValueError(f"f must be a multiple of 8 in [8, 128], got {f}")


def _leon_value(pairs: Iterable[Tuple[bytes, int]], total: int, f: int) -> int:
    """Bit j of the last f/8 bytes of md5 (big-endian) is set when the
    features having it carry more than half of total; a feature adds
    max(weight, 0) to each of its bits (see sh_leon_features in
    src/_core_simhash_leon.pxi)."""
    sums = [0] * f
    for data, w in pairs:
        h = int.from_bytes(hashlib.md5(data).digest()[-(f // 8):], "big")
        for j in range(f):
            if (h >> j) & 1:
                sums[j] += max(w, 0)
    return sum(1 << j for j in range(f) if 2 * sums[j] > total)


def leonsim_text(text: str, f: int = 64) -> int:
    """Simhash(text, f).value of the `simhash` package 2.1.x: lower-case,
    keep [\\w\\u4e00-\\u9fcc], 4-character windows."""
    _check_f(f)
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    text = text.lower()
    kept = "".join(ch for ch in text if _is_word(ch) or "\u4e00" <= ch <= "\u9fcc")
    windows = [kept[i:i + 4] for i in range(max(len(kept) - 3, 1))]
    return _leon_value(((w.encode("utf-8"), 1) for w in windows), len(windows), f)


def leonsim_features(features: List[str], weights: Any, total: int, f: int = 64) -> int:
    _check_f(f)
    if not isinstance(features, list):
        raise TypeError(f"features must be a list of str, not {type(features).__name__}")
    ws = [int(w) for w in np.asarray(weights, dtype=np.int64)]
    if len(ws) != len(features):
        raise ValueError(f"weights must have one entry per feature ({len(features)}), "
                         f"got {len(ws)}")
    # The core sums in int64: the same bounds here.
    if not -(1 << 62) <= total <= (1 << 62):
        raise OverflowError(f"total must be within +-2**62, got {total}")
    if sum(w for w in ws if w > 0) >= 1 << 62:
        raise OverflowError("the positive weights must sum to less than 2**62")
    for i, feat in enumerate(features):
        if not isinstance(feat, str):
            raise TypeError(f"features[{i}] must be str, not {type(feat).__name__}")
    return _leon_value(((s.encode("utf-8"), w) for s, w in zip(features, ws)), total, f)
