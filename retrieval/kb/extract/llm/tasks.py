"""The three LLM extraction tasks: prompt, JSON schema, answer parser, and size model.

A task turns a batch of passages into one request and the parsed answer into one
Extraction per passage. `check` raises ValueError on an unusable answer (the LLM layer
then asks for one repair); a passage the answer leaves out comes back as None so the
extractor can retry it on its own instead of storing nothing for it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from ....core.records import SAG_ENTITY_TYPES, EntityLink, Event, Extraction, Passage, Proposition, Triple
from ....llm import compact
from ...normalize import normalize_entity
from ..openie_import import verbalise
from . import prompts

# Caps on list and string lengths: a small model can fall into repeating one item, or one
# phrase inside a string, until max_tokens cuts the JSON off (seen with Qwen2.5-Coder-1.5B on
# passages about G. Stanley Hall and Victoria Falls). With caps in the schema the grammar
# makes it close the string or the list; duplicates are dropped on parsing.
MAX_TRIPLES = 30
MAX_ENTITIES = 30
MAX_PROPOSITIONS = 25
_NAME = {"type": "string", "maxLength": 120}        # an entity name, a triple's part
_SENTENCE = {"type": "string", "maxLength": 400}    # an event or a proposition
_ENTITY = {"type": "object", "properties": {"name": _NAME, "type": {"type": "string", "enum": list(SAG_ENTITY_TYPES)}},
           "required": ["name", "type"]}


@dataclass(frozen=True)
class Task:
    layer: str                      # the KB layer it fills
    paper: str                      # where the structure comes from
    batch_size: int                 # passages per request (paper default)
    messages: Callable[[list[Passage]], list[dict]]
    schema: dict
    check: Callable[[Any, list[Passage]], Any]
    parse: Callable[[Any, list[Passage]], list[Optional[Extraction]]]
    # Expected completion tokens for a passage of n tokens, for --estimate: fitted on the
    # 50-passage demo build with Qwen2.5-Coder-1.5B (mean passage ~116 tokens; measured
    # ~215 / ~155 / ~227 completion tokens a passage for triples / event / propositions).
    out_tokens: Callable[[int], float]
    max_tokens: Callable[[int], int]  # completion budget for a batch of n passages
    fills: tuple[str, ...] = ()       # the layers one answer fills, when more than `layer`

    @property
    def layers(self) -> tuple[str, ...]:
        return self.fills or (self.layer,)


def _name(x: Any) -> str:
    return x.strip() if isinstance(x, str) else ""


def _entity_links(raw: Any) -> list[EntityLink]:
    out: dict[str, EntityLink] = {}
    for e in raw if isinstance(raw, list) else []:
        if isinstance(e, dict) and _name(e.get("name")):
            t = e.get("type") if e.get("type") in SAG_ENTITY_TYPES else None
            out.setdefault(_name(e["name"]), EntityLink(_name(e["name"]), t))
    return list(out.values())


# --- GEAR App. I.1: named entities + triples ------------------------------------------------------
TRIPLES_SCHEMA = {"type": "object", "properties": {
    "named_entities": {"type": "array", "items": _NAME, "maxItems": MAX_ENTITIES},
    "triples": {"type": "array", "items": {"type": "array", "items": _NAME, "minItems": 3, "maxItems": 3},
                "maxItems": MAX_TRIPLES}},
    "required": ["named_entities", "triples"]}


def _check_triples(value: Any, batch: list[Passage]) -> Any:
    if not isinstance(value, dict) or not isinstance(value.get("triples"), list):
        raise ValueError('expected an object with a "triples" list')
    if not any(_triple(t) for t in value["triples"]):
        raise ValueError("no usable [subject, relation, object] triple: the passage states facts, list them")
    return value


def _triple(t: Any) -> Optional[tuple[str, str, str]]:
    if isinstance(t, (list, tuple)) and len(t) == 3 and all(_name(x) for x in t):
        return tuple(_name(x) for x in t)  # type: ignore[return-value]
    if isinstance(t, dict):  # {"subject", "predicate"/"relation", "object"} from looser endpoints
        parts = (t.get("subject"), t.get("predicate") or t.get("relation"), t.get("object"))
        if all(_name(x) for x in parts):
            return tuple(_name(x) for x in parts)  # type: ignore[return-value]
    return None


def _parse_triples(value: dict, batch: list[Passage]) -> list[Optional[Extraction]]:
    p = batch[0]
    ex = Extraction(p.id)
    seen = set()
    for raw in value["triples"]:
        t = _triple(raw)
        if t is None:
            ex.malformed += 1
        elif t not in seen:
            seen.add(t)
            ex.triples.append(Triple(*t, p.id))
    names = [_name(n) for n in value.get("named_entities") or [] if _name(n)]
    ex.entities = [EntityLink(n) for n in dict.fromkeys(names)]
    return [ex]


TRIPLES = Task("triples", "GEAR App. I.1", 1, lambda b: prompts.triples_messages(b[0]), TRIPLES_SCHEMA,
               _check_triples, _parse_triples, out_tokens=lambda n: 60 + 1.6 * n, max_tokens=lambda n: 1024)


# --- SAG §3.2: one event + typed entities ---------------------------------------------------------
EVENT_SCHEMA = {"type": "object", "properties": {
    "event": _SENTENCE, "entities": {"type": "array", "items": _ENTITY, "maxItems": MAX_ENTITIES}},
                "required": ["event", "entities"]}


def _check_event(value: Any, batch: list[Passage]) -> Any:
    if not isinstance(value, dict) or len(_name(value.get("event")).split()) < 3:
        raise ValueError('"event" must be a sentence stating what the chunk is about')
    if not _entity_links(value.get("entities")):
        raise ValueError('"entities" is empty: name the people, places, works … the chunk mentions')
    return value


def _parse_event(value: dict, batch: list[Passage]) -> list[Optional[Extraction]]:
    p = batch[0]
    links = _entity_links(value.get("entities"))
    return [Extraction(p.id, entities=links, events=[Event(p.id, _name(value["event"]), links)])]


EVENTS = Task("events", "SAG §3.2", 1, lambda b: prompts.event_messages(b[0]), EVENT_SCHEMA,
              _check_event, _parse_event, out_tokens=lambda n: 60 + 0.8 * n, max_tokens=lambda n: 512)


# --- GRASP §3.1 / A.1.5: propositions + typed entities linked by index ---------------------------
PROPOSITIONS_SCHEMA = {"type": "object", "properties": {"passages": {"type": "array", "items": {
    "type": "object", "properties": {
        "passage": {"type": "integer"},
        "propositions": {"type": "array", "items": _SENTENCE, "maxItems": MAX_PROPOSITIONS},
        "entities": {"type": "array", "maxItems": MAX_ENTITIES, "items": {
            "type": "object", "properties": {
                "name": _NAME, "type": {"type": "string", "enum": list(SAG_ENTITY_TYPES)},
                "propositions": {"type": "array", "items": {"type": "integer"}}},
            "required": ["name", "type", "propositions"]}}},
    "required": ["passage", "propositions", "entities"]}}}, "required": ["passages"]}


def _items_by_number(value: Any, batch: list[Passage]) -> dict[int, dict]:
    items = value.get("passages") if isinstance(value, dict) else None
    if not isinstance(items, list):
        raise ValueError('expected {"passages": [...]}')
    out: dict[int, dict] = {}
    for i, item in enumerate(items, 1):
        if not isinstance(item, dict):
            continue
        n = item.get("passage", i)
        n = n if isinstance(n, int) and 1 <= n <= len(batch) else i
        if n not in out and [s for s in item.get("propositions") or [] if _name(s)]:
            out[n] = item
    return out


def _check_propositions(value: Any, batch: list[Passage]) -> Any:
    if not _items_by_number(value, batch):
        raise ValueError(f"no passage has propositions; give propositions for passages 1 to {len(batch)}")
    return value


def _parse_propositions(value: dict, batch: list[Passage]) -> list[Optional[Extraction]]:
    items = _items_by_number(value, batch)
    out: list[Optional[Extraction]] = []
    for n, p in enumerate(batch, 1):
        item = items.get(n)
        if item is None:
            out.append(None)  # left out of the answer: the extractor retries it alone
            continue
        ex = Extraction(p.id)
        texts = [_name(s) for s in item["propositions"] if _name(s)]
        props = [Proposition(p.id, t) for t in dict.fromkeys(texts)]
        index_of = {t: i for i, t in enumerate(dict.fromkeys(texts))}
        remap = [index_of[t] for t in texts]  # answer's index → deduplicated index
        for e in item.get("entities") or []:
            links = _entity_links([e])
            if not links:
                ex.malformed += 1
                continue
            ex.entities.append(links[0])
            for j in e.get("propositions") or []:
                if isinstance(j, int) and 0 <= j < len(remap):
                    target = props[remap[j]]
                    if links[0] not in target.entities:
                        target.entities.append(links[0])
                else:
                    ex.malformed += 1  # an index pointing at no proposition
        ex.propositions = props
        out.append(ex)
    return out


PROPOSITIONS = Task("propositions", "GRASP §3.1, A.1.5", 10, prompts.propositions_messages, PROPOSITIONS_SCHEMA,
                    _check_propositions, _parse_propositions, out_tokens=lambda n: 40 + 1.6 * n,
                    max_tokens=lambda n: 200 + 700 * n)

TASKS = {t.layer: t for t in (TRIPLES, EVENTS, PROPOSITIONS)}


# --- One read for all three layers (a deviation from reading each passage three times) ------------
# The typed entities (SAG's 11 types) serve events and propositions; the triples are GEAR's
# layer and, verbalised, GRASP's propositions, linked to the entities they name; the event
# sentence is SAG's. docs/llm-indexing.md "One read" has the measurement; `--reads per-layer`
# goes back to the three papers' own prompts.
# Tighter caps than the per-layer tasks': on a 1,367-character passage ("Adolescence") the 1.5B
# model wrote until the 768-token limit, twice (the repair too), ~2 minutes lost. It still loops
# there at 512 (the caps bound each list and string, not their sum); a cut-off answer is now
# asked again with sampling (LLM.json) rather than shown back to the model.
MAX_JOINT_TRIPLES = 15
MAX_JOINT_PER_TYPE = 6
JOINT_SCHEMA = {"type": "object", "properties": {
    "entities": {"type": "object", "properties": {
        t: {"type": "array", "items": _NAME, "maxItems": MAX_JOINT_PER_TYPE} for t in SAG_ENTITY_TYPES}},
    "triples": {"type": "array", "items": {"type": "array", "items": _NAME, "minItems": 3, "maxItems": 3},
                "maxItems": MAX_JOINT_TRIPLES},
    "event": {"type": "string", "maxLength": 220}},  # ~25 words; the model otherwise copies the passage
    "required": ["entities", "triples", "event"]}


def _typed_entities(raw: Any) -> list[EntityLink]:
    out: dict[str, EntityLink] = {}
    for etype, names in (raw.items() if isinstance(raw, dict) else []):
        for n in names if isinstance(names, list) else []:
            if _name(n):
                out.setdefault(_name(n), EntityLink(_name(n), etype if etype in SAG_ENTITY_TYPES else None))
    return list(out.values())


def _check_joint(value: Any, batch: list[Passage]) -> Any:
    if not isinstance(value, dict) or not isinstance(value.get("triples"), list):
        raise ValueError('expected an object with "entities", "triples" and "event"')
    if not any(_triple(t) for t in value["triples"]):
        raise ValueError("no usable [subject, relation, object] triple: the passage states facts, list them")
    if len(_name(value.get("event")).split()) < 3:
        raise ValueError('"event" must be a sentence stating what the passage is about')
    return value


def _parse_joint(value: dict, batch: list[Passage]) -> list[Optional[Extraction]]:
    (ex,) = _parse_triples({"triples": value["triples"]}, batch)
    typed = _typed_entities(value.get("entities"))
    by_norm = {normalize_entity(e.name): e for e in typed}
    for t in ex.triples:  # a triple's ends are entities too, typed when the entity list typed them
        for end in (t.subject, t.object):
            by_norm.setdefault(normalize_entity(end), EntityLink(end))
    ex.entities = list({e.name: e for e in by_norm.values()}.values())
    ex.events = [Event(ex.passage_id, _name(value["event"]), typed or ex.entities)]
    ex.propositions = [
        Proposition(ex.passage_id, verbalise(t),
                    list({e.name: e for e in (by_norm[normalize_entity(t.subject)],
                                              by_norm[normalize_entity(t.object)])}.values()))
        for t in ex.triples]
    return [ex]


# Size model: completion tokens for a passage of n tokens, fitted on the first demo passages
# with Qwen2.5-Coder-1.5B (docs/llm-indexing.md, "One read").
JOINT = Task("joint", "GEAR+SAG+GRASP", 1, lambda b: prompts.joint_messages(b[0]), compact.mark(JOINT_SCHEMA),
             _check_joint, _parse_joint, out_tokens=lambda n: 60 + 1.1 * n, max_tokens=lambda n: 512,
             fills=("triples", "events", "propositions"))
