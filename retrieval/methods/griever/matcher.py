"""§4.3 Vector-based entity matcher over query n-grams built from one encoder pass."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...encoders.embedder import QueryEncoding
from ...store.sqlite import STOPWORDS

_WORD = re.compile(r"\w+(?:['’]\w+)*")


@dataclass
class NGrams:
    texts: list[str]
    spans: list[tuple[int, int]]   # character spans in the query
    vectors: np.ndarray            # (n, dim), unit length


@dataclass(frozen=True)
class Match:
    name: str        # the entity or predicate that was scored
    via: str         # the synonym whose embedding matched best (== name when none did better)
    score: float
    ngram: str
    span: tuple[int, int]


def _unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n == 0, 1, n)


def query_ngrams(enc: QueryEncoding, max_n: int) -> NGrams:
    """enc(n_g|q): the mean of the n-gram's contextual token vectors, for every word n-gram
    up to `max_n` words that is not made of stopwords only. No extra encoder call; prefix
    sums make each n-gram's mean O(1)."""
    words = [(m.start(), m.end(), m.group(0).lower()) for m in _WORD.finditer(enc.text)]
    dim = enc.vector.shape[0]
    if not words or not enc.token_spans:
        return NGrams([], [], np.zeros((0, dim), np.float32))
    starts = np.array([a for a, _ in enc.token_spans])
    ends = np.array([b for _, b in enc.token_spans])
    # token range [first, last) of each word; tokens never straddle words
    first = np.searchsorted(starts, [w[0] for w in words], side="left")
    last = np.searchsorted(ends, [w[1] for w in words], side="right")
    prefix = np.vstack([np.zeros((1, dim), np.float32), np.cumsum(enc.token_vectors, axis=0)])
    stop = [w[2] in STOPWORDS for w in words]
    texts, spans, lo, hi = [], [], [], []
    for i in range(len(words)):
        for j in range(i, min(i + max_n, len(words))):
            if all(stop[i:j + 1]) or last[j] <= first[i]:
                continue
            texts.append(enc.text[words[i][0]:words[j][1]])
            spans.append((words[i][0], words[j][1]))
            lo.append(first[i])
            hi.append(last[j])
    if not texts:
        return NGrams([], [], np.zeros((0, dim), np.float32))
    lo_a, hi_a = np.array(lo), np.array(hi)
    means = (prefix[hi_a] - prefix[lo_a]) / (hi_a - lo_a)[:, None]
    return NGrams(texts, spans, _unit(means.astype(np.float32)))


def span_vector(enc: QueryEncoding, start: int) -> np.ndarray:
    """A sub-query's vector (question[start:]) pooled from the same pass: §4.2.1 without re-encoding."""
    keep = [i for i, (a, _) in enumerate(enc.token_spans) if a >= start]
    if not keep:
        return enc.vector
    return _unit(enc.token_vectors[keep].mean(axis=0))


def match(ngrams: NGrams, names: list[str], vectors: np.ndarray, owners: list[str] | None = None) -> dict[str, Match]:
    """Best similarity of each name over all n-grams; with `owners`, row i scores owner
    owners[i] (an entity and its synonyms share one owner) and the best row wins (§4.3)."""
    owners = owners or names
    out: dict[str, Match] = {}
    if len(ngrams.texts) == 0 or len(names) == 0:
        return out
    sims = vectors @ ngrams.vectors.T          # (names, ngrams)
    best = sims.argmax(axis=1)
    for row, (owner, name) in enumerate(zip(owners, names)):
        col = int(best[row])
        score = float(sims[row, col])
        if owner not in out or score > out[owner].score:
            out[owner] = Match(owner, name, score, ngrams.texts[col], ngrams.spans[col])
    return out
