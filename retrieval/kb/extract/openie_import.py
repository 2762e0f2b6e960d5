"""Import of HippoRAG OpenIE output (NER + triples per document), e.g. the GPT-3.5 MuSiQue file.

With `layers` including "propositions", each imported triple also becomes a GRASP proposition
(§3.1: atomic, LLM-made, entity-linked): "subject predicate object.", linked to its subject
and object. Without it, propositions come from another extractor (the rules one: sentences,
GRASP Table 2's *sentences* row)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ...core.errors import InputError
from ...core.records import EntityLink, Extraction, Passage, Proposition, Triple, passage_id
from ...corpus.readers import read_json


def verbalise(t: Triple) -> str:
    """A triple as a one-sentence proposition."""
    text = f"{t.subject} {t.predicate} {t.object}".strip()
    return text if text.endswith((".", "!", "?")) else text + "."


class OpenIEImport:
    name = "openie-import"
    layers_separable = True  # a build may ask for some of its layers (build._restricted)

    def __init__(self, path: str | Path, layers: Iterable[str] = ("triples",)):
        self.layers = frozenset(layers)
        bad = self.layers - {"triples", "propositions"}
        if bad or not self.layers:
            raise InputError(f"OpenIE import makes triples and propositions, not {sorted(bad) or 'nothing'}")
        data = read_json(path)
        docs = data.get("docs") if isinstance(data, dict) else data
        if not isinstance(docs, list):
            raise InputError(f"{path}: expected HippoRAG OpenIE output with a `docs` list")
        self.path = Path(path)
        self.by_id: dict[str, dict] = {}
        for i, doc in enumerate(docs):
            if not isinstance(doc, dict):
                raise InputError(f"{path}: docs[{i}] is not an object")
            if "passage" in doc:
                title, _, text = doc["passage"].partition("\n")
            elif "title" in doc and "text" in doc:
                title, text = doc["title"], doc["text"]
            else:
                raise InputError(f"{path}: docs[{i}] has neither `passage` nor `title`+`text`")
            self.by_id[passage_id(title.strip(), text.strip())] = doc

    @property
    def version(self) -> str:
        """The tag a build stores per layer: propositions from triples are a different source."""
        return f"1:{self.path.name}" + (":verbalised" if "propositions" in self.layers else "")

    def extract(self, passages: list[Passage]) -> Iterable[Extraction]:
        for p in passages:
            doc = self.by_id.get(p.id)
            ex = Extraction(p.id)
            if doc is None:
                ex.failed = "passage not found in the OpenIE file"
                yield ex
                continue
            for raw in doc.get("extracted_triples") or []:
                if (isinstance(raw, (list, tuple)) and len(raw) == 3
                        and all(isinstance(x, str) and x.strip() for x in raw)):
                    s, pr, o = (x.strip() for x in raw)
                    ex.triples.append(Triple(s, pr, o, p.id))
                else:
                    ex.malformed += 1
            if "propositions" in self.layers:
                ex.propositions = [Proposition(p.id, verbalise(t), [EntityLink(t.subject), EntityLink(t.object)])
                                   for t in ex.triples]
            ex.entities = [EntityLink(e.strip()) for e in doc.get("extracted_entities") or []
                           if isinstance(e, str) and e.strip()]
            yield ex
