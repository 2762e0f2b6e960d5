"""Where a multi-hop question can be composed from a KB's own graph (MuSiQue's bottom-up
composition, Trivedi et al. 2022): passages joined through a bridge entity, or compared on the
same kind of fact.

- bridge: passage A holds a triple (s, p1, e) whose object e is what passage B is about (B's
  title); B holds a triple (e, p2, o) and o, the answer, is written in B.
- chain (3 hops): A → B through e1, B → C through e2, and C's own fact gives the answer.
- comparison: two passages state the same predicate with a year about their own subjects;
  the question asks which came first.

Pure reads of the KB file; deterministic for a seed, so a resumed generation sees the same order.
"""
from __future__ import annotations

import random
import re
import sqlite3
from dataclasses import dataclass, field

from ..bench.metrics import normalize_answer
from ..kb.normalize import normalize_entity

_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
# Objects that are not an answer a reader could look up (pronouns, numbers alone, very long clauses).
_MAX_ANSWER_WORDS = 6
# Predicates too empty to ask about ("Germany has temperate seasonal climate"): no question reads well.
_VAGUE = {"is", "was", "are", "were", "be", "has", "had", "have", "includes", "contains", "became", "is not",
          "was not", "is a", "was a", "is an", "was an"}


@dataclass(frozen=True)
class Fact:
    """One triple as a hop: who states it, and what it says."""
    passage_id: str
    title: str
    subject: str
    predicate: str
    object: str


@dataclass
class Candidate:
    """A composition to try: its hops in order, the bridge entities, the answer and the gold passages."""
    kind: str                                  # bridge | chain | comparison
    facts: list[Fact]
    answer: str
    bridges: list[str] = field(default_factory=list)

    @property
    def gold(self) -> list[str]:
        return list(dict.fromkeys(f.passage_id for f in self.facts))

    @property
    def hops(self) -> int:
        return len(self.gold)

    @property
    def key(self) -> str:
        """What makes two candidates the same composition (resume and duplicate pairs)."""
        return self.kind + ":" + "|".join(f"{f.passage_id}/{f.predicate}/{f.object}" for f in self.facts)


def _answer_like(obj: str) -> bool:
    words = obj.split()
    return 0 < len(words) <= _MAX_ANSWER_WORDS and normalize_entity(obj) not in {"it", "he", "she", "they", "this"}


def written_in(answer: str, text: str) -> bool:
    """The answer's words stand in the text, whole (SQuAD-normalised)."""
    a = normalize_answer(answer)
    return bool(a) and f" {a} " in f" {normalize_answer(text)} "


def load(con: sqlite3.Connection) -> tuple[dict[int, tuple[str, str, str]], list[tuple[int, str, str, str]]]:
    passages = {r: (pid, title, text) for r, pid, title, text in
                con.execute("SELECT rowid, id, title, text FROM passages")}
    triples = con.execute("SELECT passage_rowid, subject, predicate, object FROM triples ORDER BY rowid").fetchall()
    return passages, triples


def mine(con: sqlite3.Connection, seed: int = 0, limit: int = 10_000) -> list[Candidate]:
    """Bridge, chain and comparison candidates, interleaved in a seeded order (one per passage B
    first, so a small --n spreads over the corpus instead of one prolific article)."""
    passages, triples = load(con)
    by_title: dict[str, list[int]] = {}
    for r, (_, title, _) in passages.items():
        by_title.setdefault(normalize_entity(title), []).append(r)
    about = {n: rs[0] for n, rs in by_title.items() if len(rs) == 1 and n}  # ambiguous titles are no bridge
    own: dict[int, list[Fact]] = {}      # passage → its facts about its own subject, answer written in it
    out_links: dict[int, list[tuple[Fact, int]]] = {}  # passage → (fact, passage its object is about)
    for r, s, p, o in triples:
        pid, title, text = passages[r]
        fact = Fact(pid, title, s, p, o)
        target = about.get(normalize_entity(o))
        if target is not None and target != r and normalize_entity(p) not in _VAGUE:
            out_links.setdefault(r, []).append((fact, target))
        if normalize_entity(s) == normalize_entity(title) and _answer_like(o) and written_in(o, text) \
                and normalize_entity(o) != normalize_entity(title) and normalize_entity(p) not in _VAGUE:
            own.setdefault(r, []).append(fact)

    rng = random.Random(seed)
    bridges: list[Candidate] = []
    chains: list[Candidate] = []
    for a, links in out_links.items():
        for fact_a, b in links:
            for fact_b in own.get(b, []):
                if normalize_entity(fact_b.object) in (normalize_entity(fact_a.subject),
                                                       normalize_entity(fact_a.object)):
                    continue
                bridges.append(Candidate("bridge", [fact_a, fact_b], fact_b.object, [fact_a.object]))
            for fact_b, c in out_links.get(b, []):
                if c == a or normalize_entity(fact_b.subject) != normalize_entity(passages[b][1]):
                    continue
                for fact_c in own.get(c, []):
                    chains.append(Candidate("chain", [fact_a, fact_b, fact_c], fact_c.object,
                                            [fact_a.object, fact_b.object]))
    comparisons = _comparisons(own, rng)
    for pool in (bridges, chains):
        rng.shuffle(pool)
    return _interleave([_spread(bridges), _spread(chains), comparisons], (6, 2, 2))[:limit]


def _comparisons(own: dict[int, list[Fact]], rng: random.Random) -> list[Candidate]:
    by_pred: dict[str, list[Fact]] = {}
    for facts in own.values():
        for f in facts:
            if _YEAR.search(f.object):
                by_pred.setdefault(normalize_entity(f.predicate), []).append(f)
    out = []
    for facts in by_pred.values():
        rng.shuffle(facts)
        for x, y in zip(facts[::2], facts[1::2]):
            yx, yy = int(_YEAR.search(x.object).group(0)), int(_YEAR.search(y.object).group(0))
            if x.passage_id == y.passage_id or yx == yy or normalize_entity(x.title) == normalize_entity(y.title):
                continue
            first = x if yx < yy else y
            out.append(Candidate("comparison", [x, y], first.title))
    rng.shuffle(out)
    return out


def _spread(cands: list[Candidate]) -> list[Candidate]:
    """Round-robin over the answering passage, so no single passage supplies most questions."""
    groups: dict[str, list[Candidate]] = {}
    for c in cands:
        groups.setdefault(c.facts[-1].passage_id, []).append(c)
    out, queues = [], list(groups.values())
    while queues:
        queues = [q for q in queues if q]
        for q in queues:
            out.append(q.pop(0))
    return out


def _interleave(pools: list[list[Candidate]], weights: tuple[int, ...]) -> list[Candidate]:
    out, idx = [], [0] * len(pools)
    while any(i < len(p) for i, p in zip(idx, pools)):
        for j, (pool, w) in enumerate(zip(pools, weights)):
            out.extend(pool[idx[j]: idx[j] + w])
            idx[j] += w
    return out
