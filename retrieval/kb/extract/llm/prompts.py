"""Offline extraction prompts, written for HopTrace after each paper's description.

- triples: GEAR App. I.1 (entities and triples in one answer, pronouns resolved, every
  triple anchored on the passage's named entities);
- event: SAG §3.2 (one concise event per chunk, whole semantics kept, typed entities from
  the 11 SAG types as a parallel output);
- propositions: GRASP §3.1 and A.1.5 (atomic self-contained propositions and typed
  entities in one call, entities linked to propositions by index, several passages per call).

Bump PROMPT_VERSION whenever a per-layer prompt changes, JOINT_VERSION when the one-read prompt
or its output format does: the KB records them with every passage.
"""
from __future__ import annotations

import json

from ....core.records import SAG_ENTITY_TYPES, Passage

PROMPT_VERSION = "1"
JOINT_VERSION = "2"  # 2: compact JSON, no spaces between tokens (retrieval/llm/compact.py)

_TYPES = ", ".join(SAG_ENTITY_TYPES)


def passage_block(p: Passage) -> str:
    return f"Title: {p.title}\nText: {p.text}"


TRIPLES_SYSTEM = (
    "You turn an encyclopedia passage into a small knowledge graph. Answer with one JSON object with two keys:\n"
    '- "named_entities": the names in the passage (people, places, organisations, works, dates, numbers that '
    "matter), each written in full as the passage names it;\n"
    '- "triples": a list of [subject, relation, object] lists stating the passage\'s facts.\n'
    "Rules: every triple uses at least one of the named entities, and preferably two. Replace pronouns "
    "(he, she, it, they, the company …) with the name they refer to. Keep relations short (a verb phrase "
    "such as \"born in\" or \"directed by\"). State only what the passage says."
)

TRIPLES_EXAMPLE_IN = Passage(
    "example", "Rosalind Franklin",
    "Rosalind Franklin was a British chemist. Her X-ray photographs of DNA, taken at King's College London "
    "in 1952, were key to working out its double-helix structure. She died in London in 1958.")
TRIPLES_EXAMPLE_OUT = {
    "named_entities": ["Rosalind Franklin", "British", "DNA", "King's College London", "1952", "London", "1958"],
    "triples": [["Rosalind Franklin", "nationality", "British"],
                ["Rosalind Franklin", "occupation", "chemist"],
                ["Rosalind Franklin", "took X-ray photographs of", "DNA"],
                ["Rosalind Franklin", "worked at", "King's College London"],
                ["Rosalind Franklin", "photographed DNA in", "1952"],
                ["Rosalind Franklin", "died in", "London"],
                ["Rosalind Franklin", "died in year", "1958"]]}


def triples_messages(p: Passage) -> list[dict]:
    return [{"role": "system", "content": TRIPLES_SYSTEM},
            {"role": "user", "content": passage_block(TRIPLES_EXAMPLE_IN)},
            {"role": "assistant", "content": json.dumps(TRIPLES_EXAMPLE_OUT)},
            {"role": "user", "content": passage_block(p)}]


EVENT_SYSTEM = (
    "You index a text chunk for retrieval. Answer with one JSON object:\n"
    '- "event": one or two sentences that state what the chunk is about, self-contained (full names, no '
    "pronouns), keeping who, what, where and when together rather than splitting them into separate facts;\n"
    f'- "entities": the entities the chunk mentions, each {{"name", "type"}} with type one of: {_TYPES}.'
)

EVENT_EXAMPLE_IN = Passage(
    "example", "Treaty of Kiel",
    "The Treaty of Kiel was signed on 14 January 1814 in Kiel between the United Kingdom and Sweden on one "
    "side and Denmark–Norway on the other. Denmark ceded Norway to the King of Sweden.")
EVENT_EXAMPLE_OUT = {
    "event": "The Treaty of Kiel, signed in Kiel on 14 January 1814 by the United Kingdom, Sweden and "
             "Denmark–Norway, made Denmark cede Norway to the King of Sweden.",
    "entities": [{"name": "Treaty of Kiel", "type": "work"}, {"name": "14 January 1814", "type": "time"},
                 {"name": "Kiel", "type": "location"}, {"name": "United Kingdom", "type": "location"},
                 {"name": "Sweden", "type": "location"}, {"name": "Denmark–Norway", "type": "location"},
                 {"name": "Norway", "type": "location"}, {"name": "King of Sweden", "type": "person"},
                 {"name": "ceding of territory", "type": "action"}]}


def event_messages(p: Passage) -> list[dict]:
    return [{"role": "system", "content": EVENT_SYSTEM},
            {"role": "user", "content": passage_block(EVENT_EXAMPLE_IN)},
            {"role": "assistant", "content": json.dumps(EVENT_EXAMPLE_OUT, ensure_ascii=False)},
            {"role": "user", "content": passage_block(p)}]


