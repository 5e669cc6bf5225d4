"""A synthetic corpus for judging SimHash near-duplicate detection.

English and Chinese documents of about 1,000 characters drawn from Zipf-like
vocabularies (common words are common, as in real text), with

- planted near duplicates: the same document with 1%, 3% or 10% of its words
  (English) or characters (Chinese) replaced, inserted or deleted;
- different articles on the same topic: independent documents that share a
  topic vocabulary (a third of their words come from it), the hard negatives;
- unrelated documents: independent documents of the same language.

Everything is deterministic for a given seed and needs only the standard
library.  ``python benchmarks/simhash_corpus.py`` prints a sample.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

EDIT_RATES = (0.01, 0.03, 0.10)
TARGET_CHARS = 1000

# Common English words, then inflected forms to reach a 2,000-word vocabulary.
_EN_WORDS = """
the of and to in is that for it as was with be by on not he this are or his from at which
but have an they you were her she there been one all we their has would when if so no what
will more can who out up about them into time only some could new two may then do first any
my now such like other over our man me even most made after also did many before must through
back years where much your way well down should because each just those people how too little
state good very make world still own see men work long here get both between life being under
never day same another know while last might us great old year off come since against go came
right used take three himself few house use during without again place around however home
small found thought went say part once general high upon school every does got united left
number course war until always away something fact though water less public put think almost
hand enough far took head yet government system better set told nothing night end why called
didn find going look asked later knew point next city business give group toward young let
room president side social given present several order national possible rather second face
per among form important often things looked early white case large become need big four within
felt along children saw best church ever least power development light thing seemed family
interest want members mind country area others done turned although open problem sense began
market report company data network policy energy price growth research crawler engine search
index server browser internet website content article news update security page link address
""".split()
_EN_SUFFIXES = ["s", "ed", "ing", "er", "ly", "ness", "al", "ment", "ity", "ive"]
_ZH_PUNCT_MID = ["，", "，", "，", "、", "；", "："]
_ZH_PUNCT_END = ["。", "。", "。", "！", "？"]


def _english_vocabulary(rng: random.Random, size: int = 2000) -> List[str]:
    base = list(dict.fromkeys(_EN_WORDS))
    vocab, seen = list(base), set(base)
    while len(vocab) < size:
        word = rng.choice(base) + rng.choice(_EN_SUFFIXES)
        if word not in seen:
            seen.add(word)
            vocab.append(word)
    return vocab


def _chinese_vocabulary(rng: random.Random, size: int = 3000) -> List[str]:
    """The most common hanzi: GB2312 level 1 (3,755 characters), shuffled."""
    chars = []
    for hi in range(0xB0, 0xD8):
        for lo in range(0xA1, 0xFF):
            try:
                chars.append(bytes([hi, lo]).decode("gb2312"))
            except UnicodeDecodeError:
                pass
    rng.shuffle(chars)
    return chars[:size]


class _Zipf:
    """Draws units with probability proportional to 1/rank."""

    def __init__(self, units: List[str]):
        self.units = units
        self.cum = list(itertools.accumulate(1.0 / (r + 1) for r in range(len(units))))

    def draw(self, rng: random.Random, k: int = 1) -> List[str]:
        return rng.choices(self.units, cum_weights=self.cum, k=k)


@dataclass
class Corpus:
    """docs[i] with language langs[i]; pairs are (i, j) index pairs."""
    docs: List[str] = field(default_factory=list)
    langs: List[str] = field(default_factory=list)
    near: Dict[Tuple[str, float], List[Tuple[int, int]]] = field(default_factory=dict)
    same_topic: Dict[str, List[Tuple[int, int]]] = field(default_factory=dict)
    unrelated: Dict[str, List[Tuple[int, int]]] = field(default_factory=dict)

    def add(self, doc: str, lang: str) -> int:
        self.docs.append(doc)
        self.langs.append(lang)
        return len(self.docs) - 1


class Generator:
    def __init__(self, seed: int = 1):
        self.rng = random.Random(f"simhash-corpus:{seed}")
        self.en = _Zipf(_english_vocabulary(random.Random(f"en:{seed}")))
        self.zh = _Zipf(_chinese_vocabulary(random.Random(f"zh:{seed}")))

    def _draw(self, lang: str, topic: List[str], k: int) -> List[str]:
        out = (self.en if lang == "en" else self.zh).draw(self.rng, k)
        if topic:
            out = [self.rng.choice(topic) if self.rng.random() < 1 / 3 else u for u in out]
        return out

    def english(self, topic: List[str] = ()) -> str:
        sentences, length = [], 0
        while length < TARGET_CHARS:
            words = self._draw("en", list(topic), self.rng.randint(6, 22))
            if self.rng.random() < 0.25:
                j = self.rng.randrange(1, len(words))
                words[j - 1] += ","
            s = " ".join(words)
            s = s[0].upper() + s[1:] + self.rng.choice([".", ".", ".", "?", "!"])
            sentences.append(s)
            length += len(s) + 1
        return " ".join(sentences)[:TARGET_CHARS + 40]

    def chinese(self, topic: List[str] = ()) -> str:
        out, length = [], 0
        while length < TARGET_CHARS:
            k = self.rng.randint(10, 30)
            chars = self._draw("zh", list(topic), k)
            for _ in range(self.rng.randint(0, 2)):
                chars.insert(self.rng.randrange(2, k - 1), self.rng.choice(_ZH_PUNCT_MID))
            if self.rng.random() < 0.1:
                chars = ["“"] + chars + ["”"]
            s = "".join(chars) + self.rng.choice(_ZH_PUNCT_END)
            out.append(s)
            length += len(s)
        return "".join(out)[:TARGET_CHARS]

    def document(self, lang: str, topic: List[str] = ()) -> str:
        return self.english(topic) if lang == "en" else self.chinese(topic)

    def edit(self, doc: str, lang: str, rate: float) -> str:
        """doc with round(rate * units) random replacements, insertions and
        deletions of words (English) or characters (Chinese)."""
        units = doc.split(" ") if lang == "en" else list(doc)
        vocab = self.en if lang == "en" else self.zh
        for _ in range(max(1, round(rate * len(units)))):
            op, j = self.rng.randrange(3), self.rng.randrange(len(units))
            if op == 0:
                units[j] = vocab.draw(self.rng)[0]
            elif op == 1:
                units.insert(j, vocab.draw(self.rng)[0])
            elif len(units) > 1:
                del units[j]
        return (" " if lang == "en" else "").join(units)

    def topic(self, lang: str, size: int = 40) -> List[str]:
        units = (self.en if lang == "en" else self.zh).units
        return self.rng.sample(units[100:], size)   # topic words are not the commonest


def quality_corpus(n_base: int = 500, n_topics: int = 250, seed: int = 1) -> Corpus:
    """Per language: n_base documents, each with a 1%, 3% and 10% edited copy;
    n_topics pairs of different articles on one topic; n_base unrelated pairs."""
    gen, c = Generator(seed), Corpus()
    for lang in ("en", "zh"):
        base = [c.add(gen.document(lang), lang) for _ in range(n_base)]
        for rate in EDIT_RATES:
            c.near[(lang, rate)] = [(i, c.add(gen.edit(c.docs[i], lang, rate), lang))
                                    for i in base]
        c.unrelated[lang] = [(base[i], base[(i + 1) % n_base]) for i in range(n_base)]
        pairs = []
        for _ in range(n_topics):
            topic = gen.topic(lang)
            pairs.append((c.add(gen.document(lang, topic), lang),
                          c.add(gen.document(lang, topic), lang)))
        c.same_topic[lang] = pairs
    return c


def speed_corpus(n: int = 10_000, seed: int = 1) -> List[str]:
    """n documents of about 1,000 characters, alternating runs of 10 English
    and 10 Chinese, every 10th a 3% edit of the one 9 before (a crawl has
    near duplicates)."""
    gen, docs = Generator(seed), []
    for i in range(n):
        lang = "en" if (i // 10) % 2 == 0 else "zh"
        if i % 10 == 9:
            docs.append(gen.edit(docs[i - 9], lang, 0.03))
        else:
            docs.append(gen.document(lang))
    return docs


if __name__ == "__main__":
    corpus = quality_corpus(n_base=2, n_topics=1)
    for lang in ("en", "zh"):
        a, b = corpus.near[(lang, 0.03)][0]
        print(f"--- {lang} original\n{corpus.docs[a][:300]}\n--- 3% edit\n{corpus.docs[b][:300]}")
