"""Typed records shared by importers, the KB, the store and the methods.

Every layer of the knowledge base has one record type here; nothing below this module
passes bare dicts around for data that has a shape.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Optional


def passage_id(title: str, text: str) -> str:
    """HippoRAG 2's chunk id, so gold ids and third-party OpenIE files line up with ours."""
    return "chunk-" + hashlib.md5(f"{title}\n{text}".encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str

    @classmethod
    def make(cls, title: str, text: str) -> "Passage":
        return cls(passage_id(title, text), title, text)

    @property
    def content(self) -> str:
        """What is embedded and shown: the title gives short passages their subject."""
        return f"{self.title}\n{self.text}"


@dataclass
class Question:
    id: str
    text: str
    answers: list[str]
    gold_passage_ids: list[str] = field(default_factory=list)
    hops: Optional[int] = None
    type: Optional[str] = None
    # MuSiQue's question_decomposition: [{"question", "answer", "paragraph_support_idx"}, ...]
    decomposition: Optional[list[dict]] = None
    # Graded qrels as the collection gave them (passage → grade, 0 included); gold_passage_ids are
    # those at the build's --min-grade and above. None when the gold came ungraded.
    grades: Optional[dict[str, int]] = None


@dataclass(frozen=True)
class Triple:
    subject: str
    predicate: str
    object: str
    passage_id: str
    id: Optional[int] = None

    @property
    def text(self) -> str:
        return f"{self.subject} {self.predicate} {self.object}"


@dataclass(frozen=True)
class Entity:
    """A named entity; `type` is one of SAG's 11 types where the extractor gave one."""
    name: str
    type: Optional[str] = None
    id: Optional[int] = None


@dataclass
class PartialTriple:
    """GRIEVER App. A.1: a subject+predicate (or, inverse, predicate+object) pair.

    `subject` is the entity inside the pair, `objects` its complement entities, so a
    matched pair names the join entities of the next hop.
    """
    id: int
    subject: str
    predicate: str
    is_inverse: bool
    objects: list[str]
    passage_ids: list[str]

    @property
    def content(self) -> str:
        return f"{self.predicate} {self.subject}" if self.is_inverse else f"{self.subject} {self.predicate}"

    @property
    def freq(self) -> int:
        """How many triples share this pair: the denominator of GRIEVER eq. (1)."""
        return max(1, len(self.objects))


@dataclass
class SameAs:
    """GRIEVER §4.2.3: an alias of an entity and the passages the alias was seen in."""
    entity: str
    alias: str
    similarity: float
    passage_ids: list[str]


@dataclass(frozen=True)
class EntityLink:
    """An entity linked from an event or a proposition, with the type the extractor gave."""
    name: str
    type: Optional[str] = None


@dataclass
class Event:
    """SAG §3.2: one concise statement of a chunk's core content, linked to typed entities."""
    passage_id: str
    summary: str
    entities: list[EntityLink] = field(default_factory=list)
    id: Optional[int] = None


@dataclass
class Proposition:
    """GRASP §3.1: an atomic, self-contained statement from a passage, linked to entities."""
    passage_id: str
    text: str
    entities: list[EntityLink] = field(default_factory=list)
    id: Optional[int] = None


@dataclass
class Extraction:
    """Everything one extractor produced for one passage."""
    passage_id: str
    triples: list[Triple] = field(default_factory=list)
    entities: list[EntityLink] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    propositions: list[Proposition] = field(default_factory=list)
    malformed: int = 0                 # items dropped for a bad shape (e.g. a triple without an object)
    failed: Optional[str] = None       # why nothing was extracted; the build records it per layer


# SAG §3.2's entity types; every extractor maps its own labels onto these.
SAG_ENTITY_TYPES = (
    "time", "location", "person", "organization", "group", "topic",
    "work", "product", "action", "metric", "label",
)