PROPOSITIONS_SYSTEM = (
    "You split numbered passages into propositions. A proposition is one atomic fact, written as a short "
    "sentence that can be understood alone: use full names instead of pronouns and keep dates and places "
    "with the fact they belong to. Cover every fact of each passage.\n"
    'Answer with one JSON object {"passages": [...]} holding one item per input passage, in order:\n'
    '{"passage": its number, "propositions": [sentences], "entities": [{"name", "type", "propositions": '
    "[0-based indexes of this passage's propositions that mention it]}]}\n"
    f"Entity types: {_TYPES}."
)

PROPOSITIONS_EXAMPLE_IN = [
    Passage("example-1", "Lake Baikal",
            "Lake Baikal is a rift lake in Siberia. It is the deepest lake in the world, at 1,642 metres."),
    Passage("example-2", "Irkutsk",
            "Irkutsk is a city near Lake Baikal. It was founded in 1661 as a Cossack fort."),
]
PROPOSITIONS_EXAMPLE_OUT = {"passages": [
    {"passage": 1,
     "propositions": ["Lake Baikal is a rift lake.", "Lake Baikal is in Siberia.",
                      "Lake Baikal is the deepest lake in the world.", "Lake Baikal is 1,642 metres deep."],
     "entities": [{"name": "Lake Baikal", "type": "location", "propositions": [0, 1, 2, 3]},
                  {"name": "Siberia", "type": "location", "propositions": [1]},
                  {"name": "1,642 metres", "type": "metric", "propositions": [3]}]},
    {"passage": 2,
     "propositions": ["Irkutsk is a city near Lake Baikal.", "Irkutsk was founded in 1661.",
                      "Irkutsk was founded as a Cossack fort."],
     "entities": [{"name": "Irkutsk", "type": "location", "propositions": [0, 1, 2]},
                  {"name": "Lake Baikal", "type": "location", "propositions": [0]},
                  {"name": "1661", "type": "time", "propositions": [1]},
                  {"name": "Cossack fort", "type": "topic", "propositions": [2]}]}]}


def numbered(passages: list[Passage]) -> str:
    return "\n\n".join(f"[{i}] {passage_block(p)}" for i, p in enumerate(passages, 1))


def propositions_messages(passages: list[Passage]) -> list[dict]:
    return [{"role": "system", "content": PROPOSITIONS_SYSTEM},
            {"role": "user", "content": numbered(PROPOSITIONS_EXAMPLE_IN)},
            {"role": "assistant", "content": json.dumps(PROPOSITIONS_EXAMPLE_OUT)},
            {"role": "user", "content": numbered(passages)}]


# One read for all three layers (docs/llm-indexing.md, "One read"): typed entities grouped by
# type (the type is written once, not once per entity), triples whose relation is a verb
# phrase so that "subject relation object" reads as a proposition, and one short event
# sentence. Measured on 10 passages, the entity list first is what keeps the triples good:
# without it (types from spaCy instead) silver triple recall fell from 0.36 to 0.19, and
# with the triples grouped by subject to 0.21.
JOINT_SYSTEM = (
    "You index an encyclopedia passage for retrieval. Answer with one JSON object with three keys:\n"
    f'- "entities": the named things in the passage grouped by type, {{type: [names]}}, types from: {_TYPES}; '
    "each name written in full as the passage gives it;\n"
    '- "triples": the passage\'s facts as [subject, relation, object]; subject and object are names (replace '
    "pronouns such as he, she, it, they with the name they stand for); the relation is a short verb phrase, "
    'so that "subject relation object" reads as a sentence ("was born in", "is directed by");\n'
    '- "event": one sentence of at most 25 words saying what the passage is about, keeping who, what, where '
    "and when together, with full names."
)

JOINT_EXAMPLE_OUT = {
    "entities": {"time": ["1952", "1958"], "location": ["King's College London", "London"],
                 "person": ["Rosalind Franklin"], "topic": ["DNA", "double-helix structure"]},
    "triples": [["Rosalind Franklin", "was", "a British chemist"],
                ["Rosalind Franklin", "took X-ray photographs of", "DNA"],
                ["Rosalind Franklin", "worked at", "King's College London"],
                ["Rosalind Franklin", "photographed DNA in", "1952"],
                ["Rosalind Franklin", "helped work out", "double-helix structure"],
                ["Rosalind Franklin", "died in", "London"],
                ["Rosalind Franklin", "died in", "1958"]],
    "event": "British chemist Rosalind Franklin photographed DNA at King's College London in 1952, key to "
             "its double-helix structure."}


def joint_messages(p: Passage) -> list[dict]:
    return [{"role": "system", "content": JOINT_SYSTEM},
            {"role": "user", "content": passage_block(TRIPLES_EXAMPLE_IN)},
            # Written as the grammar will make the model write it: no spaces between JSON tokens.
            {"role": "assistant", "content": json.dumps(JOINT_EXAMPLE_OUT, ensure_ascii=False, separators=(",", ":"))},
            {"role": "user", "content": passage_block(p)}]
